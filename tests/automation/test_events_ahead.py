"""One-key consumer runs take their triggering events from those the daemon read ahead (SPEC §12).

The daemon reads a one-key flow's pending requests several at a time; their
events are read with them, in one query, instead of one query per run. Each
run still sees exactly its own events, as objects of its own, and whatever
is not held (dropped for room, never read ahead, a read that failed) comes
from the store as before.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import partita as p
from partita.automation.daemon import TriggerDaemon
from partita.automation.events_ahead import EXTRA_AHEAD_LIMIT, EventsAhead
from partita.errors import StoreError
from partita.store.sql import SqlStore
from partita.store.triggers import TriggerRequest


class CountingReader:
    """The store's `list_events_by_ids`, counting calls and which ids they asked for; may fail on request."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.asked: list[list[int]] = []
        self.fail = False

    def list_events_by_ids(self, ids: Any) -> list[p.AssetEvent]:
        self.asked.append(sorted(ids))
        if self.fail:
            raise StoreError("store sqlite:///gone.db: cannot read events: disk I/O error")
        return self.store.list_events_by_ids(ids)


def _request(request_id: int, *event_ids: int) -> TriggerRequest:
    return TriggerRequest(
        id=request_id, flow="f", partition_key=f"k{request_id}", generation=0, status="pending",
        event_ids=tuple(event_ids), run_id=None, created_at=0.0, claimed_at=None,
    )  # fmt: skip


def _publish(store: SqlStore, count: int) -> list[int]:
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.StaticPartitionDef("letters", ["a", "b", "c"]), registry=registry)
    def raw() -> int:
        return 1

    keys = ["a", "b", "c"]
    return [
        p.publish_event(store, registry, "raw", partition_key=keys[n % 3], extra={"n": n, "tags": [n]}).id
        for n in range(count)
    ]


def test_events_read_ahead_come_from_one_query_and_equal_the_stored_ones(store: SqlStore) -> None:
    ids = _publish(store, 6)
    reader, ahead = CountingReader(store), EventsAhead()
    ahead.read_ahead(reader, [_request(1, ids[0], ids[3]), _request(2, ids[1]), _request(3, ids[3], ids[5])])
    assert reader.asked == [sorted([ids[0], ids[1], ids[3], ids[5]])]

    got = ahead.events(reader, [ids[5], ids[0], ids[3], ids[0]])
    assert len(reader.asked) == 1  # all held: no read
    assert got == store.list_events_by_ids([ids[0], ids[3], ids[5]])  # in id order, each once

    # Held ones are read again nowhere; the others only by themselves; an unknown id is skipped.
    got = ahead.events(reader, [ids[2], ids[3], 10_000_000])
    assert reader.asked[1:] == [[ids[2], 10_000_000]]
    assert got == store.list_events_by_ids([ids[2], ids[3]])

    # Read ahead again: what is held already is not asked for.
    ahead.read_ahead(reader, [_request(4, ids[0], ids[4])])
    assert reader.asked[2:] == [[ids[4]]]


def test_each_caller_gets_objects_of_its_own(store: SqlStore) -> None:
    ids = _publish(store, 1)
    reader, ahead = CountingReader(store), EventsAhead()
    ahead.read_ahead(reader, [_request(1, ids[0])])
    (first,) = ahead.events(reader, ids)
    first.extra["tags"].append("changed by a body")
    first.extra["added"] = True
    (second,) = ahead.events(reader, ids)
    assert second.extra == {"n": 0, "tags": [0]}
    assert second is not first and second == store.list_events_by_ids(ids)[0]


def test_the_oldest_events_make_room_and_too_many_are_not_read_ahead(store: SqlStore) -> None:
    ids = _publish(store, 8)
    reader, ahead = CountingReader(store), EventsAhead(limit=3)
    ahead.read_ahead(reader, [_request(n, ids[n]) for n in range(2)])
    ahead.read_ahead(reader, [_request(n, ids[n]) for n in range(2, 4)])
    assert len(ahead) == 3  # ids[0] made room
    asked = len(reader.asked)
    assert ahead.events(reader, ids[:4]) == store.list_events_by_ids(ids[:4])
    assert reader.asked[asked:] == [[ids[0]]]

    # More than the limit at once: nothing is read ahead, each run reads its own.
    asked = len(reader.asked)
    ahead.read_ahead(reader, [_request(n, ids[n]) for n in range(4, 8)])
    assert reader.asked[asked:] == [] and len(ahead) == 3


def test_an_event_with_a_large_extra_is_not_held_and_is_read_by_its_run(store: SqlStore) -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def raw() -> int:
        return 1

    small = p.publish_event(store, registry, "raw", extra={"rows": 1}).id
    large = p.publish_event(store, registry, "raw", extra={"blob": "x" * (EXTRA_AHEAD_LIMIT + 1)}).id
    reader, ahead = CountingReader(store), EventsAhead()
    ahead.read_ahead(reader, [_request(1, small, large)])
    assert len(ahead) == 1
    assert ahead.events(reader, [small, large]) == store.list_events_by_ids([small, large])
    assert reader.asked[1:] == [[large]]


def test_a_failed_read_ahead_leaves_each_run_to_read_its_own(store: SqlStore) -> None:
    ids = _publish(store, 2)
    reader, ahead = CountingReader(store), EventsAhead()
    reader.fail = True
    ahead.read_ahead(reader, [_request(1, *ids)])  # does not raise: the pass goes on
    assert len(ahead) == 0
    reader.fail = False
    assert ahead.events(reader, ids) == store.list_events_by_ids(ids)
    assert reader.asked[-1] == sorted(ids)


def test_a_daemon_serves_one_key_runs_their_own_events_without_a_read_per_run(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One daily event fans out to 24 hourly one-key runs: every run sees it unchanged, none reads it itself."""
    registry = p.AssetRegistry()
    seen: dict[str, list[tuple[int, Any]]] = {}
    lock = threading.Lock()

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def daily() -> int:
        return 1

    @p.asset(partition_def=p.HourlyPartitionDef("UTC"), registry=registry)
    def hourly(context: p.AssetContext) -> None:
        events = context.triggering_events
        with lock:
            seen[str(context.partition_key)] = [(event.id, dict(event.extra)) for event in events]
        for event in events:  # a body may change what it was given: no other run sees it
            event.extra["touched_by"] = str(context.partition_key)

    flow = p.Flow(
        ["hourly"], registry=registry, name="hours", trigger=p.OnAssetEvents(["daily"], mapper=p.FanOutMapper())
    )
    event_id = p.publish_event(store, registry, "daily", partition_key="2024-05-01", extra={"rows": 7}).id
    reads: list[str] = []
    original = type(store).list_events_by_ids

    def counted(self: SqlStore, ids: Any) -> list[p.AssetEvent]:
        reads.append(threading.current_thread().name)
        return original(self, ids)

    monkeypatch.setattr(type(store), "list_events_by_ids", counted)
    daemon = TriggerDaemon([flow], store, max_in_flight=3)
    try:
        assert daemon.run_once() == 24
    finally:
        daemon.stop()
    assert len(seen) == 24
    assert all(events == [(event_id, {"rows": 7})] for events in seen.values())
    # Read with the requests, by the caller's thread: one read for all 24 runs, none by a consumer thread.
    assert reads == [threading.current_thread().name]
