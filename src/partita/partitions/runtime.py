"""Partitions discovered at run time (SPEC §9, seed 000).

A `PartitionAtRuntime` domain has no catalog at authoring time: its keys are
declared by a discovering producer while the run executes (regions onboard,
tenants retire). Keys are non-empty strings without control characters, at
most `MAX_RUNTIME_KEY_LENGTH` characters; ``allowed`` (a collection or a
predicate) and ``max_keys`` bound what a producer may declare.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from partita.errors import DefinitionError
from partita.partitions.base import PartitionDef, check_key_text

__all__ = ["MAX_RUNTIME_KEY_LENGTH", "PartitionAtRuntime", "PartitionKey"]

MAX_RUNTIME_KEY_LENGTH = 255
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class PartitionKey:
    """A discovered key with the metadata its discovery event carries (``extra``)."""

    key: str
    extra: Mapping[str, Any] | None = field(default=None, compare=False)


class PartitionAtRuntime(PartitionDef):
    """Keys known only when the discovering producer looks; domain ``runtime:<name>``.

    ``allowed`` restricts keys (a collection of strings, or a predicate taking
    the key); ``max_keys`` bounds the fan-out of one discovery.
    """

    kind: ClassVar[str] = "runtime"
    key_format: ClassVar[str] = f"a non-empty string of at most {MAX_RUNTIME_KEY_LENGTH} characters"
    allowed_in_product: ClassVar[bool] = False
    storable_key_text: ClassVar[bool] = True  # normalize_key checks the text

    def __init__(
        self,
        name: str,
        allowed: Collection[str] | Callable[[str], bool] | None = None,
        max_keys: int | None = None,
    ) -> None:
        if not isinstance(name, str) or _NAME.fullmatch(name) is None:
            raise DefinitionError(
                "PartitionAtRuntime name must be a non-empty identifier of letters, digits, '_', '.' or '-'"
            )
        if allowed is not None and not callable(allowed):
            if isinstance(allowed, (str, bytes)) or not isinstance(allowed, Collection):
                raise DefinitionError("PartitionAtRuntime allowed must be a collection of keys or a predicate")
            if any(not isinstance(key, str) for key in allowed):
                raise DefinitionError("PartitionAtRuntime allowed keys must be strings")
            allowed = frozenset(allowed)
        if max_keys is not None and (isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1):
            raise DefinitionError("PartitionAtRuntime max_keys must be a positive integer")
        self._name = name
        self._allowed = allowed
        self._max_keys = max_keys

    @property
    def name(self) -> str:
        return self._name

    @property
    def max_keys(self) -> int | None:
        return self._max_keys

    @property
    def domain(self) -> str:
        return f"runtime:{self._name}"

    def normalize_key(self, key: Any) -> str:
        if isinstance(key, PartitionKey):
            key = key.key
        if not isinstance(key, str):
            raise ValueError("runtime partition keys must be strings")
        if not key:
            raise ValueError("runtime partition keys must not be empty")
        if len(key) > MAX_RUNTIME_KEY_LENGTH:
            raise ValueError(f"runtime partition keys are at most {MAX_RUNTIME_KEY_LENGTH} characters")
        if _CONTROL.search(key):
            raise ValueError("runtime partition keys must not contain control characters")
        check_key_text(key)
        self.check_allowed(key)
        return key

    def check_allowed(self, key: str) -> None:
        allowed = self._allowed
        if allowed is None:
            return
        if callable(allowed):
            try:
                accepted = allowed(key)
            except Exception as exc:  # noqa: BLE001 - reported as a rejection naming the rule
                raise ValueError(f"the allowed predicate of {self.domain} raised {type(exc).__name__}") from None
            if accepted is not True and accepted is not False:
                accepted = bool(accepted)
            if not accepted:
                raise ValueError(f"partition key is not allowed by {self.domain}")
        elif key not in allowed:
            raise ValueError(f"partition key is not one of the keys allowed by {self.domain}")

    def format_key(self, key: str) -> str:
        return key

    def key_identity(self, key: str) -> str:
        return key

    def key_contract(self) -> object:
        # allowed and max_keys only accept or reject keys.
        return (self._key_methods(), self.domain)

    def describe(self) -> dict[str, Any]:
        description = super().describe()
        description["max_keys"] = self._max_keys
        description["allowed"] = None if self._allowed is None else ("predicate" if callable(self._allowed) else "keys")
        return description

    def __repr__(self) -> str:
        return f"PartitionAtRuntime(name={self._name!r}, max_keys={self._max_keys!r})"
