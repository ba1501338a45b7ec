"""Codecs turn outputs into bytes and back. `JsonCodec` accepts strict JSON only."""

from __future__ import annotations

import json
import math
from typing import Any, Protocol, runtime_checkable

__all__ = ["Codec", "JsonCodec"]


@runtime_checkable
class Codec(Protocol):
    #: Stored in manifests; a reader refuses payloads written by another codec.
    name: str

    def encode(self, value: Any) -> bytes: ...

    def decode(self, payload: bytes) -> Any: ...


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("JSON payload contains a number too large for a float")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"JSON payload contains the non-finite number {name}")


class JsonCodec:
    """Strict JSON: None, bool, int, finite float, str, list, and dicts with str keys.

    Tuples, non-string keys, arbitrary objects, cycles, NaN and infinities are
    rejected instead of being coerced, so what loads is what was committed.
    """

    name = "json/1"

    def check(self, value: Any, name: str = "output") -> None:
        """Raise ValueError naming the offending part (under ``name``) unless ``value`` is strict JSON."""
        self._check(value, name, set())

    def encode(self, value: Any) -> bytes:
        self._check(value, "output", set())
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")

    def decode(self, payload: bytes) -> Any:
        return json.loads(payload.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite_float)

    def _check(self, value: Any, path: str, active: set[int]) -> None:
        # Exact types: subclasses (enums, custom str/int types) would come back
        # as their base type, silently changing what was committed.
        kind = type(value)
        if value is None or kind in (bool, str, int):
            return
        if kind is float:
            if not math.isfinite(value):
                raise ValueError(f"JsonCodec: {path} is not a finite number")
            return
        if kind in (list, dict):
            if id(value) in active:
                raise ValueError(f"JsonCodec: {path} contains a reference cycle")
            active.add(id(value))
            if kind is list:
                for index, item in enumerate(value):
                    self._check(item, f"{path}[{index}]", active)
            else:
                for key, item in value.items():
                    if type(key) is not str:
                        raise ValueError(
                            f"JsonCodec: {path} has a key of type {type(key).__name__}; JSON object keys are strings"
                        )
                    self._check(item, f"{path}[{key!r}]", active)
            active.discard(id(value))
            return
        if kind is tuple:
            raise ValueError(f"JsonCodec: {path} is a tuple; use a list (JSON has no tuples)")
        raise ValueError(f"JsonCodec: {path} is a {type(value).__name__}, which is not a JSON value")

    def __repr__(self) -> str:
        return "JsonCodec()"
