"""Golden files of generated C (tests/unit/golden/), compared byte for byte.

When a change to the generators or templates is intended, regenerate them with
`python -m jumpgate.ncas.software.codegen.golden --update` and review the diff like code.
"""
from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from jumpgate.ncas.software.codegen import golden

from .test_codegen_harness import RUNTIME

CASES = sorted(golden.CASES)
HINT = "stale golden file; run: python -m jumpgate.ncas.software.codegen.golden --update"


@pytest.mark.parametrize("name", CASES)
def test_generated_code_matches_golden_file(name):
    path = golden.GOLDEN_DIR / f"{name}.c"
    assert path.exists(), HINT
    assert golden.render_case(name) == path.read_text(), HINT


def test_no_orphan_golden_files():
    assert sorted(p.stem for p in golden.GOLDEN_DIR.glob("*.c")) == CASES, HINT


def compile_seconds(source: str, tmp_path, flags=("-O2",), repeat: int = 3) -> float:
    """Compile with -Wall -Wextra -Werror; the best of `repeat` wall times."""
    src = tmp_path / "q.c"
    src.write_text(source)
    cmd = ["gcc", "-std=c11", *flags, "-Wall", "-Wextra", "-Werror", f"-I{RUNTIME}", "-c", str(src),
           "-o", str(tmp_path / "q.o")]
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        best = min(best or 1e9, time.perf_counter() - t0)
    return best


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")
@pytest.mark.parametrize("name", CASES)
def test_golden_code_compiles_warning_free(name, tmp_path):
    # How fast it compiles is a benchmark's business (bench/control_plane_overhead.py reports cold
    # compiles), not a timed assertion on a shared, noisy machine.
    compile_seconds(golden.render_case(name), tmp_path, repeat=1)
