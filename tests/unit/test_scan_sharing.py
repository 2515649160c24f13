"""The coordinator of shared scans (jumpgate/nca/sharing.py, the keys of
jumpgate/ncas/software/scan_sharing.py): which scans end up in one group, and how long a scan
waits for the others (docs/shared-scans.md)."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from jumpgate.nca.sharing import Sharing
from jumpgate.ncas.software.scan_sharing import ShareKey, fits

KEY = ShareKey("default", "local", "scan_json", "/data", ("/data/t.jsonl",), 1, ())
OTHER = ShareKey("default", "local", "scan_json", "/data", ("/data/u.jsonl",), 1, ())


def scan(job: str, filters: int = 0):
    return SimpleNamespace(spec=SimpleNamespace(job_id=job), probe_filters=lambda: [None] * filters)


def join_all(tickets) -> dict:
    groups: dict = {}
    threads = [threading.Thread(target=lambda t=t: groups.__setitem__(t.member.spec.job_id, t.join(fits)))
               for t in tickets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return groups


def test_scans_announced_together_run_as_one_group():
    sharing = Sharing(wait_s=5, linger_s=0)
    tickets = [sharing.announce(KEY, scan(j)) for j in "abc"]
    groups = join_all(tickets)
    assert len({id(g) for g in groups.values()}) == 1
    [group] = {id(g): g for g in groups.values()}.values()
    assert sorted(m.spec.job_id for m in group.members) == ["a", "b", "c"] and group.closed and not group.alone


def test_a_scan_of_other_files_runs_alone():
    sharing = Sharing(wait_s=5, linger_s=0)
    groups = join_all([sharing.announce(KEY, scan("a")), sharing.announce(OTHER, scan("b"))])
    assert groups["a"].alone and groups["b"].alone


def test_an_announced_scan_is_waited_for_at_most_wait_s():
    sharing = Sharing(wait_s=0.3, linger_s=0)
    first = sharing.announce(KEY, scan("a"))
    sharing.announce(KEY, scan("late"))  # compiled, but its stage never comes
    t0 = time.monotonic()
    group = first.join()
    assert group.alone and 0.25 <= time.monotonic() - t0 < 2


def test_a_withdrawn_scan_is_not_waited_for():
    sharing = Sharing(wait_s=5, linger_s=0)
    first = sharing.announce(KEY, scan("a"))
    gone = sharing.announce(KEY, scan("cancelled"))
    threading.Timer(0.1, gone.withdraw).start()
    t0 = time.monotonic()
    assert first.join().alone and time.monotonic() - t0 < 2


def test_linger_keeps_the_group_open_for_scans_not_yet_announced():
    sharing = Sharing(wait_s=5, linger_s=1.0)
    first = sharing.announce(KEY, scan("a"))
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("a", first.join()))
    t.start()
    time.sleep(0.2)  # job b is planned only now
    group_b = sharing.announce(KEY, scan("b")).join(fits)
    t.join(5)
    assert result["a"] is group_b and len(group_b.members) == 2


def test_runtime_filter_slots_bound_a_group():
    sharing = Sharing(wait_s=5, linger_s=0)
    groups = join_all([sharing.announce(KEY, scan("a", filters=10)), sharing.announce(KEY, scan("b", filters=10))])
    assert groups["a"] is not groups["b"]  # 20 slots: more than one process has


def test_an_open_group_waits_for_requests_being_planned():
    sharing = Sharing(wait_s=5, linger_s=0)
    first = sharing.announce(KEY, scan("a"))
    result = {}
    planned = threading.Event()

    def plan_then_join():
        with sharing.planning():
            planned.set()
            time.sleep(0.3)  # planning job b
            ticket = sharing.announce(KEY, scan("b"))
        result["b"] = ticket.join(fits)

    t = threading.Thread(target=plan_then_join)
    t.start()
    planned.wait(5)
    group_a = first.join()
    t.join(5)
    assert result["b"] is group_a and len(group_a.members) == 2


def test_keys_hold_the_tenant_the_files_and_what_the_process_is_given(tmp_path):
    """Scans of one tenant over the same files share; another tenant's, or a fused shuffle, never."""
    from jumpgate.compiler.compile import compile_plan
    from jumpgate.dataflow.request import parse_request
    from jumpgate.nca.deployment import Host
    from jumpgate.nca.interface import InstanceContext
    from jumpgate.ncas.software.scan_json import JsonScanNca
    from jumpgate.ncas.software.scan_sharing import share_key

    (tmp_path / "t.jsonl").write_text('{"a": 1}\n')
    host = Host(name="local", address="127.0.0.1", cores=2, data_root=str(tmp_path))

    def key(tenant: str, *ops: dict, last: str | None = None):
        last = last or ops[-1]["name"]
        request = {"name": "k", "operations": [
            {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": [{"name": "a", "type": "int64"}]},
            *ops, {"kind": "send", "name": "o", "input": last, "transport": "tcp", "host": "127.0.0.1", "port": 9}]}
        pipeline = compile_plan(parse_request(request, tmp_path), [JsonScanNca()])
        spec = pipeline.build_spec(pipeline.ncas[0], "job")
        context = InstanceContext(object(), str(tmp_path), str(tmp_path / "cache"), host=host, tenant=tenant)
        return share_key(JsonScanNca().instantiate(spec, context))

    a, why = key("ann", {"kind": "filter", "name": "f", "input": "r", "condition": "a > 0"})
    a2, _ = key("ann", {"kind": "project", "name": "p", "input": "r", "columns": [{"name": "b", "expr": "a * 2"}]})
    b, _ = key("bob", {"kind": "filter", "name": "f", "input": "r", "condition": "a > 0"})
    assert a is not None and why == "" and a == a2 and a != b and a.files == (str(tmp_path / "t.jsonl"),)
    none, why = key("ann", {"kind": "shuffle", "name": "s", "input": "r", "keys": ["a"], "partitions": 1}, last="s[0]")
    assert none is None and "shuffle" in why
