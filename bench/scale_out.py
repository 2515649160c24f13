"""Scaling out over nodes (thesis §3.3.4): TPC-H Q3 and Q6 with lineitem split over two nodes of
one core each, against the same queries on one node of one core, in the same run.

The two-node server's inventory has nodes `a` and `b` (`cores: 1` each, and `cpus` pinning each to a CPU of its own, so they do not share a core of this
machine; `--no-pin` leaves the CPUs to the kernel), each with its own data root: lineitem's files are dealt between them,
balanced by bytes (hard links, so no data is copied), orders and customer are on `a` only
(`--split lineitem,orders` deals orders' files too, as a warehouse partitions its two large
tables). Jumpgate then runs one lineitem scan per node, each reading its own files, with what is
safe to run on a part of the rows beside it (Q6: a partial sum per node and one final sum; Q3:
the join probing lineitem on both nodes, each receiving the whole build side, one aggregation). The one-node server has one node (`cores: 1`, pinned to the first CPU) holding everything. Both
servers run the same requests (the conformance suite's, with the client's `send`), alternating,
after one warm-up run each (compile and page cache); the answers are checked against DuckDB over
the same files. Reported: median wall time from submit to the last row received, and the speedup
one node / two nodes (goal: >= 1.6x).

Nodes are `reach: local` by default (processes of this machine bound to 127.0.0.2 and 127.0.0.3);
with `--ssh` they are network namespaces with their own OpenSSH servers and agents
(jumpgate/deploy/netns_fixture.py), where this machine allows it.

    .venv/bin/python bench/scale_out.py                 # SF 1, JSON Lines, 5 runs
    .venv/bin/python bench/scale_out.py --format parquet --runs 3 --ssh
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tpch_bottoms import EXT, QUERIES, Query, compare, duck_connect, ensure_data, request_for  # noqa: E402

from jumpgate.client import Jumpgate  # noqa: E402
from jumpgate.local_server import LocalServer  # noqa: E402

TABLES = ("lineitem", "orders", "customer")


def link_tree(src: Path, dst: Path, keep) -> None:
    """Hard-link the files of `src` that `keep(path)` wants into `dst` (same layout)."""
    for path in sorted(src.rglob("*")):
        if path.is_file() and keep(path):
            target = dst / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                os.link(path, target)


def node_roots(full: Path, a: Path, b: Path, fmt: str, split: tuple[str, ...]) -> None:
    """Two data roots: the files of each table in `split` dealt over both, balanced by bytes
    (largest first, each to the root with fewer bytes so far); the other tables on `a`; every
    table's schema on the roots holding a part of it."""
    for table in split:
        files = sorted((full / "tpch" / table).glob(f"*.{EXT[fmt]}"), key=lambda f: -f.stat().st_size)
        if len(files) < 2:
            raise SystemExit(f"{table} has {len(files)} file(s): nothing to split")
        load, on_b = [0, 0], set()
        for f in files:
            side = 0 if load[0] <= load[1] else 1
            load[side] += f.stat().st_size
            if side:
                on_b.add(f.name)
        link_tree(full / "tpch" / table, a / "tpch" / table, lambda p, on_b=on_b: p.name not in on_b)
        link_tree(full / "tpch" / table, b / "tpch" / table,
                  lambda p, on_b=on_b: p.name in on_b or p.name == "schema.json")  # (datagen's old layout)
    for table in TABLES:
        if table not in split:
            link_tree(full / "tpch" / table, a / "tpch" / table, lambda p: True)
        for root in (a, b) if table in split else (a,):  # the schema beside the table's folder
            link_tree(full / "tpch", root / "tpch", lambda p, table=table: p.name == f"{table}.schema.json")


@contextlib.contextmanager
def inventories(work: Path, full: Path, fmt: str, ssh: bool, split: tuple[str, ...], pin: bool):
    """(one-node inventory, two-node inventory, the client's address)."""
    one, two = work / f"one-{'ssh' if ssh else 'local'}.yaml", work / f"two-{'ssh' if ssh else 'local'}.yaml"
    # Each node one core of its own, for real (`cpus`: its NCAs are pinned there): the one node on
    # the first CPU, the two nodes on the first and the second. Unpinned, the one node's NCAs
    # would run on every CPU of this machine.
    first, second = sorted(os.sched_getaffinity(0))[:2]
    pins = {"one": str(first), "a": str(first), "b": str(second)} if pin else {}

    def cpus(name: str) -> str:
        return f", cpus: '{pins[name]}'" if name in pins else ""

    if not ssh:
        a, b = work / "a", work / "b"
        node_roots(full, a, b, fmt, split)
        one.write_text(f"nodes:\n  - {{name: one, address: 127.0.0.2, cores: 1, data_root: '{full}'{cpus('one')}}}\n")
        two.write_text("nodes:\n"
                       f"  - {{name: a, address: 127.0.0.2, cores: 1, data_root: '{a}'{cpus('a')}}}\n"
                       f"  - {{name: b, address: 127.0.0.3, cores: 1, data_root: '{b}'{cpus('b')}}}\n")
        yield one, two, "127.0.0.1", []
        return
    import yaml

    from jumpgate.deploy import netns_fixture

    why = netns_fixture.why_not()
    if why:
        raise SystemExit(f"--ssh: {why}")
    with netns_fixture.NetnsHosts(work / "hosts", names=["one", "a", "b"]) as hosts:
        link_tree(full / "tpch", hosts.host("one").data_root / "tpch", lambda p: True)
        node_roots(full, hosts.host("a").data_root, hosts.host("b").data_root, fmt, split)
        caches = {h.name: {"cache_dir": str(h.home / "cache")} for h in hosts.hosts}
        nodes = yaml.safe_load(hosts.inventory_yaml(work / "all.yaml", cores=1, overrides=caches).read_text())["nodes"]
        for node in nodes:
            if node["name"] in pins:
                node["cpus"] = pins[node["name"]]
        one.write_text(yaml.safe_dump({"nodes": nodes[:1]}))
        two.write_text(yaml.safe_dump({"nodes": nodes[1:]}))
        yield one, two, hosts.client_address, ["--send-allow", str(hosts.subnet)]


def run_once(jg: Jumpgate, request: dict) -> tuple[float, pa.Table, dict]:
    t0 = time.perf_counter()
    tables = jg.run(request, timeout=600)
    wall = time.perf_counter() - t0
    (table,) = tables.values()
    return wall, table, jg.last_job.nodes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--format", choices=sorted(EXT), default="json")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--queries", default="q3,q6")
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/jumpgate-bench"))
    ap.add_argument("--ssh", action="store_true", help="nodes in network namespaces, reached over SSH")
    ap.add_argument("--no-pin", action="store_true",
                    help="let the kernel run every node's NCAs on every CPU (default: each node's own CPU)")
    ap.add_argument("--split", default="lineitem",
                    help="tables whose files are dealt over the two nodes (the others are on node a)")
    args = ap.parse_args()
    wanted = [q.strip() for q in args.queries.split(",") if q.strip()]
    queries: list[Query] = [q for q in QUERIES if q.name in wanted]
    full = ensure_data(args.data_dir, args.sf, args.format)
    split = tuple(t.strip() for t in args.split.split(",") if t.strip())
    unknown = set(split) - set(TABLES)
    if unknown:
        raise SystemExit(f"--split: {', '.join(sorted(unknown))} not among {', '.join(TABLES)}")
    work = args.data_dir / f"scale-out-sf{args.sf:g}-{args.format}-{'-'.join(sorted(split))}"
    duck = duck_connect(full, args.format, None)
    print(f"TPC-H SF {args.sf:g} ({args.format}), {' and '.join(split)} split over two nodes of one core each, against one "
          f"node of one core; {args.runs} runs, alternating; nodes {'over SSH' if args.ssh else 'local'}")
    results = []
    with tempfile.TemporaryDirectory() as tmp, \
            inventories(work, full, args.format, args.ssh, split, not args.no_pin) as (one_inv, two_inv, client, allow):
        cache = Path(tmp) / "cache"
        with LocalServer(full, cache, Path(tmp) / "one.log", extra_args=["--nodes", str(one_inv), *allow]) as one_srv, \
                LocalServer(full, cache, Path(tmp) / "two.log", extra_args=["--nodes", str(two_inv), *allow]) as two_srv, \
                Jumpgate(one_srv.url) as one, Jumpgate(two_srv.url) as two:
            for q in queries:
                request = request_for(q, args.format)
                for op in request["operations"]:
                    if op["kind"] == "send":
                        op["host"] = client  # an address the nodes reach
                answers, walls = {}, {"one": [], "two": []}
                for label, jg in (("one", one), ("two", two)):
                    _, table, nodes = run_once(jg, copy.deepcopy(request))  # compile, page cache
                    answers[label] = q.top(table)
                    if label == "two":
                        print(f"  {q.name}: two-node pipeline: " + ", ".join(
                            f"{n['id']} ({'+'.join(n['operations'])}) on {n['host']}" for n in jg.last_job.ncas))
                result = duck.execute(q.sql)
                answers["duckdb-1T"] = (result.to_arrow_table() if hasattr(result, "to_arrow_table")
                                        else result.fetch_arrow_table())
                problems = compare(q, answers)
                if problems:
                    print(f"  {q.name}: WRONG ANSWER: {'; '.join(problems)}")
                    return 1
                for _ in range(args.runs):
                    for label, jg in (("one", one), ("two", two)):
                        walls[label].append(run_once(jg, copy.deepcopy(request))[0])
                m1, m2 = statistics.median(walls["one"]), statistics.median(walls["two"])
                results.append((q, m1, m2))
                print(f"  {q.name} ({q.title}): one node {m1 * 1000:.0f} ms, two nodes {m2 * 1000:.0f} ms, "
                      f"speedup {m1 / m2:.2f}x (goal >= 1.6x: {'met' if m1 / m2 >= 1.6 else 'NOT met'}); "
                      f"answers equal DuckDB's")
    shutil.rmtree(work / "hosts", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
