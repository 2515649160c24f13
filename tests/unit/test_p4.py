"""The P4 programs (p4/) against the controller that programs them and the model that stands in for
them. Without a P4 compiler here, the first tests read the sources: every table, action, action
parameter and register the controller writes is declared where it should be, in both programs,
with the bit widths the controller packs; the shared sizes are one file that the programs, the
model and the plugin all read. When p4c (BMv2), p4test with an installed tna.p4, or p4c's
Tofino back end (p4c-barefoot) is installed, the last tests compile or type-check the programs, with no warning, and
compare the P4Info with the controller; otherwise they say they were skipped and why."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from jumpgate.nca.interface import NcaError
from jumpgate.ncas.switch import defs, golden
from jumpgate.ncas.switch.backends import P4RuntimeBackend, p4runtime_modules
from jumpgate.ncas.switch.controller import CONTROLS, JobConfig, Output, SeenRing, TableEntry, p4_path

P4 = defs.p4_dir()
PROGRAMS = {"v1model": P4 / "v1model" / "jumpgate_agg.p4", "tna": P4 / "tna" / "jumpgate_agg.p4"}
SHARED = ("include/job_config.p4", "include/output.p4", "include/passes.p4")
RUNTIME = Path(__file__).resolve().parents[2] / "ncas" / "runtime"


def source(arch: str) -> str:
    """The program with its local includes pasted in (what the preprocessor sees)."""
    text = PROGRAMS[arch].read_text()
    return text + "".join((P4 / rel).read_text() for rel in ("include/headers.p4", "include/parser_states.p4",
                                                              *SHARED))


def control_body(text: str, name: str) -> str:
    m = re.search(rf"control {name}\s*\(", text)
    assert m, f"no control {name}"
    depth, i = 0, text.index("{", m.end())
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    raise AssertionError(f"control {name} does not close")


@pytest.mark.parametrize("arch", sorted(PROGRAMS))
def test_each_control_declares_what_its_controller_class_writes(arch):
    """Every table and register the controller writes is declared in the control instance
    controller.p4_path names (BF Runtime's names): the Tofino program splits the slot table and
    the counters between its pipes."""
    text = source(arch)
    for cls in CONTROLS:
        for name in (*getattr(cls, "tables", ()), *getattr(cls, "registers", ())):
            path = p4_path(name, arch).split(".")
            pipe = control_body(text, path[0])
            control = re.search(rf"(\w+)\(\) {path[1]};", pipe).group(1)
            for instance in path[2:]:  # a control instance inside that control
                control = re.search(rf"(\w+)\(\) {instance};", control_body(text, control)).group(1)
            body = control_body(text, control)
            assert re.search(rf"\btable {name}\s*\{{|register<[^;]*\)\s*{name}\s*;|Register<[^;]*\)\s*{name}\s*;",
                             body), f"{arch}: {name} is not in control {control} ({'.'.join(path)})"


def test_the_programs_with_the_ring_declare_it_and_answer_version_2_senders():
    """The ring's registers are where the controller's SeenRing says, in the programs it names,
    and only those programs' parsers take "NTU2" datagrams (a program without the ring could not
    deduplicate them, and its senders would wait for receipts that never come)."""
    for arch in PROGRAMS:
        text = source(arch)
        takes_v2 = "#define JG_TAKES_UDP_V2" in PROGRAMS[arch].read_text()
        assert takes_v2 == (arch in SeenRing.programs), arch
        if not takes_v2:
            continue
        ingress = control_body(text, "SwitchIngress")
        control = re.search(rf"(\w+)\(\) {SeenRing.p4_instance};", ingress).group(1)
        body = control_body(text, control)
        if arch == "v1model":
            for name in SeenRing.registers:
                assert re.search(rf"register<[^;]*\)\s*{name}\s*;", body), f"{arch}: {name} is not in control {control}"
            # the ring's serial compare (jumpgate_defs.p4: a mark not newer than its cell's was taken)
            assert "bit<16> newer = c - mark;" in body and "newer[15:15] == 0" in body
            # every first pass of a version 2 data datagram and every END taken whole is cloned to
            # the session of its port, and egress turns the clone into the answer
            assert ingress.count("clone(CloneType.I2E, JG_RECEIPT_SESSION_BASE + (bit<32>)sm.ingress_port)") == 2
            answer = control_body(text, "Answer")
            assert "truncate(14 + 20 + 8 + JG_UDP_HEADER_BYTES)" in answer
            assert "answer.apply(hdr)" in control_body(text, "SwitchEgress")
        else:
            for name in SeenRing.registers:  # `repeats` in a control of its own (controller.P4_PATHS)
                instance = p4_path(name, arch).split(".")[-1]
                owner = control_body(text, re.search(rf"(\w+)\(\) {instance};", ingress).group(1))
                assert re.search(rf"Register<[^;]*\)\s*{name}\s*;", owner), f"{arch}: {name} is not in {instance}"
            # the same serial compare: the 16-bit subtraction's sign, in the stateful ALU
            assert "Register<int<16>, bit<18>>(JG_SEEN_CELLS, 0) seen;" in body
            assert "if (v - (int<16>)meta.mark >= 0) { rep = 1; }" in body
            # a data datagram's first pass (its receipt: StreamCounters, or a repeat's branch) and an
            # END taken whole are mirrored to the session of its port; egress makes the answer
            assert "meta.session = (bit<10>)ig_intr_md.ingress_port | JG_RECEIPT_SESSION_BASE;" in ingress
            assert "ig_dprsr_md.mirror_type = MIRROR_ANSWER;" in control_body(text, "StreamCounters")
            assert "mirror.emit<answer_h>(meta.session, { meta.answer });" in text
            assert "ANSWER_KIND: eg_answer;" in text
            answer = control_body(text, "SwitchEgress")
        assert "JG_F_ACK | JG_F_END" in answer and "JG_F_ACK | JG_F_SACK" in answer


@pytest.mark.parametrize("arch", sorted(PROGRAMS))
def test_action_names_and_parameter_widths_match_the_controller(arch):
    text = source(arch)
    for name, params in (("set_job", JobConfig.set_job_params), ("set_route", Output.set_route_params)):
        m = re.search(rf"action {name}\(([^)]*)\)", text)
        assert m, name
        declared = [(p.split()[-1], int(re.search(r"bit<(\d+)>", p).group(1))) for p in m.group(1).split(",")]
        assert declared == list(params), f"{name}: the P4 says {declared}"
    for prefix, n in (("key_w", 8), ("v0_w", 8), ("v1_w", 8)):
        for i in range(n):
            assert f"action {prefix}{i}()" in text
    for i in range(defs.MAX_OUT_WORDS):
        for what in ("count", "s0", "s1"):
            assert f"action out{i}_{what}()" in text


def test_table_keys_match_the_controller():
    text = (P4 / "include/job_config.p4").read_text() + (P4 / "include/output.p4").read_text()
    for cls in (JobConfig, Output):
        for table, (_, bits) in cls.table_keys.items():
            body = text[text.index(f"table {table} {{"):]
            key = re.search(r"key = \{ ([\w.]+) : exact; \}", body).group(1)
            field = key.split(".")[-1]
            decl = re.search(rf"bit<(\d+)>\s+{field};", (P4 / "include/headers.p4").read_text())
            assert decl and int(decl.group(1)) == bits, f"{table}: key {key}"


def test_one_file_of_sizes_for_programs_model_and_plugin():
    assert defs.WAY_SLOTS == 1 << defs.SLOT_BITS == defs.MAX_JOBS * defs.BLOCK_SLOTS
    assert defs.TABLE_SLOTS == defs.WAYS * defs.WAY_SLOTS and defs.SUM_BIAS == 1 << defs.VALUE_BITS
    assert defs.MAX_JOBS * defs.MAX_STREAMS == defs.read_defs()["JG_STREAM_COUNTERS"]
    assert defs.MAX_TUPLE_BYTES == 8 + 8 * defs.MAX_IN_FIELDS
    for path in (*PROGRAMS.values(), P4 / "model" / "switch_model.c"):
        assert '#include "../include/jumpgate_defs.p4"' in path.read_text(), path
    # no size is spelled out as a number elsewhere
    for path in PROGRAMS.values():
        assert "65536" not in path.read_text().replace("32w65536", "")


def test_model_implements_every_table_action_and_register():
    model = (P4 / "model" / "switch_model.c").read_text()
    for cls in CONTROLS:
        for table in getattr(cls, "tables", ()):
            assert f'"{table}"' in model or table.startswith("out"), table
        for reg in getattr(cls, "registers", ()):
            if reg in defs.SLOT_REGISTERS:  # a way's registers: WAY_REGS(w) names them "kl" #w, ...
                name = re.fullmatch(r"([a-z]+\d?_?)(\d)", reg).group(1)
                assert f'{{"{name}" #w' in model and f"WAY_REGS({reg[-1]})" in model, reg
            else:
                assert f'{{"{reg}"' in model, reg


STEPS = {"v1model": ("TRY_WAY", "AT_WAY", "TAKE_WAY"),
         # TNA: one table per register array, a FLUSH's take among its actions: kl tried, kh claimed
         # or checked (in ingress), the count and the sums (in egress)
         "tna": ("TRY_WAY", "KEY_WAY", "COUNT_WAY", "SUM_WAY")}


@pytest.mark.parametrize("arch", sorted(PROGRAMS))
def test_every_way_has_its_registers_hash_and_steps(arch):
    """The ways are written out (P4 has no loops): each has its registers, its hash input and its
    steps, and the FLUSH's way field is JG_FLUSH_WAY_SHIFT up (bits 18:16 of the number, the third
    byte's bits 2:0 of the little-endian field as extracted)."""
    text = PROGRAMS[arch].read_text()
    for w in range(defs.WAYS):
        assert f"#define ROT{w} " in text
        for step in STEPS[arch]:
            assert f"{step}({w}" in text, (step, w)
    if arch == "tna":
        assert all(f"kl{w}_t.apply()" in text for w in range(defs.WAYS))
        assert all(f"kh{w}_t.apply()" in text for w in range(defs.WAYS))
        assert all(f"VALUES_AT({w})" in text for w in range(defs.WAYS))
    if arch == "v1model":
        assert "seq[18:16]" in text
    else:  # the third byte as extracted, its bits 2:0 matched and tested
        assert "hdr.ntu.seq[47:40]" in text and "W &&& 7" in text and "hdr.bridge.way[2:0] == W" in text
    assert defs.FLUSH_WAY_SHIFT == 16 and defs.WAYS == 7


def _uncommented(path: Path) -> str:
    return re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)


def test_datagrams_of_several_tuples_agree_everywhere():
    """JG_TUPLES_PER_DATAGRAM (docs/switch.md, "Several tuples per datagram") is what the model
    checks a datagram against and what the plugin announces, and what the P4 programs' shared
    parts are written out for (P4 has no loops over a #define): the record stacks have that many
    entries of each kind (0 .. JG_MAX_OUT_WORDS words), the parser reads 1 .. N-1 records of every
    kind before a recirculated datagram's next tuple, and Admit's table of UDP lengths has every
    tuple length with 1 .. N tuples."""
    n = defs.TUPLES_PER_DATAGRAM
    assert 1 < n <= 16
    headers = _uncommented(P4 / "include/headers.p4")
    for k in range(defs.MAX_OUT_WORDS + 1):
        words = re.search(rf"header rec{k}_h \{{([^}}]*)\}}", headers).group(1)
        assert re.findall(r"bit<64> w(\d)", words) == [str(i) for i in range(k)], f"rec{k}_h"
        assert re.search(rf"rec{k}_h\[JG_TUPLES_PER_DATAGRAM\] rec{k};", headers), f"stack rec{k}"
    parser = _uncommented(P4 / "include/parser_states.p4")
    pass_state = parser[parser.index("state parse_pass"):parser.index("#define REC_STATES")]
    cases = set(re.findall(r"\((\d), (\d)\): parse_rec(\d)_(\d);", pass_state))
    assert cases == {(str(k), str(r), str(k), str(r)) for k in range(defs.MAX_OUT_WORDS + 1) for r in range(1, n)}
    states = parser[parser.index("#define REC_STATES"):parser.index("state parse_end")]
    for r in range(1, n):
        body = re.search(rf"state parse_rec##K##_{r} \{{(.*?)transition parse_tuple;", states, re.S).group(1)
        assert body.count("pkt.extract(hdr.rec##K.next)") == r, r
    assert re.findall(r"REC_STATES\((\d)\)", states) == [str(k) for k in range(defs.MAX_OUT_WORDS + 1)]
    admit = _uncommented(P4 / "include/passes.p4")
    per_length = re.search(r"#define UDP_LENS\(L\) (.*)", admit).group(1)
    assert re.findall(r"UDP_LEN\(L, (\d+)\)", per_length) == [str(c) for c in range(1, n + 1)]
    entries = admit[admit.index("const entries"):]
    lengths = range(defs.MIN_TUPLE_BYTES, defs.MAX_TUPLE_BYTES + 1, 8)  # null vector and 1 .. 8 fields
    assert re.findall(r"UDP_LENS\((\d+)\)", entries[:entries.index("}")]) == [str(k) for k in lengths]
    model = (P4 / "model" / "switch_model.c").read_text()
    assert "h.count > JG_TUPLES_PER_DATAGRAM" in model and "rec[JG_TUPLES_PER_DATAGRAM]" in model


def test_flags_as_the_p4_programs_read_them():
    """The P4 programs read the little-endian u16 flags as extracted (bytes swapped): the JG_F_*
    of jumpgate_defs.p4 are the transport's flags (ncas/runtime/jg_udp.h) swapped, and JG_F_PASS,
    the switch's own mark on a datagram it recirculates, is none of the transport's flags."""
    d = defs.read_defs()
    wire = {m.group(1): int(m.group(2), 16) for m in re.finditer(r"#define JG_UDP_F_(\w+) (0x[0-9a-fA-F]+)u",
                                                                   (RUNTIME / "jg_udp.h").read_text())}

    def swapped(v: int) -> int:
        return (v & 0xFF) << 8 | v >> 8

    for name in ("END", "LOSS", "FLUSH", "FINISH", "DISCARD", "ERROR", "RETX", "ACK", "SACK"):
        assert d[f"JG_F_{name}"] == swapped(wire[name]), name
    assert d["JG_F_PASS"] not in {swapped(v) for v in wire.values()}
    assert bin(d["JG_F_PASS"]).count("1") == 1


# Tofino 1's egress parser reads at most 160 bytes of a packet (p4c's Tofino back end,
# backends/tofino/bf-p4c/specs/parde_spec.h, TofinoPardeSpec::maxParseDepth); its intrinsic
# metadata header (tofino1_base.p4, egress_intrinsic_metadata_t) is 27 of them.
TOFINO1_EGRESS_PARSE_BYTES = 160
TOFINO1_EGRESS_INTRINSIC_BYTES = 27


def test_the_egress_pipe_parses_within_tofino_1s_limit():
    """The Tofino program's egress pipe parses the bridge header, Ethernet, IPv4, UDP, the NTU
    header and the pass header or a FINISH's payload, and leaves the rest (the records earlier
    passes left, the tuples still to come) as payload: the tuple of the pass left the datagram in
    ingress, and the new record is emitted in front of the earlier ones (docs/switch.md, "Does it
    fit one Tofino pipe?"). That much must stay within the egress parser's 160 bytes."""
    text = _uncommented(P4 / "include/headers.p4")
    header_bits = {m.group(1): sum(int(b) for b in re.findall(r"bit<(\d+)>", m.group(2)))
                   for m in re.finditer(r"header (\w+)\s*\{([^}]*)\}", text)}
    assert all(bits % 8 == 0 for bits in header_bits.values()), header_bits
    tna = _uncommented(PROGRAMS["tna"])
    parser = tna[tna.index("parser SwitchEgressParser"):tna.index("#define VALUE_ACTIONS")]
    # a version 2 sender's answer (its mirror header, one byte, then the headers up to NTU) is
    # shorter than what the ingress pipe sends on
    answer = parser[parser.index("state eg_answer"):parser.index("state eg_bridged")]
    assert re.findall(r"pkt\.extract\(hdr\.(\w+)\)", answer) == ["ethernet", "ipv4", "udp", "ntu"]
    assert "pkt.advance(8);" in answer
    parser = parser.replace(answer, "")
    extracted = re.findall(r"pkt\.extract\(hdr\.(\w+)\)", parser)
    assert extracted == ["bridge", "ethernet", "ipv4", "udp", "ntu", "pass", "finish"], extracted
    kinds = {name: re.search(rf"(\w+)\s+{name};", text).group(1) for name in extracted}
    path = [kinds[n] for n in extracted[:-2]] + [max(kinds["pass"], kinds["finish"], key=header_bits.get)]
    depth = TOFINO1_EGRESS_INTRINSIC_BYTES + sum(header_bits[k] for k in path) // 8
    assert depth <= TOFINO1_EGRESS_PARSE_BYTES, f"the egress parser would read {depth} bytes"


def test_the_tofino_records_are_counted_where_they_are_decided():
    """The Tofino program counts a record into the datagram's (n_rec, rec_bytes) in the action that
    decides it (REC_COUNTED: the bypass, the spill, a flushed slot), so that its output counters
    need not wait for Passes; Passes leaves its own increment out there (PASS_REC_COUNTED) and keeps
    it in the BMv2 program. Every record the Tofino program makes goes through REC_COUNTED."""
    tna = _uncommented(PROGRAMS["tna"])
    assert "#define PASS_REC_COUNTED" in tna and "#define PASS_REC_COUNTED" not in _uncommented(PROGRAMS["v1model"])
    define = re.search(r"#define REC_COUNTED (.*)", tna).group(1)
    assert "meta.rec = 1;" in define and "meta.n_rec = meta.n_rec + 1;" in define
    assert "meta.rec_bytes = meta.rec_bytes + meta.rec_len;" in define
    assert tna.count("meta.rec = 1") == 1  # only in REC_COUNTED
    passes = _uncommented(P4 / "include/passes.p4")
    assert re.search(r"#ifndef PASS_REC_COUNTED\s+if \(meta\.rec == 1\) \{\s+meta\.n_rec = meta\.n_rec \+ 1;", passes)


def _compile(cmd: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600)


def tna_include_dir() -> Path | None:
    """An installed p4include directory with TNA's architecture file tna.p4: p4c's Tofino back end
    installs it next to core.p4 in <prefix>/share/p4c/p4include (also in Intel's SDE, under
    $SDE_INSTALL). Only installed places count: a p4c source tree is not a dependency."""
    prefixes = [Path(exe).resolve().parent.parent for tool in ("p4test", "bf-p4c", "p4c")
                if (exe := shutil.which(tool))]
    if os.environ.get("SDE_INSTALL"):
        prefixes.append(Path(os.environ["SDE_INSTALL"]))
    prefixes += [Path("/usr/local"), Path("/usr")]
    return next((d for p in prefixes if (d := p / "share" / "p4c" / "p4include").joinpath("tna.p4").is_file()), None)


@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c is not installed (neither Debian 12 nor PyPI packages it; "
                    "docs/switch.md says where to get it)")
def test_v1model_program_compiles_with_p4c(tmp_path):
    info = tmp_path / "jumpgate_agg.p4info.txtpb"  # text format (.txt is deprecated by p4c)
    proc = _compile(["p4c", "--target", "bmv2", "--arch", "v1model", "--p4runtime-files", str(info),
                     "-o", str(tmp_path), str(PROGRAMS["v1model"])], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not proc.stderr.strip(), f"p4c warned:\n{proc.stderr}"
    text = info.read_text()
    for table in (t for c in CONTROLS for t in getattr(c, "tables", ())):
        assert re.search(rf'name: "[\w.]*\b{table}"', text), table


def test_tna_program_passes_p4test_with_tna(tmp_path):
    """p4c's front and mid end (p4test) against TNA's architecture file, the type check bf-p4c starts
    with: every RegisterAction has Tofino 1's shape (one output), no warning."""
    if shutil.which("p4test") is None:
        pytest.skip("p4test is not installed (it comes with p4c; docs/switch.md says where to get it)")
    include = tna_include_dir()
    if include is None:
        pytest.skip("no installed tna.p4 (<prefix>/share/p4c/p4include/tna.p4, which p4c's Tofino back end or "
                    "Intel's SDE installs)")
    # bf-p4c's driver defines the target; tna.p4 refuses to be read without it
    proc = _compile(["p4test", "-D__TARGET_TOFINO__=1", "-I", str(include), str(PROGRAMS["tna"])], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not proc.stderr.strip(), f"p4test warned:\n{proc.stderr}"


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(shutil.which("p4c-barefoot") is None or shutil.which("p4c") is None,
                    reason="p4c's Tofino back end (p4c-barefoot, run as `p4c --target tofino`) is not installed: "
                    "it is built from p4lang/p4c's sources, no package registry has it (docs/switch.md, "
                    "'Does it fit one Tofino pipe?')")
@pytest.mark.skipif(os.environ.get("JUMPGATE_TOFINO_COMPILE") != "1",
                    reason="the Tofino back end takes 3 to 8 minutes of one core for this program "
                    "(docs/switch.md, 'Does it fit one Tofino pipe?'); run it with JUMPGATE_TOFINO_COMPILE=1")
def test_tna_program_compiles_for_tofino(tmp_path):
    """The Tofino back end of p4c (p4c-barefoot; Intel's SDE calls its driver bf-p4c) through PHV
    allocation and table placement into Tofino 1's 12 + 12 MAU stages, with its context (the
    driver's description of the tables) and its resource report of at most 12 stages. Minutes of CPU:
    its runs here, and what they reported, are in docs/switch.md."""
    out = tmp_path / "out"
    proc = subprocess.run(["nice", "-n", "10", "p4c", "--target", "tofino", "--arch", "tna", "-g", "-I", str(P4 / "include"),
                           "-o", str(out), str(PROGRAMS["tna"])],
                          capture_output=True, text=True, cwd=tmp_path, timeout=1700)
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert not re.search(r"^error", proc.stderr, re.M), proc.stderr[-6000:]
    context = json.loads((out / "pipe" / "context.json").read_text())
    assert context.get("tables"), "context.json lists no tables"
    # one entry per MAU stage the placement used (both pipes share them); a failed placement lists
    # every stage it ran to (26 in an earlier run)
    stages = json.loads((out / "pipe" / "logs" / "resources.json").read_text())["resources"]["mau"]["mau_stages"]
    assert 0 < len(stages) <= 12 and max(s["stage_number"] for s in stages) < 12, len(stages)


def synthetic_p4info(p4info_pb2):
    """A P4Info with the controller's tables, actions and registers under the names p4c gives them
    (SwitchIngress.<control instance>.<name>), as a P4Runtime client sees the compiled program."""
    info = p4info_pb2.P4Info()
    ids = iter(range(1, 10_000))
    for cls in (JobConfig, Output):
        for table, (key, bits) in cls.table_keys.items():
            t = info.tables.add()
            t.preamble.id, t.preamble.name = next(ids), f"SwitchIngress.{cls.p4_instance}.{table}"
            t.match_fields.add(id=1, name=key, bitwidth=bits, match_type=p4info_pb2.MatchField.EXACT)
    actions = {"set_job": JobConfig.set_job_params, "set_route": Output.set_route_params}
    actions |= {f"{p}{i}": () for p in ("key_w", "v0_w", "v1_w") for i in range(8)}
    actions |= {"v0_none": (), "v1_none": ()} | {f"out{i}_{w}": () for i in range(3) for w in ("count", "s0", "s1")}
    for name, params in actions.items():
        a = info.actions.add()
        a.preamble.id, a.preamble.name = next(ids), f"SwitchIngress.x.{name}"
        for pid, (pname, bits) in enumerate(params, 1):
            a.params.add(id=pid, name=pname, bitwidth=bits)
    return info


def test_p4runtime_entries_pack_keys_and_parameters():
    try:
        p4info_pb2, p4runtime_pb2, _ = p4runtime_modules()
    except NcaError as e:
        pytest.skip(str(e))
    backend = P4RuntimeBackend("bmv2://127.0.0.1:9559?data_ip=10.0.0.100&ctrl_ip=10.0.0.1")
    backend.load(p4runtime_pb2, synthetic_p4info(p4info_pb2))
    assert backend.ingress(3) == ("10.0.0.100", 40003)
    doc = json.loads(golden.render_case("store_sales_items"))
    job = next(e for e in doc["entries"] if e["table"] == "job")
    entry = backend.table_entry(TableEntry("job", job["key"], "set_job", tuple(job["params"].items())))
    assert entry.match[0].exact.value == (40002).to_bytes(2, "big")
    params = {p.param_id: p.value for p in entry.action.action.params}
    widths = dict(JobConfig.set_job_params)
    for pid, (name, value) in enumerate(job["params"].items(), 1):
        assert params[pid] == value.to_bytes((widths[name] + 7) // 8, "big"), name
    sel = backend.table_entry(TableEntry("key_select", 2, "key_w0"))
    assert sel.match[0].exact.value == b"\x02" and not sel.action.action.params


def test_bmv2_backend_takes_version_2_and_the_ports_it_answers_on():
    """BMv2 runs the program with the ring (version 2 senders); the ports whose clone sessions carry
    the answers come from the `forward` table unless the URL lists them, and a bad list is refused
    when the URL is read, naming the option."""
    url = "bmv2://127.0.0.1:9559?data_ip=10.0.0.100&ctrl_ip=10.0.0.1"
    assert P4RuntimeBackend(url).udp_version == 2 and "v1model" in SeenRing.programs
    assert P4RuntimeBackend(url).answer_ports is None
    assert P4RuntimeBackend(url + "&answer_ports=1,3").answer_ports == {1, 3}
    with pytest.raises(ValueError, match="answer_ports='1,x' is not a comma-separated list"):
        P4RuntimeBackend(url + "&answer_ports=1,x")
