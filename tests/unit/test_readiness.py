"""Waiting for a descriptor to be readable works for any descriptor number (contract/readiness.py):
select() refuses those numbered 1024 or more, which a busy server reaches."""
from __future__ import annotations

import os
import resource

import pytest

from jumpgate.contract.readiness import wait_readable


def test_a_descriptor_above_1024_is_waited_for():
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        pytest.skip(f"the open-files limit is {soft}: no descriptor above 1024 can be opened")
    held = [os.dup(0) for _ in range(1100)]  # the next descriptors are numbered above 1024
    try:
        r, w = os.pipe()
        assert r >= 1024
        assert not wait_readable(r, 0.05)
        os.write(w, b"x")
        assert wait_readable(r, 1.0)
        os.close(w)
        os.read(r, 1)
        assert wait_readable(r, 1.0)  # the writer went: a read now says so (end of file)
        os.close(r)
    finally:
        for fd in held:
            os.close(fd)
