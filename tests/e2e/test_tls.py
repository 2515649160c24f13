"""The REST port over HTTPS (`serve --tls-cert --tls-key`, docs/security.md): a client that trusts
the certificate runs a job with its token; plain HTTP to that port gets no answer."""
from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from jumpgate.client import Jumpgate
from jumpgate.local_server import free_port

from .helpers import read_op

pytestmark = pytest.mark.e2e


def self_signed(work: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = work / "cert.pem", work / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_a_job_over_https_with_a_token(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "t.jsonl").write_text("".join(f'{{"a": {i}}}\n' for i in range(10)))
    cert, key = self_signed(tmp_path)
    exe = str(Path(sys.executable).with_name("jumpgate"))
    tokens = tmp_path / "tokens.yaml"
    token = subprocess.run([exe, "tokens", "add", "--file", str(tokens), "--tenant", "t"], capture_output=True,
                           text=True, check=True).stdout.strip()
    port = free_port()
    with open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen([exe, "serve", "--data-root", str(root), "--port", str(port), "--tokens", str(tokens),
                                 "--tls-cert", str(cert), "--tls-key", str(key), "--cache-dir", str(tmp_path / "c")],
                                stdout=log, stderr=subprocess.STDOUT)
    url = f"https://127.0.0.1:{port}"
    trust = ssl.create_default_context(cafile=str(cert))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/v1/health", verify=trust).status_code == 200:
                    break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.1)
        http = httpx.Client(base_url=url, verify=trust, timeout=60)
        with http, Jumpgate(url, token=token, http=http) as jg:
            rows = jg.run({"operations": [read_op("r", "t.jsonl", [{"name": "a", "type": "int64"}]),
                                          {"kind": "send", "name": "out", "input": "r", "transport": "tcp",
                                           "host": "127.0.0.1", "port": 0}]}, timeout=120)["out"]
        assert sorted(rows.column("a").to_pylist()) == list(range(10))
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=5)
    finally:
        proc.terminate()
        proc.wait(30)
