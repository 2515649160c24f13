"""The conformance suite over the built-in NCAs: one test per request file.

A request that needs an operation no registered NCA claims (`GET /v1/ncas`) is a strict expected
failure whose reason says which ("needs an NCA for join"). It is still sent: the expected failure
is only the server refusing it (422); any other failure fails. When an NCA for it lands, the mark
disappears by itself and the request must pass; one that passes while marked fails loudly
(strict), which means the prediction in `jumpgate.conformance.cases.Need` needs updating.
"""
from __future__ import annotations

import pytest

from jumpgate.conformance import PASSED, UNSUPPORTED, load_cases

pytestmark = [pytest.mark.e2e, pytest.mark.conformance]

CASES = load_cases()


class Unsupported(Exception):
    """The server refused a request that needs an operation no registered NCA claims."""


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_request(case, runner, request):
    gap = runner.gap(case)
    if gap:
        request.applymarker(pytest.mark.xfail(reason=gap, strict=True, raises=Unsupported))
    outcome = runner.run(case)
    if outcome.status == UNSUPPORTED:
        raise Unsupported(outcome.message)
    assert outcome.status == PASSED, f"{case.name} ({case.source}): {outcome.message}"
