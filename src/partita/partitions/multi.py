"""Products of partition dimensions, e.g. (date, region)."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Hashable, Iterator, Mapping
from typing import Any, ClassVar

from partita.errors import DefinitionError
from partita.partitions.base import PartitionDef
from partita.partitions.static import StaticPartitionDef

__all__ = ["MultiPartitionDef", "MultiPartitionKey"]

_DIMENSION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SEPARATOR = "|"


@functools.total_ordering
class MultiPartitionKey(Mapping[str, Any]):
    """An immutable, ordered mapping from dimension name to that dimension's key.

    Keys of one product compare dimension by dimension, in dimension order.
    """

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

    def __lt__(self, other: object) -> bool:
        if isinstance(other, MultiPartitionKey):
            return tuple(value for _, value in self._items) < tuple(value for _, value in other._items)
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
    def supports_range(self) -> bool:  # type: ignore[override]
        """Ranges walk the product's one time dimension (a dimension with ranges), the others fixed."""
        return sum(1 for _, definition in self._dimensions if definition.supports_range) == 1

    def range(self, start: Any, end: Any) -> tuple[MultiPartitionKey, ...]:
        """Every key from ``start`` to ``end`` along the one dimension whose value differs; the others stay fixed.

        ``2026-01-01|eu`` .. ``2026-01-31|eu`` is January of segment ``eu``.
        Ends that differ in any other dimension are refused: that would not
        be one range.
        """
        first, last = self.normalize_key(start), self.normalize_key(end)
        differing = [name for name, _ in self._dimensions if first[name] != last[name]]
        walked = next((name for name, definition in self._dimensions if definition.supports_range), None)
        if walked is None:
            raise ValueError("multi partition ranges walk a time dimension, and this product has none; select keys")
        if any(name != walked for name in differing):
            raise ValueError(
                f"a multi partition range walks its time dimension {walked!r}; every other dimension must have the "
                "same value at both ends"
            )
        values = self.dimensions[walked].range(first[walked], last[walked])
        return tuple(MultiPartitionKey({**dict(first.items()), walked: value}) for value in values)

    @property
    def bounded(self) -> bool:
        """Whether every dimension has a finite list of keys (static, or a time definition with a start and an end)."""
        return all(_listing(definition) is not None for _, definition in self._dimensions)

    def all_keys(self) -> tuple[MultiPartitionKey, ...]:
        """Every key of a bounded product, in a documented order.

        The product of the dimensions in declaration order, the first
        dimension slowest (``2026-01-01|eu``, ``2026-01-01|us``,
        ``2026-01-02|eu`` ...); each dimension in its own order: a static
        one as declared, a time one from its start to its end.
        """
        listings = []
        for name, definition in self._dimensions:
            listing = _listing(definition)
            if listing is None:
                raise ValueError(
                    f"dimension {name!r} has no finite list of keys (a time dimension needs a start and an end); "
                    "the product cannot list its keys"
                )
            listings.append(listing)
        names = [name for name, _ in self._dimensions]
        return tuple(MultiPartitionKey(dict(zip(names, combo, strict=True))) for combo in itertools.product(*listings))

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


def _listing(definition: PartitionDef) -> tuple[Any, ...] | None:
    """A dimension's keys in its own order, or None when it has no finite list."""
    if isinstance(definition, StaticPartitionDef):
        return definition.keys
    start, end = getattr(definition, "start", None), getattr(definition, "end", None)
    if definition.supports_range and start is not None and end is not None:
        return tuple(definition.range(start, end))
    return None
