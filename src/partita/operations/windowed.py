"""A partition status read over its keys only: what `asset_status` decides, at the cost of the window it covers.

`asset_status` reads every key an asset ever had and keeps those of the
selection; that is the right cost for ``partita status`` over all of
history and the wrong one for a page that shows 30 days of an asset with a
century of them. Here the reads are bounded by the smallest and largest key
text of the scope (whatever the definition's order, every key of the scope
lies between them; keys between them but outside the scope are read and
left out), and the states are decided by the same `key_states`.

`windowed_states` is the cheaper read a grid needs, the states alone: which
keys have a success at all (no newest event per key), and the runs and
times of the few keys whose attempts can change that (a newest outcome that
failed, a live run), whose states `key_state` decides as ever.

Unpartitioned assets and discovering producers (whose successes are their
registry's sightings) are read as `asset_status` reads them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from partita.definitions.assets import AssetDefinition
from partita.definitions.config import RunConfig
from partita.operations.scope import StatusScope, status_scope
from partita.operations.status import (
    KeyState,
    PartitionStatus,
    _is_producer,
    asset_status,
    cycles_uncollected,
    key_state,
    key_states,
)
from partita.partitions.base import PartitionDef
from partita.store.key_history import KeyHistory
from partita.store.sql import SqlStore

__all__ = ["WindowStates", "windowed_states", "windowed_status"]

#: Failed keys up to this many have their last successes read by key; more read the window's at once.
_FEW_KEYS = 5_000


@dataclass(frozen=True, slots=True)
class WindowStates:
    """The state of each key of ``scope.keys``, in that order, without the runs and times behind them."""

    asset: str
    definition: PartitionDef | None
    scope: StatusScope
    states: tuple[KeyState, ...]


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


def windowed_states(
    definition: AssetDefinition, closure: Mapping[str, AssetDefinition], config: RunConfig, store: SqlStore, now: dt.datetime
) -> WindowStates:
    """The state of each key `windowed_status` covers, as it decides them, from the cheaper reads above."""
    if definition.partition_def is None or _is_producer(definition, closure):
        status = asset_status(definition, closure, config, store, now)
        return WindowStates(status.asset, status.definition, status.scope, tuple(entry.state for entry in status.keys))
    with cycles_uncollected():
        scope = status_scope(definition, config, store, now)
        texts = [key for key in scope.keys if key is not None]
        if not texts:
            return WindowStates(definition.name, definition.partition_def, scope, ())
        first, last = min(texts), max(texts)
        reader = KeyHistory(store)
        succeeded = reader.succeeded_keys(definition.name, first, last)
        deciding = reader.key_attempts(definition.name, first, last, deciding=True)
        failed = [key for key, recorded in deciding.items() if recorded.failed and recorded.running is None]
        # Only a failed key compares its failure with its last success: few are read by key, many all at once.
        wanted = failed if len(failed) <= _FEW_KEYS else None
        successes = reader.last_successes(definition.name, first, last, keys=wanted) if failed else {}
        materialized, missing = KeyState.MATERIALIZED, KeyState.MISSING
        states = [materialized if key in succeeded else missing for key in texts]
        if deciding:
            position = {key: index for index, key in enumerate(texts)}
            for key, recorded in deciding.items():
                index = position.get(key)
                if index is not None:
                    states[index] = key_state(successes.get(key), recorded)
        return WindowStates(definition.name, definition.partition_def, scope, tuple(states))
