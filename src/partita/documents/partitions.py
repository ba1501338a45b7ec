"""The ``partita.partitions`` document: partition definitions, or the known keys of a runtime domain."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from partita.definitions.assets import AssetDefinition
from partita.errors import ConfigurationError
from partita.store.protocol import PartitionRecord

__all__ = ["definitions_body", "known_keys_body", "runtime_domain", "runtime_domain_of"]


def runtime_domain(name: str) -> str:
    """``tenants`` or ``runtime:tenants`` as the domain's full name."""
    return name if name.startswith("runtime:") else f"runtime:{name}"


def runtime_domain_of(closure: Sequence[AssetDefinition], name: str, owner: str) -> str:
    """The runtime domain ``name`` names, when an asset of ``closure`` is in it; ConfigurationError otherwise.

    ``owner`` says whose assets were searched (an entry, an asset) in the message.
    """
    domain = runtime_domain(name)
    if not any(d.partition_def is not None and d.partition_def.domain == domain for d in closure):
        raise ConfigurationError(f"no asset of {owner} is in the runtime domain {domain}")
    return domain


def definitions_body(closure: Sequence[AssetDefinition]) -> dict[str, Any]:
    """Each partitioned asset of ``closure`` with its definition's description (no keys are enumerated)."""
    return {
        "assets": [
            {"asset": definition.name, "partition": definition.partition_def.describe()}
            for definition in closure
            if definition.partition_def is not None
        ]
    }


def known_keys_body(domain: str, known: Sequence[PartitionRecord]) -> dict[str, Any]:
    """The keys of a runtime domain its producers discovered (active or retired), in first-seen order."""
    return {"domain": domain, "keys": [record.to_dict() for record in known]}
