"""The immutable description of one asset, fixed when `@asset` decorates it.

Kept apart from the decorator so that the registry, which holds these
descriptions, and the decorator, which fills the registry, depend on it
without depending on each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from partita.definitions.policies import RetryPolicy
from partita.partitions.base import PartitionDef
from partita.partitions.mappers import PartitionMapper

__all__ = ["AssetDefinition", "Callback"]

#: A lifecycle callback: one positional `CallbackContext`, sync or async.
Callback = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class AssetDefinition:
    """Everything partita knows about one asset, fixed at decoration time.

    ``inputs`` maps a body parameter to the upstream asset whose output it
    receives; ``deps`` lists every upstream asset (inputs first, then the
    ordering-only ``deps=`` names) without repeats. ``mappers`` holds the
    partition mapper declared for a dependency (``deps={"hourly": RollupMapper("day")}``);
    a mapper under the asset's own name is a dependency on its own earlier
    partitions, which ``deps`` never lists.
    """

    name: str
    fn: Callable[..., Any] = field(repr=False)
    inputs: tuple[tuple[str, str], ...]
    deps: tuple[str, ...]
    context_parameter: str | None
    partition_def: PartitionDef | None
    is_async: bool
    resource: str | None = None
    retry: RetryPolicy | None = None
    materialization: Any = field(default=None, repr=False)
    version: str | None = None
    on_success: Callback | None = field(default=None, repr=False)
    on_failure: Callback | None = field(default=None, repr=False)
    on_retry: Callback | None = field(default=None, repr=False)
    mappers: Mapping[str, PartitionMapper] = field(default_factory=dict, repr=False)

    @property
    def partitioned(self) -> bool:
        return self.partition_def is not None

    @property
    def self_mapper(self) -> PartitionMapper | None:
        """The mapper of a dependency on this asset's own earlier partitions, if declared."""
        return self.mappers.get(self.name) if self.mappers else None
