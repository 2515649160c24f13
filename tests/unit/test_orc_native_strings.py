"""String columns in the ORC scan's native stripe reader (ncas/runtime/orc_native.cpp): STRING and
BINARY columns in both encodings (DICTIONARY / DICTIONARY_V2 as Arrow dictionary arrays, DIRECT /
DIRECT_V2 as plain string arrays), against the Arrow ORC adapter (`scan.orc_native 0`) and the
values Python wrote: NULLs, empty, non-ASCII and long strings, every compression, several stripes
and batch sizes, the row prefilter on string columns, and malformed LENGTH / DATA streams and
dictionary sizes failing with the file named. The stripe footers are read here with a few lines
of protobuf, to check which encoding the writer chose and to find the streams to corrupt."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pytest

from jumpgate.ncas.software.arrow_cpp import unavailable_reason

from .fixtures.columnar import cache_dir, scan_nca

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=f"Arrow C++: {unavailable_reason()}")

ADAPTER = {"scan.orc_native": "0"}
SCHEMA = [("k", "int64"), ("lo", "string"), ("hi", "string"), ("bin", "string"), ("none", "string")]
# the writer's choice: 0 never builds a dictionary, 1.0 keeps one even for all-distinct values
THRESHOLD = {"direct": 0.0, "dictionary": 1.0}
COLUMN = {name: i + 1 for i, (name, _) in enumerate(SCHEMA)}  # ORC column ids: 0 is the root struct
# ORC Type, ColumnEncoding and stream kinds
STRING, VARCHAR = 7, 16
DIRECT, DICTIONARY, DIRECT_V2, DICTIONARY_V2 = 0, 1, 2, 3
DATA, LENGTH = 1, 2
LO_POOL = ["", "a", "b", "ß-ü", "日本語", "naïve café", "🙂🙃", "x" * 300, "tab\tand\nnewline", "Z"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return cache_dir(tmp_path_factory)


def make_table(n: int, seed: int = 3) -> pa.Table:
    """k: the row number; lo: few distinct values (NULLs, "", non-ASCII, a 300-byte one); hi: nearly
    all distinct, some long (up to 5000 bytes) or empty; bin: BINARY; none: every row NULL."""
    rnd = random.Random(seed)
    pieces = ["é", "ø", "中", "𝄞", "abc", " ", "-"]
    lo, hi, bins = [], [], []
    for k in range(n):
        r = rnd.random()
        lo.append(None if r < 0.15 else rnd.choice(LO_POOL) if r < 0.7 else f"v{k % 37}")
        r = rnd.random()
        if r < 0.1:
            hi.append(None)
        elif r < 0.13:
            hi.append("")
        elif r < 0.16:
            hi.append("".join(rnd.choice(pieces) for _ in range(rnd.randint(500, 2000))))
        else:
            hi.append(f"{k:06d}" + "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 12))))
        bins.append(None if rnd.random() < 0.1 else f"b{k % 13}".encode())
    return pa.table({"k": pa.array(range(n), pa.int64()), "lo": pa.array(lo, pa.string()),
                     "hi": pa.array(hi, pa.string()), "bin": pa.array(bins, pa.binary()),
                     "none": pa.array([None] * n, pa.string())})


def write(table: pa.Table, path: Path, encoding: str, **kw) -> Path:
    kw.setdefault("stripe_size", 1024)  # the writer cuts a stripe at its next batch: many stripes
    kw.setdefault("batch_size", 1500)
    orc.write_table(table, str(path), dictionary_key_size_threshold=THRESHOLD[encoding], **kw)
    return path


def key(r: dict) -> str:
    return json.dumps(r, sort_keys=True)


def expected(table: pa.Table, keep=lambda r: True) -> list[str]:
    rows = []
    for r in table.to_pylist():
        if isinstance(r["bin"], bytes):
            r["bin"] = r["bin"].decode()
        if keep(r):
            rows.append(key(r))
    return sorted(rows)


def run_both(nca, path: Path, params: dict | None = None, threads: int = 1):
    """(native event, native rows, adapter event, adapter rows), rows as sorted keys."""
    ev, got, _ = nca.run([path], threads=threads, params=params)
    ev_a, got_a, _ = nca.run([path], threads=threads, params={**(params or {}), **ADAPTER})
    assert ev["event"] == "done", ev
    assert ev_a["event"] == "done", ev_a
    return ev, sorted(map(key, got)), ev_a, sorted(map(key, got_a))


# ------------------------------------------------------------------ the stripes of an uncompressed file


def uvarint(b: bytes, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return v, i


def pb_fields(b: bytes, base: int = 0) -> list[tuple[int, int | bytes, int]]:
    """(field number, value, absolute offset of the value) of one protobuf message."""
    out: list[tuple[int, int | bytes, int]] = []
    i = 0
    while i < len(b):
        k, i = uvarint(b, i)
        f, w = k >> 3, k & 7
        if w == 0:
            at = i
            v, i = uvarint(b, i)
            out.append((f, v, base + at))
        elif w == 2:
            n, i = uvarint(b, i)
            out.append((f, b[i:i + n], base + i))
            i += n
        else:
            i += 8 if w == 1 else 4
    return out


@dataclass
class Stream:
    kind: int
    column: int
    at: int  # absolute file offset
    length: int


@dataclass
class Encoding:
    kind: int
    dict_size: int
    dict_size_at: int  # absolute file offset of the dictionarySize varint (-1: none)


def stripes(path: Path) -> list[tuple[list[Stream], list[Encoding]]]:
    """Each stripe's streams and column encodings, from an uncompressed ORC file."""
    data = path.read_bytes()
    ps_len = data[-1]
    ps = {f: v for f, v, _ in pb_fields(data[-1 - ps_len:-1])}
    assert ps.get(2, 0) == 0, "only uncompressed files"
    footer_at = len(data) - 1 - ps_len - ps[1]
    out = []
    for f, info, _ in pb_fields(data[footer_at:footer_at + ps[1]]):
        if f != 3:
            continue
        si = {f2: v for f2, v, _ in pb_fields(info)}
        offset, index_len, data_len, footer_len = si.get(1, 0), si.get(2, 0), si.get(3, 0), si.get(4, 0)
        sf_at = offset + index_len + data_len
        streams, encodings, at = [], [], offset
        for f2, msg, msg_at in pb_fields(data[sf_at:sf_at + footer_len], sf_at):
            fs = pb_fields(msg, msg_at)
            d = {f3: v for f3, v, _ in fs}
            if f2 == 1:
                streams.append(Stream(d.get(1, 0), d.get(2, 0), at, d.get(3, 0)))
                at += d.get(3, 0)
            elif f2 == 2:
                size_at = next((a for f3, _, a in fs if f3 == 2), -1)
                encodings.append(Encoding(d.get(1, 0), d.get(2, 0), size_at))
        out.append((streams, encodings))
    return out


def type_kinds(path: Path) -> list[tuple[int, int]]:
    """(kind, absolute offset of the kind's varint) of each column's Type, from an uncompressed file."""
    data = path.read_bytes()
    ps_len = data[-1]
    ps = {f: v for f, v, _ in pb_fields(data[-1 - ps_len:-1])}
    footer_at = len(data) - 1 - ps_len - ps[1]
    out = []
    for f, msg, msg_at in pb_fields(data[footer_at:footer_at + ps[1]], footer_at):
        if f == 4:
            out.append(next((v, a) for f2, v, a in pb_fields(msg, msg_at) if f2 == 1))
    return out


def corrupt(src: Path, dst: Path, edits: list[tuple[int, bytes]]) -> Path:
    """A copy of src with bytes overwritten at the given offsets."""
    data = bytearray(src.read_bytes())
    for at, b in edits:
        data[at:at + len(b)] = b
    dst.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize("file_version", ["0.11", "0.12"])
@pytest.mark.parametrize("encoding", ["direct", "dictionary"])
def test_the_writer_settings_give_the_encodings_tested(encoding, file_version, tmp_path):
    path = write(make_table(3000), tmp_path / "t.orc", encoding, compression="uncompressed",
                 file_version=file_version)
    v2 = file_version == "0.12"
    want = {"direct": DIRECT_V2 if v2 else DIRECT, "dictionary": DICTIONARY_V2 if v2 else DICTIONARY}[encoding]
    found = stripes(path)
    assert len(found) > 1
    for _, encodings in found:
        assert encodings[COLUMN["lo"]].kind == want and encodings[COLUMN["hi"]].kind == want
        assert encodings[COLUMN["bin"]].kind == (DIRECT_V2 if v2 else DIRECT)  # ORC has no BINARY dictionaries
        if encoding == "dictionary":
            assert 0 < encodings[COLUMN["lo"]].dict_size <= len(LO_POOL) + 37


# ------------------------------------------------------------------ exact equality


@pytest.mark.parametrize("file_version", ["0.11", "0.12"])
@pytest.mark.parametrize("compression", ["uncompressed", "zlib", "snappy", "zstd"])
@pytest.mark.parametrize("encoding", ["direct", "dictionary"])
def test_string_stripes_are_native_and_equal_the_adapter_and_the_values_written(encoding, compression, file_version,
                                                                               tmp_path, cache):
    n = 12000
    table = make_table(n)
    path = write(table, tmp_path / "t.orc", encoding, compression=compression, file_version=file_version)
    nstripes = orc.ORCFile(str(path)).nstripes
    assert nstripes >= 2
    nca = scan_nca(tmp_path, "orc", SCHEMA, cache)
    ev, native, ev_a, adapter = run_both(nca, path, threads=2)
    assert ev["stats"]["stripes_native"] == nstripes and ev_a["stats"]["stripes_native"] == 0
    assert ev["stats"]["tuples_out"] == n
    assert native == adapter
    assert native == expected(table)


@pytest.mark.parametrize("batch_rows", ["1", "7", "999"])
@pytest.mark.parametrize("encoding", ["direct", "dictionary"])
def test_batches_of_any_size(encoding, batch_rows, tmp_path, cache):
    """Batches ending inside runs of lengths or indices and inside bytes of PRESENT bits."""
    table = make_table(3000, seed=11)
    path = write(table, tmp_path / "t.orc", encoding, compression="snappy", batch_size=1300)
    nca = scan_nca(tmp_path, "orc", SCHEMA, cache)
    ev, native, _, adapter = run_both(nca, path, params={"scan.batch_rows": batch_rows}, threads=2)
    assert ev["stats"]["stripes_native"] == ev["stats"]["stripes_total"] > 1
    assert native == adapter == expected(table)


@pytest.mark.parametrize("encoding", ["direct", "dictionary"])
def test_filters_on_string_columns(encoding, tmp_path, cache):
    """The row prefilter on string arrays and on dictionary arrays (each entry tested once)."""
    table = make_table(8000, seed=5)
    path = write(table, tmp_path / "t.orc", encoding, compression="zstd")
    cond = "lo IN ('ß-ü', '', '日本語', 'v3') AND hi >= '002' AND hi < '007' AND bin <> 'b4'"
    nca = scan_nca(tmp_path, "orc", SCHEMA, cache, condition=cond)
    ev, native, _, adapter = run_both(nca, path)
    assert ev["stats"]["stripes_native"] == ev["stats"]["stripes_total"] - ev["stats"]["stripes_skipped"] > 0

    def keep(r: dict) -> bool:
        return (r["lo"] in ("ß-ü", "", "日本語", "v3") and r["hi"] is not None and "002" <= r["hi"] < "007"
                and r["bin"] is not None and r["bin"] != "b4")

    want = expected(table, keep)
    assert len(want) > 50
    assert native == adapter == want


@pytest.mark.parametrize("encoding", ["direct", "dictionary"])
def test_varchar_columns_are_read_as_strings(encoding, tmp_path, cache):
    """VARCHAR (which the adapter also reads as utf8): the file's STRING types made VARCHAR."""
    table = make_table(3000, seed=2)
    path = write(table, tmp_path / "t.orc", encoding, compression="uncompressed")
    kinds = type_kinds(path)
    edits = [(kinds[COLUMN[c]][1], bytes([VARCHAR])) for c in ("lo", "hi")]
    assert all(kinds[COLUMN[c]][0] == STRING for c in ("lo", "hi"))
    path = corrupt(path, tmp_path / "v.orc", edits)
    assert [str(t) for t in orc.ORCFile(str(path)).schema.types][1:3] == ["string", "string"]
    assert [k for k, _ in type_kinds(path)][COLUMN["lo"]:COLUMN["hi"] + 1] == [VARCHAR, VARCHAR]
    nca = scan_nca(tmp_path, "orc", SCHEMA, cache, path="v.orc")
    ev, native, _, adapter = run_both(nca, path)
    assert ev["stats"]["stripes_native"] == ev["stats"]["stripes_total"] > 1
    assert native == adapter == expected(table)


# ------------------------------------------------------------------ malformed string streams


# case -> the stream changed and what the error says
MALFORMED = {
    "direct_length": "malformed or truncated LENGTH stream",  # RLE that does not decode
    "direct_length_huge": "malformed or truncated LENGTH stream (past the end of DATA)",
    "dictionary_length": "malformed or truncated LENGTH stream",
    "dictionary_length_huge": "malformed or truncated LENGTH stream (past the end of DICTIONARY_DATA)",
    "dictionary_index": "dictionary index past the dictionary's",  # index == dictionarySize
    "dictionary_size": "dictionary index past the dictionary's 2 entries",  # dictionarySize made 2
}


def huge_lengths(v2: bool, size: int) -> bytes:
    """A LENGTH stream of `size` bytes of lengths 2^35 - 1: runs of 512 (RLE v2 DELTA, delta 0)
    or 130 (RLE v1) of them."""
    run = b"\xc1\xff\xff\xff\xff\xff\x7f\x00" if v2 else b"\x7f\x00\xff\xff\xff\xff\x7f"
    return (run * (size // len(run) + 1))[:size]


def repeated(value: int, v2: bool, size: int) -> bytes:
    """A stream of `size` bytes of one value below 128: runs of 512 (RLE v2 DELTA, delta 0) or 130
    (RLE v1) of it."""
    run = bytes([0xC1, 0xFF, value, 0x00]) if v2 else bytes([0x7F, 0x00, value])
    return (run * (size // len(run) + 1))[:size]


@pytest.mark.parametrize("case", list(MALFORMED))
@pytest.mark.parametrize("file_version", ["0.11", "0.12"])
def test_malformed_string_streams_fail_naming_the_file(case, file_version, tmp_path, cache):
    """Streams that do not decode, lengths past the end of DATA / DICTIONARY_DATA, indices past the
    dictionary, a dictionary size smaller than the indices need: an error event naming the file,
    the stripe and the column, no crash (the stripes before it are read fine)."""
    encoding = "direct" if case.startswith("direct") else "dictionary"
    v2 = file_version == "0.12"
    good = write(make_table(6000, seed=8), tmp_path / "good.orc", encoding, compression="uncompressed",
                 file_version=file_version)
    streams, encodings = stripes(good)[1]
    col = COLUMN["lo"]
    enc = encodings[col]

    def stream(kind: int) -> Stream:
        s = next(s for s in streams if s.column == col and s.kind == kind)
        assert s.length >= 32  # a few runs: more values than the stripe has rows
        return s

    if case == "dictionary_size":
        assert 10 <= enc.dict_size < 128 and enc.dict_size_at > 0  # a one-byte varint
        edits = [(enc.dict_size_at, bytes([2]))]
    elif case == "dictionary_index":
        assert enc.dict_size < 128
        s = stream(DATA)
        edits = [(s.at, repeated(enc.dict_size, v2, s.length))]
    elif case.endswith("_huge"):
        s = stream(LENGTH)
        edits = [(s.at, huge_lengths(v2, s.length))]
    else:  # 0xFF: a varint that never ends (RLE v1), DELTA runs whose base never ends (RLE v2)
        s = stream(LENGTH)
        edits = [(s.at, b"\xff" * s.length)]
    bad = corrupt(good, tmp_path / "bad.orc", edits)
    nca = scan_nca(tmp_path, "orc", SCHEMA, cache, path="bad.orc")
    ev, _, _ = nca.run([bad], threads=2)
    assert ev["event"] == "error" and ev["file"] == str(bad), ev
    assert "stripe 1 " in ev["message"] and f"ORC column {col}: {MALFORMED[case]}" in ev["message"], ev
