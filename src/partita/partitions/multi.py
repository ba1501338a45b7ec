"""Products of partition dimensions, e.g. (date, region)."""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterator, Mapping
from typing import Any, ClassVar

from partita.errors import DefinitionError
from partita.partitions.base import PartitionDef
from partita.partitions.static import StaticPartitionDef

__all__ = ["MultiPartitionDef", "MultiPartitionKey"]

_DIMENSION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SEPARATOR = "|"


class MultiPartitionKey(Mapping[str, Any]):
    """An immutable, ordered mapping from dimension name to that dimension's key."""

    __slots__ = ("_items", "_hash")

    def __init__(self, components: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        merged = dict(components or {}, **kwargs)
        self._items: tuple[tuple[str, Any], ...] = tuple(merged.items())
        self._hash: int | None = None

    def __getitem__(self, dimension: str) -> Any:
        for name, value in self._items:
            if name == dimension:
                return value
        raise KeyError(dimension)

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MultiPartitionKey):
            return self._items == other._items
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._items)
        return self._hash

    def __repr__(self) -> str:
        inner = ", ".join(f"{name!r}: {value!r}" for name, value in self._items)
        return f"MultiPartitionKey({{{inner}}})"


class MultiPartitionDef(PartitionDef):
    """The product of two or more named dimensions.

    Canonical text joins each dimension's canonical text with ``|`` in
    dimension order; the in-memory key is a `MultiPartitionKey`.
    """

    kind: ClassVar[str] = "multi"
    allowed_in_product: ClassVar[bool] = False

    def __init__(self, dimensions: Mapping[str, PartitionDef]) -> None:
        if not isinstance(dimensions, Mapping) or len(dimensions) < 2:
            raise DefinitionError("MultiPartitionDef needs a mapping of at least two named dimensions")
        for name, definition in dimensions.items():
            if not isinstance(name, str) or _DIMENSION.fullmatch(name) is None:
                raise DefinitionError("MultiPartitionDef dimension names must be identifiers")
            if not isinstance(definition, PartitionDef):
                raise DefinitionError(f"MultiPartitionDef dimension {name!r} must be a PartitionDef")
            if not definition.allowed_in_product:
                raise DefinitionError(
                    f"MultiPartitionDef dimension {name!r}: a {definition.kind} definition cannot be a dimension of a product"
                )
            if isinstance(definition, StaticPartitionDef) and any(_SEPARATOR in key for key in definition.keys):
                raise DefinitionError(
                    f"MultiPartitionDef dimension {name!r}: static keys cannot contain '|' inside a product"
                )
        self._dimensions: tuple[tuple[str, PartitionDef], ...] = tuple(dimensions.items())

    @property
    def dimensions(self) -> Mapping[str, PartitionDef]:
        return dict(self._dimensions)

    @property
    def storable_key_text(self) -> bool:  # type: ignore[override]
        """Storable when every dimension's text is (the separator is ``|``)."""
        return all(definition.storable_key_text for _, definition in self._dimensions)

    @property
    def domain(self) -> str:
        inner = ",".join(f"{name}={definition.domain}" for name, definition in self._dimensions)
        return f"multi({inner})"

    @property
    def key_format(self) -> str:  # type: ignore[override]
        return _SEPARATOR.join(f"<{name}: {definition.key_format}>" for name, definition in self._dimensions)

    def normalize_key(self, key: Any) -> MultiPartitionKey:
        if isinstance(key, str):
            return self._parse_text(key)
        if not isinstance(key, Mapping):
            raise ValueError("multi partition keys must be MultiPartitionKey values, mappings of dimension to key, or a|b text")
        expected = [name for name, _ in self._dimensions]
        if set(key) != set(expected) or len(key) != len(expected):
            raise ValueError(f"multi partition keys must name exactly the dimensions {', '.join(expected)}")
        components = {}
        for name, definition in self._dimensions:
            try:
                components[name] = definition.normalize_key(key[name])
            except ValueError as exc:
                raise ValueError(f"dimension {name!r}: {exc}") from None
        return MultiPartitionKey(components)

    def _parse_text(self, text: str) -> MultiPartitionKey:
        parts = text.split(_SEPARATOR)
        if len(parts) != len(self._dimensions):
            raise ValueError(f"multi partition key text must have {len(self._dimensions)} parts separated by '|'")
        components = {}
        for (name, definition), part in zip(self._dimensions, parts, strict=True):
            try:
                components[name] = definition.parse_key(part)
            except ValueError as exc:
                raise ValueError(f"dimension {name!r}: {exc}") from None
        return MultiPartitionKey(components)

    def format_key(self, key: MultiPartitionKey) -> str:
        parts = []
        for name, definition in self._dimensions:
            text = definition.format_key(key[name])
            if _SEPARATOR in text:
                raise ValueError(f"dimension {name!r}: canonical key text cannot contain '|' inside a product")
            parts.append(text)
        return _SEPARATOR.join(parts)

    def key_identity(self, key: MultiPartitionKey) -> Hashable:
        return tuple(definition.key_identity(key[name]) for name, definition in self._dimensions)

    def key_contract(self) -> object:
        return (self._key_methods(), tuple((name, definition.key_contract()) for name, definition in self._dimensions))

    def describe(self) -> dict[str, Any]:
        description = super().describe()
        description["dimensions"] = {name: definition.describe() for name, definition in self._dimensions}
        return description

    def __repr__(self) -> str:
        inner = ", ".join(f"{name!r}: {definition!r}" for name, definition in self._dimensions)
        return f"MultiPartitionDef({{{inner}}})"
