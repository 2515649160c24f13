"""Generated docs stay in step with the code, and the docs' links lead somewhere."""
import re
from pathlib import Path

import pytest

from jumpgate.matrix import COMMAND, render

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *ROOT.glob("*/README.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_support_matrix_is_current():
    assert (ROOT / "docs/support-matrix.md").read_text() == render(), f"regenerate with: {COMMAND}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_files(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        path = target.split("#", 1)[0]
        if not path or re.match(r"[a-z]+:", path):
            continue  # an anchor on the same page, or a URL
        if not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to missing files: {broken}"


def test_every_page_of_docs_is_in_the_index():
    index = (ROOT / "docs" / "README.md").read_text()
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md" and f"`{p.name}`" not in index]
    assert not missing, f"docs/README.md does not list: {missing}"
