"""The server keeps an idle HTTP connection open longer than clients keep one in their pools (Java's
HttpClient, which the Spark and Trino clients use, 30 s). With uvicorn's default of 5 s, a request
sent on a pooled connection while the server closed it got no answer at all, and a client cannot
safely send a POST like `POST /v1/jobs` again."""
from __future__ import annotations

import socket
import time
from urllib.parse import urlparse

import pytest

from jumpgate.cli import KEEP_ALIVE_S

pytestmark = pytest.mark.e2e


def get(sock: socket.socket, host: str) -> bytes:
    sock.sendall(f"GET /v1/ncas HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_an_idle_connection_still_answers_after_a_pooled_client_would_reuse_it(server):
    assert KEEP_ALIVE_S > 30
    u = urlparse(server.url)
    with socket.create_connection((u.hostname, u.port), timeout=10) as sock:
        assert get(sock, u.netloc).startswith(b"HTTP/1.1 200")
        time.sleep(6.5)  # past uvicorn's default keep-alive (5 s)
        assert get(sock, u.netloc).startswith(b"HTTP/1.1 200")
