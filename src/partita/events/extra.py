"""What an event's ``extra`` may be: strict JSON, bounded in size and depth, storable text (SPEC §8).

Shared by emissions and discovered keys, which word their rejections
themselves. Every check is iterative or bounded, so a deeply nested value is
rejected instead of exhausting the interpreter's recursion limit.
"""

from __future__ import annotations

import re
from typing import Any

from partita.materialization.codecs import JsonCodec
from partita.partitions.base import storable_text_problem

__all__ = ["MAX_EXTRA_BYTES", "MAX_EXTRA_DEPTH", "encoded_extra_size", "json_text_depth"]

#: Largest accepted ``extra`` (its compact JSON encoding, in bytes).
MAX_EXTRA_BYTES = 64 * 1024
#: Deepest accepted nesting of objects and arrays in ``extra`` (the object itself is level 1).
MAX_EXTRA_DEPTH = 32
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")
_STRICT_JSON = JsonCodec()


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
