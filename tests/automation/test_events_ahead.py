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
from sqlalchemy import update

import partita as p
from partita.automation.daemon import TriggerDaemon
from partita.automation.evaluation import TriggerEvaluator
from partita.automation.events_ahead import EXTRA_AHEAD_LIMIT, EventsAhead
from partita.errors import StoreError
from partita.store.schema import trigger_requests
from partita.store.sql import SqlStore
from partita.store.triggers import TriggerRequest


class CountingReader:
    """The store's event reads by id (rows or events), counting calls and which ids they asked for; may fail."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.asked: list[list[int]] = []
        self.fail: Exception | None = None

    def _asked(self, ids: Any) -> None:
        self.asked.append(sorted(ids))
        if self.fail is not None:
            raise self.fail

    def list_events_by_ids(self, ids: Any) -> list[p.AssetEvent]:
        self._asked(ids)
        return self.store.list_events_by_ids(ids)

    def event_rows_by_ids(self, ids: Any) -> list[tuple[Any, ...]]:
        self._asked(ids)
        return self.store.event_rows_by_ids(ids)


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
    reader = CountingReader(store)
    ahead = EventsAhead(reader)
    ahead.read_ahead([_request(1, ids[0], ids[3]), _request(2, ids[1]), _request(3, ids[3], ids[5])])
    assert reader.asked == [sorted([ids[0], ids[1], ids[3], ids[5]])]

    got = ahead.events([ids[5], ids[0], ids[3], ids[0]])
    assert len(reader.asked) == 1  # all held: no read
    assert got == store.list_events_by_ids([ids[0], ids[3], ids[5]])  # in id order, each once

    # Held ones are read again nowhere; the others only by themselves; an unknown id is skipped.
    got = ahead.events([ids[2], ids[3], 10_000_000])
    assert reader.asked[1:] == [[ids[2], 10_000_000]]
    assert got == store.list_events_by_ids([ids[2], ids[3]])

    # Read ahead again: what is held already is not asked for.
    ahead.read_ahead([_request(4, ids[0], ids[4])])
    assert reader.asked[2:] == [[ids[4]]]


def test_each_caller_gets_objects_of_its_own(store: SqlStore) -> None:
    ids = _publish(store, 1)
    reader = CountingReader(store)
    ahead = EventsAhead(reader)
    ahead.read_ahead([_request(1, ids[0])])
    (first,) = ahead.events(ids)
    first.extra["tags"].append("changed by a body")
    first.extra["added"] = True
    (second,) = ahead.events(ids)
    assert second.extra == {"n": 0, "tags": [0]}
    assert second is not first and second == store.list_events_by_ids(ids)[0]


def test_two_windows_are_held_and_too_many_events_are_left_to_their_runs(store: SqlStore) -> None:
    """Each read ahead replaces the window before the last; what the new one still needs is kept, not read again."""
    ids = _publish(store, 8)
    reader = CountingReader(store)
    ahead = EventsAhead(reader, limit=3)
    ahead.read_ahead([_request(n, ids[n]) for n in range(2)])  # window A: 0, 1
    ahead.read_ahead([_request(n, ids[n]) for n in range(1, 4)])  # window B: 1 (kept), 2, 3
    assert reader.asked == [[ids[0], ids[1]], [ids[2], ids[3]]]
    assert len(ahead) == 4  # runs handed out from A may not have started yet
    ahead.read_ahead([_request(4, ids[4])])  # window C: A is dropped
    assert len(ahead) == 4  # 1, 2, 3 (B) and 4 (C)
    asked = len(reader.asked)
    assert ahead.events(ids[:5]) == store.list_events_by_ids(ids[:5])
    assert reader.asked[asked:] == [[ids[0]]]

    # More than one window holds: nothing is read, and the runs read their own.
    asked = len(reader.asked)
    ahead.read_ahead([_request(n, ids[n]) for n in range(4, 8)])
    assert reader.asked[asked:] == [] and len(ahead) == 1  # window C is the one before now


def test_an_event_with_a_large_extra_is_not_held_and_is_read_by_its_run(store: SqlStore) -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def raw() -> int:
        return 1

    small = p.publish_event(store, registry, "raw", extra={"rows": 1}).id
    large = p.publish_event(store, registry, "raw", extra={"blob": "x" * (EXTRA_AHEAD_LIMIT + 1)}).id
    reader = CountingReader(store)
    ahead = EventsAhead(reader)
    ahead.read_ahead([_request(1, small, large)])
    assert len(ahead) == 1
    assert ahead.events([small, large]) == store.list_events_by_ids([small, large])
    assert reader.asked[1:] == [[large]]
    # While its request waits in the window, the large event is not read ahead again.
    ahead.read_ahead([_request(1, small, large)])
    assert reader.asked[2:] == []


@pytest.mark.parametrize(
    "failure",
    [
        StoreError("store sqlite:///gone.db: cannot read events: disk I/O error"),
        ValueError("'future' is not a valid SourceKind"),  # a row this version cannot decode
    ],
)
def test_a_failed_read_ahead_leaves_each_run_to_read_its_own(store: SqlStore, failure: Exception) -> None:
    ids = _publish(store, 2)
    reader = CountingReader(store)
    ahead = EventsAhead(reader)
    reader.fail = failure
    ahead.read_ahead([_request(1, *ids)])  # does not raise: the pass goes on
    assert len(ahead) == 0
    reader.fail = None
    assert ahead.events(ids) == store.list_events_by_ids(ids)
    assert reader.asked[-1] == sorted(ids)


def _one_key_flow(name: str, seen: list[str], max_keys_per_run: int = 1) -> tuple[p.Flow, p.AssetRegistry]:
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def raw() -> int:
        return 1

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def consumer(context: p.AssetContext) -> None:
        seen.append(str(context.partition_key))

    trigger = p.OnAssetEvents(["raw"], max_keys_per_run=max_keys_per_run)
    return p.Flow(["consumer"], registry=registry, name=name, trigger=trigger), registry


def test_an_event_no_run_can_decode_fails_its_own_run_only(store: SqlStore) -> None:
    """A row of a newer version (an unknown source kind) among ten: the nine others run; its own is held back."""
    seen: list[str] = []
    flow, registry = _one_key_flow("one_key", seen)
    keys = [f"2024-01-{day:02d}" for day in range(1, 11)]
    ids = [p.publish_event(store, registry, "raw", partition_key=key).id for key in keys]
    with store.database.write() as connection:
        connection.exec_driver_sql(f"UPDATE partita_events SET source_kind = 'future' WHERE id = {ids[0]}")
    daemon = TriggerDaemon([flow], store, max_in_flight=4)
    try:
        assert daemon.run_once() == 9
    finally:
        daemon.stop()
    assert daemon.failing == {}
    assert sorted(seen) == keys[1:]


def test_a_stale_batch_claim_is_taken_over_whole_by_a_flow_now_one_key_per_run(store: SqlStore) -> None:
    """Claimed as a batch of three (``max_keys_per_run=10``), left stale, then served with one key per run."""
    seen: list[str] = []
    batched, registry = _one_key_flow("batched", seen, max_keys_per_run=10)
    keys = ["2024-01-01", "2024-01-02", "2024-01-03"]
    for key in keys:
        p.publish_event(store, registry, "raw", partition_key=key)
    gone = TriggerEvaluator(batched, store)  # a daemon that claims the batch and dies before its run
    gone.evaluate()
    (batch,) = gone.due_runs(4)
    claimed = gone.claim_run(batch)
    assert claimed is not None and len(claimed) == 3
    with store.database.write() as connection:
        connection.execute(update(trigger_requests).values(claimed_at=claimed[0].claimed_at - 3600))

    one_key, _ = _one_key_flow("batched", seen)
    daemon = TriggerDaemon([one_key], store, max_in_flight=4)
    try:
        assert daemon.run_once() == 1  # the claimed batch, whole: its run id starts once
    finally:
        daemon.stop()
    assert daemon.failing == {}
    assert sorted(seen) == keys


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
    reading = {name: getattr(type(store), name) for name in ("list_events_by_ids", "event_rows_by_ids")}

    def counted(name: str) -> Any:
        def read(self: SqlStore, ids: Any) -> Any:
            reads.append(threading.current_thread().name)
            return reading[name](self, ids)

        return read

    for name in reading:
        monkeypatch.setattr(type(store), name, counted(name))
    daemon = TriggerDaemon([flow], store, max_in_flight=3)
    try:
        assert daemon.run_once() == 24
    finally:
        daemon.stop()
    assert len(seen) == 24
    assert all(events == [(event_id, {"rows": 7})] for events in seen.values())
    # Read with the requests, by the caller's thread: one read for all 24 runs, none by a consumer thread.
    assert reads == [threading.current_thread().name]
