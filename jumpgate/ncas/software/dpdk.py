"""DPDK for software NCAs' UDP transport (docs/udp-transport.md, "DPDK"): the runtime's dpdk_io.c,
built and linked only where pkg-config finds Debian's libdpdk-dev, only into NCAs that ask for it
(`build_nca(..., dpdk=True)`), so nothing else depends on DPDK.

`scripts/setup.sh` installs libdpdk-dev only with JUMPGATE_WITH_DPDK=1: it pulls in some 230
packages (systemd and udev updates among them) that every other part of Jumpgate does without.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

OBJECT = "dpdk_io.o"
_STAMP = ".complete"


class DpdkUnavailable(Exception):
    pass


@dataclass(frozen=True)
class DpdkToolchain:
    version: str
    ldflags: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"libdpdk {self.version}"


@functools.cache
def dpdk_toolchain() -> DpdkToolchain:
    """libdpdk's version and link flags from pkg-config; DpdkUnavailable (with the fix) without it."""
    try:
        version = subprocess.run(["pkg-config", "--modversion", "libdpdk"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        libs = subprocess.run(["pkg-config", "--libs", "libdpdk"], capture_output=True, text=True,
                              check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        raise DpdkUnavailable("pkg-config finds no libdpdk: apt-get install libdpdk-dev "
                              "(or JUMPGATE_WITH_DPDK=1 bash scripts/setup.sh)") from None
    return DpdkToolchain(version, tuple(libs))


def dpdk_missing() -> str | None:
    """Why NCAs cannot be built with DPDK here, or None."""
    try:
        dpdk_toolchain()
    except DpdkUnavailable as e:
        return str(e)
    return None


def ensure_dpdk_object(runtime: Path, make_vars: list[str]) -> tuple[Path, DpdkToolchain]:
    """Build dpdk_io.o (`make dpdk`) into runtime/dpdk-<hash of the libdpdk version> unless there."""
    from .build import NcaBuildError, _file_lock, runtime_dir

    try:
        tc = dpdk_toolchain()
    except DpdkUnavailable as e:
        raise NcaBuildError(f"the NCA cannot be built with DPDK: {e}") from None
    build = runtime / f"dpdk-{hashlib.sha256(tc.key.encode()).hexdigest()[:12]}"
    if (build / _STAMP).exists():
        return build / OBJECT, tc
    with _file_lock(runtime.parent / f"{runtime.name}-{build.name}.lock"):
        if (build / _STAMP).exists():
            return build / OBJECT, tc
        tmp = Path(tempfile.mkdtemp(prefix=f".{build.name}-", dir=runtime))
        try:
            cmd = ["make", "-C", str(runtime_dir()), f"BUILD={tmp}", *make_vars, "dpdk"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise NcaBuildError("building the DPDK transport failed", proc.stderr + proc.stdout, cmd)
            (tmp / _STAMP).write_text(json.dumps({"dpdk": tc.key, "built": time.time(), "pid": os.getpid()}))
            if build.exists():
                shutil.rmtree(build)
            os.rename(tmp, build)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return build / OBJECT, tc
