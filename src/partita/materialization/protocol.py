"""The materialization protocol: reuse committed partition outputs (SPEC §10, seed 003).

An adapter resolves a record for an exact identity, loads a committed output,
and commits a new one. Identities are explicit: asset name and version,
partition domain, the typed key and whether it is present, and the ordered
materialization ids of the asset's direct inputs, so a changed upstream
output never matches a downstream record from an earlier run. Adapter
methods may be sync (run in worker threads) or async (run on the loop).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from partita.errors import DefinitionError

__all__ = [
    "Materialization",
    "MaterializationCollection",
    "MaterializationContext",
    "MaterializationInvalidation",
    "MaterializationRecord",
    "check_version",
]

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}")


def check_version(version: Any, owner: str) -> str:
    """A version is explicit, non-empty text: bump it when the output's meaning changes."""
    if not isinstance(version, str) or not version.strip():
        raise DefinitionError(
            f"{owner}: version must be a non-empty string (bump it when the output's meaning changes)"
        )
    if version != version.strip():
        raise DefinitionError(f"{owner}: version must not start or end with whitespace")
    return version


def _check_identity(
    asset_name: Any,
    version: Any,
    partition_domain: Any,
    partition_key_text: Any,
    partition_key_present: Any,
    input_ids: Any,
) -> tuple[str, ...]:
    if not isinstance(asset_name, str) or not asset_name:
        raise ValueError("materialization identity: asset_name must be a non-empty string")
    check_version(version, "materialization identity")
    if not isinstance(partition_domain, str) or not partition_domain:
        raise ValueError("materialization identity: partition_domain must be a non-empty string")
    if not isinstance(partition_key_present, bool):
        raise ValueError("materialization identity: partition_key_present must be a bool")
    if partition_key_present and not isinstance(partition_key_text, str):
        raise ValueError("materialization identity: a present key needs its canonical text")
    if not partition_key_present and partition_key_text is not None:
        raise ValueError("materialization identity: an absent key has no text")
    if isinstance(input_ids, (str, bytes)) or not isinstance(input_ids, Sequence):
        raise ValueError("materialization identity: input_materialization_ids must be a sequence of ids")
    ids = tuple(input_ids)
    for index, value in enumerate(ids):
        if not isinstance(value, str) or _ID.fullmatch(value) is None:
            raise ValueError(
                f"materialization identity: input_materialization_ids[{index}] is not a materialization id"
            )
    return ids


@dataclass(frozen=True, slots=True)
class MaterializationContext:
    """The exact identity one attempt asks an adapter about.

    ``partition_key`` is the typed in-memory key; ``partition_key_text`` its
    canonical text (what adapters store); ``partition_key_type`` names its
    Python type so that equal text of different types stays apart.
    """

    asset_name: str
    version: str
    partition_domain: str
    partition_key: Any
    partition_key_text: str | None
    partition_key_present: bool
    input_materialization_ids: tuple[str, ...] = ()
    partition_key_type: str = field(default="")
    _identity_hash: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ids = _check_identity(
            self.asset_name,
            self.version,
            self.partition_domain,
            self.partition_key_text,
            self.partition_key_present,
            self.input_materialization_ids,
        )
        object.__setattr__(self, "input_materialization_ids", ids)
        if not self.partition_key_type:
            key_type = type(self.partition_key) if self.partition_key_present else type(None)
            object.__setattr__(self, "partition_key_type", f"{key_type.__module__}.{key_type.__qualname__}")

    @classmethod
    def for_asset(
        cls, asset: Any, partition_key: Any, *, input_materialization_ids: Sequence[str] = ()
    ) -> MaterializationContext:
        """The context the engine builds for this asset and key.

        ``asset`` is an @asset function (or its definition) declared with a
        version and a partition definition; the key is normalized by that
        definition, so a near-miss (text for a date, non-canonical text)
        raises instead of silently naming another identity.
        """
        definition = getattr(asset, "__partita_asset__", asset)
        version = getattr(definition, "version", None)
        partition_def = getattr(definition, "partition_def", None)
        name = getattr(definition, "name", None)
        if not isinstance(name, str) or version is None or partition_def is None:
            raise ValueError("MaterializationContext.for_asset needs an @asset with a version and a partition_def")
        key = partition_def.normalize_key(partition_key)
        return cls(
            asset_name=name,
            version=version,
            partition_domain=partition_def.domain,
            partition_key=key,
            partition_key_text=partition_def.format_key(key),
            partition_key_present=True,
            input_materialization_ids=tuple(input_materialization_ids),
        )

    def record(
        self,
        materialization_id: str,
        *,
        committed_at: dt.datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> MaterializationRecord:
        """A record of exactly this identity (what an adapter's commit and resolve return)."""
        return MaterializationRecord(
            materialization_id=materialization_id,
            asset_name=self.asset_name,
            version=self.version,
            partition_domain=self.partition_domain,
            partition_key_text=self.partition_key_text,
            partition_key_present=self.partition_key_present,
            input_materialization_ids=self.input_materialization_ids,
            committed_at=committed_at,
            partition_key_type=self.partition_key_type,
            metadata=metadata or {},
        )

    def identity(self) -> dict[str, Any]:
        """The identity as a JSON-safe mapping (stable field order)."""
        return {
            "asset": self.asset_name,
            "version": self.version,
            "partition_domain": self.partition_domain,
            "partition_key": {
                "present": self.partition_key_present,
                "type": self.partition_key_type if self.partition_key_present else None,
                "text": self.partition_key_text,
            },
            "input_materialization_ids": list(self.input_materialization_ids),
        }

    def identity_hash(self) -> str:
        """SHA-256 of the canonical identity: a safe file name, no raw key inside (computed once)."""
        if not self._identity_hash:
            canonical = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
            object.__setattr__(self, "_identity_hash", hashlib.sha256(canonical.encode("utf-8")).hexdigest())
        return self._identity_hash


@dataclass(frozen=True, slots=True)
class MaterializationRecord:
    """A committed output's identity and where to find it."""

    materialization_id: str
    asset_name: str
    version: str
    partition_domain: str
    partition_key_text: str | None
    partition_key_present: bool
    input_materialization_ids: tuple[str, ...]
    committed_at: dt.datetime | None = None
    #: The typed key's Python type ("" when the adapter does not track it).
    partition_key_type: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.materialization_id, str) or _ID.fullmatch(self.materialization_id) is None:
            raise ValueError("materialization record: materialization_id is not a valid id")
        ids = _check_identity(
            self.asset_name,
            self.version,
            self.partition_domain,
            self.partition_key_text,
            self.partition_key_present,
            self.input_materialization_ids,
        )
        object.__setattr__(self, "input_materialization_ids", ids)

    def matches(self, context: MaterializationContext) -> bool:
        """True when this record belongs to exactly the context's identity."""
        return (
            self.asset_name == context.asset_name
            and self.version == context.version
            and self.partition_domain == context.partition_domain
            and self.partition_key_present == context.partition_key_present
            and self.partition_key_text == context.partition_key_text
            and self.input_materialization_ids == context.input_materialization_ids
            and (not self.partition_key_type or self.partition_key_type == context.partition_key_type)
        )


@runtime_checkable
class Materialization(Protocol):
    """Resolve, load and commit outputs for exact identities (sync or async methods)."""

    def resolve(self, context: MaterializationContext) -> MaterializationRecord | None: ...

    def load(self, context: MaterializationContext, record: MaterializationRecord) -> Any: ...

    def commit(self, context: MaterializationContext, output: Any) -> MaterializationRecord: ...


@runtime_checkable
class MaterializationInvalidation(Protocol):
    """Optional: revoke one exact identity (never automatic, never cascading)."""

    def invalidate(self, context: MaterializationContext, *, reason: str) -> Any: ...


@runtime_checkable
class MaterializationCollection(Protocol):
    """Optional: the currently available records for exactly these contexts, in order."""

    def available(self, contexts: Sequence[MaterializationContext]) -> list[MaterializationRecord]: ...
