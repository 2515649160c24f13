"""What a dead server leaves on this machine, found and removed when the next one starts (and
periodically after; docs/operations.md, "Jobs that outlive the server").

A local NCA exits when its standard input, a pipe from its server, closes (docs/nca-process-
protocol.md), so a killed server normally leaves no process. This is the check that it did not:
an NCA whose runtime is stuck outside its polling loop, or a process a plugin started some other
way, would otherwise run (and hold its ports and cores) forever.

Processes are told apart by `ProcessId`: a pid with the process's start time (clock ticks since
boot, /proc/PID/stat field 22), because pids are reused, within seconds in a container. A server
puts its own id in the environment (`OWNER_ENV`), which every process it starts inherits, and in
an `.owner` file in its work root (`cache/jobs/<pid>`), so both can be matched to a live server
exactly, not guessed from names or parents.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from ..contract.readiness import wait_readable

log = logging.getLogger(__name__)

# The environment variable naming the server process that started a process (and, through it, its
# children): "pid:start_ticks".
OWNER_ENV = "JUMPGATE_SERVER"
OWNER_FILE = ".owner"
# btime (/proc/stat) has whole seconds: how far a start time read from it may be off.
CLOCK_SLACK_S = 2.0


@dataclass(frozen=True)
class ProcessId:
    pid: int
    ticks: int  # start time in clock ticks since boot

    def __str__(self) -> str:
        return f"{self.pid}:{self.ticks}"

    @staticmethod
    def parse(text: str) -> ProcessId | None:
        pid, _, ticks = text.strip().partition(":")
        if not (pid.isdigit() and ticks.isdigit()):
            return None
        return ProcessId(int(pid), int(ticks))

    def alive(self) -> bool:
        """The very process, not a later one with its pid."""
        stat = _stat(self.pid)
        return stat is not None and stat[1] == self.ticks


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start ticks) of a live process; None when it is gone. A zombie is gone: it
    has exited, only its parent has not collected its status yet (a server killed by its
    supervisor stays one until the supervisor waits for it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    # The fields after the command name (which may hold spaces and parentheses): state is the
    # first, ppid the second, start time the twentieth.
    fields = text[text.rindex(")") + 2:].split()
    try:
        if fields[0] in ("Z", "X"):
            return None
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def this_process() -> ProcessId:
    stat = _stat(os.getpid())
    return ProcessId(os.getpid(), stat[1] if stat else 0)


def boot_id() -> str:
    """This boot of this machine: ticks restart at each boot, so an id is only meaningful with it."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def started_at(pid: int) -> float | None:
    """When a live process started, in seconds since the epoch (within CLOCK_SLACK_S)."""
    stat = _stat(pid)
    if stat is None:
        return None
    try:
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    except (OSError, StopIteration, ValueError):
        return None
    return btime + stat[1] / os.sysconf("SC_CLK_TCK")


def mark_this_process() -> ProcessId:
    """Name this process in the environment every process it starts from now on inherits (local
    NCAs, pre-started spares, the switch model). Set once per process, with the same value by
    every service in it, so it is safe for several services to call."""
    me = this_process()
    os.environ[OWNER_ENV] = str(me)
    return me


# ---------------------------------------------------------------- processes


@dataclass(frozen=True)
class Orphan:
    pid: int
    ticks: int
    exe: str
    why: str


def _owner_of(pid: int) -> ProcessId | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return None
    prefix = OWNER_ENV.encode() + b"="
    for item in env.split(b"\0"):
        if item.startswith(prefix):
            return ProcessId.parse(item[len(prefix):].decode(errors="replace"))
    return None


def orphans(cache_dir: Path) -> list[Orphan]:
    """Processes running an executable built in `cache_dir` (NCAs, the switch model) whose server
    is gone: the server named in their environment is not alive, or, for a process without that
    name (started by an older server), its parent is init, which adopts the children of a process
    that died. A live server's NCAs, and a node agent's on this machine, have neither."""
    root = os.path.realpath(cache_dir).rstrip("/") + "/"
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:  # gone, a zombie, a kernel thread or another user's
            continue
        exe = exe.removesuffix(" (deleted)")  # its binary was rebuilt or removed since it started
        if not exe.startswith(root):
            continue
        stat = _stat(pid)
        if stat is None:
            continue
        ppid, ticks = stat
        owner = _owner_of(pid)
        if owner is not None:
            if not owner.alive():
                found.append(Orphan(pid, ticks, exe, f"its server (pid {owner.pid}) is gone"))
        elif ppid == 1:
            found.append(Orphan(pid, ticks, exe, "adopted by init: the process that started it is gone"))
    return found


def stop(orphan: Orphan, grace: float = 2.0) -> bool:
    """TERM, then KILL after `grace`: through a pidfd, so that a pid reused meanwhile is never
    signalled. True when the process is gone."""
    try:
        fd = os.pidfd_open(orphan.pid)
    except OSError:
        return True  # exited already
    try:
        stat = _stat(orphan.pid)
        if stat is None or stat[1] != orphan.ticks:  # the pidfd holds another process now
            return True
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                signal.pidfd_send_signal(fd, sig)
            except ProcessLookupError:
                return True
            if wait_readable(fd, wait):  # readable: it exited
                return True
        return False
    finally:
        os.close(fd)


def stop_orphans(cache_dir: Path) -> list[Orphan]:
    """Stop every orphan of `cache_dir`; the ones stopped, each logged with why."""
    stopped = []
    for orphan in orphans(cache_dir):
        gone = stop(orphan)
        log.warning("stopped NCA process %d (%s), left by a dead server: %s%s", orphan.pid, orphan.exe,
                    orphan.why, "" if gone else "; it did not exit after KILL")
        stopped.append(orphan)
    return stopped


# ---------------------------------------------------------------- work roots


def claim(work_root: Path, me: ProcessId) -> None:
    """Mark a work root as this process's, so that no later server takes it for a dead one's."""
    try:
        (work_root / OWNER_FILE).write_text(str(me) + "\n")
    except OSError as e:
        log.warning("cannot mark %s as this server's: %s", work_root, e)


def _stale(path: Path) -> bool:
    """A work root (`cache/jobs/<pid>`) whose server is gone: the process its `.owner` names is
    not alive; without that file (an older server), no process has its pid, or the one that has
    started after the directory last changed (the pid was reused)."""
    try:
        owner = ProcessId.parse((path / OWNER_FILE).read_text())
    except OSError:
        owner = None
    if owner is not None:
        return not owner.alive()
    try:
        changed = path.stat().st_mtime
    except OSError:
        return False
    start = started_at(int(path.name))
    return start is None or start > changed + CLOCK_SLACK_S


def remove_dead_work_roots(cache_dir: Path) -> list[Path]:
    """Remove the work roots of servers that are gone (their jobs' directories, their spares'
    logs); the ones removed."""
    jobs = Path(cache_dir) / "jobs"
    try:
        entries = list(jobs.iterdir())
    except OSError:
        return []
    removed = []
    for path in entries:
        if path.name.isdigit() and path.is_dir() and _stale(path):
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
                log.info("removed %s, the work directory of a server that is gone", path)
    return removed

