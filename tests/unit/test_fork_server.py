"""Fork servers (ncas/runtime/fork_server.c, jumpgate/agent/fork_server.py) with a real software
NCA binary: a forked process is a fresh NCA of that binary with the descriptors, directory and
process group it was given; its exit code comes back whether it exits or is killed; a bad request
is refused without harming the server; the local deployer forks declared binaries (spares too),
falls back to exec when their server is gone, and leaves nothing behind; the node agent forks what
the server declares forkable."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from jumpgate.agent.fork_server import ForkedProcess, ForkServer, ForkServerError
from jumpgate.nca.deployment import Host
from jumpgate.ncas.software.build import build_nca

from . import test_warm_pool
from .test_agent import connect, running_agent
from .test_warm_pool import argv, wait_for

FIXTURES = Path(__file__).parent / "fixtures"
deployer = test_warm_pool.deployer  # the fixture: local deployers, shut down and checked after each test


@pytest.fixture(scope="module")
def binary(tmp_path_factory) -> str:
    cache = tmp_path_factory.getbasetemp() / "nca-cache"
    return str(build_nca((FIXTURES / "copy_query.c").read_text(), "scan_json", cache).path)


@pytest.fixture
def server(binary, tmp_path):
    s = ForkServer(binary, tmp_path / "fork-server.log")
    yield s
    s.close()


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def gone(pid: int) -> bool:
    """No such process, or only its zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def closed(proc) -> None:
    for stream in (proc.stdin, proc.stdout):
        stream.close()


def test_a_forked_process_is_a_fresh_nca_with_the_descriptors_and_directory_it_was_given(server, binary, tmp_path):
    work = tmp_path / "job"
    work.mkdir()
    with open(tmp_path / "nca.stderr", "wb") as err:
        proc = server.spawn(argv(binary), work, err)
    assert isinstance(proc, ForkedProcess) and parent_of(proc.pid) == server.proc.pid
    assert os.getpgid(proc.pid) == proc.pid and os.getsid(proc.pid) == proc.pid  # its own session
    assert os.readlink(f"/proc/{proc.pid}/cwd") == str(work)
    assert os.readlink(f"/proc/{proc.pid}/exe") == binary
    assert Path(f"/proc/{proc.pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0") == [a.encode() for a in argv(binary)]
    assert Path(f"/proc/{server.proc.pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0") == \
        [binary.encode(), b"--fork-server"]  # its room for the children's blanked
    ready = json.loads(proc.stdout.readline())
    assert ready["event"] == "ready" and len(ready["ports"]) == 1
    with socket.create_connection(("127.0.0.1", ready["ports"][0]), timeout=5):
        pass  # its input port is bound and listening
    assert proc.poll() is None
    proc.stdin.write(b"bogus-command\n")  # the runtime's answer to a bad command: exit 2, a message
    assert proc.wait(5) == 2 and proc.poll() == 2
    assert b"bogus-command" in proc.stdout.read() + (tmp_path / "nca.stderr").read_bytes()
    assert gone(proc.pid)  # reaped by its server
    closed(proc)


def test_end_of_input_exit_code_and_a_kill_signal_come_back(server, binary, tmp_path):
    with open(os.devnull, "wb") as err:
        a, b = (server.spawn(argv(binary), tmp_path, err) for _ in range(2))
    assert a.pid != b.pid
    os.close(a._pidfd)  # as on a kernel without pidfds: the server's exit notice alone tells
    a._pidfd = None
    assert a.poll() is None
    a.stdin.close()  # the control plane's signal to exit
    assert a.wait(5) == 0 and a.poll() == 0
    with pytest.raises(subprocess.TimeoutExpired):
        b.wait(0.05)
    os.killpg(b.pid, signal.SIGKILL)
    assert b.wait(5) == -signal.SIGKILL
    closed(a)
    closed(b)


def test_a_bad_request_is_refused_and_the_server_goes_on(server, binary, tmp_path):
    ours = server._sock
    with server._lock:  # a request without descriptors, sent as a broken client would
        ours.send(str(tmp_path).encode() + b"\0--bind\0" + b"127.0.0.1\0")
        text, fds = server._replies.get(timeout=5)
    assert text.startswith(b"error ") and b"three descriptors" in text and fds == []
    with server._lock:
        socket.send_fds(ours, [b"\0--inputs\0" + b"1\0"], [0, 1, 2])  # no working directory
        text, fds = server._replies.get(timeout=5)
    assert text.startswith(b"error ") and b"working directory" in text
    with open(os.devnull, "wb") as err:  # a directory that does not exist: the child says so and exits
        proc = server.spawn(argv(binary), tmp_path / "missing", err)
    assert proc.wait(5) == 127
    closed(proc)
    with open(os.devnull, "wb") as err:
        proc = server.spawn(argv(binary), tmp_path, err)
    assert json.loads(proc.stdout.readline())["event"] == "ready"
    closed(proc)
    assert proc.wait(5) == 0


def test_without_a_socket_on_stdin_it_refuses_to_serve(binary):
    out = subprocess.run([binary, "--fork-server"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    assert out.returncode == 2 and b"SOCK_SEQPACKET" in out.stderr


def test_the_server_ends_with_its_socket_and_its_children_with_their_input(binary, tmp_path):
    server = ForkServer(binary, tmp_path / "fs.log")
    with open(os.devnull, "wb") as err:
        proc = server.spawn(argv(binary), tmp_path, err)
    assert json.loads(proc.stdout.readline())["event"] == "ready"
    server.close()
    assert server.proc.returncode == 0 and not server.alive
    assert not (tmp_path / "fs.log").exists()  # an empty log goes with it
    assert not gone(proc.pid)  # a job's process outlives the server as long as its control plane
    with pytest.raises(ForkServerError):
        server.spawn(argv(binary), tmp_path, err)
    closed(proc)
    assert wait_for(lambda: gone(proc.pid), 5.0)
    assert proc.wait(1) == -255  # nobody is left to report its code


def test_the_deployer_forks_declared_binaries_spares_too(deployer, binary, tmp_path):
    d = deployer(per_binary=1)
    plain = d.start(d.host, argv(binary), tmp_path, "plain", reuse=True)
    assert parent_of(plain.pid) == os.getpid()  # not declared: exec'ed
    d.stop(plain)
    d.allow_fork_server(d.host, binary)
    job = d.start(d.host, argv(binary), tmp_path, "job", reuse=True)
    [server] = d.fork_servers.servers()
    assert parent_of(job.pid) == server.proc.pid and job.log_path == tmp_path / "job.stderr"
    assert json.loads(next(job.events()))["event"] == "ready"
    assert [p.pid for p in d.running()] == [job.pid]
    d.stop(job)
    assert gone(job.pid) and d.running() == []
    d.warm_up(d.host, argv(binary))
    [spare] = wait_for(d.warm.pids)
    assert parent_of(spare) == server.proc.pid
    again = d.start(d.host, argv(binary), tmp_path, "again", reuse=True)
    assert again.pid == spare
    d.stop(again)
    assert gone(spare)


def test_a_dead_fork_server_is_replaced_and_its_binary_still_starts(deployer, binary, tmp_path):
    d = deployer(per_binary=0)
    d.allow_fork_server(d.host, binary)
    first = d.start(d.host, argv(binary), tmp_path, "first")
    [server] = d.fork_servers.servers()
    server.proc.kill()
    server.proc.wait()
    second = d.start(d.host, argv(binary), tmp_path, "second")
    [replacement] = d.fork_servers.servers()
    assert replacement is not server and parent_of(second.pid) == replacement.proc.pid
    assert json.loads(next(second.events()))["event"] == "ready"
    for proc in (first, second):
        d.stop(proc)
        assert gone(proc.pid)


def test_at_most_fork_servers_binaries_are_kept_loaded(deployer, binary, tmp_path):
    other = tmp_path / "copy-of-binary"
    other.write_bytes(Path(binary).read_bytes())
    other.chmod(0o755)
    d = deployer(per_binary=0, fork_servers=1)
    for b in (binary, str(other)):
        d.allow_fork_server(d.host, b)
    a = d.start(d.host, argv(binary), tmp_path, "a")
    [first] = d.fork_servers.servers()
    b = d.start(d.host, argv(str(other)), tmp_path, "b")
    assert [s.binary for s in d.fork_servers.servers()] == [str(other)] and first.proc.poll() == 0  # the older one stopped
    assert not gone(a.pid)  # its process goes on
    for proc in (a, b):
        d.stop(proc)
    d = deployer(per_binary=0, fork_servers=0)
    d.allow_fork_server(d.host, binary)
    c = d.start(d.host, argv(binary), tmp_path, "c")
    assert parent_of(c.pid) == os.getpid() and not d.fork_servers.servers()  # off
    d.stop(c)



@pytest.fixture
def agent(tmp_path):
    yield from running_agent(tmp_path)


def test_the_agent_forks_a_binary_the_server_declares_forkable(agent, binary, tmp_path):
    """agent/node.py: a start with `fork` runs the process as a child of the binary's fork server
    under the agent, pinned to the node's CPUs like an exec'ed one; its events, stop and exit
    code travel as usual; a session's end stops it, and the last session's end the fork server;
    without `fork` the agent exec's it."""
    _, secret, port, agent_proc = agent
    cpu = max(os.sched_getaffinity(0))
    host = Host("n", "127.0.0.1", 1, cpus=(cpu,))
    link = connect(port, secret)
    try:
        shipped = link.ship(Path(binary))
        plain = link.start([shipped, *argv(binary)[1:]], "job1", "plain", host)
        assert parent_of(plain.pid) == agent_proc.pid
        link.stop(plain, grace=1.0)
        forked = link.start([shipped, *argv(binary)[1:]], "job1", "nca0", host, fork=True)
        server = parent_of(forked.pid)
        assert parent_of(server) == agent_proc.pid
        assert Path(f"/proc/{server}/cmdline").read_bytes().rstrip(b"\0") == shipped.encode() + b"\0--fork-server"
        # the child's own arguments in its command line (what `ps` shows, and tools look for)
        assert Path(f"/proc/{forked.pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0") == \
            [a.encode() for a in [shipped, *argv(binary)[1:]]]
        assert os.sched_getaffinity(forked.pid) == {cpu} and os.getsid(forked.pid) == forked.pid
        events = forked.events()
        assert json.loads(next(events))["event"] == "ready"
        forked.send(b"bogus-command\n")
        assert wait_for(lambda: forked.exited.is_set(), 5.0) and forked.exit_code == 2
        link.stop(forked, grace=1.0)
        again = link.start([shipped, *argv(binary)[1:]], "job2", "nca0", host, fork=True)
        assert parent_of(again.pid) == server  # the same loaded copy
    finally:
        link.close()
    assert wait_for(lambda: gone(again.pid), 5.0)  # ended with the session
    assert wait_for(lambda: gone(server), 5.0)  # and with the last session, the fork server
    assert agent_proc.poll() is None


def test_a_process_whose_descriptors_are_past_1024_is_still_waited_for(server, binary, tmp_path):
    """A busy server holds well over 1024 descriptors; select(2) cannot watch those, poll(2) can."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit ({hard}) is too low")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    filler = [os.dup(0) for _ in range(1100)]
    try:
        with open(os.devnull, "wb") as err:
            proc = server.spawn(argv(binary), tmp_path, err)
        assert proc._pidfd is not None and proc._pidfd > 1024 and proc.stdout.fileno() > 1024
        assert json.loads(proc.stdout.readline())["event"] == "ready" and proc.poll() is None
        closed(proc)
        assert proc.wait(5) == 0
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_binary_that_serves_no_fork_server_is_exec_ed_and_not_asked_again(deployer, tmp_path, caplog):
    """A plugin's binary declared forkable that is not built on the runtime: its would-be server
    exits at once; the process is exec'ed, with one warning, and later starts go straight to exec."""
    script = tmp_path / "plain-nca"
    script.write_text("#!/bin/sh\necho ready\nwhile read line; do :; done\n")
    script.chmod(0o755)
    d = deployer(per_binary=0)
    d.allow_fork_server(d.host, str(script))
    procs = []
    for name in ("first", "second"):
        proc = d.start(d.host, [str(script), "--bind", "127.0.0.1"], tmp_path, name)
        procs.append(proc)
        assert parent_of(proc.pid) == os.getpid() and next(proc.events()) == b"ready\n"
    assert d.fork_servers.servers() == []
    assert len([r for r in caplog.records if "without its fork server" in r.getMessage()]) == 1
    for proc in procs:
        d.stop(proc)


@pytest.mark.parametrize("fmt", ["orc", "parquet"])
def test_a_columnar_scan_forks_beside_the_jemalloc_thread_libarrow_starts(fmt, tmp_path, tmp_path_factory):
    """libarrow (the pyarrow wheel's) starts jemalloc's background thread before main; the fork
    server allows that one thread (jemalloc's fork handlers make it safe) and forks working scans."""
    from .fixtures.columnar import cache_dir
    from .test_runtime_filters_columnar import scan_binary

    data = tmp_path / "data"
    data.mkdir()
    (data / f"t.{fmt}").write_bytes(b"")  # the request names a file; the scan never opens it here
    exe, _ = scan_binary(data, fmt, cache_dir(tmp_path_factory))
    s = ForkServer(str(exe), tmp_path / "fs.log")
    try:
        names = {Path(f"/proc/{s.proc.pid}/task/{t}/comm").read_text().strip()
                 for t in os.listdir(f"/proc/{s.proc.pid}/task") if int(t) != s.proc.pid}
        assert names <= {"jemalloc_bg_thd"}, names
        with open(tmp_path / "nca.stderr", "wb") as err:
            proc = s.spawn(argv(str(exe)), tmp_path, err)
        assert parent_of(proc.pid) == s.proc.pid and s.alive, (tmp_path / "fs.log").read_text()
        assert json.loads(proc.stdout.readline())["event"] == "ready"
        closed(proc)
        assert proc.wait(5) == 0
    finally:
        s.close()
