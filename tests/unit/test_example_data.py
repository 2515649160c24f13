"""`jumpgate example` never overwrites data it did not write (found: it overwrote a user's own
`sales.jsonl`): a data root holding a file of its name without its marker is refused, untouched;
its own files it may write again."""
from __future__ import annotations

import pytest

from jumpgate.examples import NotOurData, run_example, write_data


def test_a_users_own_file_is_never_overwritten(tmp_path):
    (tmp_path / "sales.jsonl").write_text('{"mine": 1}\n')
    with pytest.raises(NotOurData, match="was not written by `jumpgate example`"):
        write_data(tmp_path, sales=10)
    assert run_example("http://127.0.0.1:9", tmp_path, rows=10) == 2  # refused before any server is asked
    assert (tmp_path / "sales.jsonl").read_text() == '{"mine": 1}\n'
    assert not (tmp_path / "stores.jsonl").exists()


def test_its_own_files_it_writes_again(tmp_path):
    write_data(tmp_path, sales=10)
    first = (tmp_path / "sales.jsonl").read_text()
    write_data(tmp_path, sales=20)
    assert len((tmp_path / "sales.jsonl").read_text().splitlines()) == 20 != len(first.splitlines())
