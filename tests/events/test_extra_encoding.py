"""Emission encodes ``extra`` once and builds its hashes from prepared parts: the results must not change.

Stored payload hashes and default identities are compared with new ones
whenever an emission repeats, so `encode_extra`, `payload_digest` and
`DefaultIdentities` must give exactly what the straightforward computations
(`encoded_extra_size`, `payload_hash`, the SHA-256 of the JSON field list)
give, and reject exactly what they reject, with the same message.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partita.events.extra import MAX_EXTRA_DEPTH, encode_extra, encoded_extra_size
from partita.events.identity import DefaultIdentities, payload_digest, payload_hash

#: Every code point, lone surrogates and NUL included.
ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=8)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | ANY_TEXT
JSON_VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4), max_leaves=24
)
EXTRAS = st.dictionaries(ANY_TEXT, JSON_VALUES, max_size=6)


def _size_or_error(extra: Any) -> int | str:
    try:
        return encoded_extra_size(extra)
    except ValueError as exc:
        return f"rejected: {exc}"


def _encoded_or_error(extra: Any) -> Any:
    try:
        return encode_extra(extra)
    except ValueError as exc:
        return f"rejected: {exc}"


@settings(max_examples=1500, deadline=None)
@given(
    asset=st.text(min_size=1, max_size=12),
    key=st.none() | st.text(max_size=12),
    date=st.none() | st.datetimes(timezones=st.timezones()),
    extra=EXTRAS,
)
def test_one_encoding_gives_the_size_the_stored_text_and_the_payload_hash_of_three(asset, key, date, extra):
    expected = _size_or_error(extra)
    encoded = _encoded_or_error(extra)
    if isinstance(expected, str):
        assert encoded == expected
        return
    assert encoded.size == expected
    assert encoded.text == json.dumps(extra, separators=(",", ":"))  # what rows stored before
    assert payload_digest(asset, key, date, encoded.canonical) == payload_hash(asset, key, date, extra)


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def _cycle() -> dict[str, Any]:
    value: dict[str, Any] = {"list": []}
    value["list"].append(value)
    return value


class _Text(str):
    pass


@pytest.mark.parametrize(
    "extra",
    [
        {"note": "a\x00b"},
        {"a\x00": 1},
        {"note": "\ud800"},
        {"\udfff": 1},
        {"ratio": float("nan")},
        {"ratio": float("inf")},
        {"pair": (1, 2)},
        {1: "one"},
        {"when": dt.date(2026, 8, 8)},
        {"subclass": _Text("x")},
        {"set": {1}},
        _nested(MAX_EXTRA_DEPTH + 1),
        {"deep": [_nested(MAX_EXTRA_DEPTH)]},
        _cycle(),
    ],
    ids=lambda extra: None,
)
def test_what_the_full_checks_reject_is_rejected_with_their_message(extra):
    expected = _size_or_error(extra)
    assert isinstance(expected, str)
    assert _encoded_or_error(extra) == expected


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"b": 1, "a": {"d": [1, {"z": None, "y": True}], "c": "x"}},
        {"text": "caf\u00e9 \u2603 \U0001f600"},
        {"control": "tab\there, del\x7f, bell\x07"},
        {"escaped": "a literal \\u0000 is not a NUL"},
        _nested(MAX_EXTRA_DEPTH),
        {"big": 10**30, "small": -1.5e-300},
    ],
    ids=lambda extra: None,
)
def test_accepted_extras_keep_their_size_text_and_hash(extra):
    encoded = encode_extra(extra)
    assert encoded.size == encoded_extra_size(extra)
    assert encoded.text == json.dumps(extra, separators=(",", ":"))
    assert payload_digest("a", "k", None, encoded.canonical) == payload_hash("a", "k", None, extra)


@given(
    fields=st.tuples(
        st.sampled_from(["attempt", "flow"]),
        st.text(max_size=10),
        st.none() | st.text(max_size=10),
        st.none() | st.text(max_size=10),
        st.none() | st.text(max_size=10),
        st.none() | st.integers(min_value=1, max_value=10**6),
    ),
    number=st.integers(min_value=0, max_value=10**9),
)
def test_a_default_identity_is_the_hash_of_the_producers_fields_and_its_number(fields, number):
    expected = "auto:" + hashlib.sha256(json.dumps([*fields, number]).encode("utf-8")).hexdigest()
    assert DefaultIdentities(list(fields)).identity(number) == expected
