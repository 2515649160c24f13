"""generate_ntf against contract §2, exactly."""
from __future__ import annotations

import json

import pytest

from jumpgate.contract.ntf import NtfField, NtfLayout, generate_ntf
from jumpgate.contract.types import (
    BOOLEAN,
    DATE,
    FLOAT64,
    INT32,
    INT64,
    STRING,
    DataType,
    Field,
    Schema,
    decimal,
)


def schema(*fields: tuple[str, DataType]) -> Schema:
    return Schema(tuple(Field(n, t) for n, t in fields))


def wide(n: int) -> Schema:
    return schema(*[(f"c{i}", INT32) for i in range(n)])


@pytest.mark.parametrize(("n", "null_bytes"), [(1, 8), (63, 8), (64, 8), (65, 16), (128, 16), (129, 24)])
def test_null_vector_is_ceil_n_over_64_words(n, null_bytes):
    layout = generate_ntf(wide(n))
    assert layout.null_bytes == null_bytes
    assert layout.fields[0].offset == null_bytes  # the first field follows the null vector
    assert [f.null_bit for f in layout.fields] == list(range(n))


def test_one_field():
    layout = generate_ntf(schema(("x", INT64)))
    assert (layout.null_bytes, layout.fixed_size, layout.variable) == (8, 16, False)
    assert layout.fields == (NtfField("x", INT64, 8, 8, 0),)


def test_every_field_starts_on_a_multiple_of_8():
    layout = generate_ntf(schema(("flag", BOOLEAN), ("n", INT32), ("d", DATE), ("big", INT64),
                                 ("f", FLOAT64), ("m", decimal(12, 2)), ("s", STRING)))
    assert [(f.offset, f.size) for f in layout.fields] == [
        (8, 1), (16, 4), (24, 4), (32, 8), (40, 8), (48, 8), (56, 8)]
    assert layout.fixed_size == 64
    assert layout.variable is True


def test_fixed_size_rounds_the_last_field_up_to_8():
    assert generate_ntf(schema(("flag", BOOLEAN))).fixed_size == 16  # 8 + 1 -> 16
    assert generate_ntf(schema(("n", INT32))).fixed_size == 16  # 8 + 4 -> 16
    assert generate_ntf(schema(("a", INT32), ("b", BOOLEAN))).fixed_size == 24  # 16 + 1 -> 24


def test_sixty_five_fields_layout():
    layout = generate_ntf(wide(65))
    assert layout.null_bytes == 16
    assert layout.fields[0].offset == 16
    assert layout.fields[64].offset == 16 + 64 * 8
    assert layout.fields[64].null_bit == 64  # bit 0 of byte 8
    assert layout.fixed_size == 16 + 65 * 8


def test_strings_are_offset_and_length_pairs():
    layout = generate_ntf(schema(("a", STRING), ("b", STRING)))
    assert [(f.offset, f.size) for f in layout.fields] == [(8, 8), (16, 8)]
    assert layout.variable is True
    assert layout.fixed_size == 24
    assert generate_ntf(schema(("a", INT64))).variable is False


def test_the_contract_example_exactly():
    layout = generate_ntf(schema(("state", STRING), ("total_price", FLOAT64)))
    expected = json.loads("""
        {"version": 1, "null_bytes": 8, "fixed_size": 24, "variable": true,
         "fields": [{"name": "state", "type": "string", "offset": 8, "size": 8, "null_bit": 0},
                    {"name": "total_price", "type": "float64", "offset": 16, "size": 8, "null_bit": 1}]}
    """)
    assert layout.to_json() == expected


def test_from_json_round_trip():
    layout = generate_ntf(schema(("flag", BOOLEAN), ("m", decimal(18, 4)), ("s", STRING), ("d", DATE)))
    text = json.dumps(layout.to_json())
    again = NtfLayout.from_json(json.loads(text))
    assert again == layout
    assert again.to_json() == layout.to_json()
    assert again.field("m").type == decimal(18, 4)
    assert again.schema == schema(("flag", BOOLEAN), ("m", decimal(18, 4)), ("s", STRING), ("d", DATE))


def test_a_hand_written_layout_is_read_verbatim():
    """A switch may publish its own layout (contract §2): from_json keeps it as written."""
    obj = {"version": 1, "null_bytes": 8, "fixed_size": 16, "variable": False,
           "fields": [{"name": "k", "type": "int32", "offset": 8, "size": 4, "null_bit": 0},
                      {"name": "v", "type": "int32", "offset": 12, "size": 4, "null_bit": 1}]}
    layout = NtfLayout.from_json(obj)
    assert layout.to_json() == obj
    assert layout != generate_ntf(layout.schema)
