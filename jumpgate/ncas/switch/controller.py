"""The controller side of the P4 program: one class per P4 control, same name, owning that
control's tables and registers (the SwitchML habit). They compute *what* to write for one job
(table entries and register cells) as plain data; a backend (backends.py) writes it to a Tofino,
a BMv2 or the switch model. The golden files of tests/unit/golden/switch/ hold these entries for
representative queries (`python -m jumpgate.ncas.switch.golden --update`).

Names of tables, actions, parameters and registers are those of p4/include/*.p4 and
p4/{v1model,tna}/jumpgate_agg.p4; tests/unit/test_p4.py checks that the sources declare them.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import defs
from .query import SwitchQuery, wire_null_mask

V0_INT32, V1_INT32 = 1, 2  # set_job `flags`


@dataclass(frozen=True, slots=True)
class TableEntry:
    """An exact-match entry: `key` is the table's only key field (a UDP port or a job number)."""

    table: str
    key: int
    action: str
    params: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict:
        return {"table": self.table, "key": self.key, "action": self.action, "params": dict(self.params)}


@dataclass(frozen=True, slots=True)
class RegisterWrite:
    register: str
    index: int
    value: int

    def to_json(self) -> dict:
        return {"register": self.register, "index": self.index, "value": self.value}


@dataclass(frozen=True, slots=True)
class JobSlots:
    """A job's place on the switch: its number, its lease of the slot table (slot indices base ..
    base + size - 1 in every one of the WAYS ways), and its tag: a random non-zero 32-bit number
    XORed into the key's low half where a slot stores it, so that no key of the job but one (whose
    low half equals the tag, and which always goes downstream) stores the 0 of an empty slot."""

    job: int
    base: int
    size: int
    tag: int

    @property
    def mask(self) -> int:
        return self.size - 1


class JobConfig:
    """Control JobConfig: which UDP port is which job, and where its key and values are."""

    p4_instance = "job_config"  # the instance name in SwitchIngress (p4/*/jumpgate_agg.p4)

    tables = ("job", "key_select", "v0_select", "v1_select")
    table_keys = {"job": ("udp_port", 16), "key_select": ("job", 8), "v0_select": ("job", 8), "v1_select": ("job", 8)}
    set_job_params = (("job", 8), ("tag", 32), ("base", 16), ("mask", 16), ("in_len", 16), ("flags", 8),
                      ("key_null", 64), ("v0_null", 64), ("v1_null", 64), ("cnt_null", 64))

    @staticmethod
    def entries(q: SwitchQuery, slots: JobSlots, udp_port: int) -> list[TableEntry]:
        s0 = q.sums[0] if q.sums else None
        s1 = q.sums[1] if len(q.sums) > 1 else None
        flags = (V0_INT32 if s0 and s0.int32 else 0) | (V1_INT32 if s1 and s1.int32 else 0)
        params = (("job", slots.job), ("tag", slots.tag), ("base", slots.base), ("mask", slots.mask),
                  ("in_len", q.in_len), ("flags", flags), ("key_null", wire_null_mask(q.key_null_bit)),
                  ("v0_null", wire_null_mask(s0.null_bit if s0 else None)),
                  ("v1_null", wire_null_mask(s1.null_bit if s1 else None)),
                  ("cnt_null", wire_null_mask(q.count_null_bit)))
        return [
            TableEntry("job", udp_port, "set_job", params),
            TableEntry("key_select", slots.job, f"key_w{q.key_word}"),
            TableEntry("v0_select", slots.job, f"v0_w{s0.word}" if s0 else "v0_none"),
            TableEntry("v1_select", slots.job, f"v1_w{s1.word}" if s1 else "v1_none"),
        ]


class Output:
    """Control Output: where a job's records and its END go, and the record's layout."""

    p4_instance = "output"  # the instance name in SwitchIngress (p4/*/jumpgate_agg.p4)

    tables = ("route", "out0_select", "out1_select", "out2_select")
    table_keys = {t: ("job", 8) for t in tables}
    set_route_params = (("dst_ip", 32), ("dst_port", 16), ("out_stream", 32), ("ctrl_ip", 32), ("ctrl_port", 16),
                        ("out_words", 8), ("s0_out_null", 8), ("s1_out_null", 8))

    @staticmethod
    def entries(q: SwitchQuery, job: int, dst_ip: int, dst_port: int, out_stream: int, ctrl_ip: int,
                ctrl_port: int) -> list[TableEntry]:
        route = TableEntry("route", job, "set_route", (
            ("dst_ip", dst_ip), ("dst_port", dst_port), ("out_stream", out_stream), ("ctrl_ip", ctrl_ip),
            ("ctrl_port", ctrl_port), ("out_words", len(q.out_words)), ("s0_out_null", q.out_null("s0")),
            ("s1_out_null", q.out_null("s1"))))
        return [route] + [TableEntry(f"out{i}_select", job, f"out{i}_{what}") for i, what in enumerate(q.out_words)]


class Aggregator:
    """Control Aggregator: the slot registers. The data plane reads and clears a slot when the
    controller sends a FLUSH datagram for it; a clear without output is a FLUSH with DISCARD."""

    p4_instance = "aggregator"  # the instance name in SwitchIngress (p4/*/jumpgate_agg.p4)

    registers = defs.SLOT_REGISTERS

    @staticmethod
    def flush_seq(way: int, index: int) -> int:
        """The `seq` of the FLUSH datagram for slot `index` (of the job's block) of `way`."""
        return way << defs.FLUSH_WAY_SHIFT | index

    @staticmethod
    def flushes(slots: JobSlots) -> list[int]:
        """Every FLUSH a job's block needs: each slot of each way."""
        return [Aggregator.flush_seq(w, i) for w in range(defs.WAYS) for i in range(slots.size)]


class StreamCounters:
    """Control StreamCounters: per-job counters, reset when a job is configured and destroyed."""

    p4_instance = "counters"  # the instance name in SwitchIngress (p4/*/jumpgate_agg.p4)

    registers = (defs.STREAM_REGISTER, *defs.JOB_REGISTERS)

    @staticmethod
    def reset(job: int) -> list[RegisterWrite]:
        cells = [RegisterWrite(r, job, 0) for r in defs.JOB_REGISTERS]
        return cells + [RegisterWrite(defs.STREAM_REGISTER, job * defs.MAX_STREAMS + s, 0)
                        for s in range(defs.MAX_STREAMS)]


@dataclass(frozen=True, slots=True)
class RegisterFill:
    """`count` cells of a register from `index` on, all set to `value`."""

    register: str
    index: int
    count: int
    value: int


class SeenRing:
    """The ring of version 2 input streams (docs/udp-transport.md, "A switch in a version 2 path"):
    `seen`, defs.SEEN cells per (job, stream), and `repeats`, the datagrams per job it dropped.
    Reset when a job is configured: a mark another job left would drop this job's datagram of the
    same number. Not in CONTROLS: the model and both P4 programs have these registers (control
    SeenRing of each program; the Tofino program's `repeats` is in control RepeatCounter)."""

    p4_instance = "seen_ring"  # the instance name in SwitchIngress (p4/*/jumpgate_agg.p4)
    programs = ("tna", "v1model")  # the P4 programs that have it
    registers = (defs.RING_REGISTER, defs.REPEATS_REGISTER)

    @staticmethod
    def reset(job: int) -> list[RegisterFill]:
        streams = defs.MAX_STREAMS * defs.SEEN
        return [RegisterFill(defs.RING_REGISTER, job * streams, streams, 0),
                RegisterFill(defs.REPEATS_REGISTER, job, 1, 0)]


CONTROLS = (JobConfig, Output, Aggregator, StreamCounters)


def owner(name: str) -> type:
    """The controller class that owns table or register `name`."""
    for cls in CONTROLS:
        if name in getattr(cls, "tables", ()) or name in getattr(cls, "registers", ()):
            return cls
    raise KeyError(name)


# Where the programs put what a controller class owns, when not in SwitchIngress.<its p4_instance>.
# Both programs select the values in control ValueSelect; the Tofino program splits the slot table
# and the counters between its two pipes (docs/switch.md, "Does it fit one Tofino pipe?"): ingress
# has kl<w> and kh<w> of every way, egress the counts, the sums and the counters of the switch's
# output.
_EGRESS_SLOTS = tuple(r for w in range(defs.WAYS) for r in (f"cn{w}", f"s0_{w}", f"s1_{w}"))
P4_PATHS: dict[str, dict[str, str]] = {
    "v1model": {"v0_select": "SwitchIngress.value_select", "v1_select": "SwitchIngress.value_select"},
    "tna": {"v0_select": "SwitchIngress.value_select", "v1_select": "SwitchIngress.value_select",
            **{r: "SwitchEgress.accumulator" for r in _EGRESS_SLOTS},
            **{r: "SwitchEgress.counters" for r in ("out_seq", "records", "flushed", "bypassed", "spilled")},
            defs.RING_REGISTER: "SwitchIngress.seen_ring", defs.REPEATS_REGISTER: "SwitchIngress.repeat_counter"},
}


def p4_path(name: str, arch: str) -> str:
    """The control instance (`SwitchIngress.job_config`) that declares table or register `name` in
    p4/<arch>/jumpgate_agg.p4: BF Runtime names a table `pipe.<that>.<name>`."""
    return P4_PATHS[arch].get(name) or f"SwitchIngress.{owner(name).p4_instance}"
