"""The partition definition contract every definition fulfils (SPEC §3).

A definition owns how input becomes a canonical key: `normalize_key` turns a
Python value into the in-memory key, `format_key`/`parse_key` translate between
that key and its canonical text. Rejections raise `ValueError` with a message
that describes the rule and never repeats the rejected input, because keys can
be private (tenants, customers).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, ClassVar

__all__ = ["PartitionDef"]

#: The methods that decide what a key becomes; a subclass overriding one keys differently.
_KEY_METHODS = ("normalize_key", "parse_key", "format_key", "key_identity", "range")


class PartitionDef:
    """Base class for partition definitions.

    A custom subclass keeps identity normalization: every value is a present
    key, including ``0``, ``""`` and ``False``. Override ``domain`` (a stable
    name shared by definitions whose keys mean the same thing) and the key
    methods when stricter validation is needed.
    """

    kind: ClassVar[str] = "custom"
    key_format: ClassVar[str] = "any value accepted by the definition"
    supports_range: ClassVar[bool] = False
    #: Whether the definition may be a dimension of a MultiPartitionDef.
    allowed_in_product: ClassVar[bool] = True

    @property
    def domain(self) -> str:
        """Stable name of the key space; assets in one closure share it."""
        cls = type(self)
        return f"custom:{cls.__module__}.{cls.__qualname__}"

    def normalize_key(self, key: Any) -> Any:
        """Return the canonical in-memory key or raise ``ValueError``."""
        return key

    def format_key(self, key: Any) -> str:
        """Return the canonical text of a normalized key."""
        return str(key)

    def parse_key(self, text: str) -> Any:
        """Turn canonical text (CLI, events, storage) into a normalized key."""
        if not isinstance(text, str):
            raise ValueError("partition key text must be a string")
        return self.normalize_key(text)

    def range(self, start: Any, end: Any) -> tuple[Any, ...]:
        """Return the inclusive, normalized keys from start to end."""
        raise ValueError(
            f"{self.kind} partition definitions do not support ranges; "
            "select keys explicitly"
        )

    def key_identity(self, key: Any) -> Hashable:
        """Identity used to select duplicate keys once.

        Keys are duplicates when they are equal and of the same type, so ``0``
        and ``False`` stay two keys.
        """
        try:
            hash(key)
        except TypeError:
            raise ValueError(
                "partition keys must be hashable; normalize_key returned an "
                "unhashable value"
            ) from None
        return (type(key), key)

    def key_contract(self) -> object:
        """What decides how this definition turns input into keys, compared with ``==``.

        Assets of one domain in one closure receive each other's keys, so their
        definitions must normalize, parse and format keys alike: planning
        fails when their contracts differ. The default is the classes'
        key methods plus every instance attribute, so another class, or the
        same class configured otherwise, is another contract. Override it to
        leave out settings that only accept or reject keys (the built-ins
        leave out ``start``/``end``, static key sets and ``allowed``), or
        caches a definition fills while it normalizes keys.
        """
        return (self._key_methods(), self.domain, dict(getattr(self, "__dict__", {})))

    def _key_methods(self) -> tuple[Any, ...]:
        cls = type(self)
        return tuple(getattr(cls, name) for name in _KEY_METHODS)

    def describe(self) -> dict[str, Any]:
        """JSON-safe description: kind, domain, key form, range support."""
        return {
            "kind": self.kind,
            "domain": self.domain,
            "key_format": self.key_format,
            "supports_range": self.supports_range,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(domain={self.domain!r})"
