"""NTF → Arrow decoding and stream framing (contract §2, §3), against bytes built with struct."""
from __future__ import annotations

import datetime as dt
import struct
import time
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

import jumpgate.client.ntf as ntf
from jumpgate.client import (
    HAVE_NATIVE,
    StreamError,
    decode_stream,
    decode_streams,
    decode_tuples,
    scan_stream,
)
from jumpgate.client.testing import encode_stream, encode_table, encode_tuple, end_marker, frame, header
from jumpgate.contract.ntf import generate_ntf
from jumpgate.contract.types import Field, Schema, parse_type

EPOCH = dt.date(1970, 1, 1)
ARROW = {"boolean": pa.bool_(), "int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(),
         "string": pa.string(), "date": pa.date32()}


def layout_of(cols: list[tuple[str, str]]):
    return generate_ntf(Schema(tuple(Field(n, parse_type(t)) for n, t in cols)))


def arrow_of(t: str) -> pa.DataType:
    if t.startswith("decimal"):
        p, s = t[8:-1].split(",")
        return pa.decimal128(int(p), int(s))
    return ARROW[t]


def expected_table(cols, rows) -> pa.Table:
    data = {n: pa.array([r[i] for r in rows], type=arrow_of(t)) for i, (n, t) in enumerate(cols)}
    return pa.table(data, schema=pa.schema([pa.field(n, arrow_of(t)) for n, t in cols]))


@pytest.fixture(params=["native", "python"] if HAVE_NATIVE else ["python"])
def scanner(request, monkeypatch):
    """Run a test with the native helper and again with the pure-Python fallback."""
    if request.param == "python":
        monkeypatch.setattr(ntf, "_ntfscan", None)
    return request.param


def test_native_helper_is_built():
    assert HAVE_NATIVE, "jumpgate.client._ntfscan was not built: run pip install -e . with a C compiler"


# ----------------------------------------------------------------------------- the contract's example
CONTRACT_LAYOUT = {"version": 1, "null_bytes": 8, "fixed_size": 24, "variable": True,
                   "fields": [{"name": "state", "type": "string", "offset": 8, "size": 8, "null_bit": 0},
                              {"name": "total_price", "type": "float64", "offset": 16, "size": 8, "null_bit": 1}]}


def test_contract_example_bytes_by_hand(scanner):
    t0 = bytes(8) + struct.pack("<II", 24, 2) + struct.pack("<d", 12.5) + b"CA"
    t1 = bytes([0b01]) + bytes(7) + bytes(8) + struct.pack("<d", -1.0)  # state NULL
    t2 = bytes([0b10]) + bytes(7) + struct.pack("<II", 24, 6) + bytes(8) + "Zürich".encode()[:6]
    t3 = bytes([0b11]) + bytes(23)
    stream = (b"NTF1" + struct.pack("<I", 0) + b"".join(struct.pack("<I", len(t)) + t for t in (t0, t1, t2, t3))
              + struct.pack("<IQ", 0, 4))
    got = decode_stream(stream, CONTRACT_LAYOUT)
    want = pa.table({"state": pa.array(["CA", None, "Zürich"[:5], None]),
                     "total_price": pa.array([12.5, -1.0, None, None])})
    assert got.equals(want)
    # the reference encoder writes the same bytes
    assert encode_tuple(["CA", 12.5], CONTRACT_LAYOUT) == t0
    assert encode_tuple([None, None], CONTRACT_LAYOUT) == t3


# ----------------------------------------------------------------------------- every type, NULLs
ALL_TYPES = [("b", "boolean"), ("i", "int32"), ("l", "int64"), ("f", "float64"), ("d", "decimal(12,2)"),
             ("s", "string"), ("dt", "date"), ("s2", "string"), ("big", "decimal(18,0)")]
ALL_ROWS = [
    (True, 1, 2**40, 1.5, Decimal("123.45"), "hello", dt.date(2024, 2, 29), "", Decimal(10**18 - 1)),
    (False, -2**31, -2**63, -0.0, Decimal("-0.01"), "ünïcødé ✓ 日本", dt.date(1969, 12, 31), "x", Decimal(-10**18 + 1)),
    (None, None, None, None, None, None, None, None, None),
    (True, None, 7, None, Decimal("0.00"), None, EPOCH, "tail", None),
    (None, 2**31 - 1, None, float("inf"), None, "", None, None, Decimal(0)),
    (False, 0, 0, 1e-300, Decimal("9999999999.99"), "a" * 70000, dt.date(9999, 12, 31), "🙂", Decimal(5)),
]


def test_every_type_with_nulls_everywhere(scanner):
    layout = layout_of(ALL_TYPES)
    got = decode_stream(encode_stream(ALL_ROWS, layout, stream_id=3), layout)
    assert got.equals(expected_table(ALL_TYPES, ALL_ROWS))
    assert got.schema.field("d").type == pa.decimal128(12, 2)
    assert got.column("s").null_count == 2


def test_every_column_null_and_no_column_null(scanner):
    layout = layout_of(ALL_TYPES)
    rows = [tuple([None] * len(ALL_TYPES))] * 5 + [ALL_ROWS[0]] * 3
    got = decode_stream(encode_stream(rows, layout), layout)
    assert got.equals(expected_table(ALL_TYPES, rows))
    got = decode_stream(encode_stream([ALL_ROWS[0]] * 4, layout), layout)
    assert all(c.null_count == 0 for c in got.columns)


def test_fixed_only_layout_stride_path_matches_exact_scan():
    cols = [(n, t) for n, t in ALL_TYPES if t != "string"]
    layout = layout_of(cols)
    assert not layout.variable
    rows = [tuple(v for (n, t), v in zip(ALL_TYPES, r, strict=True) if t != "string") for r in ALL_ROWS] * 50
    stream = encode_stream(rows, layout)
    buf = np.frombuffer(stream, np.uint8)
    stride = ntf._scan_fixed(buf, layout.fixed_size)
    exact = ntf._scan_frames_py(buf, 8, layout.fixed_size, layout.fixed_size)
    assert stride is not None and np.array_equal(stride, exact)
    assert decode_stream(stream, layout).equals(expected_table(cols, rows))


def test_seventy_fields_use_two_null_words(scanner):
    types = ["int32", "int64", "boolean", "string", "float64", "date", "decimal(5,1)"]
    cols = [(f"c{i}", types[i % len(types)]) for i in range(70)]
    layout = layout_of(cols)
    assert layout.null_bytes == 16 and layout.fields[69].null_bit == 69

    def value(i, t, r):
        if (i + r) % 3 == 0:
            return None
        return {"int32": i * r, "int64": -i * r * 10**10, "boolean": (i + r) % 2 == 0, "string": "é" * (i % 5),
                "float64": i / (r + 1), "date": dt.date(2000, 1, 1) + dt.timedelta(days=i - r),
                "decimal(5,1)": Decimal(i * 10 + r) / 10}[t]

    rows = [tuple(value(i, t, r) for i, (_, t) in enumerate(cols)) for r in range(7)]
    rows.append(tuple([None] * 64 + [value(i, t, 1) for i, (_, t) in enumerate(cols)][64:]))  # only word 2 set
    got = decode_stream(encode_stream(rows, layout), layout)
    assert got.equals(expected_table(cols, rows))
    # field 64 + k is bit k of byte 8, the first byte of the second null word
    raw = encode_tuple(rows[-1], layout)
    second_word = sum(1 << (i - 64) for i in range(64, 70) if rows[-1][i] is None)
    assert raw[:8] == b"\xff" * 8 and second_word and raw[8:16] == bytes([second_word]) + bytes(7)


def test_zero_rows_keep_the_schema(scanner):
    layout = layout_of(ALL_TYPES)
    stream = header(0) + end_marker(0)
    got = decode_stream(stream, layout)
    assert got.num_rows == 0 and got.schema == expected_table(ALL_TYPES, []).schema
    assert decode_streams([], layout).schema == got.schema
    assert decode_streams([stream, header(1) + end_marker(0)], layout).num_rows == 0
    fixed = layout_of([("a", "int32")])
    assert decode_stream(stream, fixed).num_rows == 0


def test_decode_tuples_over_concatenated_streams(scanner):
    layout = layout_of(ALL_TYPES)
    a, b = encode_stream(ALL_ROWS[:4], layout, 0), encode_stream(ALL_ROWS[4:] + ALL_ROWS, layout, 1)
    sa, sb = scan_stream(a, layout), scan_stream(b, layout)
    data = np.frombuffer(a + b, np.uint8)
    starts = np.concatenate([sa.starts, sb.starts + len(a)])
    got = decode_tuples(data, starts, layout)
    assert got.equals(expected_table(ALL_TYPES, ALL_ROWS + ALL_ROWS))
    # explicit lengths work on unframed tuple bytes too
    tuples = [encode_tuple(r, layout) for r in ALL_ROWS]
    lengths = np.array([len(t) for t in tuples])
    unframed = decode_tuples(b"".join(tuples), np.cumsum(lengths) - lengths, layout, lengths=lengths)
    assert unframed.equals(expected_table(ALL_TYPES, ALL_ROWS))


def test_decode_streams_concatenates_and_rejects_duplicate_ids():
    layout = layout_of(ALL_TYPES)
    s0, s1 = encode_stream(ALL_ROWS[:2], layout, 0), encode_stream(ALL_ROWS[2:], layout, 1)
    assert decode_streams([s0, s1], layout).equals(expected_table(ALL_TYPES, ALL_ROWS))
    with pytest.raises(StreamError, match="duplicate stream ids"):
        decode_streams([s0, encode_stream(ALL_ROWS, layout, 0)], layout)


def test_large_string_offsets_and_mixed_concat(monkeypatch):
    layout = layout_of([("s", "string"), ("n", "int32")])
    rows = [("abc", 1), (None, 2), ("", 3), ("défg", 4)]
    monkeypatch.setattr(ntf, "_INT32_OFFSETS_MAX", 5)  # as if the column exceeded 2 GiB
    big = decode_stream(encode_stream(rows, layout), layout)
    assert big.schema.field("s").type == pa.large_string()
    assert big.column("s").to_pylist() == ["abc", None, "", "défg"]
    small = decode_stream(encode_stream(rows[:1], layout, 1), layout)
    assert small.schema.field("s").type == pa.string()
    both = ntf.concat_tables([small, big], layout)
    assert both.schema.field("s").type == pa.large_string()
    assert both.column("s").to_pylist() == ["abc", "abc", None, "", "défg"]


def test_decimals_and_dates_edges():
    cols = [("d", "decimal(18,4)"), ("x", "date")]
    layout = layout_of(cols)
    rows = [(Decimal("-99999999999999.9999"), dt.date(1, 1, 1)), (Decimal("0.0001"), dt.date(1900, 3, 1))]
    assert decode_stream(encode_stream(rows, layout), layout).equals(expected_table(cols, rows))
    over = header(0) + frame(bytes(8) + struct.pack("<q", 10**18) + bytes(8)) + end_marker(1)
    with pytest.raises(StreamError, match="does not fit decimal"):
        decode_stream(over, layout)


def test_boolean_nonzero_byte_is_true():
    layout = layout_of([("b", "boolean")])
    stream = header(0) + frame(bytes(8) + b"\x02" + bytes(7)) + frame(bytes(16)) + end_marker(2)
    assert decode_stream(stream, layout).column("b").to_pylist() == [True, False]


def test_null_string_with_garbage_offset_and_empty_string_anywhere():
    layout = layout_of([("s", "string")])
    null_garbage = b"\x01" + bytes(7) + struct.pack("<II", 999, 999)
    empty_at_zero = bytes(8) + struct.pack("<II", 0, 0)
    stream = header(0) + frame(null_garbage) + frame(empty_at_zero) + end_marker(2)
    assert decode_stream(stream, layout).column("s").to_pylist() == [None, ""]


# ----------------------------------------------------------------------------- framing errors
STR_LAYOUT = layout_of([("id", "int64"), ("s", "string")])
FIX_LAYOUT = layout_of([("id", "int64"), ("v", "float64")])


def _good(layout, n=3):
    rows = [(i, f"v{i}") for i in range(n)] if layout is STR_LAYOUT else [(i, i / 2) for i in range(n)]
    return encode_stream(rows, layout)


def _tuple(layout, i=0):
    return encode_tuple((i, "xy") if layout is STR_LAYOUT else (i, 0.5), layout)


@pytest.mark.parametrize("layout", [STR_LAYOUT, FIX_LAYOUT], ids=["variable", "fixed"])
@pytest.mark.parametrize("case, mangle, message", [
    ("bad header", lambda s, t: b"NTF2" + s[4:], "bad stream header"),
    ("short header", lambda s, t: s[:5], "inside its header"),
    ("empty", lambda s, t: b"", "inside its header"),
    ("header only", lambda s, t: s[:8], "ended before its end marker"),
    ("no end marker", lambda s, t: s[:-12], "ended before its end marker"),
    ("cut in a prefix", lambda s, t: s[:-12] + b"\x05\x00", "ended before its end marker"),
    ("truncated tuple", lambda s, t: s[:-12] + frame(t)[:-3], "truncated tuple 3"),
    ("count too high", lambda s, t: s[:-12] + end_marker(4), "counts 4 tuples but 3"),
    ("count too low", lambda s, t: s[:-12] + end_marker(2), "counts 2 tuples but 3"),
    ("count cut short", lambda s, t: s[:-5], "cut short"),
    ("bytes after the end", lambda s, t: s + b"\x00", "1 bytes follow the end marker"),
    ("zero-length tuple", lambda s, t: s[:-12] + struct.pack("<I", 0) + frame(t) + end_marker(4),
     r"counts \d+ tuples but 3"),  # the u32 0 reads as an end marker whose count is garbage
    ("length 2^31", lambda s, t: s[:-12] + struct.pack("<I", 2**31) + bytes(16) + end_marker(4),
     "not below 2"),
    ("shorter than fixed part", lambda s, t: s[:-12] + frame(t[:-4]) + end_marker(4), "length"),
])
def test_framing_errors(scanner, layout, case, mangle, message):
    stream = mangle(_good(layout), _tuple(layout))
    with pytest.raises(StreamError, match=message):
        decode_stream(stream, layout)


def test_fixed_layout_rejects_longer_tuples(scanner):
    s = _good(FIX_LAYOUT)
    with pytest.raises(StreamError, match="layout's tuples are 24 bytes"):
        decode_stream(s[:-12] + frame(_tuple(FIX_LAYOUT) + b"extra"), FIX_LAYOUT)


def test_error_names_the_tuple_and_byte(scanner):
    s = _good(STR_LAYOUT, 2)
    bad = s[:-12] + struct.pack("<I", 1000) + b"abc"
    with pytest.raises(StreamError, match=rf"truncated tuple 2: length prefix at byte {len(s) - 12} says 1000"):
        decode_stream(bad, STR_LAYOUT)


def test_string_outside_its_tuple():
    fs = STR_LAYOUT.fixed_size
    for off, ln in [(fs, 5), (fs + 1, 2), (8, 1)]:
        t = bytes(8) + struct.pack("<q", 1) + struct.pack("<II", off, ln) + b"ab"
        with pytest.raises(StreamError, match="outside the tuple's variable section"):
            decode_stream(header(0) + frame(t) + end_marker(1), STR_LAYOUT)


def test_invalid_utf8_is_an_error():
    t = bytes(8) + struct.pack("<q", 1) + struct.pack("<II", STR_LAYOUT.fixed_size, 2) + b"\xff\xfe"
    with pytest.raises(StreamError, match="string field 's'"):
        decode_stream(header(0) + frame(t) + end_marker(1), STR_LAYOUT)


@pytest.mark.parametrize("change, message", [
    (lambda j: j.update(version=2), "version 2"),
    (lambda j: j["fields"][1].update(offset=20), "outside the fixed part"),
    (lambda j: j["fields"][0].update(size=4), "has size 4"),
    (lambda j: j["fields"][0].update(null_bit=64), "null bit 64"),
    (lambda j: j.update(variable=False), "variable"),
    (lambda j: j["fields"][0].update(type="varchar"), "malformed NTF layout"),
])
def test_bad_layouts_are_rejected(change, message):
    j = STR_LAYOUT.to_json()
    change(j)
    with pytest.raises(StreamError, match=message):
        decode_stream(_good(STR_LAYOUT), j)


def test_hand_written_unaligned_layout():
    """A layout an NCA publishes itself (contract §2) need not follow the 8-byte alignment."""
    layout = {"version": 1, "null_bytes": 1, "fixed_size": 14, "variable": False,
              "fields": [{"name": "k", "type": "int32", "offset": 1, "size": 4, "null_bit": 0},
                         {"name": "v", "type": "int64", "offset": 5, "size": 8, "null_bit": 3},
                         {"name": "ok", "type": "boolean", "offset": 13, "size": 1, "null_bit": 7}]}
    t0 = b"\x00" + struct.pack("<iq?", -5, 2**50, True)
    t1 = bytes([0b1000_1000]) + struct.pack("<iq?", 9, 0, False)
    got = decode_stream(header(0) + frame(t0) + frame(t1) + end_marker(2), layout)
    assert got.to_pydict() == {"k": [-5, 9], "v": [2**50, None], "ok": [True, None]}


# ----------------------------------------------------------------------------- helpers and speed
def test_numpy_gather_matches_native():
    rng = np.random.default_rng(0)
    buf = rng.integers(0, 256, 10_000, dtype=np.uint8)
    begin = rng.integers(0, 9_000, 500)
    length = rng.integers(0, 100, 500)
    total = int(length.sum())
    want = np.concatenate([buf[b:b + n] for b, n in zip(begin, length, strict=True)])
    assert np.array_equal(ntf.gather_ranges_numpy(buf, begin, length, total), want)
    assert np.array_equal(ntf.gather_ranges(buf, begin, length, total), want)


def test_vectorized_encoder_matches_reference():
    layout = layout_of(ALL_TYPES)
    table = expected_table(ALL_TYPES, ALL_ROWS)
    assert encode_table(table, layout, 5) == encode_stream(ALL_ROWS, layout, 5)


def test_million_rows_decode_well_under_a_second():
    n = 1_000_000
    rng = np.random.default_rng(1)
    cols = [("id", "int64"), ("a", "int32"), ("x", "float64"), ("d", "decimal(12,2)"), ("s", "string"),
            ("dt", "date"), ("flag", "boolean"), ("t", "string")]
    layout = layout_of(cols)
    words = np.array(["alpha", "beta", "gamma", "naïve", "", "longer string with spaces", "O'Neil", "x"])

    def mask():
        return rng.random(n) < 0.1
    table = pa.table({
        "id": pa.array(np.arange(n)),
        "a": pa.array(rng.integers(-1000, 1000, n).astype(np.int32), mask=mask()),
        "x": pa.array(rng.random(n), mask=mask()),
        "d": pa.array(rng.integers(-10**9, 10**9, n), mask=mask()).cast(pa.decimal128(19, 0))
        .cast(pa.decimal128(12, 2), safe=False),
        "s": pa.array(words[rng.integers(0, len(words), n)], mask=mask()),
        "dt": pa.array(rng.integers(0, 20000, n).astype(np.int32), mask=mask()).cast(pa.date32()),
        "flag": pa.array(rng.random(n) < 0.5, mask=mask()),
        "t": pa.array(np.char.add("store_", rng.integers(0, 100000, n).astype(str))),
    })
    stream = encode_table(table, layout)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        got = decode_stream(stream, layout)
        best = min(best, time.perf_counter() - t0)
    assert got.equals(table)
    print(f"decoded {n} rows, {len(stream) / 1e6:.0f} MB in {best:.3f} s")
    assert best < 1.0
