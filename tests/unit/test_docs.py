"""Generated docs stay in step with the code."""
from pathlib import Path

from jumpgate.nca.matrix import render

ROOT = Path(__file__).resolve().parents[2]


def test_support_matrix_is_current():
    assert (ROOT / "docs/support-matrix.md").read_text() == render(), \
        "regenerate with: python -m jumpgate.nca.matrix --write docs/support-matrix.md"
