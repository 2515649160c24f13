"""A read's path is checked again when the NCA opens the file, not only when the job is submitted:
a data file replaced, between submit and execute, by a symlink to a file outside the data root
fails the job with the file named and the reason, no row of the outside file reaches the client,
and nothing is left running; for JSON Lines, Parquet and ORC. A symlink that stays inside the data
root is still read (docs/nca-process-protocol.md, "Input files")."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from jumpgate.client import Jumpgate
from jumpgate.client.receiver import Receiver
from jumpgate.ncas.software.arrow_cpp import unavailable_reason

from .test_errors import wait_no_children

pytestmark = pytest.mark.e2e

EXT = {"json": "jsonl", "parquet": "parquet", "orc": "orc"}
FORMATS = [pytest.param(f, marks=pytest.mark.skipif(f != "json" and unavailable_reason() is not None,
                                                    reason=f"Arrow C++: {unavailable_reason()}")) for f in EXT]
SCHEMA = [{"name": "k", "type": "int64"}, {"name": "s", "type": "string"}]


def write(path: Path, fmt: str, rows: list[dict]) -> None:
    if fmt == "json":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return
    import pyarrow as pa

    table = pa.Table.from_pylist(rows, schema=pa.schema([("k", pa.int64()), ("s", pa.string())]))
    if fmt == "orc":
        import pyarrow.orc as orc

        orc.write_table(table, str(path))
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, str(path))


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_swapped_for_a_symlink_leading_outside_after_submit_is_refused(server, data_root, tmp_path, fmt):
    name = f"swapped_{fmt}.{EXT[fmt]}"
    secret = tmp_path / f"secret.{EXT[fmt]}"  # a sibling of the data root: outside it
    write(data_root / name, fmt, [{"k": 1, "s": "inside"}])
    write(secret, fmt, [{"k": 666, "s": "SECRET"}] * 100)
    try:
        with Jumpgate(server.url) as jg, Receiver("127.0.0.1", 0, name="out") as receiver:
            job = jg.submit(jg.read(name, format=fmt, schema=SCHEMA).send("127.0.0.1", receiver.port, name="out"))
            # checked and compiled; now the file becomes a symlink to the outside file, in one rename
            os.symlink(secret, data_root / f".{name}.swap")
            os.replace(data_root / f".{name}.swap", data_root / name)
            out = job.outputs["out"]
            receiver.start(out.expected_streams, out.layout)
            job.execute()
            status = job.status(wait=60)
            while not job.finished:
                status = job.status(wait=60)
            received = receiver.bytes_received
        assert status["state"] == "failed", status
        err = status["error"]
        assert err["file"].endswith(name) and err["stage"] == 0, err
        # the NCA names the file and why: with the host's data root, "it leads outside the data root
        # (a symlink?): refused"; on a host that declares none, the symlink itself is refused
        message = err["message"]
        assert f"cannot open input file {name}" in message or f"/{name}:" in message, err
        assert "symlink" in message and message.endswith("refused"), err
        assert received == 0  # not one byte: the scan failed before it connected
        assert wait_no_children(server) == []
    finally:
        (data_root / name).unlink(missing_ok=True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_symlink_that_stays_inside_the_root_is_read(server, data_root, fmt):
    real, link = data_root / "linked" / f"real_{fmt}.{EXT[fmt]}", data_root / f"link_{fmt}.{EXT[fmt]}"
    real.parent.mkdir(exist_ok=True)
    rows = [{"k": k, "s": f"row {k}"} for k in range(50)]
    write(real, fmt, rows)
    os.symlink(f"linked/{real.name}", link)
    try:
        with Jumpgate(server.url) as jg:
            got = jg.read(link.name, format=fmt, schema=SCHEMA).collect(timeout=120)
        assert sorted(got.to_pylist(), key=lambda r: r["k"]) == rows
        assert wait_no_children(server) == []
    finally:
        link.unlink()
        real.unlink()
