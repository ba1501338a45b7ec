"""Contexts handed to user code: `AssetContext` for bodies, `CallbackContext` for callbacks."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from partita.errors import DiscoveryError, EmissionError

if TYPE_CHECKING:
    from partita.events.emission import Emitter
    from partita.events.model import EmissionReceipt
    from partita.execution.discovery import DiscoveryCollector
    from partita.results.model import RunResult

__all__ = ["AssetContext", "CallbackContext", "TriggeringEvents"]


@dataclass(frozen=True, slots=True)
class TriggeringEvents:
    """The events that made a trigger start a run: all of them, and for a batch run each consumer key's own.

    An attempt of a batch's consumer key sees that key's events; any other
    attempt (an unpartitioned asset, or keys of another domain) sees all.
    """

    every: tuple[Any, ...] = ()
    by_key: Mapping[str, tuple[Any, ...]] | None = None

    @classmethod
    def of(cls, events: Any) -> TriggeringEvents:
        """From a sequence of events, or a mapping from consumer key text to its events."""
        if not isinstance(events, Mapping):
            return cls(tuple(events))
        by_key = {str(key): tuple(found) for key, found in events.items()}
        unique = {event.id: event for found in by_key.values() for event in found}
        return cls(tuple(unique[event_id] for event_id in sorted(unique)), by_key)

    def for_key(self, partition_def: Any, key: Any) -> tuple[Any, ...]:
        if self.by_key is None or partition_def is None:
            return self.every
        return self.by_key.get(partition_def.format_key(key), self.every)


class AssetContext:
    """Passed to a body that declares a ``context`` parameter; read-only.

    ``partition_key`` is the normalized key object (``None`` with
    ``partition_key_present=False`` for an unpartitioned asset; a present key
    may itself be falsey, such as ``0`` or ``""``). ``invocation_number``
    starts at 1 and grows with each retry of the same attempt. A discovering
    producer of a runtime domain declares its keys with `add_partition` or
    one ``partition_keys = [...]`` assignment, validated whole before any key
    of it is declared. In a run a trigger started,
    ``triggering_events`` holds the asset events that started it (in a run
    serving a batch of consumer keys, the events of this attempt's key).
    """

    __slots__ = (
        "asset_name",
        "run_id",
        "partition_key",
        "partition_key_present",
        "invocation_number",
        "logger",
        "emitter",
        "triggering_events",
        "_discovery",
    )

    asset_name: str
    run_id: str
    partition_key: Any
    partition_key_present: bool
    invocation_number: int
    logger: logging.Logger
    emitter: Emitter | None

    def __init__(
        self,
        asset_name: str,
        run_id: str,
        partition_key: Any,
        partition_key_present: bool,
        invocation_number: int,
        logger: logging.Logger,
        emitter: Emitter | None = None,
        discovery: DiscoveryCollector | None = None,
        triggering_events: tuple[Any, ...] = (),
    ) -> None:
        set_ = object.__setattr__
        set_(self, "asset_name", asset_name)
        set_(self, "run_id", run_id)
        set_(self, "partition_key", partition_key)
        set_(self, "partition_key_present", partition_key_present)
        set_(self, "invocation_number", invocation_number)
        set_(self, "logger", logger)
        set_(self, "emitter", emitter)
        set_(self, "triggering_events", triggering_events)
        set_(self, "_discovery", discovery)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "partition_keys":
            # Whole or nothing: a rejected list declares no key and leaves the assignment unused.
            self._collector().assign(value)
            return
        raise AttributeError(f"AssetContext is read-only; {name!r} cannot be set")

    def __repr__(self) -> str:
        return (
            f"AssetContext(asset_name={self.asset_name!r}, run_id={self.run_id!r}, "
            f"partition_key_present={self.partition_key_present}, invocation_number={self.invocation_number})"
        )

    def _collector(self) -> DiscoveryCollector:
        if self._discovery is None:
            raise DiscoveryError(
                f"asset {self.asset_name!r} is not a discovering producer: only the asset of a PartitionAtRuntime "
                "domain without an upstream in that domain declares keys (and only when the run discovers)"
            )
        return self._discovery

    def add_partition(self, key: Any, extra: Any = None) -> None:
        """Declare a discovered key (a string or `PartitionKey`) with optional event ``extra``."""
        self._collector().add(key, extra)

    @property
    def partition_keys(self) -> tuple[Any, ...]:
        """The keys declared so far (as `PartitionKey` values)."""
        return self._collector().declared()

    def emit(
        self,
        asset: Any,
        *,
        partition_key: Any = None,
        partition_date: Any = None,
        extra: Any = None,
        dedupe_key: str | None = None,
    ) -> EmissionReceipt:
        """Publish an asset event now; returns once it is stored (see `partita.emit`).

        Partition arguments are explicit: the event's key is never taken
        from this attempt's own key.
        """
        return _emitter_of(self).emit(
            asset, partition_key=partition_key, partition_date=partition_date, extra=extra, dedupe_key=dedupe_key
        )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (
            AssetContext,
            (
                self.asset_name,
                self.run_id,
                self.partition_key,
                self.partition_key_present,
                self.invocation_number,
                self.logger,
                self.emitter,
                self._discovery,
                self.triggering_events,
            ),
        )


@dataclass(frozen=True, slots=True)
class CallbackContext:
    """The one argument of every lifecycle callback.

    Asset callbacks see their attempt (``asset_name``, ``partition_key``,
    ``exception`` for failures and retries); flow callbacks see
    ``asset_name=None`` and the run's ``result``. New fields may be added;
    read them by name.
    """

    run_id: str
    asset_name: str | None
    partition_key: Any
    partition_key_present: bool
    exception: BaseException | None = None
    result: RunResult | None = None
    invocation_number: int | None = None
    emitter: Emitter | None = field(default=None, repr=False, compare=False)

    def emit(
        self,
        asset: Any,
        *,
        partition_key: Any = None,
        partition_date: Any = None,
        extra: Any = None,
        dedupe_key: str | None = None,
    ) -> EmissionReceipt:
        """Publish an asset event from this callback (flow callbacks carry no attempt fields)."""
        return _emitter_of(self).emit(
            asset, partition_key=partition_key, partition_date=partition_date, extra=extra, dedupe_key=dedupe_key
        )


def _emitter_of(context: AssetContext | CallbackContext) -> Emitter:
    emitter = context.emitter
    if emitter is None:
        raise EmissionError("this context was not created by a running flow; it cannot publish events")
    return emitter.resolve()  # an Emitter resolves to itself, a LazyEmitter to the one it made
