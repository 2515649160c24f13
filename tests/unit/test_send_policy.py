"""The send policy's default rule (tenancy/policy.py): the request's own address and loopback; an
IPv4 client seen through a dual-stack socket is its IPv4 address; a source that is no address
allows nothing beyond loopback (and is never an internal error)."""
from __future__ import annotations

import pytest

from jumpgate.contract.errors import Forbidden
from jumpgate.tenancy.policy import Reserved, SendTarget, TenantPolicy, check_sends

RESERVED = Reserved(8470, frozenset({"127.0.0.1"}), frozenset({40001}))


def sends_to(host: str, port: int = 9000) -> list[SendTarget]:
    return [SendTarget("out", "operations[2]", host, port)]


@pytest.mark.parametrize("source, host, allowed", [
    ("10.1.2.3", "10.1.2.3", True),
    ("::ffff:10.1.2.3", "10.1.2.3", True),  # dual stack
    ("10.1.2.3", "10.1.2.4", False),
    ("testclient", "127.0.0.5", True),  # loopback whatever the source
    ("testclient", "10.1.2.3", False),
    (None, "::1", True),
])
def test_the_default_rule(source, host, allowed):
    if allowed:
        assert check_sends(sends_to(host), TenantPolicy(), source, RESERVED, "t") == {"out": host}
    else:
        with pytest.raises(Forbidden, match="default rule of tenant 't'"):
            check_sends(sends_to(host), TenantPolicy(), source, RESERVED, "t")


def test_reserved_ports_are_refused_whatever_the_rule():
    with pytest.raises(Forbidden, match="own REST port"):
        check_sends(sends_to("127.0.0.1", 8470), TenantPolicy(), None, RESERVED, "t")
    with pytest.raises(Forbidden, match="node agent's port"):
        check_sends(sends_to("127.0.0.1", 40001), TenantPolicy(), None, RESERVED, "t")
