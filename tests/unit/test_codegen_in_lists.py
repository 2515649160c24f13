"""Large IN lists in generated C (codegen/inset.py): one sorted array and one binary search per
list, whatever its length, so the C compiler's time does not grow with it (10,000 comparisons
took gcc -O2 24 s). Their answers are checked against DuckDB in test_codegen_semantics.py and,
end to end, in tests/e2e/test_filter_project.py."""
from __future__ import annotations

import random
import shutil

import pytest

from jumpgate.ncas.software.codegen.golden import ALL_TYPES, scan_chain
from jumpgate.ncas.software.codegen.inset import SET_MIN
from jumpgate.ncas.software.codegen.scan import generate_scan_query

from .test_codegen_golden import compile_seconds

N = 10_000


def lists(n: int) -> list[tuple[str, str]]:
    rnd = random.Random(7)
    return [
        ("ints", "l IN (" + ", ".join(str(rnd.randint(-10**12, 10**12)) for _ in range(n)) + ")"),
        ("decimals", "d IN (" + ", ".join(f"{rnd.randint(-10**7, 10**7) / 100:.2f}" for _ in range(n)) + ")"),
        ("strings", "s NOT IN (" + ", ".join(f"'w{rnd.randint(0, 10**9)}'" for _ in range(n)) + ")"),
        ("floats", "f IN (" + ", ".join(repr(rnd.uniform(-1e6, 1e6)) for _ in range(n)) + ")"),
        ("dates", "dt IN (" + ", ".join(f"DATE '{rnd.randint(1900, 2100)}-{rnd.randint(1, 12):02d}-"
                                        f"{rnd.randint(1, 28):02d}'" for _ in range(n)) + ")"),
    ]


def source(n: int) -> str:
    ops, layout = scan_chain(ALL_TYPES, [("project", [("id", "id"), *lists(n)])])
    return generate_scan_query(ops, layout)


def test_each_large_list_is_one_array_and_one_search():
    text = source(N)
    assert text.count("while (lo") == 5
    assert text.count("static const ") - text.count("static const char") == 6  # 5 arrays + string offsets
    assert text.count("if (") < 100, "no comparison per value"


def test_a_list_below_the_threshold_is_compared_value_by_value():
    text = source(SET_MIN - 1)
    assert "while (lo" not in text and text.count("if (!t") >= 5 * (SET_MIN - 1)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")
def test_ten_thousand_values_per_list_compile_in_seconds(tmp_path):
    seconds = compile_seconds(source(N), tmp_path, repeat=1)
    print(f"5 IN lists of {N:,} values: gcc -O2 {seconds:.2f} s")
    assert seconds < 20  # one list of 10,000 integers alone took 24 s as comparisons
