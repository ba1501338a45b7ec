"""`PartitionedOutputs`: what an unpartitioned consumer receives from a partitioned upstream."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import Any

from partita.partitions.base import PartitionDef

__all__ = ["PartitionedOutputs"]


class PartitionedOutputs(Mapping[Any, Any]):
    """A read-only mapping of selected key to that key's output, in selection order.

    Lookups use the partition definition's key identity, not ``==``: keys
    that Python considers equal but that are distinct partitions (``0`` and
    ``False`` of a custom definition, the two occurrences of a repeated
    daylight-saving hour) keep their own outputs.
    """

    __slots__ = ("_definition", "_keys", "_outputs", "_index")

    def __init__(self, definition: PartitionDef, keys: tuple[Any, ...], outputs: list[Any]) -> None:
        self._definition = definition
        self._keys = keys
        self._outputs = tuple(outputs)
        self._index: dict[Hashable, int] | None = None

    def _position(self, key: Any) -> int:
        if self._index is None:
            identity = self._definition.key_identity
            self._index = {identity(k): position for position, k in enumerate(self._keys)}
        try:
            return self._index[self._definition.key_identity(key)]
        except (ValueError, TypeError):
            raise KeyError(key) from None

    def __getitem__(self, key: Any) -> Any:
        try:
            return self._outputs[self._position(key)]
        except KeyError:
            raise KeyError(key) from None

    def __contains__(self, key: object) -> bool:
        try:
            self._position(key)
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[Any]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def items(self) -> Any:  # type: ignore[override]
        """Pairs in selection order, without identity lookups."""
        return zip(self._keys, self._outputs, strict=True)

    def values(self) -> Any:  # type: ignore[override]
        return iter(self._outputs)

    def __repr__(self) -> str:
        return f"PartitionedOutputs(<{len(self._keys)} keys>)"
