"""A real Kubernetes control plane for tests and benchmarks: etcd, kube-apiserver and
kube-controller-manager on loopback, as the cluster a Kubernetes deployment of Jumpgate talks to.

The binaries are Kubernetes' own (v1.36.3), built from the Go module proxy by scripts/kube-build.sh
into a cache outside the work tree (`cache_dir()`); etcd is Debian's etcd-server. There is no
kubelet, no container runtime and no scheduler: jumpgate/deploy/kubelet_fixture.py plays those parts
for the tests, through the API server only.

    with KubeCluster(tmp / "kube") as cluster:
        cluster.kubeconfig            # an admin kubeconfig (static token, group system:masters)
        cluster.restart_apiserver()   # the same API server again, its state kept in etcd

What is made, all under `work` (etcd's data in a directory of its own under /dev/shm, so its fsyncs
cost nothing; removed by `close`):
- a CA; the API server's serving certificate (127.0.0.1, 10.0.0.1 and the `kubernetes` service's
  names); a service-account key pair (the API server signs tokens, the token controller too);
  `issue_client_cert` makes client certificates of any user and groups (a node's identity is
  `system:node:NAME` in `system:nodes`, as a kubelet's);
- the API server's client certificate towards kubelets (for `kubectl logs`), kubelets' serving
  certificates checked against the CA, and reached at their InternalIP;
- a static token file with one admin token; `--authorization-mode=Node,RBAC` with the
  NodeRestriction admission plugin, so a node may touch only its own pods and their secrets;
- kube-controller-manager with its own identity (`system:kube-controller-manager`), each controller
  on its own service account (`--use-service-account-credentials`), the root CA it publishes into
  every namespace (`kube-root-ca.crt`), and the service-account key; `--leader-elect=false`, so it
  survives the API server's restart instead of exiting on a lost lease.

`start` returns once /readyz answers and the controllers work (the `default` namespace has its
`default` ServiceAccount and `kube-root-ca.crt`, without which no Pod is admitted). `close` (and
leaving the `with`) stops the three processes, each by its own pid, and removes the data. Should
the test process die instead, the three die with it (`setpriv --pdeathsig`: with the thread that
started them, so start and restart the cluster from a thread that lives as long as it), and the
next cluster removes the etcd data left behind.
`why_not()` says why a cluster cannot be made here (binaries not built, etcd not installed).
"""
from __future__ import annotations

import atexit
import datetime
import functools
import ipaddress
import json
import os
import secrets
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from .sshd_fixture import free_port

KUBE_VERSION = "v1.36.3"
BINARIES = ("kube-apiserver", "kube-controller-manager")
SERVICE_CIDR = "10.0.0.0/24"  # cluster IPs are only allocated: nothing routes them here
ADDRESS = "127.0.0.1"
ETCD_DATA_PREFIX = "jumpgate-etcd-"  # + the owner's pid


def cache_dir() -> Path:
    """Where scripts/kube-build.sh puts the binaries (bin/) and its build log."""
    return Path(os.environ.get("JUMPGATE_KUBE_CACHE") or f"/var/cache/jumpgate/kube/{KUBE_VERSION}")


def binary(name: str) -> Path:
    return cache_dir() / "bin" / name


def etcd_binary() -> str | None:
    return shutil.which("etcd") or ("/usr/bin/etcd" if os.access("/usr/bin/etcd", os.X_OK) else None)


@functools.cache
def why_not() -> str | None:
    """Why a test cluster cannot be made here (None: it can)."""
    for name in BINARIES:
        path = binary(name)
        if not os.access(path, os.X_OK):
            failed = cache_dir() / "build.failed"
            why = f" (the last build failed: {failed.read_text().strip()})" if failed.exists() else ""
            return (f"{path} is not built{why}: scripts/kube-build.sh builds it from the Go module "
                    f"proxy (scripts/setup.sh runs it unless JUMPGATE_WITH_KUBE=0)")
        try:
            out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{path} does not run: {e}"
        if out.strip() != f"Kubernetes {KUBE_VERSION}":
            return f"{path} is not {KUBE_VERSION} ({out.strip() or 'no version'}): run scripts/kube-build.sh"
    if etcd_binary() is None:
        return "etcd is not installed (Debian's etcd-server; scripts/setup.sh installs it)"
    try:
        import cryptography  # noqa: F401  (a dependency of paramiko)
    except ImportError:
        return "the `cryptography` package is missing (the cluster's certificates are made with it)"
    return None


# ---------------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path


class _Authority:
    """The cluster's CA: signs the serving certificate and client certificates."""

    def __init__(self, work: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.work = work
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "jumpgate-test-ca")])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(hours=1))
                      .not_valid_after(now + datetime.timedelta(days=30))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False),
                                     critical=True)
                      .sign(self._key, hashes.SHA256()))
        self.files = self._write("ca", self._cert, self._key)

    def _write(self, stem: str, cert, key) -> CertFiles:
        from cryptography.hazmat.primitives import serialization

        files = CertFiles(self.work / f"{stem}.crt", self.work / f"{stem}.key")
        files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files.key.touch(mode=0o600)
        files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
        return files

    def issue(self, stem: str, common_name: str, groups: Sequence[str] = (), *, server_names: Sequence[str] = (),
              ) -> CertFiles:
        """A certificate signed by the CA: a server's when `server_names` (DNS names or IPs) are
        given, else a client's (user `common_name`, groups as organizations, as Kubernetes reads them)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups),
                             x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server_names else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(self._cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=30))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False),
                                  critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if server_names:
            alt = []
            for n in server_names:
                try:
                    alt.append(x509.IPAddress(ipaddress.ip_address(n)))
                except ValueError:
                    alt.append(x509.DNSName(n))
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        return self._write(stem, builder.sign(self._key, hashes.SHA256()), key)


def _service_account_keys(work: Path) -> CertFiles:
    """The service-account signing key (RSA) and its public key, as `cert` (a PEM public key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files = CertFiles(work / "sa.pub", work / "sa.key")
    files.key.touch(mode=0o600)
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    files.cert.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
    return files


# ---------------------------------------------------------------------------- processes


def _launch(argv: Sequence[str], log: Path) -> subprocess.Popen:
    """Start a process of the cluster. Under `setpriv --pdeathsig KILL` it ends when the thread that
    started it does (the test process killed: nothing is left running, holding ports and memory)."""
    prefix = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
    with open(log, "ab") as out:
        return subprocess.Popen([*prefix, *argv], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _sweep_etcd_data(parent: Path) -> None:
    """Remove the etcd data directories of earlier runs whose process is gone."""
    for d in parent.glob(f"{ETCD_DATA_PREFIX}*"):
        pid = d.name[len(ETCD_DATA_PREFIX):].split("-")[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(d, ignore_errors=True)


def _stop(proc: subprocess.Popen | None, grace: float = 10.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class KubeCluster:
    """etcd, kube-apiserver and kube-controller-manager on loopback; see the module docstring."""

    def __init__(self, work: Path, *, apiserver_args: Sequence[str] = (),
                 controller_manager_args: Sequence[str] = ()) -> None:
        self.work = Path(work)
        self.extra_apiserver_args = list(apiserver_args)
        self.extra_controller_manager_args = list(controller_manager_args)
        self.etcd_port = self.etcd_peer_port = self.port = self.controller_manager_port = 0
        self.admin_token = secrets.token_hex(16)
        self.etcd: subprocess.Popen | None = None
        self.apiserver: subprocess.Popen | None = None
        self.controller_manager: subprocess.Popen | None = None
        self._etcd_data: Path | None = None
        self._ca: _Authority | None = None
        self._client_certs = 0

    # ------------------------------------------------------------------ what users read

    @property
    def server(self) -> str:
        """The API server's URL."""
        return f"https://{ADDRESS}:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.work / "ca.crt"

    @property
    def kubeconfig(self) -> Path:
        """An admin kubeconfig (the static admin token; group system:masters)."""
        return self.work / "admin.kubeconfig"

    def logs(self) -> dict[str, Path]:
        return {name: self.work / f"{name}.log" for name in ("etcd", *BINARIES)}

    def processes(self) -> dict[str, subprocess.Popen]:
        """The cluster's processes still running, by name."""
        procs = {"etcd": self.etcd, "kube-apiserver": self.apiserver,
                 "kube-controller-manager": self.controller_manager}
        return {name: p for name, p in procs.items() if p is not None and p.poll() is None}

    # ------------------------------------------------------------------ life cycle

    def __enter__(self) -> KubeCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, timeout: float = 90.0) -> None:
        why = why_not()
        if why is not None:
            raise RuntimeError(f"cannot make a Kubernetes test cluster here: {why}")
        deadline = time.monotonic() + timeout
        for attempt in range(3):  # a port picked free may be taken by another run before it is bound
            atexit.register(self.close)
            try:
                self.work.mkdir(parents=True, exist_ok=True)
                self._make_files()
                self._start_etcd(deadline)
                self.start_apiserver(deadline - time.monotonic())
                self._start_controller_manager(deadline)
                return
            except RuntimeError as e:
                self.close()
                if "address already in use" not in str(e) or attempt == 2:
                    raise
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        """Stop the controller manager, the API server and etcd; remove etcd's data. Safe to call
        more than once."""
        atexit.unregister(self.close)
        for attr in ("controller_manager", "apiserver", "etcd"):
            _stop(getattr(self, attr))
        if self._etcd_data is not None:
            shutil.rmtree(self._etcd_data, ignore_errors=True)
            self._etcd_data = None

    def stop_apiserver(self) -> None:
        """Stop the API server (etcd and the controller manager go on, the latter retrying)."""
        _stop(self.apiserver)
        self.apiserver = None

    def start_apiserver(self, timeout: float = 60.0) -> None:
        """(Re)start the API server on the same port, over the same etcd, and wait for /readyz."""
        if self.apiserver is not None and self.apiserver.poll() is None:
            return
        self.apiserver = _launch([str(binary("kube-apiserver")), *self._apiserver_args()],
                                 self.logs()["kube-apiserver"])
        self._wait("kube-apiserver", self.apiserver, lambda: self.get("/readyz") == (200, "ok"),
                   time.monotonic() + timeout)

    def restart_apiserver(self) -> None:
        self.stop_apiserver()
        self.start_apiserver()

    # ------------------------------------------------------------------ credentials

    def issue_client_cert(self, user: str, groups: Sequence[str] = ()) -> CertFiles:
        """A client certificate of `user` in `groups`, signed by the cluster's CA."""
        assert self._ca is not None, "start the cluster first"
        self._client_certs += 1
        stem = "client-" + "".join(c if c.isalnum() else "-" for c in user) + f"-{self._client_certs}"
        return self._ca.issue(stem, user, groups)

    def issue_server_cert(self, name: str, addresses: Sequence[str]) -> CertFiles:
        """A serving certificate for `addresses` (IPs or DNS names), signed by the cluster's CA, which
        the API server trusts for kubelets (`--kubelet-certificate-authority`)."""
        assert self._ca is not None, "start the cluster first"
        return self._ca.issue(f"serving-{name}", name, server_names=addresses)

    def write_kubeconfig(self, path: Path, *, token: str | None = None, cert: CertFiles | None = None,
                         user: str = "user") -> Path:
        """A kubeconfig for this cluster with a bearer token or a client certificate."""
        creds = {"token": token} if token is not None else \
            {"client-certificate": str(cert.cert), "client-key": str(cert.key)} if cert is not None else {}
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "jumpgate-test",
            "clusters": [{"name": "jumpgate-test",
                          "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": user, "user": creds}],
            "contexts": [{"name": "jumpgate-test", "context": {"cluster": "jumpgate-test", "user": user}}],
        }
        path = Path(path)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig authenticating as `user` in `groups` with a fresh client certificate."""
        cert = self.issue_client_cert(user, groups)
        return self.write_kubeconfig(cert.cert.with_suffix(".kubeconfig"), cert=cert, user=user)

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """GET `path` of the API server as the admin: (status, body); status 0 when unreachable."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        req = urllib.request.Request(self.server + path, headers={"Authorization": f"Bearer {self.admin_token}"})
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except (OSError, ssl.SSLError):
            return 0, ""

    def version(self) -> str:
        status, body = self.get("/version")
        return json.loads(body)["gitVersion"] if status == 200 else ""

    # ------------------------------------------------------------------ the parts

    def _make_files(self) -> None:
        self.etcd_port, self.etcd_peer_port = free_port(ADDRESS), free_port(ADDRESS)
        self.port, self.controller_manager_port = free_port(ADDRESS), free_port(ADDRESS)
        self._ca = _Authority(self.work)
        self._serving = self._ca.issue(
            "apiserver", "kube-apiserver",
            server_names=[ADDRESS, "10.0.0.1", "localhost", "kubernetes", "kubernetes.default",
                          "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"])
        self._kubelet_client = self._ca.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client")
        self._sa = _service_account_keys(self.work)
        tokens = self.work / "tokens.csv"
        tokens.write_text(f"{self.admin_token},admin,admin-uid,system:masters\n")
        tokens.chmod(0o600)
        self.write_kubeconfig(self.kubeconfig, token=self.admin_token, user="admin")
        self._controller_manager_kubeconfig = self.kubeconfig_for("system:kube-controller-manager")

    def _start_etcd(self, deadline: float) -> None:
        shm = Path("/dev/shm")
        parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else self.work
        _sweep_etcd_data(parent)
        self._etcd_data = Path(tempfile.mkdtemp(prefix=f"{ETCD_DATA_PREFIX}{os.getpid()}-", dir=parent))
        client, peer = f"http://{ADDRESS}:{self.etcd_port}", f"http://{ADDRESS}:{self.etcd_peer_port}"
        self.etcd = _launch([etcd_binary() or "etcd", "--name", "jumpgate-test", "--data-dir", str(self._etcd_data),
                             "--listen-client-urls", client, "--advertise-client-urls", client,
                             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                             "--initial-cluster", f"jumpgate-test={peer}", "--logger", "zap",
                             "--log-level", "warn"], self.logs()["etcd"])

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"{client}/health", timeout=2) as r:
                    return json.loads(r.read()).get("health") == "true"
            except (OSError, ValueError):
                return False

        self._wait("etcd", self.etcd, healthy, deadline)

    def _apiserver_args(self) -> list[str]:
        return [
            f"--etcd-servers=http://{ADDRESS}:{self.etcd_port}",
            f"--bind-address={ADDRESS}", f"--secure-port={self.port}",
            f"--advertise-address={ADDRESS}", "--endpoint-reconciler-type=none",  # loopback: no endpoints
            f"--tls-cert-file={self._serving.cert}", f"--tls-private-key-file={self._serving.key}",
            f"--client-ca-file={self.ca_file}",
            f"--kubelet-client-certificate={self._kubelet_client.cert}",
            f"--kubelet-client-key={self._kubelet_client.key}",
            f"--kubelet-certificate-authority={self.ca_file}", "--kubelet-preferred-address-types=InternalIP",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={self._sa.cert}", f"--service-account-signing-key-file={self._sa.key}",
            f"--token-auth-file={self.work / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true",
            f"--cert-dir={self.work / 'apiserver-certs'}", "--profiling=false",
            # On SIGTERM, end open watches within 2 s instead of waiting a minute for them to close.
            "--shutdown-watch-termination-grace-period=2s",
            *self.extra_apiserver_args,
        ]

    def _start_controller_manager(self, deadline: float) -> None:
        kubeconfig = str(self._controller_manager_kubeconfig)
        self.controller_manager = _launch([
            str(binary("kube-controller-manager")),
            f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--bind-address={ADDRESS}", f"--secure-port={self.controller_manager_port}",
            f"--cert-dir={self.work / 'controller-manager-certs'}",
            f"--service-account-private-key-file={self._sa.key}", f"--root-ca-file={self.ca_file}",
            "--use-service-account-credentials=true",
            f"--cluster-signing-cert-file={self.ca_file}", f"--cluster-signing-key-file={self.work / 'ca.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--controllers=*", "--leader-elect=false", "--profiling=false",
            *self.extra_controller_manager_args,
        ], self.logs()["kube-controller-manager"])

        def working() -> bool:  # the service-account and root-CA publishing controllers have run
            return (self.get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200
                    and self.get("/api/v1/namespaces/default/configmaps/kube-root-ca.crt")[0] == 200)

        self._wait("kube-controller-manager", self.controller_manager, working, deadline)

    def _wait(self, name: str, proc: subprocess.Popen, ready, deadline: float) -> None:
        while not ready():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited ({proc.returncode}); its log ends:\n{_tail(self.logs()[name])}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready in time; its log ends:\n{_tail(self.logs()[name])}")
            time.sleep(0.1)
