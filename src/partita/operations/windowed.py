"""A partition status read over its keys only: what `asset_status` decides, at the cost of the window it covers.

`asset_status` reads every key an asset ever had and keeps those of the
selection; that is the right cost for ``partita status`` over all of
history and the wrong one for a page that shows 30 days of an asset with a
century of them. Here the reads are bounded by the smallest and largest key
text of the scope (whatever the definition's order, every key of the scope
lies between them; keys between them but outside the scope are read and
left out), and the states are decided by the same `key_states`.

Unpartitioned assets and discovering producers (whose successes are their
registry's sightings) are read as `asset_status` reads them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from partita.definitions.assets import AssetDefinition
from partita.definitions.config import RunConfig
from partita.operations.scope import status_scope
from partita.operations.status import PartitionStatus, _is_producer, asset_status, cycles_uncollected, key_states
from partita.store.key_history import KeyHistory
from partita.store.sql import SqlStore

__all__ = ["windowed_status"]


def windowed_status(
    definition: AssetDefinition, closure: Mapping[str, AssetDefinition], config: RunConfig, store: SqlStore, now: dt.datetime
) -> PartitionStatus:
    """The status of ``definition``'s keys that ``config`` selects (or its default scope), reading only their range."""
    if definition.partition_def is None or _is_producer(definition, closure):
        return asset_status(definition, closure, config, store, now)
    with cycles_uncollected():
        scope = status_scope(definition, config, store, now)
        keys = scope.keys
        texts = [key for key in keys if key is not None]  # a partitioned asset's keys are all text
        if not texts:
            return PartitionStatus(definition.name, definition.partition_def, scope, ())
        first, last = min(texts), max(texts)
        reader = KeyHistory(store)
        successes = reader.last_successes(definition.name, first, last)
        attempts = reader.key_attempts(definition.name, first, last)
        return PartitionStatus(
            definition.name, definition.partition_def, scope, key_states(keys, successes, attempts)  # type: ignore[arg-type]  # str keys
        )
