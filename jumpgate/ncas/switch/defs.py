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
WAYS: int = _D["JG_WAYS"]
WAY_SLOTS: int = _D["JG_WAY_SLOTS"]  # slot indices per way: what jobs lease blocks of
SLOT_BITS: int = _D["JG_SLOT_BITS"]
TABLE_SLOTS: int = _D["JG_TABLE_SLOTS"]  # slots in all, WAYS * WAY_SLOTS
FLUSH_WAY_SHIFT: int = _D["JG_FLUSH_WAY_SHIFT"]
BLOCK_SLOTS: int = _D["JG_BLOCK_SLOTS"]
MAX_JOBS: int = _D["JG_MAX_JOBS"]
MAX_STREAMS: int = _D["JG_MAX_STREAMS"]
MAX_IN_FIELDS: int = _D["JG_MAX_IN_FIELDS"]
MIN_TUPLE_BYTES: int = _D["JG_MIN_TUPLE_BYTES"]
MAX_TUPLE_BYTES: int = _D["JG_MAX_TUPLE_BYTES"]
TUPLES_PER_DATAGRAM: int = _D["JG_TUPLES_PER_DATAGRAM"]  # input tuples a data datagram towards it may carry
VALUE_BITS: int = _D["JG_VALUE_BITS"]
SUM_BIAS: int = _D["JG_SUM_BIAS"]
SUM_SPAN: int = _D["JG_SUM_SPAN"]
COUNT_SPILL: int = _D["JG_COUNT_SPILL"]
MAX_OUT_WORDS: int = _D["JG_MAX_OUT_WORDS"]
MAX_SUMS = 2  # registers s0_* and s1_*
# Version 2 input streams (docs/udp-transport.md, "A switch in a version 2 path"): the ring `seen`,
# SEEN cells per (job, stream), each holding the mark of the datagram last taken in it.
SEEN: int = _D["JG_SEEN"]
SEEN_BITS: int = _D["JG_SEEN_BITS"]
SEEN_CELLS: int = _D["JG_SEEN_CELLS"]
RECEIPT_SESSION_BASE: int = _D["JG_RECEIPT_SESSION_BASE"]  # clone (BMv2) or mirror (Tofino) session of port p: this + p
UDP_HEADER_BYTES: int = _D["JG_UDP_HEADER_BYTES"]

# Registers, as named in both P4 programs and the model. Per way w, in pipeline order, each of
# WAY_SLOTS 32-bit cells: kl<w> (the key's first four wire bytes XOR the job's tag; 0 = empty),
# kh<w> (its last four bytes), cn<w> (the count), s0_<w> and s1_<w> (0 = no value, else the sum +
# SUM_BIAS). One word each, because a Tofino 1 stateful ALU reads out one word per packet and a
# FLUSH takes the whole slot in one pass (docs/switch.md, "The pipeline").
WAY_REGISTERS = tuple((f"kl{w}", f"kh{w}", f"cn{w}", f"s0_{w}", f"s1_{w}") for w in range(WAYS))
SLOT_REGISTERS = tuple(r for way in WAY_REGISTERS for r in way)
# One cell per job: output datagrams (out_seq numbers them), FLUSHes processed, bypassed tuples, spill
# records, input tuples taken through the table (tuples), tuples in the output datagrams (records).
JOB_REGISTERS = ("out_seq", "flushed", "bypassed", "spilled", "tuples", "records")
STREAM_REGISTER = "received"  # data datagrams taken per (job, stream): job * MAX_STREAMS + stream
# The ring of version 2 streams and the datagrams per job it dropped as taken before: the model and
# both P4 programs (docs/udp-transport.md, "A switch in a version 2 path").
RING_REGISTER, REPEATS_REGISTER = "seen", "repeats"


def seen_mark(seq: int) -> int:
    """The mark datagram `seq` leaves in its cell of the ring: its pass over the ring counted from 1,
    modulo 2^16 (0 is an empty cell). jumpgate_defs.p4 says why a mark compares as a serial number."""
    return ((seq >> SEEN_BITS) + 1) & 0xFFFF


def seen_cell(job: int, stream: int, seq: int) -> int:
    return (job * MAX_STREAMS + stream) * SEEN + seq % SEEN
