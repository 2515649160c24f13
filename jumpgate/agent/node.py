"""The node agent (`jumpgate agent`; docs/agent.md): a small daemon on each node that runs the NCA
processes a Jumpgate server asks for.

It keeps a content-addressed cache of what NCAs need (their binaries: the server compiles and
ships, see docs/agent.md "Where NCAs are built"), starts and stops NCA processes, relays their
control channel (commands to standard input, event lines from standard output), answers what
the node's data root holds, and reports health and load. One agent serves every server that
knows its secret, each over its own authenticated connection (a session), and ends a session's
processes when the session ends: when the connection closes, when the server says goodbye, or
when the server has said nothing for its lease (a server that vanished without closing).

This file is deliberately self-contained (the Python standard library only, Python 3.10+) but for
fork_server.py, which is too: the server ships both to a node over SSH and runs this one with the
node's own `python3`, so a node needs no Jumpgate installation. `jumpgate agent` runs the same code.

Wire format (docs/agent.md): frames of one JSON header line, followed by `n` bytes of payload when
the header has `n`. The agent speaks first (`{"agent": ..., "nonce": ...}`); the client answers
`hello` with an HMAC-SHA256 of both nonces under the shared secret, and the agent proves its own
knowledge of the secret back, so neither side talks to an impostor and the secret never crosses the
wire.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import glob
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

if __package__:  # `jumpgate agent`
    from .fork_server import ForkedProcess, ForkServers
else:  # a script shipped over SSH, with fork_server.py beside it
    from fork_server import ForkedProcess, ForkServers  # type: ignore[no-redef]

PROTOCOL = 1
DEFAULT_LEASE_S = 10.0
MAX_HEADER = 1 << 16  # a header line longer than this is not ours
MAX_PAYLOAD = 1 << 31  # a blob (an NCA binary) larger than 2 GiB is not ours either
HANDSHAKE_TIMEOUT_S = 10.0
KEEP_WORK_S = 3600.0  # a job directory no process uses is removed this long after its last change
FORK_SERVERS = 16  # binaries kept loaded to fork NCA processes from (fork_server.py), at most
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
DIGEST = re.compile(r"^[0-9a-f]{64}$")


def mac(secret: bytes, *parts: str) -> str:
    return hmac.new(secret, "|".join(parts).encode(), hashlib.sha256).hexdigest()


class ProtocolError(Exception):
    """The peer sent something that is not a frame of this protocol."""


class Frames:
    """Frames over a connected stream (a socket here; a Paramiko channel on the server side has
    the same `makefile`/`sendall`)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.rfile = stream.makefile("rb")
        self.wlock = threading.Lock()

    def read(self) -> tuple[dict, bytes] | None:
        """The next frame; None at the end of the stream."""
        line = self.rfile.readline(MAX_HEADER + 1)
        if not line:
            return None
        if not line.endswith(b"\n"):
            if len(line) > MAX_HEADER:
                raise ProtocolError(f"a header line longer than {MAX_HEADER} bytes")
            return None  # the stream ended inside a header
        try:
            head = json.loads(line)
        except ValueError:
            raise ProtocolError(f"a header that is not JSON: {line[:80]!r}") from None
        if not isinstance(head, dict):
            raise ProtocolError("a header that is not a JSON object")
        n = head.get("n", 0)
        if not isinstance(n, int) or not 0 <= n <= MAX_PAYLOAD:
            raise ProtocolError(f"a payload length out of range: {n!r}")
        payload = self.rfile.read(n) if n else b""
        if len(payload) < n:
            return None
        return head, payload

    def close(self) -> None:
        """Close the reading file and the stream (a socket's file holds the socket open)."""
        for closable in (self.rfile, self.stream):
            with contextlib.suppress(OSError, EOFError):
                closable.close()

    def write(self, head: dict, payload: bytes = b"") -> None:
        if payload:
            head = {**head, "n": len(payload)}
        data = json.dumps(head, separators=(",", ":")).encode() + b"\n" + payload
        with self.wlock:
            self.stream.sendall(data)


# ------------------------------------------------------------------ the node's files


def stat_under(root: str, rel: str) -> dict:
    """What the server's path rules need to know of `rel` under the data root `root` (the same
    facts as its LocalStorage): nothing is revealed about a file outside the root."""
    base = os.path.realpath(root)
    return _facts_under(base, os.path.realpath(os.path.join(base, rel)))


def glob_stat_under(root: str, pattern: str) -> list[dict]:
    """`glob_under` with each match's facts, in one answer (the server asked a round trip per
    file before); each directory's real path is found once, as LocalStorage.glob_stat does."""
    base = os.path.realpath(root)
    dirs: dict[str, str] = {}
    out = []
    for match in glob_under(root, pattern):
        parent, name = os.path.split(os.path.join(base, match))
        if parent not in dirs:
            dirs[parent] = os.path.realpath(parent)
        real = os.path.join(dirs[parent], name)
        try:
            plain = name not in ("", ".", "..") and not os.path.islink(real)
        except OSError:
            plain = False
        out.append({"path": match, **_facts_under(base, real if plain else os.path.realpath(real))})
    return out


def _facts_under(base: str, real: str) -> dict:
    inside = real == base or real.startswith(base.rstrip("/") + "/")
    exists = inside and os.path.exists(real)
    is_file = exists and os.path.isfile(real)
    return {"real": real, "inside": inside, "exists": exists, "is_file": is_file,
            "size": os.path.getsize(real) if is_file else 0}


def glob_under(root: str, pattern: str) -> list[str]:
    return sorted(glob.glob(pattern, root_dir=os.path.realpath(root), recursive=True))


def health(agent: Agent) -> dict:
    mem = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                mem[key] = int(value.split()[0]) * 1024
    return {"load": list(os.getloadavg()), "cpus": os.cpu_count() or 1, "mem_total": mem.get("MemTotal", 0),
            "mem_available": mem.get("MemAvailable", 0), "ncas": agent.process_count(),
            "sessions": agent.session_count(), "version": agent.version, "pid": os.getpid()}


@contextlib.contextmanager
def pinned_start(cpus: list[int] | tuple[int, ...]) -> Iterator[None]:
    """Around a process start: the calling thread runs on `cpus` (the node's `cpus` of the
    inventory; nothing when empty) until the block ends. A child inherits the CPU set of the
    thread that forks it, so the NCA and every thread it starts run on those CPUs from their first
    instruction; pinning the process after its start left a moment in which it ran anywhere,
    which a watcher of the node's processes could see. The server's local deployer uses this same
    function (jumpgate/deploy/affinity.py): the agent ships alone."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)  # 0: the calling thread alone
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def activity(pid: int) -> list[int] | None:
    """/proc's rchar, wchar and utime+stime of a process: they change whenever it moves bytes
    through a system call or uses CPU (the server's stall watchdog compares readings)."""
    try:
        io = dict(line.split(": ", 1) for line in Path(f"/proc/{pid}/io").read_text().splitlines() if ": " in line)
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        return [int(io["rchar"]), int(io["wchar"]), int(fields[11]) + int(fields[12])]
    except (OSError, KeyError, ValueError, IndexError):
        return None


# ------------------------------------------------------------------ processes and sessions


class Proc:
    """An NCA process of one session, known to the server by its tag `p`."""

    def __init__(self, tag: int, popen: subprocess.Popen | ForkedProcess, log_path: Path) -> None:
        self.tag = tag
        self.popen = popen
        self.log_path = log_path
        self.stdin_lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self.stdin_lock:
            stdin = self.popen.stdin
            if stdin is None or stdin.closed:
                return
            try:
                stdin.write(data)
                stdin.flush()
            except (OSError, ValueError):
                pass  # it exited: its exit event tells the server

    def close_stdin(self) -> None:
        with self.stdin_lock:
            with contextlib.suppress(OSError, ValueError):
                if self.popen.stdin is not None:
                    self.popen.stdin.close()

    def stop(self, grace: float) -> int | None:
        """End of input (the NCA's signal to exit), then TERM and KILL its process group."""
        self.close_stdin()
        p = self.popen
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(0.2)
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            if p.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(wait)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)  # children the NCA left in its group
        return p.poll()


class Session:
    """One server's connection: its processes end with it."""

    def __init__(self, agent: Agent, frames: Frames, sid: str, lease: float, peer: str) -> None:
        self.agent = agent
        self.frames = frames
        self.sid = sid
        self.lease = lease
        self.peer = peer
        self.last_seen = time.monotonic()
        self.procs: dict[int, Proc] = {}
        self.lock = threading.Lock()
        self.ended = threading.Event()

    def emit(self, head: dict, payload: bytes = b"") -> None:
        if self.ended.is_set():
            return
        try:
            self.frames.write(head, payload)
        except OSError:
            self.hang_up()

    def hang_up(self) -> None:
        """Close the connection; the reader then ends the session."""
        with contextlib.suppress(OSError):
            self.frames.stream.shutdown(socket.SHUT_RDWR)

    # ---------------------------------------------------------------- requests

    def handle(self, head: dict, payload: bytes) -> None:
        op = head.get("op")
        rid = head.get("id")
        try:
            handler = getattr(self, f"op_{op}", None) if isinstance(op, str) and op.isidentifier() else None
            if handler is None:
                raise ValueError(f"unknown operation {op!r}")
            answer = handler(head, payload)
        except (ValueError, TypeError, KeyError, OSError) as e:
            if rid is not None:
                self.emit({"re": rid, "ok": False, "error": _describe(e)})
            else:
                self.agent.log(f"session {self.sid}: {op}: {_describe(e)}")
            return
        if rid is not None and answer is not None:
            self.emit({"re": rid, "ok": True, **answer})

    def op_ping(self, head: dict, payload: bytes) -> dict:
        return {}

    def op_health(self, head: dict, payload: bytes) -> dict:
        return health(self.agent)

    def op_has(self, head: dict, payload: bytes) -> dict:
        path = self.agent.blob_path(head["digest"], head["name"])
        return {"have": path.is_file(), "path": str(path)}

    def op_put(self, head: dict, payload: bytes) -> dict:
        return {"path": str(self.agent.put_blob(head["digest"], head["name"], payload))}

    def op_start(self, head: dict, payload: bytes) -> dict:
        tag, argv, work, name = head["p"], head["argv"], head["work"], head["name"]
        if not isinstance(tag, int) or not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            raise ValueError("start needs an integer `p` and a non-empty list of strings `argv`")
        for what, value in (("work", work), ("name", name)):
            if not isinstance(value, str) or not SAFE_NAME.match(value):
                raise ValueError(f"{what} {value!r} is not a plain name")
        cpus = head.get("cpus") or []
        if not (isinstance(cpus, list) and all(isinstance(c, int) and not isinstance(c, bool) for c in cpus)):
            raise ValueError("`cpus` must be a list of CPU numbers")
        missing = set(cpus) - os.sched_getaffinity(0)
        if missing:
            raise ValueError(f"this node has no CPU {sorted(missing)[0]} that the agent may use "
                             f"(it may use {sorted(os.sched_getaffinity(0))}): check the inventory's `cpus`")
        work_dir = self.agent.work / work
        work_dir.mkdir(parents=True, exist_ok=True)
        log_path = work_dir / f"{name}.stderr"
        fork = head.get("fork") is True  # argv[0] serves --fork-server (docs/agent.md)
        with self.lock:
            if tag in self.procs:
                raise ValueError(f"process {tag} exists already")
            with open(log_path, "wb") as log:
                popen = self.agent.fork_servers.spawn(argv, work_dir, log, tuple(cpus)) if fork else None
                if popen is None:
                    with pinned_start(cpus):
                        popen = subprocess.Popen(argv, cwd=work_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                 stderr=log, start_new_session=True, bufsize=0)
            proc = self.procs[tag] = Proc(tag, popen, log_path)
        threading.Thread(target=self._relay, args=(proc,), name=f"nca-{tag}", daemon=True).start()
        return {"pid": popen.pid}

    def _relay(self, proc: Proc) -> None:
        """Forward the process's event lines, then its exit. (The pipe is unbuffered for the
        process's standard input; its output is read through a buffer, a line at a time.)"""
        with open(proc.popen.stdout.fileno(), "rb", closefd=False) as out, contextlib.suppress(OSError, ValueError):
            for line in out:
                self.emit({"ev": "out", "p": proc.tag}, line)
        with contextlib.suppress(OSError):
            proc.popen.stdout.close()
        code = proc.popen.wait()
        self.emit({"ev": "exit", "p": proc.tag, "code": code})

    def _proc(self, head: dict) -> Proc:
        with self.lock:
            proc = self.procs.get(head["p"])
        if proc is None:
            raise KeyError(f"no process {head['p']!r} in this session")
        return proc

    def op_stdin(self, head: dict, payload: bytes) -> None:
        self._proc(head).write(payload)

    def op_close(self, head: dict, payload: bytes) -> None:
        self._proc(head).close_stdin()

    def op_stop(self, head: dict, payload: bytes) -> None:
        """Stopping waits (up to the grace and then some): in its own thread, so that the other
        processes' traffic goes on; the reply comes when the process is gone."""
        proc = self._proc(head)
        grace = float(head.get("grace", 2.0))

        def stop() -> None:
            code = proc.stop(grace)
            with self.lock:
                self.procs.pop(proc.tag, None)
            if head.get("id") is not None:
                self.emit({"re": head["id"], "ok": True, "code": code})
        threading.Thread(target=stop, name=f"stop-{proc.tag}", daemon=True).start()

    def op_activity(self, head: dict, payload: bytes) -> dict:
        return {"reading": activity(self._proc(head).popen.pid)}

    def op_tail(self, head: dict, payload: bytes) -> dict:
        proc = self._proc(head)
        limit = int(head.get("limit", 2000))
        try:
            data = proc.log_path.read_bytes()[-limit:]
        except OSError:
            data = b""
        return {"text": data.decode(errors="replace").strip()}

    def op_stat(self, head: dict, payload: bytes) -> dict:
        return stat_under(head["root"], head["rel"])

    def op_glob(self, head: dict, payload: bytes) -> dict:
        return {"paths": glob_under(head["root"], head["pattern"])}

    def op_glob_stat(self, head: dict, payload: bytes) -> dict:
        return {"matches": glob_stat_under(head["root"], head["pattern"])}

    def op_bye(self, head: dict, payload: bytes) -> None:
        self.hang_up()

    # ---------------------------------------------------------------- the end

    def end(self, why: str) -> None:
        """Stop every process of the session (in parallel: each may take its grace)."""
        self.ended.set()
        with self.lock:
            procs = list(self.procs.values())
            self.procs.clear()
        if procs:
            self.agent.log(f"session {self.sid} ({self.peer}) ended ({why}): stopping {len(procs)} NCA(s)")
        threads = [threading.Thread(target=p.stop, args=(1.0,), daemon=True) for p in procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def _describe(e: BaseException) -> str:
    if isinstance(e, KeyError):
        return f"missing or unknown {e.args[0]}" if e.args else "missing field"
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    return str(e)


class Agent:
    def __init__(self, cache: Path, secret: bytes, version: str, idle_exit: float = 0.0,
                 log_file: Path | None = None) -> None:
        self.cache = cache
        self.blobs = cache / "blobs"
        self.work = cache / "work"
        self.secret = secret
        self.version = version
        self.idle_exit = idle_exit
        self.log_file = log_file
        self.sessions: dict[str, Session] = {}
        self.lock = threading.Lock()
        self.idle_since = time.monotonic()
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        # Loaded copies of binaries that fork their processes, for every session (fork_server.py)
        self.fork_servers = ForkServers(FORK_SERVERS, cache / "fork-servers", pinned_start, self.log)

    def log(self, message: str) -> None:
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}\n"
        if self.log_file is not None:
            with contextlib.suppress(OSError), open(self.log_file, "a") as f:
                f.write(line)
        else:
            sys.stderr.write(line)

    def blob_path(self, digest: str, name: str) -> Path:
        if not isinstance(digest, str) or not DIGEST.match(digest):
            raise ValueError(f"{digest!r} is not a SHA-256 digest in hex")
        if not isinstance(name, str) or not SAFE_NAME.match(name):
            raise ValueError(f"{name!r} is not a plain file name")
        return self.blobs / f"{digest[:24]}-{name}"

    def put_blob(self, digest: str, name: str, data: bytes) -> Path:
        """Store bytes under their digest, checked: a cache that could hold the wrong bytes for a
        digest would run the wrong program."""
        path = self.blob_path(digest, name)
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise ValueError(f"the bytes of {name} have digest {actual[:16]}..., not {digest[:16]}...")
        if not path.is_file():
            tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(data)
            tmp.chmod(0o755)
            tmp.rename(path)  # atomic: a racing upload of the same bytes is harmless
        return path

    def process_count(self) -> int:
        with self.lock:
            sessions = list(self.sessions.values())
        return sum(1 for s in sessions for p in list(s.procs.values()) if p.popen.poll() is None)

    def session_count(self) -> int:
        with self.lock:
            return len(self.sessions)

    # ---------------------------------------------------------------- serving

    def serve(self, listener: socket.socket) -> None:
        threading.Thread(target=self._watch, name="lease-watch", daemon=True).start()
        while True:
            conn, peer = listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._connection, args=(conn, f"{peer[0]}:{peer[1]}"), daemon=True).start()

    def _connection(self, conn: socket.socket, peer: str) -> None:
        frames = Frames(conn)
        session = None
        why = "the connection ended"
        try:
            session = self._handshake(conn, frames, peer)
            if session is None:
                return
            while True:
                frame = frames.read()
                if frame is None:
                    why = "the server closed the connection"
                    break
                session.last_seen = time.monotonic()
                session.handle(*frame)
        except ProtocolError as e:
            why = f"protocol error: {e}"
            with contextlib.suppress(OSError):
                frames.write({"ev": "error", "error": str(e)})
        except OSError as e:
            why = f"connection error: {e}"
        finally:
            if session is not None:
                with self.lock:
                    self.sessions.pop(session.sid, None)
                    if not self.sessions:
                        self.idle_since = time.monotonic()
                session.end(why)
                with self.lock:
                    idle = not self.sessions
                if idle:  # no server left: nothing of any stays on the node, fork servers included
                    self.fork_servers.stop_all()
            frames.close()

    def _handshake(self, conn: socket.socket, frames: Frames, peer: str) -> Session | None:
        conn.settimeout(HANDSHAKE_TIMEOUT_S)
        nonce = secrets.token_hex(16)
        frames.write({"agent": "jumpgate", "protocol": PROTOCOL, "version": self.version, "nonce": nonce})
        frame = frames.read()
        if frame is None:
            return None
        head, _ = frame
        cnonce = head.get("cnonce")
        if head.get("op") != "hello" or not isinstance(cnonce, str) or not isinstance(head.get("mac"), str):
            frames.write({"ok": False, "error": "expected hello with cnonce and mac"})
            return None
        if not hmac.compare_digest(head["mac"], mac(self.secret, "client", nonce, cnonce)):
            self.log(f"refused {peer}: wrong secret")
            frames.write({"ok": False, "error": "authentication failed: the secret does not match"})
            return None
        lease = head.get("lease", DEFAULT_LEASE_S)
        if not isinstance(lease, (int, float)) or not 0.5 <= lease <= 3600:
            lease = DEFAULT_LEASE_S
        session = Session(self, frames, secrets.token_hex(8), float(lease), f"{head.get('server', '?')}@{peer}")
        with self.lock:
            self.sessions[session.sid] = session
        conn.settimeout(None)
        frames.write({"ok": True, "mac": mac(self.secret, "agent", cnonce, nonce), "session": session.sid,
                      "cpus": os.cpu_count() or 1, "cache": str(self.cache), "protocol": PROTOCOL})
        self.log(f"session {session.sid} opened by {session.peer}, lease {session.lease:g} s")
        return session

    def sweep_work(self, keep: float = KEEP_WORK_S) -> list[str]:
        """Remove job directories (NCA logs) that no running process uses and that have not
        changed for `keep` seconds: the server reads a log's tail while its job runs."""
        with self.lock:
            sessions = list(self.sessions.values())
        busy = {Path(p.log_path).parent.name for s in sessions for p in list(s.procs.values())}
        removed = []
        for d in self.work.iterdir():
            try:
                if d.name not in busy and d.is_dir() and time.time() - d.stat().st_mtime > keep:
                    shutil.rmtree(d, ignore_errors=True)
                    removed.append(d.name)
            except OSError:
                continue
        return removed

    def _watch(self) -> None:
        """End sessions whose server is silent past its lease; exit when idle long enough; sweep
        old job directories now and then."""
        last_sweep = 0.0
        while True:
            time.sleep(0.25)
            now = time.monotonic()
            if now - last_sweep > 60:
                last_sweep = now
                self.sweep_work()
            with self.lock:
                sessions = list(self.sessions.values())
                idle = not sessions and now - self.idle_since
            for s in sessions:
                if now - s.last_seen > s.lease:
                    self.log(f"session {s.sid} ({s.peer}): no word for {now - s.last_seen:.1f} s, past its "
                             f"lease of {s.lease:g} s")
                    s.hang_up()
            if self.idle_exit > 0 and idle and idle > self.idle_exit:
                self.log(f"no session for {self.idle_exit:g} s: exiting")
                os._exit(0)


# ------------------------------------------------------------------ starting


FORK_SERVER_FILE = Path(__file__).resolve().parent / "fork_server.py"  # shipped beside this file


def file_version() -> str:
    """The agent's version: a digest of this file and the one it imports, as shipped to a node."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(FORK_SERVER_FILE.read_bytes())
    return digest.hexdigest()[:16]


def read_secret(path: Path) -> bytes:
    """The shared secret: made once, readable by the node's user only."""
    with contextlib.suppress(FileNotFoundError):
        return path.read_text().strip().encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    try:
        os.link(tmp, path)  # the first writer wins; everyone reads what it wrote
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_text().strip().encode()


def parse_listen(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not ADDRESS:PORT")
    return host.strip("[]"), int(port)


def run(args: argparse.Namespace) -> None:
    """Serve in the foreground; the port chosen is written to the state directory, then the pid
    (its presence says the agent is ready)."""
    state = Path(args.state)
    state.mkdir(parents=True, exist_ok=True)
    secret = read_secret(Path(args.secret_file) if args.secret_file else state / "secret")
    agent = Agent(Path(args.cache), secret, file_version(), args.idle_exit,
                  Path(args.log) if args.log else None)
    host, port = args.listen
    listener = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                                    reuse_port=False, backlog=64)
    bound = listener.getsockname()[1]
    (state / "port.tmp").write_text(f"{host} {bound}\n")
    (state / "port.tmp").rename(state / "port")
    (state / "pid").write_text(f"{os.getpid()}\n")
    agent.log(f"agent {agent.version} listening on {host}:{bound}, cache {agent.cache}")
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    agent.serve(listener)


def ensure(args: argparse.Namespace) -> None:
    """Print the address of this version's agent as JSON, starting it when none runs. A lock
    keeps two servers that arrive at once from starting two."""
    state = Path(args.state)
    state.mkdir(parents=True, exist_ok=True)
    secret = read_secret(state / "secret")
    with open(state / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _running(state)
        if found is None:
            for name in ("port", "pid"):
                (state / name).unlink(missing_ok=True)
            argv = [sys.executable, str(Path(__file__).resolve()), "serve", "--state", str(state),
                    "--cache", args.cache, "--listen", "127.0.0.1:0", "--idle-exit", str(args.idle_exit),
                    "--log", str(state / "agent.log")]
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=open(state / "agent.log", "ab"), start_new_session=True, close_fds=True)
            deadline = time.monotonic() + 10
            while found is None and time.monotonic() < deadline:
                time.sleep(0.02)
                found = _running(state)
            if found is None:
                tail = (state / "agent.log").read_text(errors="replace")[-1500:] if (state / "agent.log").exists() else ""
                print(json.dumps({"error": f"the agent did not start within 10 s: {tail.strip()}"}))
                sys.exit(1)
    host, port, pid = found
    print(json.dumps({"host": host, "port": port, "pid": pid, "secret": secret.decode(), "version": file_version()}))


def _running(state: Path) -> tuple[str, int, int] | None:
    """The agent of this state directory when it runs and accepts connections."""
    try:
        host, port = (state / "port").read_text().split()
        pid = int((state / "pid").read_text())
        os.kill(pid, 0)
        with socket.create_connection((host, int(port)), timeout=1.0):
            pass
    except (OSError, ValueError):
        return None
    return host, int(port), pid


def stop_agent(state: Path) -> bool:
    """Stop the agent of a state directory (its sessions' NCAs end with it: their standard input
    was the agent's); True when one was running."""
    try:
        pid = int((state / "pid").read_text())
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        return False
    for name in ("port", "pid"):
        (state / name).unlink(missing_ok=True)
    return True


def main(argv: list[str] | None = None) -> None:
    default_cache = str(Path.home() / ".cache" / "jumpgate")
    parser = argparse.ArgumentParser(prog="jumpgate agent", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    helps = {"serve": "run the agent in the foreground",
             "ensure": "start this version's agent unless it runs; print its address as JSON",
             "stop": "stop the agent of the state directory (and so its sessions' NCAs)"}
    for name, text in helps.items():
        p = sub.add_parser(name, formatter_class=argparse.ArgumentDefaultsHelpFormatter, help=text)
        p.add_argument("--cache", default=default_cache, help="the node's Jumpgate cache (blobs/, work/)")
        p.add_argument("--state", default=f"{default_cache}/agent/{file_version()}",
                       help="where the agent keeps its port, pid, secret and log")
        p.add_argument("--idle-exit", type=float, default=0.0,
                       help="exit after this many seconds without a session (0: never)")
        if name == "serve":
            p.add_argument("--listen", type=parse_listen, default=("127.0.0.1", 0),
                           help="ADDRESS:PORT to accept servers on (port 0: any free port)")
            p.add_argument("--secret-file", help="the shared secret (default: STATE/secret, made when missing)")
            p.add_argument("--log", help="append the agent's log here (default: standard error)")
    args = parser.parse_args(argv)
    if args.command == "ensure":
        ensure(args)
    elif args.command == "stop":
        sys.exit(0 if stop_agent(Path(args.state)) else 1)
    elif args.command == "serve":
        run(args)
    else:
        parser.print_help()


if __name__ == "__main__":
    main()
