"""JsonCodec: strict JSON in, the same value out (seed 003, storage boundary).

The codec accepts strict JSON values and rejects tuples, non-string mapping
keys, arbitrary objects, cycles and non-finite numbers instead of coercing
them, so what loads is exactly what was committed.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partita import Codec, JsonCodec


def _same(left: Any, right: Any) -> bool:
    """Equal values of exactly the same types, recursively (1 != 1.0 != True here)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, float):
        return left == right and math.copysign(1.0, left) == math.copysign(1.0, right)
    return bool(left == right)


def _round_trip(value: Any) -> Any:
    codec = JsonCodec()
    payload = codec.encode(value)
    assert isinstance(payload, bytes)
    return codec.decode(payload)


def test_json_codec_is_a_codec_with_a_stable_name():
    codec = JsonCodec()
    assert isinstance(codec, Codec)
    assert isinstance(codec.name, str) and codec.name
    assert JsonCodec().name == codec.name


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**100,
        -(2**70),
        0.0,
        -0.0,
        1.5,
        1e308,
        5e-324,
        0.1,
        "",
        "plain",
        "ünïcødé €",
        "emoji \U0001f600",
        'quotes " and \\ backslash\n\t',
        "\x00control",
        [],
        {},
        [1, "two", 3.0, None, True],
        {"a": 1, "b": [1, 2, {"c": None}], "": "empty key"},
        {"nested": {"deeper": {"deepest": [[], {}, [[]]]}}},
        {"z": 1, "a": 2, "m": 3},
    ],
)
def test_strict_json_round_trips_exactly(value):
    assert _same(_round_trip(value), value)


def test_round_trip_keeps_int_and_float_apart():
    decoded = _round_trip([1, 1.0, True])
    assert [type(item) for item in decoded] == [int, float, bool]


def test_round_trip_keeps_mapping_order():
    decoded = _round_trip({"z": 1, "a": 2, "m": 3})
    assert list(decoded) == ["z", "a", "m"]


def test_repeated_non_cyclic_references_are_not_cycles():
    shared = [1, 2]
    value = {"a": shared, "b": shared, "c": [shared, shared]}
    assert _same(_round_trip(value), {"a": [1, 2], "b": [1, 2], "c": [[1, 2], [1, 2]]})


def test_encoding_is_deterministic():
    value = {"b": [1, 2.5, "x"], "a": None}
    assert JsonCodec().encode(value) == JsonCodec().encode(value)


# -- rejected values ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [(), (1, 2), [1, (2, 3)], {"a": (1,)}, {"a": [{"b": ()}]}],
    ids=["empty", "pair", "nested-in-list", "nested-in-dict", "deep"],
)
def test_tuples_are_rejected(value):
    with pytest.raises(ValueError, match="tuple"):
        JsonCodec().encode(value)


@pytest.mark.parametrize(
    "value",
    [{1: "a"}, {None: 1}, {True: 1}, {1.5: 1}, {("a",): 1}, {"ok": {2: "nested"}}, [{"ok": 1}, {3: 4}]],
    ids=["int", "none", "bool", "float", "tuple", "nested", "in-list"],
)
def test_non_string_keys_are_rejected(value):
    with pytest.raises(ValueError, match="key"):
        JsonCodec().encode(value)


class Plain:
    pass


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        frozenset(),
        dt.datetime(2026, 8, 11, 12, 0),
        dt.date(2026, 8, 11),
        object(),
        Plain(),
        b"bytes",
        bytearray(b"x"),
        decimal.Decimal("1.5"),
        complex(1, 2),
        range(3),
        {"a": {1, 2}},
        [dt.datetime(2026, 8, 11)],
        [[object()]],
    ],
    ids=[
        "set",
        "frozenset",
        "datetime",
        "date",
        "object",
        "instance",
        "bytes",
        "bytearray",
        "decimal",
        "complex",
        "range",
        "nested-set",
        "nested-datetime",
        "deep-object",
    ],
)
def test_arbitrary_objects_are_rejected(value):
    with pytest.raises(ValueError, match="not a JSON value"):
        JsonCodec().encode(value)


class Color(enum.IntEnum):
    RED = 1


class Mood(enum.StrEnum):
    HAPPY = "happy"


@pytest.mark.parametrize("value", [Color.RED, [Mood.HAPPY]], ids=["int-enum", "str-enum"])
def test_enum_members_are_arbitrary_objects_not_silently_coerced(value):
    codec = JsonCodec()
    try:
        payload = codec.encode(value)
    except ValueError:
        return  # rejected: fine
    assert _same(codec.decode(payload), value)  # or round-trips exactly


def test_a_list_cycle_is_rejected():
    value: list[Any] = [1]
    value.append(value)
    with pytest.raises(ValueError, match="cycle"):
        JsonCodec().encode(value)


def test_a_dict_cycle_is_rejected():
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    with pytest.raises(ValueError, match="cycle"):
        JsonCodec().encode(value)


def test_an_indirect_cycle_through_list_and_dict_is_rejected():
    outer: dict[str, Any] = {"items": []}
    outer["items"].append({"parent": outer})
    with pytest.raises(ValueError, match="cycle"):
        JsonCodec().encode(outer)


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    "wrap",
    [lambda x: x, lambda x: [x], lambda x: {"a": x}, lambda x: {"a": [1, {"b": [x]}]}],
    ids=["top", "list", "dict", "deep"],
)
def test_non_finite_numbers_are_rejected_also_nested(number, wrap):
    with pytest.raises(ValueError, match="finite"):
        JsonCodec().encode(wrap(number))


@pytest.mark.parametrize(
    "payload",
    [b"NaN", b"Infinity", b"-Infinity", b"[1, NaN]", b'{"a": Infinity}', b'{"a": [-Infinity]}'],
)
def test_decode_rejects_non_finite_constants(payload):
    with pytest.raises(ValueError):
        JsonCodec().decode(payload)


@pytest.mark.parametrize("payload", [b"1e400", b"[-1e400]", b'{"a": 1e999}'])
def test_decode_rejects_literals_that_overflow_to_non_finite_numbers(payload):
    with pytest.raises(ValueError):
        JsonCodec().decode(payload)


@pytest.mark.parametrize("payload", [b"", b"{", b"[1,]", b"\xff\xfe", b"{'a': 1}"])
def test_decode_rejects_malformed_payloads(payload):
    with pytest.raises(ValueError):
        JsonCodec().decode(payload)


def test_error_messages_name_the_path_of_the_rejected_value():
    with pytest.raises(ValueError, match=r"output\['rows'\]\[1\]"):
        JsonCodec().encode({"rows": [1, (2,)]})


# -- property: any strict JSON value round-trips exactly -------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_any_json_value_round_trips_exactly(value):
    assert _same(_round_trip(value), value)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_encoded_payload_is_strict_json(value):
    payload = JsonCodec().encode(value)
    decoded = json.loads(payload.decode("utf-8"), parse_constant=lambda name: pytest.fail(f"{name} emitted"))
    assert _same(decoded, value)
