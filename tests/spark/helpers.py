"""The Spark client's test helper, in the style of DataFusion Comet's `checkSparkAnswerAndOperator`:
run a query with offloading off and on, compare the answers, and assert that the expected operators
really ran on Jumpgate (or, where the server cannot run them, that they fell back with a reason)."""
from __future__ import annotations

import decimal
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path


# Settings every test session uses; tests flip spark.jumpgate.* per query.
def base_conf(jar: Path, url: str, data_root: Path) -> dict[str, str]:
    return {
        "spark.jars": str(jar),
        "spark.plugins": "org.apache.spark.jumpgate.JumpgatePlugin",
        "spark.jumpgate.url": url,
        "spark.jumpgate.dataRoot": str(data_root),
        "spark.jumpgate.threshold.enabled": "false",
        "spark.jumpgate.scoring.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "4",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "3g",
        "spark.sql.session.timeZone": "UTC",
        # DuckDB's TPC-DS queries quote aliases the standard way ("order count"); Spark reads them so.
        "spark.sql.ansi.doubleQuotedIdentifiers": "true",
    }


def jvm(spark):
    return spark._jvm.io.jumpgate.spark


@dataclass
class Run:
    """One query with offloading on: its rows, what was offloaded, and the Jumpgate metrics."""

    rows: list
    offloaded: list[str]  # one entry per JumpgateExec: "scan,filter,project"
    report: str
    metrics: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    fallback_reasons: list[str] = field(default_factory=list)

    @property
    def kinds(self) -> set[str]:
        return {k for entry in self.offloaded for k in entry.split(",") if k}


def run_query(spark, sql: str, enabled: bool, **settings: str) -> Run:
    saved = {k: spark.conf.get(k, None) for k in settings}
    spark.conf.set("spark.jumpgate.enabled", "true" if enabled else "false")
    for k, v in settings.items():
        spark.conf.set(k, v)
    stats = jvm(spark).JumpgateStats
    jobs0, fallbacks0, reruns0 = stats.jobs(), stats.fallbacks(), stats.reruns()
    reasons0 = len(list(stats.fallbackReasons()))
    try:
        df = spark.sql(sql)
        rows = df.collect()
        qe = df._jdf.queryExecution()
        t = jvm(spark).JumpgateTesting
        names = ("jgJobs", "jgRows", "jgBytes", "jgTime", "jgReruns", "fallbacks")
        metrics = {m: int(t.metric(qe, m)) for m in names}
        # Jobs and fallbacks of the whole execution (a final adaptive plan may have dropped finished nodes).
        metrics["jobs_run"] = int(stats.jobs() - jobs0)
        metrics["fallbacks_run"] = int(stats.fallbacks() - fallbacks0)
        metrics["reruns_run"] = int(stats.reruns() - reruns0)
        reasons = [str(r) for r in stats.fallbackReasons()]
        fallback_reasons = reasons[reasons0:] if len(reasons) < 100 else reasons[-metrics["fallbacks_run"]:]
        counts = {str(k): int(v) for k, v in dict(t.counts(qe)).items()}
        return Run(rows, [str(s) for s in t.offloaded(qe)], str(t.report(qe)), metrics, counts,
                   fallback_reasons if metrics["fallbacks_run"] else [])
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
        spark.conf.set("spark.jumpgate.enabled", "true")


def _norm(v):
    if isinstance(v, float):
        return ("f", round(v, 9) if math.isfinite(v) else str(v))
    if isinstance(v, decimal.Decimal):
        return ("d", v.normalize() if v == v else str(v))
    if v is None:
        return ("n",)
    return ("v", v)


def normalize(rows, ordered: bool) -> list:
    out = [tuple(_norm(v) for v in r) for r in rows]
    return out if ordered else sorted(out, key=repr)


def check_spark_answer_and_operator(spark, sql: str, expect: set[str] | None = None, *, ordered: bool = False,
                                    allow_fallback: bool = False, **settings: str) -> Run:
    """Run `sql` with Jumpgate off and on; the answers must be equal (as multisets unless `ordered`)
    and every operator kind in `expect` (scan, filter, project, join, aggregate) must have been
    offloaded and run on Jumpgate without falling back."""
    off = run_query(spark, sql, enabled=False, **settings)
    assert not off.offloaded, f"offloaded with spark.jumpgate.enabled=false: {off.offloaded}"
    on = run_query(spark, sql, enabled=True, **settings)
    a, b = normalize(off.rows, ordered), normalize(on.rows, ordered)
    assert len(a) == len(b), f"{len(a)} rows in Spark, {len(b)} with Jumpgate\n{on.report}"
    assert a == b, f"answers differ\n{on.report}\nfirst differences: " + str(
        [(x, y) for x, y in zip(a, b) if x != y][:3])
    if expect:
        missing = set(expect) - on.kinds
        assert not missing, f"not offloaded: {sorted(missing)}\n{on.report}"
        assert on.metrics["jobs_run"] >= 1, f"no Jumpgate job ran\n{on.report}"
    if not allow_fallback:
        assert on.metrics["fallbacks_run"] == 0, f"fell back to Spark\n{on.report}"
    return on


def server_operations(url: str) -> set[str]:
    import httpx
    return {op for nca in httpx.get(url + "/v1/ncas").json() for op in nca.get("operations", [])}


def listening_ports(pid: int) -> set[int]:
    """Ports of the TCP sockets process `pid` listens on (Linux /proc)."""
    inodes = _listening_sockets(pid)
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and int(f[9]) in inodes:
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def _listening_sockets(pid: int) -> set[int]:
    """Inodes of the TCP sockets process `pid` listens on (Linux /proc)."""
    mine = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            mine.add(int(target[8:-1]))
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A":  # TCP_LISTEN
                listening.add(int(f[9]))
    return mine & listening


class LeakCheck:
    """The plugin's footprint in Spark's JVM (threads named jumpgate-*, destinations, buffered bytes,
    listening sockets), taken before something runs and compared after it."""

    def __init__(self, spark):
        self.stats = jvm(spark).JumpgateStats
        self.pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
        self.listening = _listening_sockets(self.pid)

    def footprint(self) -> dict[str, int]:
        return {"threads": int(self.stats.receiverThreads()), "destinations": int(self.stats.openDestinations()),
                "buffered": int(self.stats.bufferedBytes()),
                "new listening sockets": len(_listening_sockets(self.pid) - self.listening)}

    def assert_none_left(self, wait_s: float = 15.0) -> None:
        deadline = time.monotonic() + wait_s
        left = self.footprint()
        while any(left.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
            left = self.footprint()
        assert not any(left.values()), f"left behind by the plugin: {left}"
