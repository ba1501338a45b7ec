"""What an event's ``extra`` may be: strict JSON, bounded in size and depth, storable text (SPEC §8).

Shared by emissions and discovered keys, which word their rejections
themselves. Every check is iterative or bounded, so a deeply nested value is
rejected instead of exhausting the interpreter's recursion limit.

`encode_extra` serves emission, where ``extra`` is checked, measured, stored
and hashed on every call: one walk and one encoding cover all four for the
usual value, and anything unusual takes the full checks, which word the
rejection.
"""

from __future__ import annotations

import json
import math
import re
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any, NamedTuple

from partita.materialization.codecs import JsonCodec
from partita.partitions.base import storable_text_problem

__all__ = ["MAX_EXTRA_BYTES", "MAX_EXTRA_DEPTH", "EncodedExtra", "encode_extra", "encoded_extra_size", "json_text_depth"]

#: Largest accepted ``extra`` (its compact JSON encoding, in bytes).
MAX_EXTRA_BYTES = 64 * 1024
#: Deepest accepted nesting of objects and arrays in ``extra`` (the object itself is level 1).
MAX_EXTRA_DEPTH = 32
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")
_STRICT_JSON = JsonCodec()


def _encoder(sort_keys: bool) -> Any:
    """Compact ASCII JSON text of a checked value (``allow_nan=False``), ``sort_keys`` as asked.

    The C encoder is built once, without cycle markers: the value was
    checked first, and a cycle is deeper than `MAX_EXTRA_DEPTH`. Building it
    per call, as ``json.dumps`` does, would cost as much as the encoding.
    """
    if c_make_encoder is None:  # pragma: no cover - interpreters without the _json accelerator
        return json.JSONEncoder(allow_nan=False, separators=(",", ":"), sort_keys=sort_keys).encode
    encode = c_make_encoder(None, _unencodable, encode_basestring_ascii, None, ":", ",", sort_keys, False, False)
    return lambda value: "".join(encode(value, 0))


def _unencodable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


#: The stored text: compact, ASCII (escapes for the rest), keys in the caller's order.
_STORED = _encoder(sort_keys=False)
#: What the payload hash covers: the stored form with every object's keys sorted.
_CANONICAL = _encoder(sort_keys=True)
_PLAIN_SCALARS = frozenset({str, int, bool, type(None)})


def json_text_depth(text: str) -> int:
    """How deep the arrays and objects of JSON ``text`` nest, counted without parsing it.

    Lets the CLI refuse a deeply nested ``--extra`` before ``json.loads``
    recurses into it.
    """
    depth = deepest = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _render_path(path: tuple[Any, ...]) -> str:
    return "extra" + "".join(f"[{part!r}]" for part in path)


def _check_extra_tree(extra: Any) -> None:
    """ValueError unless ``extra`` nests at most `MAX_EXTRA_DEPTH` levels and every string can be stored.

    Iterative, so a deeply nested or cyclic value is rejected instead of
    exhausting the interpreter's recursion limit. Paths are built only for
    the message.
    """
    stack: list[Any] = [(extra, 1, ())]
    active: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, int):  # leaving a container
            active.discard(item)
            continue
        value, depth, path = item
        kind = type(value)
        if kind is str:
            problem = storable_text_problem(value)
            if problem is not None:
                raise ValueError(f"{_render_path(path)} {problem}")
            continue
        if kind is not list and kind is not dict:
            continue  # scalars are judged by the strict JSON check
        if id(value) in active:
            raise ValueError(f"{_render_path(path)} contains a reference cycle")
        if depth > MAX_EXTRA_DEPTH:
            raise ValueError(f"extra nests deeper than {MAX_EXTRA_DEPTH} levels of objects and arrays")
        active.add(id(value))
        stack.append(id(value))
        if kind is list:
            stack.extend((child, depth + 1, (*path, index)) for index, child in enumerate(value))
            continue
        for key, child in value.items():
            if type(key) is str:
                problem = storable_text_problem(key)
                if problem is not None:
                    raise ValueError(f"a key of {_render_path(path)} {problem}")
            stack.append((child, depth + 1, (*path, key)))


def encoded_extra_size(extra: dict[str, Any]) -> int:
    """Bytes of ``extra``'s compact JSON; ValueError naming the offending part unless it is strict JSON.

    Strict JSON here also means at most `MAX_EXTRA_DEPTH` levels deep and no
    text a store cannot keep (NUL, lone surrogates). Shared by emissions and
    discovered keys, which word their rejections themselves.
    """
    _check_extra_tree(extra)
    _STRICT_JSON.check(extra, "extra")
    return len(_STRICT_JSON.encode(extra))


class EncodedExtra(NamedTuple):
    """An accepted ``extra`` in the forms emission needs."""

    #: Compact ASCII JSON, keys in the caller's order: the stored column.
    text: str
    #: Bytes of the compact UTF-8 encoding: what `MAX_EXTRA_BYTES` limits.
    size: int
    #: ``text`` with every object's keys sorted: what the payload hash covers.
    canonical: str


EMPTY_EXTRA = EncodedExtra("{}", 2, "{}")


def _plain(extra: dict[str, Any]) -> bool | None:
    """Whether every object of plainly strict JSON ``extra`` has its keys in order; None: not plainly so.

    Plain: exact JSON types, finite numbers, at most `MAX_EXTRA_DEPTH`
    levels (a reference cycle exceeds them). Strings are judged later on the
    encoded text. None sends the value to the full checks, which say why.
    """
    in_order = True
    stack: list[tuple[Any, int]] = [(extra, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_EXTRA_DEPTH:
            return None
        if type(value) is dict:
            children: Any = value.values()
            previous = None
            for key in value:
                if type(key) is not str:
                    return None
                if previous is not None and key < previous:
                    in_order = False
                previous = key
        else:
            children = value
        for child in children:
            kind = type(child)
            if kind in _PLAIN_SCALARS:
                continue
            if kind is float:
                if not math.isfinite(child):
                    return None
            elif kind is dict or kind is list:
                stack.append((child, depth + 1))
            else:
                return None
    return in_order


def encode_extra(extra: dict[str, Any]) -> EncodedExtra:
    """``extra`` encoded once for its size, its row and its hash; ValueError as `encoded_extra_size` raises it.

    Text without ``\\u`` escapes holds no NUL, no lone surrogate and no
    character beyond ASCII, so it is also the UTF-8 encoding the size limit
    counts. Anything else, or a value that is not plainly strict JSON, goes
    through the full checks first.
    """
    in_order = _plain(extra)
    if in_order is not None:
        text = _STORED(extra)
        if "\\u" not in text:
            return EncodedExtra(text, len(text), text if in_order else _CANONICAL(extra))
    size = encoded_extra_size(extra)
    return EncodedExtra(_STORED(extra), size, _CANONICAL(extra))
