"""The partition definition contract every definition fulfils (SPEC §3).

A definition owns how input becomes a canonical key: `normalize_key` turns a
Python value into the in-memory key, `format_key`/`parse_key` translate between
that key and its canonical text. Rejections raise `ValueError` with a message
that describes the rule and never repeats the rejected input, because keys can
be private (tenants, customers).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from typing import Any, ClassVar

__all__ = ["PartitionDef", "apply_key_rule", "check_key_text", "storable_text_problem"]

# Lone surrogates come from undecodable command-line bytes (surrogateescape):
# they cannot be encoded as UTF-8, so no store can keep them.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

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
    #: Whether every canonical text it formats is storable (no NUL, valid UTF-8) by construction.
    #: Selection checks the text of definitions that do not promise it (custom ones).
    storable_key_text: ClassVar[bool] = False

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


def storable_text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as text on every backend, or None when it can.

    PostgreSQL text cannot hold NUL, and a lone surrogate is not UTF-8; both
    are rejected on every backend so that SQLite and PostgreSQL accept the
    same input. The reason never repeats the text.
    """
    if "\x00" in text:
        return "contains a NUL character"
    if not text.isascii() and _LONE_SURROGATE.search(text):  # ASCII holds no surrogate: the usual key skips the scan
        return "is not valid Unicode text (it contains a lone surrogate, as undecodable command-line bytes produce)"
    return None


def check_key_text(text: str) -> str:
    """``text`` (a key's canonical text) unchanged, or ValueError saying why no store can keep it.

    Only text is judged: a ``format_key`` that returns something else breaks
    its contract, and the attempt that needs the text reports that.
    """
    problem = storable_text_problem(text) if isinstance(text, str) else None
    if problem is not None:
        raise ValueError(f"partition key text {problem}")
    return text


def _withheld(message: str, value: Any) -> str:
    """``message`` without the rejected input, for definitions that repeat it against the contract."""
    text = value if isinstance(value, str) else None
    for form in (repr(value), text if text is not None and len(text) >= 4 else None):
        if form:
            message = message.replace(form, "<rejected key>")
    return message


def apply_key_rule(definition: PartitionDef, method: Callable[[Any], Any], value: Any, name: str) -> Any:
    """``method(value)``, a key rule of ``definition`` (``normalize_key``, ``parse_key`` ...), held to the contract.

    A rejection must be a ``ValueError`` whose message does not repeat the
    input. Custom definitions are user code: any other exception becomes a
    ValueError naming the method and the exception type (its message may
    contain the key, so it is withheld), and a ValueError message that
    repeats the input has it removed.
    """
    try:
        return method(value)
    except ValueError as exc:
        if type(definition).__module__.startswith("partita."):
            raise
        raise ValueError(_withheld(str(exc), value)) from None
    except RecursionError:
        raise ValueError(f"{type(definition).__name__}.{name} exceeded the recursion limit") from None
    except Exception as exc:  # noqa: BLE001 - user code: reported as a rejection naming the rule
        raise ValueError(
            f"{type(definition).__name__}.{name} raised {type(exc).__name__} instead of rejecting the key "
            "with ValueError (its message is withheld: it may repeat the key)"
        ) from None
