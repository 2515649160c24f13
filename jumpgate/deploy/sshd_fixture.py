"""A real OpenSSH server for tests and benchmarks of SSH nodes (Debian's openssh-server), on an
address of the loopback range, with its own host key, config and log, a client key allowed to log
in as root, and a known_hosts file holding its host key, as a user's deployment would have."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
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


@dataclass
class Sshd:
    address: str
    port: int
    key_file: Path  # the client's private key
    known_hosts: Path  # holds the server's host key
    log: Path
    proc: subprocess.Popen

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def sessions(self) -> int:
        """Commands run through this server so far (its log at VERBOSE)."""
        return self.log.read_text(errors="replace").count("Starting session: command")


def start_sshd(work: Path, address: str = "127.0.0.5") -> Sshd:
    work.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    keygen(work / "host_key")
    client_pub = keygen(work / "client_key")
    (work / "authorized_keys").write_text(client_pub + "\n")
    port = free_port(address)
    log = work / "sshd.log"
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
    proc = subprocess.Popen([SSHD, "-D", "-f", str(config), "-E", str(log)])
    host_pub = (work / "host_key.pub").read_text().split()
    known = work / "known_hosts"
    known.write_text(f"[{address}]:{port} {host_pub[0]} {host_pub[1]}\n")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=0.5):
                break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {log.read_text(errors='replace')[-1000:]}") from None
            time.sleep(0.05)
    else:
        proc.kill()
        raise RuntimeError("sshd did not listen within 10 s")
    return Sshd(address, port, work / "client_key", known, log, proc)
