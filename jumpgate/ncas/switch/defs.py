"""The switch aggregator's sizes and constants, read from the one file the P4 programs and the
switch model include (p4/include/jumpgate_defs.p4), so the plugin cannot drift from them."""
from __future__ import annotations

import os
import re
from pathlib import Path

ENV_P4_SOURCES = "JUMPGATE_P4_SOURCES"  # overrides the p4/ directory


def p4_dir() -> Path:
    """The p4/ directory: the repository's, next to the jumpgate package, unless overridden."""
    env = os.environ.get(ENV_P4_SOURCES)
    return Path(env).resolve() if env else Path(__file__).resolve().parents[3] / "p4"


def read_defs(path: Path | None = None) -> dict[str, int]:
    """`#define NAME number` lines of jumpgate_defs.p4."""
    text = (path or p4_dir() / "include" / "jumpgate_defs.p4").read_text()
    return {m.group(1): int(m.group(2), 0)
            for m in re.finditer(r"^#define\s+(JG_\w+)\s+(0x[0-9a-fA-F]+|\d+)\b", text, re.M)}


_D = read_defs()
TABLE_SLOTS: int = _D["JG_TABLE_SLOTS"]
BLOCK_SLOTS: int = _D["JG_BLOCK_SLOTS"]
MAX_JOBS: int = _D["JG_MAX_JOBS"]
MAX_STREAMS: int = _D["JG_MAX_STREAMS"]
MAX_IN_FIELDS: int = _D["JG_MAX_IN_FIELDS"]
MIN_TUPLE_BYTES: int = _D["JG_MIN_TUPLE_BYTES"]
MAX_TUPLE_BYTES: int = _D["JG_MAX_TUPLE_BYTES"]
SUM_SAFE_BITS: int = _D["JG_SUM_SAFE_BITS"]
HI_SAFE_BITS: int = _D["JG_HI_SAFE_BITS"]
COUNT_SPILL: int = _D["JG_COUNT_SPILL"]
MAX_OUT_WORDS: int = _D["JG_MAX_OUT_WORDS"]
MAX_SUMS = 2  # registers s0_* and s1_*

# Registers, as named in both P4 programs and the model, with their sizes.
SLOT_REGISTERS = ("occ", "key_lo", "key_hi", "count", "s0_lo", "s0_hi", "s0_has", "s1_lo", "s1_hi", "s1_has")
JOB_REGISTERS = ("out_seq", "flushed", "bypassed", "spilled")  # one cell per job
STREAM_REGISTER = "received"  # one cell per (job, stream): job * MAX_STREAMS + stream
