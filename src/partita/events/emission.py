"""Publishing asset events now: validation, dedupe identities and the emitter (SPEC §8).

Rules, checked before anything is stored: the target asset must be
registered; partition arguments are explicit (never inherited from the
producer's own key) and normalized by the target asset's definition; a
``partition_date`` needs a key and a timezone; ``extra`` is a strict JSON
object of bounded size. An event is identified by its ``dedupe_key`` or, by
default, by the producer's run, asset, key, invocation and emission sequence
number: emitting it again returns the first receipt with ``duplicate=True``.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from partita.errors import EmissionError
from partita.events.active import activate, active_emitter, deactivate
from partita.events.extra import (
    EMPTY_EXTRA,
    MAX_EXTRA_BYTES,
    MAX_EXTRA_DEPTH,
    EncodedExtra,
    encode_extra,
    encoded_extra_size,
    json_text_depth,
)
from partita.events.identity import DefaultIdentities, payload_digest, payload_hash
from partita.events.model import AssetEvent, EmissionReceipt, EventDraft, EventSource, SourceKind, now
from partita.partitions.base import PartitionDef, apply_key_rule, check_key_text, storable_text_problem

__all__ = [
    "MAX_DEDUPE_KEY_LENGTH",
    "MAX_EXTRA_BYTES",
    "MAX_EXTRA_DEPTH",
    "Catalog",
    "Emitter",
    "EventLog",
    "EventSink",
    "MemoryEventLog",
    "activate",
    "active_emitter",
    "deactivate",
    "emit",
    "encoded_extra_size",
    "json_text_depth",
    "payload_hash",
    "prepare_event",
]

MAX_DEDUPE_KEY_LENGTH = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

#: Asset name -> its partition definition (None: unpartitioned). Picklable, unlike a registry.
Catalog = Mapping[str, PartitionDef | None]



def _asset_name(asset: Any) -> str:
    if isinstance(asset, str) and asset:
        return asset
    definition = getattr(asset, "__partita_asset__", None)
    if definition is not None:
        return str(definition.name)
    raise EmissionError("emit: asset must be an asset name or an @asset function")


def _extra(extra: Any) -> tuple[dict[str, Any], EncodedExtra]:
    if extra is None:
        return {}, EMPTY_EXTRA
    if type(extra) is not dict and not isinstance(extra, Mapping):  # a plain dict skips the ABC check
        raise EmissionError("emit: extra must be a JSON object (a dict with string keys)")
    value = dict(extra)
    try:
        encoded = encode_extra(value)
    except ValueError as exc:
        raise EmissionError(f"emit: extra is not strict JSON: {exc}") from None
    if encoded.size > MAX_EXTRA_BYTES:
        raise EmissionError(f"emit: extra is {encoded.size} bytes of JSON; the limit is {MAX_EXTRA_BYTES}")
    return value, encoded


def _partition_date(value: Any, has_key: bool) -> dt.datetime | None:
    if value is None:
        return None
    if not has_key:
        raise EmissionError("emit: partition_date requires a partition_key")
    if not isinstance(value, dt.datetime):
        raise EmissionError("emit: partition_date must be a timezone-aware datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise EmissionError("emit: partition_date must be timezone-aware (a naive datetime is ambiguous)")
    return value


def _dedupe_key(value: Any) -> str:
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_DEDUPE_KEY_LENGTH
        or _CONTROL.search(value)
        or storable_text_problem(value) is not None
    ):
        raise EmissionError(
            f"emit: dedupe_key must be a non-empty string of at most {MAX_DEDUPE_KEY_LENGTH} characters "
            "without control characters or lone surrogates"
        )
    return value


def prepare_event(
    catalog: Catalog,
    asset: Any,
    *,
    partition_key: Any = None,
    partition_date: Any = None,
    extra: Any = None,
    dedupe_key: str | None,
    source: EventSource,
    automatic_dedupe: Callable[[], str] | None = None,
) -> EventDraft:
    """Validate and normalize one emission; raises EmissionError naming the rule."""
    name = _asset_name(asset)
    if name not in catalog:
        raise EmissionError(f"emit: asset {name!r} is not registered; events can only be published for known assets")
    definition = catalog[name]
    if definition is None:
        if partition_key is not None:
            raise EmissionError(f"emit: asset {name!r} is not partitioned; publish it without partition_key")
        key_text = None
    else:
        if partition_key is None:
            raise EmissionError(
                f"emit: asset {name!r} is partitioned (domain {definition.domain}); pass partition_key explicitly "
                "(it is never inherited from the producer's own key)"
            )
        try:
            if isinstance(partition_key, str):
                check_key_text(partition_key)
            key = apply_key_rule(definition, definition.normalize_key, partition_key, "normalize_key")
            key_text = check_key_text(apply_key_rule(definition, definition.format_key, key, "format_key"))
        except ValueError as exc:
            raise EmissionError(
                f"emit: partition_key for asset {name!r} is rejected by its definition ({definition.domain}): {exc}"
            ) from None
    date = _partition_date(partition_date, key_text is not None)
    body, encoded = _extra(extra)
    if dedupe_key is not None:
        identity = "key:" + _dedupe_key(dedupe_key)
    elif automatic_dedupe is not None:
        identity = automatic_dedupe()
    else:
        raise EmissionError("emit: an external event needs an explicit dedupe_key")
    digest = payload_digest(name, key_text, date, encoded.canonical)
    # Positional: asset, key, date, extra, source, dedupe key, payload hash, timestamp, stored extra.
    return EventDraft(name, key_text, date, body, source, identity, digest, now(), encoded.text)


@runtime_checkable
class EventSink(Protocol):
    """Where an emitter puts its events: all an emission needs."""

    def append(self, draft: EventDraft) -> EmissionReceipt: ...


@runtime_checkable
class EventLog(EventSink, Protocol):
    """Where a run's events go: the store (durable) or memory (no store configured)."""

    def record_discovery(self, domain: str, run_id: str, drafts: list[EventDraft]) -> None:
        """Discovery events and the partition registry update, together."""
        ...

    def events_of_run(self, run_id: str) -> tuple[AssetEvent, ...]:
        """Events the run published itself (not its outlet events)."""
        ...


def duplicate_conflict() -> EmissionError:
    return EmissionError(
        "emit: dedupe_key was already used for a different event (asset, key, date or extra differ); "
        "a dedupe key identifies exactly one event"
    )


class MemoryEventLog:
    """Events of one process when no store is configured; thread-safe, deduplicating."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[AssetEvent] = []
        self._by_key: dict[str, tuple[EmissionReceipt, str]] = {}

    def append(self, draft: EventDraft) -> EmissionReceipt:
        with self._lock:
            seen = None if draft.dedupe_key is None else self._by_key.get(draft.dedupe_key)
            if seen is not None:
                receipt, digest = seen
                if digest != draft.payload_hash:
                    raise duplicate_conflict()
                return EmissionReceipt(receipt.id, receipt.timestamp, duplicate=True)
            event_id = len(self._events) + 1
            self._events.append(
                AssetEvent(
                    id=event_id,
                    asset=draft.asset,
                    partition_key=draft.partition_key,
                    partition_date=draft.partition_date,
                    extra=draft.extra,
                    timestamp=draft.timestamp,
                    source=draft.source,
                )
            )
            receipt = EmissionReceipt(event_id, draft.timestamp)
            if draft.dedupe_key is not None:
                self._by_key[draft.dedupe_key] = (receipt, draft.payload_hash or "")
            return receipt

    def events(self) -> tuple[AssetEvent, ...]:
        with self._lock:
            return tuple(self._events)

    def events_of_run(self, run_id: str) -> tuple[AssetEvent, ...]:
        """Events the run published itself (emissions, not discovery events)."""
        kinds = (SourceKind.ATTEMPT, SourceKind.FLOW)
        with self._lock:
            return tuple(event for event in self._events if event.source.run_id == run_id and event.source.kind in kinds)

    def record_discovery(self, domain: str, run_id: str, drafts: list[EventDraft]) -> None:
        """One event per discovered key; without a store there is no partition registry."""
        for draft in drafts:
            self.append(draft)


class RunLiveness:
    """Shared by a run's emitters: once the run ends, a kept context can no longer publish.

    ``exported`` turns true when one of them was pickled for another
    process: what it publishes there leaves no receipt here, so the run's
    events are read back from the log.
    """

    __slots__ = ("ended", "exported")

    def __init__(self) -> None:
        self.ended = False
        self.exported = False


class Emitter:
    """Publishes events on behalf of one producer: an invocation or a callback.

    Created for every invocation, so it is kept cheap: nothing happens until
    ``emit`` is called. Across a process boundary it reconnects to the run's
    store by URL.
    """

    __slots__ = (
        "log",
        "catalog",
        "kind",
        "run_id",
        "asset",
        "key_present",
        "invocation",
        "partition_key",
        "key_format",
        "receipts",
        "store_url",
        "role",
        "liveness",
        "_sequence",
        "_identities",
        "_source",
    )

    def __init__(
        self,
        log: EventSink,
        catalog: Catalog,
        kind: SourceKind,
        run_id: str | None = None,
        asset: str | None = None,
        key_present: bool | None = None,
        invocation: int | None = None,
        partition_key: Any = None,
        key_format: Callable[[Any], str] | None = None,
        receipts: list[EmissionReceipt] | None = None,
        store_url: str | None = None,
        role: str = "body",
        liveness: RunLiveness | None = None,
    ) -> None:
        self.log = log
        self.catalog = catalog
        self.kind = kind
        self.run_id = run_id
        self.asset = asset
        self.key_present = key_present
        self.invocation = invocation
        self.partition_key = partition_key
        self.key_format = key_format
        self.receipts = receipts
        self.store_url = store_url
        #: Body or callback label: the same attempt's producers keep separate default identities.
        self.role = role
        self.liveness = liveness
        # Created eagerly: threads sharing a context must never draw the same number.
        self._sequence = itertools.count()
        self._identities: DefaultIdentities | None = None  # on the first emission without a dedupe key
        self._source: EventSource | None = None  # on the first emission

    def resolve(self) -> Emitter:
        """This emitter (as `LazyEmitter.resolve` gives the one it made)."""
        return self

    @property
    def source(self) -> EventSource:
        source = self._source
        if source is None:
            source = self._source = EventSource(self.kind, self.run_id, self.asset, self.key_present, self.invocation)
        return source

    def emit(
        self,
        asset: Any,
        *,
        partition_key: Any = None,
        partition_date: Any = None,
        extra: Any = None,
        dedupe_key: str | None = None,
    ) -> EmissionReceipt:
        """Store the event durably (when a store is configured) and return its receipt."""
        if self.liveness is not None and self.liveness.ended:
            raise EmissionError(
                "emit: this context's run has finished; events are published while a body or callback runs"
            )
        draft = prepare_event(
            self.catalog,
            asset,
            partition_key=partition_key,
            partition_date=partition_date,
            extra=extra,
            dedupe_key=dedupe_key,
            source=self.source,
            automatic_dedupe=self._automatic_dedupe,
        )
        receipt = self.log.append(draft)
        if self.receipts is not None:
            self.receipts.append(receipt)
        return receipt

    def _automatic_dedupe(self) -> str:
        identities = self._identities
        if identities is None:  # threads racing here compute the same value
            key_text = self.key_format(self.partition_key) if self.key_format is not None else None
            fields = [self.kind.value, self.role, self.run_id, self.asset, key_text, self.invocation]
            identities = self._identities = DefaultIdentities(fields)
        return identities.identity(next(self._sequence))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        if self.liveness is not None:
            self.liveness.exported = True
        state = (
            self.catalog,
            self.kind,
            self.run_id,
            self.asset,
            self.key_present,
            self.invocation,
            self.partition_key,
            self.key_format,
            None,
            None,
            self.role,
        )
        if self.store_url is None:
            return (_unavailable_emitter, state)
        return (_store_emitter, (self.store_url, *state))


_LAZY_LOCK = threading.Lock()


class LazyEmitter:
    """Creates the real `Emitter` on first use: most bodies never emit, and an
    emitter per attempt would be a measurable share of the engine's cost."""

    __slots__ = ("_factory", "_arguments", "_emitter")

    def __init__(self, factory: Callable[..., Emitter], *arguments: Any) -> None:
        self._factory = factory
        self._arguments = arguments
        self._emitter: Emitter | None = None

    def resolve(self) -> Emitter:
        emitter = self._emitter
        if emitter is None:
            # Threads sharing one context must share one emitter (one sequence).
            with _LAZY_LOCK:
                if self._emitter is None:
                    self._emitter = self._factory(*self._arguments)
                emitter = self._emitter
        return emitter

    def emit(self, asset: Any, **options: Any) -> EmissionReceipt:
        return self.resolve().emit(asset, **options)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The factory is bound to the driver's run (locks, loop): another
        # process gets the real emitter, which reconnects to the store by URL.
        return self.resolve().__reduce__()


def resolve_emitter(emitter: Emitter | LazyEmitter) -> Emitter:
    return emitter.resolve()


def _unavailable_emitter(catalog: Catalog, *state: Any) -> Emitter:
    return Emitter(_NoStoreInWorker(), catalog, *state)


class _NoStoreInWorker:
    def append(self, draft: EventDraft) -> EmissionReceipt:
        raise EmissionError(
            "emit from a worker process needs a store: events cannot be kept in memory across processes; "
            "configure Flow(store=...) or use the default in-process executor"
        )


_worker_stores: dict[str, Any] = {}


def _store_emitter(store_url: str, catalog: Catalog, *state: Any) -> Emitter:
    from partita.store import open_store
    from partita.store.events import StoreEventLog

    store = _worker_stores.get(store_url)
    if store is None:
        store = _worker_stores[store_url] = open_store(store_url)
    *fields, _, _, role = state
    return Emitter(StoreEventLog(store), catalog, *fields, store_url=store_url, role=role)


def emit(
    asset: Any,
    *,
    partition_key: Any = None,
    partition_date: Any = None,
    extra: Any = None,
    dedupe_key: str | None = None,
) -> EmissionReceipt:
    """Publish an asset event from the running body or callback (see `AssetContext.emit`).

    Outside a running body or callback (for example at import time) it
    raises EmissionError: there is no producer to attribute the event to.
    """
    active = active_emitter()
    emitter = None if active is None else resolve_emitter(active)
    if emitter is None:
        raise EmissionError(
            "partita.emit() works only while an asset body or a callback runs; nothing is running here "
            "(import and definition time cannot publish). In threads you start yourself, call context.emit(...)"
        )
    return emitter.emit(
        asset, partition_key=partition_key, partition_date=partition_date, extra=extra, dedupe_key=dedupe_key
    )


def catalog_of(definitions: Any) -> dict[str, PartitionDef | None]:
    """Asset name -> partition definition, from a registry's definitions."""
    return {definition.name: definition.partition_def for definition in definitions}


