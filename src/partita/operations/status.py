"""Partition status per asset (SPEC §15): each key materialized, failed, running or missing.

Materialized keys come from outlet events, which every successful attempt
records with its key whatever the run recorded; failed and running keys come
from attempts, which name keys only in runs that recorded them
(``record_partition_keys``). A status reads the store and runs nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import functools
import gc
import itertools
import operator
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from partita.definitions.assets import AssetDefinition, asset_name_of
from partita.definitions.config import RunConfig
from partita.errors import ConfigurationError
from partita.flow import Flow
from partita.operations.scope import StatusScope, status_scope
from partita.partitions.base import PartitionDef
from partita.partitions.runtime import PartitionAtRuntime
from partita.planning.selection import CONFIG_FIELDS, KeySource, SelectionFields
from partita.store import Store, open_store, store_url_from_environment
from partita.store.protocol import AttemptMark, KeyAttempts, LastSuccess

__all__ = [
    "KeyState", "KeyStatus", "PartitionStates", "PartitionStatus", "asset_states", "asset_status", "cycles_uncollected",
    "key_state", "key_states", "partition_status",
]  # fmt: skip



class KeyState(enum.Enum):
    """A key's state, as Dagster users know it; the order is the grid's order of severity."""

    MATERIALIZED = "materialized"
    FAILED = "failed"
    RUNNING = "running"
    MISSING = "missing"


class KeyStatus(NamedTuple):
    """One key: its state, its last success (run and time), its newest failure, the live run working on it.

    A named tuple: a status builds one per key, 100,000 at a time.
    """

    key: str | None
    state: KeyState
    last_success: LastSuccess | None = None
    #: The newest attempt that ran to an outcome, when that outcome was a failure.
    last_failure: AttemptMark | None = None
    running: AttemptMark | None = None


def key_state(success: LastSuccess | None, attempts: KeyAttempts | None) -> KeyState:
    """A key's state from its newest outlet event and what its recorded attempts say.

    Running wins (a live run is working on the key). Failed: the newest
    attempt that ran to an outcome failed, and no success event is later.
    Skipped and cancelled attempts did no work for the key and change nothing,
    so a key whose upstream failed reads as it did before (missing, or
    materialized by an earlier run).
    """
    if attempts is not None:
        if attempts.running is not None:
            return KeyState.RUNNING
        if attempts.failed and (success is None or (attempts.outcome_at or 0.0) > success.timestamp):
            return KeyState.FAILED
    return KeyState.MISSING if success is None else KeyState.MATERIALIZED


# A status over 100,000 keys builds its records in C: a KeyStatus is the tuple of its
# fields, made by tuple.__new__ (what KeyStatus._make does, without a Python call per key).
_NEW_STATUS = functools.partial(tuple.__new__, KeyStatus)
_STATE_OF = operator.itemgetter(1)  # KeyStatus.state


def _deciding(attempts: Mapping[str | None, KeyAttempts]) -> list[tuple[str | None, KeyAttempts]]:
    """The keys whose attempts change their state: a live run, or a newest outcome that failed."""
    return [(key, recorded) for key, recorded in attempts.items() if recorded.running is not None or recorded.failed]


def _positions(keys: tuple[str | None, ...]) -> dict[str | None, int]:
    return dict(zip(keys, range(len(keys)), strict=True))


def key_states(
    keys: Iterable[str | None],
    successes: Mapping[str | None, LastSuccess],
    attempts: Mapping[str | None, KeyAttempts],
) -> tuple[KeyStatus, ...]:
    """The status of each key of ``keys`` (in their order, each once), from `last_successes` and `key_attempts` answers.

    ``attempts`` may hold only the keys that failed or are running
    (`RunHistory.failed_or_running_keys`): the others cannot change a state.
    The reusable core of a status: a backfill of missing keys asks the same.
    """
    ordered = tuple(keys)
    found = list(map(successes.get, ordered))
    materialized, missing = KeyState.MATERIALIZED, KeyState.MISSING
    states = [missing if success is None else materialized for success in found]
    statuses = list(map(_NEW_STATUS, zip(ordered, states, found, itertools.repeat(None), itertools.repeat(None))))
    deciding = _deciding(attempts)
    if deciding:
        position = _positions(ordered)
        for key, recorded in deciding:
            index = position.get(key)
            if index is None:
                continue  # a key outside the selection
            success = found[index]
            state = key_state(success, recorded)
            failure = recorded.last_outcome if state is KeyState.FAILED else None
            statuses[index] = KeyStatus(key, state, success, failure, recorded.running)
    return tuple(statuses)


def _key_state_column(
    keys: tuple[str | None, ...],
    succeeded: Collection[str | None],
    successes: Mapping[str | None, LastSuccess],
    attempts: Mapping[str | None, KeyAttempts],
) -> tuple[KeyState, ...]:
    """The state of each key, as `key_states` decides it, from the keys with a success and the deciding keys' records.

    ``successes`` needs only the keys of ``attempts`` that failed.
    """
    materialized, missing = KeyState.MATERIALIZED, KeyState.MISSING
    states = [materialized if key in succeeded else missing for key in keys]
    deciding = _deciding(attempts)
    if deciding:
        position = _positions(keys)
        for key, recorded in deciding:
            index = position.get(key)
            if index is not None:
                states[index] = key_state(successes.get(key), recorded)
    return tuple(states)


def _counted(states: Sequence[KeyState]) -> Mapping[KeyState, int]:
    """Keys per state, every state present.

    One C scan per state: a Counter would call `Enum.__hash__`, a Python
    method, for each of 100,000 keys.
    """
    return MappingProxyType({state: states.count(state) for state in KeyState})


class _Times:
    """ISO 8601 text of POSIX times, to the second: keys finished in one second share one conversion."""

    def __init__(self) -> None:
        self._texts: dict[int, str] = {}

    def text(self, timestamp: float) -> str:
        second = int(timestamp)
        found = self._texts.get(second)
        if found is None:
            found = self._texts[second] = dt.datetime.fromtimestamp(second, dt.UTC).isoformat()
        return found

    def mark(self, mark: AttemptMark | LastSuccess) -> dict[str, Any]:
        return {"run_id": mark.run_id, "at": self.text(mark.timestamp)}


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    """The status of one asset's keys: the asset, its definition, each key's state and the counts per state."""

    asset: str
    definition: PartitionDef | None
    scope: StatusScope
    keys: tuple[KeyStatus, ...]
    #: Keys per state, every state present (counted once, when the status is made).
    counts: Mapping[KeyState, int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", _counted(list(map(_STATE_OF, self.keys))))

    def keys_in(self, state: KeyState) -> tuple[str | None, ...]:
        """The keys in ``state``, in key order."""
        return tuple(status.key for status in self.keys if status.state is state)

    def to_dict(self) -> dict[str, Any]:
        """The asset's entry of the ``partita.partition-status`` document (keys included: see the docs)."""
        return {
            "asset": self.asset,
            "partition": None if self.definition is None else self.definition.describe(),
            "scope": self.scope.to_dict(),
            "counts": {state.value: count for state, count in self.counts.items()},
            "keys": _key_entries(self.keys),
        }


def _key_entries(statuses: tuple[KeyStatus, ...]) -> list[dict[str, Any]]:
    """Each key's entry of the document: one comprehension, no call per key where a field is empty."""
    mark = _Times().mark
    value = {state: state.value for state in KeyState}  # Enum.value is a property: once per state, not per key
    return [
        {
            "key": key,
            "state": value[state],
            "last_success": None if success is None else mark(success),
            "last_failure": None if failure is None else mark(failure),
            "running_run_id": None if running is None else running.run_id,
        }
        for key, state, success, failure, running in statuses
    ]


@dataclass(frozen=True, slots=True)
class PartitionStates:
    """The state of each key of one asset without the runs and times behind them: what counts and a grid show.

    `asset_states` reads it with cheaper queries than a `PartitionStatus`
    takes (which keys have a success at all, and the runs and times of the
    few keys that failed or are running) and builds no record per key:
    ``partita status`` draws 100,000 keys from it.
    """

    asset: str
    definition: PartitionDef | None
    scope: StatusScope
    #: The state of each key of ``scope.keys``, in that order.
    states: tuple[KeyState, ...]
    #: Keys per state, every state present.
    counts: Mapping[KeyState, int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", _counted(self.states))


@contextlib.contextmanager
def cycles_uncollected() -> Iterator[None]:
    """Pause the cyclic garbage collector while a status builds its records (restored after).

    A status over 100,000 keys builds hundreds of thousands of rows, tuples
    and dicts that form no cycles; each allocation threshold crossed makes
    the collector rescan all of them, a third of the time. Reference
    counting still frees everything; cycles made meanwhile wait for the
    next collection.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _is_producer(definition: AssetDefinition, closure: Mapping[str, AssetDefinition]) -> bool:
    """A discovering producer: of a runtime domain, with no upstream in it (its keys are its discoveries)."""
    partition_def = definition.partition_def
    if not isinstance(partition_def, PartitionAtRuntime):
        return False
    return not any(
        (upstream := closure.get(name)) is not None
        and upstream.partition_def is not None
        and upstream.partition_def.domain == partition_def.domain
        for name in definition.deps
    )


def _discovered(store: Store, domain: str) -> dict[str | None, LastSuccess]:
    """A producer's successes are its discoveries: each key's last sighting, from the domain's registry."""
    return {
        record.key: LastSuccess(record.key, 0, record.last_run_id, record.last_seen.timestamp())
        for record in store.list_partitions(domain)
    }


def asset_status(
    definition: AssetDefinition,
    closure: Mapping[str, AssetDefinition],
    config: RunConfig,
    store: Store,
    now: dt.datetime,
    *,
    source: KeySource = KeySource.PYTHON,
    fields: SelectionFields = CONFIG_FIELDS,
) -> PartitionStatus:
    """The status of ``definition``'s keys in ``store`` (``closure``: its flow's assets, by name)."""
    with cycles_uncollected():
        return _asset_status(definition, closure, config, store, now, source, fields)


def _asset_status(
    definition: AssetDefinition,
    closure: Mapping[str, AssetDefinition],
    config: RunConfig,
    store: Store,
    now: dt.datetime,
    source: KeySource,
    fields: SelectionFields,
) -> PartitionStatus:
    scope = status_scope(definition, config, store, now, source=source, fields=fields)
    name = definition.name
    successes: Mapping[str | None, LastSuccess]
    attempts: Mapping[str | None, KeyAttempts]
    if definition.partition_def is None:
        unkeyed = store.last_unkeyed_success(name)
        successes = {} if unkeyed is None else {None: unkeyed}
        attempts = {None: store.unkeyed_attempts(name)}
    else:
        if _is_producer(definition, closure):
            successes = _discovered(store, definition.partition_def.domain)
        else:
            # The covered keys alone: a 30-day window reads 30 keys' events, not every key's.
            successes = store.last_successes(name, scope.keys)  # type: ignore[arg-type,assignment]
        attempts = store.failed_or_running_keys(name)  # type: ignore[assignment]
    return PartitionStatus(name, definition.partition_def, scope, key_states(scope.keys, successes, attempts))


def asset_states(
    definition: AssetDefinition,
    closure: Mapping[str, AssetDefinition],
    config: RunConfig,
    store: Store,
    now: dt.datetime,
    *,
    source: KeySource = KeySource.PYTHON,
    fields: SelectionFields = CONFIG_FIELDS,
) -> PartitionStates:
    """The state of each of ``definition``'s keys in ``store``, as `asset_status` decides it, without its records."""
    if definition.partition_def is None:
        status = asset_status(definition, closure, config, store, now, source=source, fields=fields)
        return PartitionStates(status.asset, None, status.scope, tuple(map(_STATE_OF, status.keys)))
    with cycles_uncollected():
        scope = status_scope(definition, config, store, now, source=source, fields=fields)
        name, partition_def = definition.name, definition.partition_def
        attempts: Mapping[str | None, KeyAttempts] = store.failed_or_running_keys(name)  # type: ignore[assignment]
        succeeded: Collection[str | None]
        successes: Mapping[str | None, LastSuccess]
        if _is_producer(definition, closure):
            successes = _discovered(store, partition_def.domain)
            succeeded = successes.keys()
        else:
            succeeded = store.succeeded_keys(name, scope.keys)  # type: ignore[arg-type]
            # Only a failed key compares its failure with its last success: only theirs are read.
            failed = [key for key, recorded in attempts.items() if recorded.failed and recorded.running is None]
            successes = store.last_successes(name, [key for key in failed if key is not None])  # type: ignore[assignment]
        states = _key_state_column(scope.keys, succeeded, successes, attempts)
        return PartitionStates(name, partition_def, scope, states)


def _store_of(flow: Flow, store: Store | str | None) -> tuple[Store, bool]:
    """The store to read and whether this call opened it (and closes it)."""
    spec: Any = store if store is not None else flow.store
    if spec is None or spec is True:
        spec = store_url_from_environment()
    if spec is None or spec is False:
        raise ConfigurationError(
            "partition_status needs a store: pass store= (a URL or a Store), give the Flow one, or set $PARTITA_STORE"
        )
    if isinstance(spec, str):
        return open_store(spec, create=False), True
    if not isinstance(spec, Store):
        raise ConfigurationError("partition_status store must be a store URL or a Store")
    return spec, False


def partition_status(
    flow: Flow,
    asset: Any,
    config: RunConfig | Mapping[str, Any] | None = None,
    *,
    store: Store | str | None = None,
    now: dt.datetime | None = None,
) -> PartitionStatus:
    """The status of each key of ``asset`` (a name or an @asset function of ``flow``'s closure).

    ``config`` selects keys as `Flow.plan` does (``partition_keys`` or a
    bounded ``partition_range``); without a selection a time definition
    covers a recent window ending ``now`` (default: the current time), a
    static one its declared keys, a runtime domain its registry's active
    keys. ``store`` defaults to the flow's store, else ``$PARTITA_STORE``; a
    URL naming no store yet is a `MissingStoreError` (nothing is created).
    """
    name = asset_name_of(asset, field_name="partition_status asset")
    closure = {definition.name: definition for definition in flow.closure()}
    definition = closure.get(name)
    if definition is None:
        raise ConfigurationError(
            f"asset {name!r} is not in the flow's assets ({', '.join(sorted(closure))}); name one of them"
        )
    if now is not None and (now.tzinfo is None or now.utcoffset() is None):
        raise ConfigurationError("partition_status now must be a timezone-aware datetime")
    when = now if now is not None else dt.datetime.now(dt.UTC)
    reader, opened = _store_of(flow, store)
    try:
        return asset_status(definition, closure, RunConfig.coerce(config), reader, when)
    finally:
        if opened:
            reader.close()
