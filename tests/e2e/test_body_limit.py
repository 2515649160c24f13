"""An oversized request body is refused (413) before it is read whole: by its declared length at
once, and while it streams in when it declares none; the server keeps answering throughout."""
from __future__ import annotations

import time

import httpx
import pytest

from jumpgate.api.app import MAX_BODY_BYTES

pytestmark = pytest.mark.e2e


def test_a_50_mb_body_is_413_within_a_second_declared_or_streamed(server):
    body = b'{"operations": [' + b" " * (50 * 1024 * 1024) + b"]}"
    with httpx.Client(base_url=server.url, timeout=60) as c:
        t0 = time.monotonic()
        declared = c.post("/v1/jobs", content=body, headers={"Content-Type": "application/json"})
        took = time.monotonic() - t0
        assert declared.status_code == 413 and f"{MAX_BODY_BYTES:,}" in declared.text, declared.text
        assert took < 1.0, took

        def chunks():
            for i in range(0, len(body), 1 << 20):
                yield body[i:i + (1 << 20)]
        try:
            streamed = c.post("/v1/jobs", content=chunks(), headers={"Content-Type": "application/json"})
            assert streamed.status_code == 413, streamed.text
        except httpx.RemoteProtocolError:
            pass  # the server may close the connection after answering, while the client still sends
        assert c.get("/v1/health").status_code == 200
