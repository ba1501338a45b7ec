"""Asset registries: where `@asset` records definitions.

A module-level default registry serves CLI entry files; explicit
`AssetRegistry` objects keep tests and libraries isolated. Entry loading swaps
in a fresh default so loading a file twice never collides with itself.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from partita.definitions.definition import AssetDefinition
from partita.errors import DefinitionError

__all__ = ["AssetRegistry", "default_registry", "fresh_default_registry"]


class AssetRegistry:
    """Asset definitions by name, in registration order; names are unique."""

    def __init__(self) -> None:
        self._definitions: dict[str, AssetDefinition] = {}
        self._lock = threading.Lock()

    def register(self, definition: AssetDefinition) -> None:
        with self._lock:
            if definition.name in self._definitions:
                raise DefinitionError(
                    f"asset {definition.name!r} is already registered; asset names must be unique in a registry"
                )
            self._definitions[definition.name] = definition

    def __getitem__(self, name: str) -> AssetDefinition:
        return self._definitions[name]

    def get(self, name: str) -> AssetDefinition | None:
        return self._definitions.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._definitions

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._definitions))

    def __len__(self) -> int:
        return len(self._definitions)

    def definitions(self) -> tuple[AssetDefinition, ...]:
        return tuple(self._definitions.values())

    def terminal_assets(self) -> tuple[str, ...]:
        """Names of registered assets that no other registered asset depends on."""
        depended_on = {dep for definition in self._definitions.values() for dep in definition.deps}
        return tuple(name for name in self._definitions if name not in depended_on)

    def __repr__(self) -> str:
        return f"AssetRegistry(<{len(self._definitions)} assets>)"


_default = AssetRegistry()


def default_registry() -> AssetRegistry:
    """The registry that `@asset` without ``registry=`` writes to."""
    return _default



@contextlib.contextmanager
def fresh_default_registry() -> Iterator[AssetRegistry]:
    """Make a new, empty registry the default for the duration of the block."""
    global _default
    previous, _default = _default, AssetRegistry()
    try:
        yield _default
    finally:
        _default = previous
