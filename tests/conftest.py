"""What every test module shares.

A socket or file left in a reference cycle is closed by the garbage collector whenever it happens
to run, and its ResourceWarning (an error here: warnings are errors) then fails whichever test is
running at that moment, often in another module. Collecting at the end of each module instead
names the module that left it.
"""
from __future__ import annotations

import gc
import warnings

import pytest


@pytest.fixture(scope="module", autouse=True)
def nothing_left_for_the_garbage_collector(request):
    yield
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    left = [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)]
    assert not left, f"{request.module.__name__} left unclosed resources to the garbage collector: {left}"
