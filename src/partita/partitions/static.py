"""A fixed, declared set of string keys (regions, products, sources)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar

from partita.errors import DefinitionError
from partita.partitions.base import PartitionDef, storable_text_problem

__all__ = ["StaticPartitionDef"]

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class StaticPartitionDef(PartitionDef):
    """Keys declared at authoring time; the domain is ``static:<name>``.

    Keys are non-empty strings without control characters, declared once
    each. Their canonical text is the key itself.
    """

    kind: ClassVar[str] = "static"
    key_format: ClassVar[str] = "one of the declared keys"
    storable_key_text: ClassVar[bool] = True  # declared keys are checked when the definition is built

    def __init__(self, name: str, keys: Iterable[str]) -> None:
        if not isinstance(name, str) or _NAME.fullmatch(name) is None:
            raise DefinitionError(
                "StaticPartitionDef name must be a non-empty identifier of letters, digits, '_', '.' or '-'"
            )
        if isinstance(keys, (str, bytes)):
            raise DefinitionError("StaticPartitionDef keys must be a collection of strings, not one string")
        try:
            candidates = list(keys)
        except TypeError:
            raise DefinitionError("StaticPartitionDef keys must be a collection of strings") from None
        declared: list[str] = []
        seen: set[str] = set()
        for index, key in enumerate(candidates):
            if not isinstance(key, str) or not key:
                raise DefinitionError(f"StaticPartitionDef keys[{index}] must be a non-empty string")
            if _CONTROL.search(key):
                raise DefinitionError(f"StaticPartitionDef keys[{index}] contains a control character")
            problem = storable_text_problem(key)
            if problem is not None:
                raise DefinitionError(f"StaticPartitionDef keys[{index}] {problem}")
            if key in seen:
                raise DefinitionError(f"StaticPartitionDef keys[{index}] repeats an earlier key")
            seen.add(key)
            declared.append(key)
        if not declared:
            raise DefinitionError("StaticPartitionDef keys must declare at least one key")
        self._name = name
        self._keys = tuple(declared)
        self._key_set = frozenset(declared)

    @property
    def name(self) -> str:
        return self._name

    @property
    def keys(self) -> tuple[str, ...]:
        return self._keys

    @property
    def domain(self) -> str:
        return f"static:{self._name}"

    def normalize_key(self, key: Any) -> str:
        if not isinstance(key, str):
            raise ValueError("static partition keys must be strings")
        if key not in self._key_set:
            raise ValueError(f"partition key is not one of the keys declared by {self.domain}")
        return key

    def format_key(self, key: str) -> str:
        return key

    def key_identity(self, key: str) -> str:
        return key

    def key_contract(self) -> object:
        # The declared keys only accept or reject; a key is itself in every key set.
        return (self._key_methods(), self.domain)

    def describe(self) -> dict[str, Any]:
        description = super().describe()
        description["key_count"] = len(self._keys)
        return description

    def __repr__(self) -> str:
        return f"StaticPartitionDef(name={self._name!r}, keys=<{len(self._keys)} keys>)"
