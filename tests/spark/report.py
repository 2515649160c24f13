"""What the TPC-DS tests found, printed at the end of the pytest run (conftest's terminal summary)
and written to `<data root>/tpcds-report.txt`: per-query outcomes and the thesis' Table 3.5."""
from __future__ import annotations

TPCDS: dict[int, dict] = {}
TABLE_3_5: dict[str, dict[str, int]] = {}
KINDS = ["scan", "filter", "project", "join", "aggregate", "shuffle", "other"]


def _split(counts: dict[str, int]) -> tuple[int, int]:
    spark = sum(v for k, v in counts.items() if k.startswith("spark."))
    jg = sum(v for k, v in counts.items() if k.startswith("jumpgate."))
    return spark, jg


def table_lines(rows: dict[str, dict[str, int]], title: str) -> list[str]:
    out = [title, f"{'Offload':<12}{'Spark':>8}{'Jumpgate':>10}{'Total':>8}   Jumpgate by type"]
    for label, counts in rows.items():
        s, j = _split(counts)
        by = ", ".join(f"{k} {counts.get('jumpgate.' + k, 0)}" for k in KINDS if counts.get("jumpgate." + k))
        out.append(f"{label:<12}{s:>8}{j:>10}{s + j:>8}   {by or '-'}")
    return out


def lines() -> list[str]:
    if not TPCDS and not TABLE_3_5:
        return []
    out = []
    if TPCDS:
        ran = {n: r for n, r in TPCDS.items() if r["status"] == "ran"}
        matched = [n for n, r in ran.items() if r.get("match")]
        with_offload = [n for n, r in ran.items() if r["metrics"].get("jobs_run", 0) > 0]
        jobs = sum(r["metrics"].get("jobs_run", 0) for r in ran.values())
        fallbacks = sum(r["metrics"].get("fallbacks_run", 0) for r in ran.values())
        out.append(f"TPC-DS: {len(TPCDS)} queries, {len(ran)} run in Spark, {len(matched)} match with offloading on, "
                   f"{len(with_offload)} ran Jumpgate jobs ({jobs} jobs, {fallbacks} fallbacks to Spark)")
        t_off = sum(r["spark_s"] for r in ran.values())
        t_on = sum(r["jumpgate_s"] for r in ran.values())
        out.append(f"time: offloading off {t_off:.0f} s, on {t_on:.0f} s (threshold and score disabled)")
        for n, r in sorted(TPCDS.items()):
            if r["status"] != "ran":
                out.append(f"  q{n:02d}: {r['status']}: {r['why']}")
        reasons: dict[str, list[int]] = {}
        for n, r in sorted(ran.items()):
            for why in r.get("fallback_reasons", []):
                reasons.setdefault(why.split(": ", 1)[-1][:160], []).append(n)
        if reasons:
            out.append("fallbacks to Spark, by reason:")
            out += [f"  {len(ns)}x {why} (q{', q'.join(f'{n:02d}' for n in sorted(set(ns)))})"
                    for why, ns in sorted(reasons.items(), key=lambda x: -len(x[1]))]
        executed = {"None (executed)": {}, "all (executed)": {}}
        for r in ran.values():
            for k, v in r["counts_off"].items():
                executed["None (executed)"][k] = executed["None (executed)"].get(k, 0) + v
            for k, v in r["counts_on"].items():
                executed["all (executed)"][k] = executed["all (executed)"].get(k, 0) + v
        out += table_lines(executed, "Table 3.5, executed plans of this run (final adaptive plans):")
    if TABLE_3_5:
        out += table_lines(TABLE_3_5, "Table 3.5, planned (initial plans, server dry-run verdicts), by offloaded types:")
    return out
