"""Where the switch aggregator's tables and registers live: one abstract class, three backends
(the SwitchML habit: end-host backends behind one interface, a no-hardware one for testing).

- `ModelBackend`: the switch model (p4/model/switch_model.c), a local process that runs the P4
  pipeline's logic on UDP sockets. What every test here uses; named a model wherever it appears.
- `P4RuntimeBackend`: BMv2 (simple_switch_grpc) running p4/v1model/jumpgate_agg.p4: tables through
  P4Runtime (the `p4runtime` package from PyPI, `pip install 'jumpgate[switch]'`), registers through
  BMv2's own Thrift runtime API (`BmRuntime`), since BMv2's P4Runtime server has no register entries.
- `BfRuntimeBackend`: a Tofino running p4/tna/jumpgate_agg.p4, through BF Runtime gRPC (the
  `bfrt_grpc` package of Intel's SDE, which is not on PyPI).

A backend writes what the controller classes computed (controller.py) and says where a job's
senders send (`ingress`). The plugin speaks to the data plane itself (FLUSH/FINISH datagrams,
END notices) through ordinary UDP sockets, identically for all three.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from ...contract.readiness import wait_readable
from ...nca.interface import NcaError
from . import defs
from .controller import RegisterFill, RegisterWrite, TableEntry, p4_path

MODEL_READY_S = 10.0


class SwitchBackend(ABC):
    """One switch. `open`/`close` are reference counted by the instances that use it."""

    kind: str = ""

    fresh_registers = False  # whether connecting starts a switch whose slot registers are all zero
    # The highest UDP transport version its ingress takes (docs/udp-transport.md): 2 where the data
    # plane has the ring of sequence numbers and answers with receipts (the model, BMv2), else 1.
    udp_version = 1
    # FLUSH datagrams the plugin may send ahead of the switch's `flushed` counter; None: all at
    # once (a switch at line rate, the model with its large receive buffer)
    flush_window: int | None = None

    def __init__(self) -> None:
        self._users = 0
        self._lock = threading.Lock()
        # Starts of the BLOCK_SLOTS-sized blocks of slot indices known to be clear in every way: a
        # job that leases a block not known clear clears it first (docs/switch.md, "Clear slots").
        self.clean_blocks: set[int] = set()

    # -- life ------------------------------------------------------------------------------
    def open(self, cache_dir: Path) -> None:
        with self._lock:
            if self._users == 0:
                self._connect(Path(cache_dir))
                self.clean_blocks = (set(range(0, defs.WAY_SLOTS, defs.BLOCK_SLOTS)) if self.fresh_registers
                                     else set())
            self._users += 1

    def close(self) -> None:
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users == 0:
                self._disconnect()

    @abstractmethod
    def _connect(self, cache_dir: Path) -> None: ...

    @abstractmethod
    def _disconnect(self) -> None: ...

    # -- what a job needs ------------------------------------------------------------------
    @property
    @abstractmethod
    def controller_host(self) -> str:
        """Where the plugin's control socket binds: the switch sends END notices there."""

    @abstractmethod
    def ingress(self, job: int) -> tuple[str, int]:
        """The (host, UDP port) a job's senders send to, and to which the plugin sends FLUSH and
        FINISH; the port is the `job` table's key."""

    def release_ingress(self, port: int) -> None:
        """Give back what `ingress` took (a real switch's ports are fixed per job: nothing to do)."""
        return None

    @abstractmethod
    def write_entries(self, entries: list[TableEntry]) -> None: ...

    @abstractmethod
    def delete_entries(self, entries: list[TableEntry]) -> None: ...

    @abstractmethod
    def write_registers(self, cells: list[RegisterWrite]) -> None: ...

    @abstractmethod
    def read_register(self, name: str, index: int, count: int = 1) -> list[int]: ...

    def fill_registers(self, fills: list[RegisterFill]) -> None:
        """Runs of equal cells; cell by cell unless the backend can do better."""
        self.write_registers([RegisterWrite(f.register, i, f.value) for f in fills
                              for i in range(f.index, f.index + f.count)])

    def prepare_answers(self) -> None:
        """Make sure the data plane can answer every version 2 sender (called at each job's
        configure when udp_version is 2): nothing to do unless the switch needs setting up for it."""
        return None

    def describe(self) -> str:
        return self.kind


# ------------------------------------------------------------------ the model


def build_model(cache_dir: Path) -> Path:
    """Compile the switch model (one C file) into the cache, keyed by its sources."""
    src = defs.p4_dir() / "model" / "switch_model.c"
    runtime = Path(__file__).resolve().parents[3] / "ncas" / "runtime"
    key = hashlib.sha256()
    for path in (src, defs.p4_dir() / "include" / "jumpgate_defs.p4", runtime / "jg_udp.h"):
        key.update(path.read_bytes())
    exe = Path(cache_dir) / "switch" / f"switch_model-{key.hexdigest()[:16]}"
    if exe.exists():
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_name(f".{exe.name}.{os.getpid()}")
    cmd = ["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-D_GNU_SOURCE",
           f"-I{runtime}", str(src), "-o", str(tmp)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise NcaError(f"building the switch model failed: {proc.stderr[-2000:]}")
    os.replace(tmp, exe)
    return exe


class ModelBackend(SwitchBackend):
    """The switch model, one process shared by the jobs that lease slots on it (like a switch),
    started when the first one opens it and stopped when the last one closes it."""

    kind = "model"
    fresh_registers = True  # a new process: every register is zero
    udp_version = 2  # it deduplicates version 2 streams with its ring and answers with receipts

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__()
        self.host = host
        self.proc: subprocess.Popen | None = None
        self._io = threading.Lock()

    @property
    def controller_host(self) -> str:
        return self.host

    def _connect(self, cache_dir: Path) -> None:
        exe = build_model(cache_dir)
        self.proc = subprocess.Popen([str(exe), "--bind", self.host], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, start_new_session=True, bufsize=0)
        ready = self._line(MODEL_READY_S)
        if ready.get("event") != "ready":
            raise NcaError(f"the switch model did not start: {ready}")

    def _disconnect(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=5)  # it exits when its standard input closes
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def _line(self, timeout: float) -> dict:
        proc = self.proc
        if proc is None:
            raise NcaError("the switch model is not running")
        # the model answers every command at once, with one whole line; none means it died
        ready = wait_readable(proc.stdout, timeout)
        line = proc.stdout.readline() if ready else b""
        if not line:
            raise NcaError("the switch model stopped answering")
        return json.loads(line)

    def command(self, line: str) -> dict:
        with self._io:
            if self.proc is None:
                raise NcaError("the switch model is not running")
            try:
                self.proc.stdin.write((line + "\n").encode())
            except (BrokenPipeError, OSError, ValueError) as e:
                raise NcaError(f"the switch model is gone ({e})") from None
            answer = self._line(MODEL_READY_S)
        if answer.get("event") == "error":
            raise NcaError(f"switch model: {answer.get('message')} (command: {line})")
        return answer

    def ingress(self, job: int) -> tuple[str, int]:
        return self.host, int(self.command("port")["port"])

    def release_ingress(self, port: int) -> None:
        if self.proc is not None:
            self.command(f"unport {port}")

    def write_entries(self, entries: list[TableEntry]) -> None:
        for e in entries:
            params = " ".join(f"{k}={v}" for k, v in e.params)
            self.command(f"add {e.table} {e.key} {e.action} {params}".rstrip())

    def delete_entries(self, entries: list[TableEntry]) -> None:
        for e in entries:
            self.command(f"del {e.table} {e.key}")

    def write_registers(self, cells: list[RegisterWrite]) -> None:
        for c in cells:
            self.command(f"write {c.register} {c.index} {c.value}")

    def read_register(self, name: str, index: int, count: int = 1) -> list[int]:
        return [int(v) for v in self.command(f"read {name} {index} {count}")["values"]]

    def fill_registers(self, fills: list[RegisterFill]) -> None:
        for f in fills:  # one command per run: a job's ring is 4096 cells
            self.command(f"fill {f.register} {f.index} {f.count} {f.value}")


# ------------------------------------------------------------------ real switches


class _RemoteSwitch(SwitchBackend):
    """What BMv2 and Tofino share: a data-plane address whose UDP ports `port_base + job` are the
    jobs' ingress ports, and a controller address the switch sends END notices to."""

    def __init__(self, url: str) -> None:
        super().__init__()
        u = urlsplit(url)
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        self.grpc = f"{u.hostname}:{u.port}"
        self.device_id = int(q.get("device_id", 0))
        self.data_ip = q.get("data_ip") or ""
        self.ctrl_ip = q.get("ctrl_ip") or ""
        self.port_base = int(q.get("port_base", 40000))
        self.options = q
        if not self.data_ip or not self.ctrl_ip:
            raise ValueError(f"{url}: data_ip (the switch's data-plane address for jobs) and ctrl_ip (this "
                             "host's address, where the switch sends END notices) are required")

    @property
    def controller_host(self) -> str:
        return self.ctrl_ip

    def ingress(self, job: int) -> tuple[str, int]:
        return self.data_ip, self.port_base + job

    def describe(self) -> str:
        return f"{self.kind} at {self.grpc}"


class BmRuntime:
    """BMv2's Thrift runtime API (service `standard` of every BMv2 switch; simple_switch_CLI speaks
    it), for the registers: BMv2's P4Runtime server (p4lang/PI) answers every register read and
    write with UNIMPLEMENTED ("Register reads are not supported yet"). Apache Thrift's Python
    library (`thrift` on PyPI, in the `switch` extra) does the encoding: the binary protocol over a
    buffered TCP socket, multiplexed by service name, as BMv2's own Python client
    (bmpy_utils.thrift_connect) connects. BMv2's generated bindings are not on PyPI, so the few
    calls are described here (their field ids and types, from BMv2's standard.thrift)."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        try:
            from thrift.protocol import TBinaryProtocol
            from thrift.transport import TSocket, TTransport
        except ImportError as e:
            raise NcaError(f"the BMv2 backend needs the thrift package: pip install 'jumpgate[switch]' ({e})") from None
        sock = TSocket.TSocket(host, port)
        sock.setTimeout(timeout * 1000)
        self.transport = TTransport.TBufferedTransport(sock)
        self.binary = TBinaryProtocol.TBinaryProtocol(self.transport)  # strict, as BMv2's server expects
        try:
            self.transport.open()
        except TTransport.TTransportException as e:
            raise NcaError(f"BMv2's Thrift server at {host}:{port}: {e}") from None
        self.seq = 0
        self.lock = threading.Lock()

    def close(self) -> None:
        self.transport.close()

    def register_read(self, name: str, index: int) -> int:
        return self.call(  # type: ignore[return-value]  # bm_register_read returns an i64
            "bm_register_read", [(1, "i32", 0), (2, "string", name), (3, "i32", index)])

    def register_read_all(self, name: str) -> list[int]:
        return self.call(  # type: ignore[return-value]  # a list<i64>
            "bm_register_read_all", [(1, "i32", 0), (2, "string", name)])

    def register_write(self, name: str, index: int, value: int) -> None:
        self.call("bm_register_write", [(1, "i32", 0), (2, "string", name), (3, "i32", index), (4, "i64", value)])

    def register_write_range(self, name: str, start: int, end: int, value: int) -> None:
        """Cells start .. end - 1 of register `name` set to `value`, in one call."""
        self.call("bm_register_write_range",
                  [(1, "i32", 0), (2, "string", name), (3, "i32", start), (4, "i32", end), (5, "i64", value)])

    def call(self, method: str, args: list[tuple[int, str, int | str]], service: str = "standard") -> object:
        """Call `method` of `service` with `args` (field id, type "i32", "i64" or "string", value;
        the `standard` calls take the context, 0, first); returns the result's field 0 (an integer,
        a list, a struct as a dict by field id, or None for a void call), raises NcaError for a
        TApplicationException and for the call's declared exception (field 1). Also the
        operator's: e.g. simple_switch's `set_all_egress_queue_depths`."""
        from thrift.protocol.TMultiplexedProtocol import TMultiplexedProtocol
        from thrift.Thrift import TApplicationException, TException, TMessageType, TType

        with self.lock:
            self.seq += 1
            proto = TMultiplexedProtocol(self.binary, service)  # prefixes the name with "service:"
            try:
                proto.writeMessageBegin(method, TMessageType.CALL, self.seq)
                proto.writeStructBegin(f"{method}_args")
                for fid, ftype, value in args:
                    kind, write = {"i32": (TType.I32, proto.writeI32), "i64": (TType.I64, proto.writeI64),
                                   "string": (TType.STRING, proto.writeString)}[ftype]
                    proto.writeFieldBegin(f"arg{fid}", kind, fid)
                    write(value)
                    proto.writeFieldEnd()
                proto.writeFieldStop()
                proto.writeStructEnd()
                proto.writeMessageEnd()
                self.transport.flush()
                # the reply is not multiplexed: read it with the plain protocol
                _, mtype, _ = self.binary.readMessageBegin()
                if mtype == TMessageType.EXCEPTION:
                    error = TApplicationException()
                    error.read(self.binary)
                    self.binary.readMessageEnd()
                    raise NcaError(f"BMv2 Thrift {method}: {error.message or error.type}")
                result = self._struct(TType)
                self.binary.readMessageEnd()
            except TException as e:
                raise NcaError(f"BMv2 Thrift {method}: {e}") from None
        if 1 in result:  # the declared exception, e.g. InvalidRegisterOperation {1: code}
            raise NcaError(f"BMv2 Thrift {method} failed: {result[1]} (a register's codes: 1 no such register, "
                           "2 index out of range)")
        return result.get(0)

    def _struct(self, TType) -> dict[int, object]:
        """A struct's fields by id; fields of types these calls never return are skipped."""
        proto = self.binary
        fields: dict[int, object] = {}
        proto.readStructBegin()
        while True:
            _, ftype, fid = proto.readFieldBegin()
            if ftype == TType.STOP:
                break
            fields[fid] = self._value(TType, ftype)
            proto.readFieldEnd()
        proto.readStructEnd()
        return fields

    def _value(self, TType, ftype: int) -> object:
        proto = self.binary
        readers = {TType.BOOL: proto.readBool, TType.BYTE: proto.readByte, TType.I16: proto.readI16,
                   TType.I32: proto.readI32, TType.I64: proto.readI64, TType.STRING: proto.readBinary}
        if ftype in readers:
            return readers[ftype]()
        if ftype == TType.STRUCT:
            return self._struct(TType)
        if ftype == TType.LIST:
            etype, size = proto.readListBegin()
            items = [self._value(TType, etype) for _ in range(size)]
            proto.readListEnd()
            return items
        proto.skip(ftype)  # maps, sets, doubles: no call here returns one
        return None


class P4RuntimeBackend(_RemoteSwitch):
    """BMv2's simple_switch_grpc: its tables through P4Runtime, its registers through its Thrift
    runtime API (`BmRuntime`; simple_switch_grpc serves both). URL options: `p4info` (the P4Info
    text file p4c wrote), `config` (the BMv2 JSON; when given, the pipeline is pushed on connect,
    which also empties its tables and registers), `device_id`, `thrift` (HOST:PORT of the Thrift
    server, default the gRPC host and port 9090), `flush_window` (default 256: BMv2 takes packets
    off its ports at a few thousand a second, stops taking them while its input queue of 1024 is
    full, and the kernel then drops what its capture buffer cannot hold, so most of a flush of
    thousands of FLUSH datagrams sent at once would be lost)."""

    kind = "bmv2"
    # p4/v1model/jumpgate_agg.p4 has the ring `seen` and answers version 2 senders (control
    # Answer): receipts and END answers leave by clone session JG_RECEIPT_SESSION_BASE + the port
    # the datagram came in on, which prepare_answers makes for every port of the `forward` table
    udp_version = 2

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.flush_window = int(self.options.get("flush_window", 256))
        self._answer_ports: set[int] = set()  # ports whose clone session this backend made
        listed = self.options.get("answer_ports")
        try:  # the ports senders are on, when not those of the `forward` table (prepare_answers)
            self.answer_ports = {int(p) for p in listed.split(",")} if listed else None
        except ValueError:
            raise ValueError(f"switch URL: answer_ports={listed!r} is not a comma-separated list of port numbers") from None

    def _connect(self, cache_dir: Path) -> None:
        # first: it chooses protobuf's implementation, which must happen before protobuf is imported
        p4info_pb2, p4runtime_pb2, p4runtime_pb2_grpc = p4runtime_modules()
        import grpc
        from google.protobuf import text_format

        self.load(p4runtime_pb2, text_format.Parse(Path(self.options["p4info"]).read_text(), p4info_pb2.P4Info()))
        thrift = self.options.get("thrift") or f"{self.grpc.rpartition(':')[0]}:9090"
        self.bm = BmRuntime(thrift.rpartition(":")[0], int(thrift.rpartition(":")[2]))
        self.channel = grpc.insecure_channel(self.grpc)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.election = p4runtime_pb2.Uint128(high=0, low=int(time.time()))
        self._requests: list = []
        self._stream = self.stub.StreamChannel(iter(self._stream_requests()))
        arbitration = p4runtime_pb2.StreamMessageRequest()
        arbitration.arbitration.device_id = self.device_id
        arbitration.arbitration.election_id.CopyFrom(self.election)
        self._requests.append(arbitration)
        next(self._stream)  # the arbitration answer
        if self.options.get("config"):
            req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
                device_id=self.device_id, election_id=self.election,
                action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
            req.config.p4info.CopyFrom(self.p4info)
            req.config.p4_device_config = Path(self.options["config"]).read_bytes()
            self.stub.SetForwardingPipelineConfig(req)

    def load(self, p4runtime_pb2, p4info) -> None:
        """Use these P4Runtime messages and this P4Info (what _connect reads; a test gives its own)."""
        self._pb = p4runtime_pb2
        self.p4info = p4info

    def _stream_requests(self):
        while True:
            while self._requests:
                yield self._requests.pop(0)
            if getattr(self, "_closing", False):
                return
            time.sleep(0.05)

    def _disconnect(self) -> None:
        self._closing = True
        self.channel.close()
        self.bm.close()
        self._answer_ports = set()

    def forward_ports(self) -> set[int]:
        """The ports the operator's `forward` table sends hosts to: where senders can be."""
        pb = self._pb
        table = self._id("tables", "forward")
        send = self._id("actions", "send")
        port_id = next(p.id for p in send.params if p.name == "port")
        req = pb.ReadRequest(device_id=self.device_id)
        req.entities.add(table_entry=pb.TableEntry(table_id=table.preamble.id))
        ports = set()
        for resp in self.stub.Read(req):
            for entity in resp.entities:
                action = entity.table_entry.action.action
                if action.action_id == send.preamble.id:
                    ports |= {int.from_bytes(p.value, "big") for p in action.params if p.param_id == port_id}
        return ports

    def prepare_answers(self) -> None:
        """A clone session JG_RECEIPT_SESSION_BASE + p to port p for every port p a sender can be
        on: the program clones a version 2 datagram to the session of the port it came in on, and
        its egress turns the clone into the sender's receipt or END answer (docs/switch.md). Ports
        are those of the `forward` table, or the URL's `answer_ports` (comma-separated)."""
        import grpc

        ports = self.answer_ports if self.answer_ports is not None else self.forward_ports()
        new = sorted(ports - self._answer_ports)
        if not new:
            return
        pb = self._pb
        base = defs.RECEIPT_SESSION_BASE
        for kind in (pb.Update.INSERT, pb.Update.MODIFY):  # MODIFY: a session an earlier run left
            failed = []
            for port in new:
                session = pb.CloneSessionEntry(session_id=base + port)
                session.replicas.add(egress_port=port, instance=1)
                entity = pb.Entity()
                entity.packet_replication_engine_entry.clone_session_entry.CopyFrom(session)
                try:
                    self._write([pb.Update(type=kind, entity=entity)])
                except grpc.RpcError as e:  # ALREADY_EXISTS on INSERT
                    failed.append((port, e))
            if not failed:
                break
            new = [port for port, _ in failed]
        else:
            raise NcaError(f"BMv2: cannot make the clone sessions that answer version 2 senders on ports "
                           f"{[p for p, _ in failed]}: {failed[0][1]}")
        self._answer_ports |= ports

    def _id(self, kind: str, name: str):
        for obj in getattr(self.p4info, kind):
            if obj.preamble.name == name or obj.preamble.name.endswith("." + name):
                return obj
        raise NcaError(f"the P4Info has no {kind[:-1]} named {name!r}: is it the jumpgate_agg program?")

    @staticmethod
    def _bytes(value: int, bits: int) -> bytes:
        return value.to_bytes((bits + 7) // 8, "big")

    def table_entry(self, e: TableEntry):
        """The P4Runtime TableEntry of `e` (a test builds these against a P4Info)."""
        pb = self._pb
        table = self._id("tables", e.table)
        action = self._id("actions", e.action)
        entry = pb.TableEntry(table_id=table.preamble.id)
        key = table.match_fields[0]
        entry.match.add(field_id=key.id, exact=pb.FieldMatch.Exact(value=self._bytes(e.key, key.bitwidth)))
        entry.action.action.action_id = action.preamble.id
        widths = {p.name: (p.id, p.bitwidth) for p in action.params}
        for name, value in e.params:
            pid, bits = widths[name]
            entry.action.action.params.add(param_id=pid, value=self._bytes(value, bits))
        return entry

    def _write(self, updates) -> None:
        req = self._pb.WriteRequest(device_id=self.device_id, election_id=self.election)
        req.updates.extend(updates)
        self.stub.Write(req)

    def write_entries(self, entries: list[TableEntry]) -> None:
        pb = self._pb
        self._write([pb.Update(type=pb.Update.INSERT, entity=pb.Entity(table_entry=self.table_entry(e)))
                     for e in entries])

    def delete_entries(self, entries: list[TableEntry]) -> None:
        pb = self._pb
        self._write([pb.Update(type=pb.Update.DELETE, entity=pb.Entity(table_entry=self.table_entry(e)))
                     for e in entries])

    def _register_name(self, name: str) -> str:
        """The register's full name (`SwitchIngress.<control instance>.<name>`), the same in the
        P4Info and in BMv2's JSON."""
        return self._id("registers", name).preamble.name

    def write_registers(self, cells: list[RegisterWrite]) -> None:
        for c in cells:
            self.bm.register_write(self._register_name(c.register), c.index, c.value)

    def fill_registers(self, fills: list[RegisterFill]) -> None:
        for f in fills:  # one call per run: a job's ring is 4096 cells
            self.bm.register_write_range(self._register_name(f.register), f.index, f.index + f.count, f.value)

    def read_register(self, name: str, index: int, count: int = 1) -> list[int]:
        full = self._register_name(name)
        if count == 1:
            return [self.bm.register_read(full, index)]
        return self.bm.register_read_all(full)[index:index + count]


class BfRuntimeBackend(_RemoteSwitch):
    """A Tofino through BF Runtime gRPC (`bfrt_grpc` from Intel's SDE). URL options: `program`
    (the P4 program's name, default jumpgate_agg), `device_id`. Names are
    `pipe.<pipe control>.<control instance>.<table>`, in the ingress or the egress pipe
    (controller.p4_path)."""

    kind = "tofino"
    # p4/tna/jumpgate_agg.p4 has the ring `seen` and answers version 2 senders: receipts and END
    # answers leave by ingress mirroring to session JG_RECEIPT_SESSION_BASE + the port the datagram
    # came in on, which prepare_answers makes for every port of the `forward` table (or the URL's
    # `answer_ports`)
    udp_version = 2
    # what a mirror session keeps of a datagram: its mirror header (1 byte) and Ethernet, IPv4, UDP
    # and NTU headers. (The answer's IPv4 and UDP lengths say 52 and 32 bytes whatever is kept: more
    # would reach its sender as Ethernet padding.)
    ANSWER_BYTES = 1 + 14 + 20 + 8 + defs.UDP_HEADER_BYTES

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._answer_ports: set[int] = set()  # ports whose mirror session this backend made
        listed = self.options.get("answer_ports")
        try:
            self.answer_ports = {int(p) for p in listed.split(",")} if listed else None
        except ValueError:
            raise ValueError(f"switch URL: answer_ports={listed!r} is not a comma-separated list of port numbers") from None

    def _connect(self, cache_dir: Path) -> None:
        try:
            import bfrt_grpc.client as gc  # ships with Intel's SDE, not on PyPI
        except ImportError as e:
            raise NcaError("the Tofino backend needs bfrt_grpc from Intel's SDE on PYTHONPATH "
                           f"(e.g. $SDE_INSTALL/lib/python3*/site-packages/tofino) ({e})") from None
        self.gc = gc
        program = self.options.get("program", "jumpgate_agg")
        self.interface = gc.ClientInterface(self.grpc, client_id=0, device_id=self.device_id)
        self.interface.bind_pipeline_config(program)
        self.info = self.interface.bfrt_info_get(program)
        self.target = gc.Target(device_id=self.device_id, pipe_id=0xFFFF)

    def _disconnect(self) -> None:
        self.interface.tear_down_stream()

    def _name(self, name: str) -> str:
        """`SwitchIngress.<control instance>.<name>` (or SwitchEgress...): how BF Runtime names a
        table, register or action of p4/tna/jumpgate_agg.p4."""
        return f"{p4_path(name, 'tna')}.{name}"

    def _table(self, name: str):
        return self.info.table_get(f"pipe.{self._name(name)}")

    def _key(self, table, e: TableEntry):
        field = {"job": "hdr.udp.dst_port"}.get(e.table, "meta.job")
        return table.make_key([self.gc.KeyTuple(field, e.key)])

    def write_entries(self, entries: list[TableEntry]) -> None:
        for e in entries:
            t = self._table(e.table)
            action = f"{self._name(e.table).rsplit('.', 1)[0]}.{e.action}"
            data = t.make_data([self.gc.DataTuple(k, v) for k, v in e.params], action)
            t.entry_add(self.target, [self._key(t, e)], [data])

    def delete_entries(self, entries: list[TableEntry]) -> None:
        for e in entries:
            t = self._table(e.table)
            t.entry_del(self.target, [self._key(t, e)])

    def write_registers(self, cells: list[RegisterWrite]) -> None:
        for c in cells:
            t = self._table(c.register)
            t.entry_add(self.target, [t.make_key([self.gc.KeyTuple("$REGISTER_INDEX", c.index)])],
                        [t.make_data([self.gc.DataTuple(f"{self._name(c.register)}.f1", c.value)])])

    def forward_ports(self) -> set[int]:
        """The ports of the operator's `forward` table: where the switch's senders are."""
        t = self.info.table_get("pipe.SwitchIngress.forward")  # the operator's, in no controller class
        ports = set()
        for data, _ in t.entry_get(self.target, None, {"from_hw": False}):
            port = data.to_dict().get("port")
            if port is not None:
                ports.add(int(port))
        return ports

    def prepare_answers(self) -> None:
        """An ingress mirror session JG_RECEIPT_SESSION_BASE + p to port p for every port p a sender
        can be on (BF Runtime's `$mirror.cfg`), which keeps ANSWER_BYTES of the datagram: the
        program mirrors a version 2 datagram to the session of the port it came in on, and its
        egress pipe makes the copy the sender's receipt or END answer (docs/switch.md)."""
        gc = self.gc
        ports = self.answer_ports if self.answer_ports is not None else self.forward_ports()
        t = self.info.table_get("$mirror.cfg")
        for port in sorted(ports - self._answer_ports):
            key = [t.make_key([gc.KeyTuple("$sid", defs.RECEIPT_SESSION_BASE + port)])]
            data = [t.make_data([gc.DataTuple("$direction", str_val="INGRESS"),
                                 gc.DataTuple("$ucast_egress_port", port),
                                 gc.DataTuple("$ucast_egress_port_valid", bool_val=True),
                                 gc.DataTuple("$session_enable", bool_val=True),
                                 gc.DataTuple("$max_pkt_len", self.ANSWER_BYTES)], "$normal")]
            try:
                t.entry_add(self.target, key, data)
            except Exception:  # a session an earlier run left: made again as this one needs it
                t.entry_mod(self.target, key, data)
        self._answer_ports |= ports

    def read_register(self, name: str, index: int, count: int = 1) -> list[int]:
        t = self._table(name)
        out = []
        for i in range(index, index + count):
            resp = t.entry_get(self.target, [t.make_key([self.gc.KeyTuple("$REGISTER_INDEX", i)])],
                               {"from_hw": True})
            data, _ = next(resp)
            values = data.to_dict()[f"{self._name(name)}.f1"]
            out.append(int(values[0]))  # one value per pipe; a job's traffic uses one pipe
        return out


def p4runtime_modules():
    """(p4info_pb2, p4runtime_pb2, p4runtime_pb2_grpc) of the `p4runtime` package. Its generated code
    predates protobuf 4, whose native implementation refuses it; the pure-Python one reads it, so
    that is chosen unless the process already imported protobuf."""
    os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
    try:
        from p4.config.v1 import p4info_pb2
        from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
    except (ImportError, TypeError) as e:
        raise NcaError(f"the BMv2 backend needs the p4runtime package: pip install 'jumpgate[switch]' ({e})") from None
    return p4info_pb2, p4runtime_pb2, p4runtime_pb2_grpc


def backend_from_url(url: str) -> SwitchBackend:
    """`bmv2://HOST:PORT?...` or `tofino://HOST:PORT?...` (docs/switch.md)."""
    scheme = urlsplit(url).scheme
    if scheme == "bmv2":
        return P4RuntimeBackend(url)
    if scheme == "tofino":
        return BfRuntimeBackend(url)
    raise ValueError(f"switch URL {url!r}: the scheme is bmv2 or tofino")


def resolve_ipv4(host: str) -> int:
    return int.from_bytes(socket.inet_aton(socket.gethostbyname(host)), "big")
