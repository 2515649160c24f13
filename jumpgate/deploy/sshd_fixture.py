"""A real OpenSSH server for tests and benchmarks of SSH nodes (Debian's openssh-server), on an
address of the loopback range, with its own host key, config and log, a client key allowed to log
in as root, and a known_hosts file holding its host key, as a user's deployment would have.

`configure_sshd` and `launch_sshd` are the parts: the first writes one server's files (also for a
server in a network namespace, jumpgate/deploy/netns_fixture.py), the second starts it, possibly
under a prefix such as `ip netns exec NS`, and waits until it listens."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def why_not() -> str | None:
    """Why a test sshd cannot run here (None: it can)."""
    if not os.path.exists(SSHD):
        return f"{SSHD} is not installed (scripts/setup.sh installs openssh-server)"
    if shutil.which("ssh-keygen") is None:
        return "ssh-keygen is not installed"
    if os.geteuid() != 0:
        return "a test sshd needs root (it logs in as root with a key)"
    return None


def free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return (path.with_suffix(".pub") if path.suffix else Path(f"{path}.pub")).read_text().strip()


@dataclass(frozen=True)
class SshdFiles:
    """One test server's files: what sshd runs with, and the known_hosts a client checks it by."""

    address: str
    port: int
    config: Path
    log: Path
    known_hosts: Path  # holds the server's host key, under the name a client looks it up by


def configure_sshd(work: Path, address: str, port: int, client_public: str) -> SshdFiles:
    """Write a server's host key, config, authorized_keys (`client_public` may log in as root)
    and known_hosts into `work`."""
    work.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation directory
    host_pub = keygen(work / "host_key").split()
    (work / "authorized_keys").write_text(client_public + "\n")
    config = work / "sshd_config"
    config.write_text(f"""Port {port}
ListenAddress {address}
HostKey {work / 'host_key'}
AuthorizedKeysFile {work / 'authorized_keys'}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile {work / 'sshd.pid'}
LogLevel VERBOSE
MaxSessions 100
MaxStartups 100
Subsystem sftp /usr/lib/openssh/sftp-server
""")
    known = work / "known_hosts"
    # Clients look a server on port 22 up by its bare address, on any other port as [address]:port.
    name = address if port == 22 else f"[{address}]:{port}"
    known.write_text(f"{name} {host_pub[0]} {host_pub[1]}\n")
    return SshdFiles(address, port, config, work / "sshd.log", known)


def launch_sshd(files: SshdFiles, prefix: Sequence[str] = (), timeout: float = 10.0) -> subprocess.Popen:
    """Start sshd in the foreground (`-D`: the process is the server, so stopping it is certain)
    under `prefix` (e.g. `ip netns exec NS`, which execs it: the pid stays sshd's), and return
    once it accepts connections."""
    proc = subprocess.Popen([*prefix, SSHD, "-D", "-f", str(files.config), "-E", str(files.log)])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((files.address, files.port), timeout=0.5):
                return proc
        except OSError:
            if proc.poll() is not None:
                log = files.log.read_text(errors="replace")[-1000:] if files.log.exists() else ""
                raise RuntimeError(f"sshd exited with {proc.returncode}: {log}") from None
            time.sleep(0.05)
    stop_process(proc)
    raise RuntimeError(f"sshd did not listen on {files.address}:{files.port} within {timeout:.0f} s")


def stop_process(proc: subprocess.Popen, grace: float = 5.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def sessions(log: Path) -> int:
    """Commands run through a server so far (its log at VERBOSE)."""
    return log.read_text(errors="replace").count("Starting session: command") if log.exists() else 0


@dataclass
class Sshd:
    address: str
    port: int
    key_file: Path  # the client's private key
    known_hosts: Path  # holds the server's host key
    log: Path
    proc: subprocess.Popen

    def stop(self) -> None:
        stop_process(self.proc)

    def sessions(self) -> int:
        """Commands run through this server so far (its log at VERBOSE)."""
        return sessions(self.log)


def start_sshd(work: Path, address: str = "127.0.0.5") -> Sshd:
    work.mkdir(parents=True, exist_ok=True)
    client_pub = keygen(work / "client_key")
    files = configure_sshd(work, address, free_port(address), client_pub)
    proc = launch_sshd(files)
    return Sshd(address, files.port, work / "client_key", files.known_hosts, files.log, proc)
