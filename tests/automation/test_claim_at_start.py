"""A one-key consumer run claims its request in the transaction that records its start (SPEC §12).

The daemon hands a pending request to a consumer thread under a new run id;
the run's start claims it, records its launch and its row together, or
writes nothing when another daemon claimed it first or an event joined it
since it was read. Exactly once still holds; a daemon gone before the
start leaves the request pending, due at once; a refused start or plan
ends as it did when the claim came first; an unexpected error before the
start holds the request back instead of handing it out again at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import partita as p
from partita.automation.daemon import TriggerDaemon
from partita.automation.evaluation import TriggerEvaluator, run_request
from partita.errors import StoreError
from partita.store.protocol import RequestClaimLost
from partita.store.sql import SqlStore
from partita.store.triggers import TriggerLaunch, TriggerStore

from .conftest import publish

KEYS = ["2024-01-01", "2024-01-02", "2024-01-03"]
ALL = ("pending", "claimed", "finished", "abandoned")


def _flow(ran: list[str], *, last_day: str | None = None) -> p.Flow:
    registry = p.AssetRegistry()
    days = p.DatePartitionDef(start="2024-01-01", end=last_day) if last_day else p.DatePartitionDef()

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def raw() -> int:
        return 1

    @p.asset(partition_def=days, registry=registry)
    def consumer(context: p.AssetContext) -> None:
        ran.append(str(context.partition_key))

    return p.Flow(["consumer"], registry=registry, name="one_key", trigger=p.OnAssetEvents(["raw"]))


def _due(evaluator: TriggerEvaluator) -> Any:
    """Evaluate and take the oldest due request as the daemon hands it out: pending, under a new run id."""
    evaluator.evaluate()
    ((request,), *_) = evaluator.due_runs(1)
    (handed,) = evaluator.unclaimed_run(request)
    assert handed.status == "pending" and handed.run_id is not None
    return handed


def test_the_start_claims_the_request_records_its_launch_and_the_end_finishes_it(store: SqlStore) -> None:
    publish(store, KEYS[0])
    ran: list[str] = []
    evaluator = TriggerEvaluator(_flow(ran), store)
    handed = _due(evaluator)

    result = run_request(evaluator, handed)

    assert result is not None and result.succeeded and ran == [KEYS[0]]
    assert result.run_id == handed.run_id
    (request,) = TriggerStore(store).requests("one_key", ALL)
    assert (request.status, request.run_id, request.tries, request.start_failures) == (
        "finished", handed.run_id, 1, 0
    )
    assert request.claimed_at is not None
    assert TriggerStore(store).launch(handed.run_id) == TriggerLaunch("one_key", handed.id, 1, None)


def test_of_two_daemons_handing_out_one_request_only_one_run_starts(store_url: str) -> None:
    ran: list[str] = []
    stores = [SqlStore(store_url) for _ in range(2)]
    try:
        publish(stores[0], KEYS[0])
        evaluators = [TriggerEvaluator(_flow(ran), s) for s in stores]
        evaluators[0].evaluate()
        handed = [evaluator.unclaimed_run(evaluator.due_runs(1)[0][0])[0] for evaluator in evaluators]
        assert handed[0].id == handed[1].id and handed[0].run_id != handed[1].run_id
        barrier, outcomes = threading.Barrier(2, timeout=30), {}

        def start(index: int) -> None:
            barrier.wait()
            try:
                outcomes[index] = run_request(evaluators[index], handed[index])
            except RequestClaimLost as exc:
                outcomes[index] = exc

        threads = [threading.Thread(target=start, args=(index,)) for index in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)

        lost = [o for o in outcomes.values() if isinstance(o, RequestClaimLost)]
        (won,) = [o for o in outcomes.values() if not isinstance(o, RequestClaimLost)]
        assert len(lost) == 1 and "changed since it was read" in str(lost[0])
        assert won.succeeded and ran == [KEYS[0]]
        assert [run.header.run_id for run in stores[0].list_runs()] == [won.run_id]
        triggers = TriggerStore(stores[0])
        (request,) = triggers.requests("one_key", ALL)
        assert (request.status, request.run_id, request.tries) == ("finished", won.run_id, 1)
        loser = next(h.run_id for h in handed if h.run_id != won.run_id)
        assert triggers.launch(loser) is None and triggers.run_status(loser) is None
    finally:
        for s in stores:
            s.close()


def test_a_daemon_gone_before_the_start_leaves_the_request_due_at_once(store: SqlStore) -> None:
    publish(store, KEYS[0])
    ran: list[str] = []
    _due(TriggerEvaluator(_flow(ran), store))  # handed out, then the daemon died: nothing was written

    (request,) = TriggerStore(store).requests("one_key", ALL)
    assert (request.status, request.run_id, request.claimed_at) == ("pending", None, None)
    # No stale claim to wait for: the next daemon starts it in its first pass.
    assert TriggerDaemon([_flow(ran)], store).run_once() == 1
    assert ran == [KEYS[0]]


def test_a_claim_lost_to_another_daemon_is_neither_a_start_nor_a_failed_one(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(store, *KEYS)
    ran: list[str] = []
    daemon = TriggerDaemon([_flow(ran)], store, max_in_flight=1)
    (evaluator,) = daemon.evaluators
    rival, read = TriggerEvaluator(_flow([]), store), evaluator.due_runs

    def raced(runs: int, starting: Any = ()) -> list[Any]:
        batches = read(runs, starting)
        if batches and batches[0][0].partition_key == KEYS[0]:  # the rival claims it first
            assert rival.claim(batches[0][0]) is not None
        return batches

    monkeypatch.setattr(evaluator, "due_runs", raced)
    assert daemon.run_once() == 2
    assert (daemon.started_runs, daemon.unstarted_runs) == (2, 0)
    assert sorted(ran) == KEYS[1:]
    (claimed,) = TriggerStore(store).requests("one_key", ("claimed",))
    assert claimed.partition_key == KEYS[0] and TriggerStore(store).run_status(claimed.run_id) is None


def test_a_refused_start_puts_the_request_off_without_claiming_it(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(store, KEYS[0])
    ran: list[str] = []
    evaluator = TriggerEvaluator(_flow(ran), store)
    handed = _due(evaluator)

    def refused(self: SqlStore, run: Any) -> None:
        raise StoreError(f"store {self.url}: cannot record the run's start: database is locked")

    monkeypatch.setattr(SqlStore, "record_run_started", refused)
    assert run_request(evaluator, handed) is None

    (request,) = TriggerStore(store).requests("one_key", ALL)
    assert (request.status, request.run_id, request.tries, request.start_failures) == ("pending", None, 0, 1)
    assert request.not_before is not None and request.not_before > time.time()
    assert "database is locked" in (request.last_error or "")
    assert TriggerStore(store).launch(handed.run_id) is None and store.list_runs() == []


def test_a_start_refused_when_putting_off_fails_too_is_held_back_by_the_daemon(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(store, KEYS[0])
    ran: list[str] = []
    starts: list[str] = []

    def refused(self: SqlStore, run: Any) -> None:
        starts.append(run.run_id)
        raise StoreError(f"store {self.url}: cannot record the run's start: disk I/O error")

    def unwritable(self: TriggerStore, *args: Any) -> bool:
        raise StoreError("store: cannot put off a trigger request: disk I/O error")

    monkeypatch.setattr(SqlStore, "record_run_started", refused)
    monkeypatch.setattr(TriggerStore, "defer", unwritable)
    daemon = TriggerDaemon([_flow(ran)], store)
    (evaluator,) = daemon.evaluators

    assert daemon.run_once() == 0 and daemon.unstarted_runs == 1
    (request,) = TriggerStore(store).requests("one_key", ALL)
    assert (request.status, request.start_failures, request.not_before) == ("pending", 0, None)
    # Still due in the store, but this daemon does not hand it out again before its backoff.
    assert evaluator.due_runs(1) == [] and len(starts) == 1
    with evaluator._held_lock:  # noqa: SLF001 - the backoff has passed
        evaluator._held = {request.id: time.time() - 1}  # noqa: SLF001
    monkeypatch.undo()
    assert TriggerDaemon([_flow(ran)], store).run_once() == 1 and ran == [KEYS[0]]


def test_a_one_key_run_whose_plan_is_refused_abandons_its_pending_request(store: SqlStore) -> None:
    publish(store, *KEYS)
    ran: list[str] = []
    TriggerEvaluator(_flow(ran), store).evaluate()
    # A new release ends the consumer's days before the last requested key.
    daemon = TriggerDaemon([_flow(ran, last_day=KEYS[1])], store)
    assert daemon.run_once() == 2 and daemon.unstarted_runs == 1
    assert sorted(ran) == KEYS[:2]
    (abandoned,) = TriggerStore(store).requests("one_key", ("abandoned",))
    assert abandoned.partition_key == KEYS[2] and abandoned.run_id is None and abandoned.last_error
    assert TriggerStore(store).requests("one_key", ("pending", "claimed")) == []


def test_run_request_with_a_request_claimed_before_keeps_that_claim(store: SqlStore) -> None:
    """A batch, a takeover or a follow-up is claimed before its run: the start claims nothing more."""
    publish(store, KEYS[0])
    ran: list[str] = []
    evaluator = TriggerEvaluator(_flow(ran), store)
    evaluator.evaluate()
    (request,) = evaluator.due_requests()
    claimed = evaluator.claim(request)
    assert claimed is not None

    result = run_request(evaluator, claimed)

    assert result is not None and result.run_id == claimed.run_id and ran == [KEYS[0]]
    (stored,) = TriggerStore(store).requests("one_key", ALL)
    assert (stored.status, stored.tries) == ("finished", 1)


def test_events_that_join_a_request_after_it_was_handed_out_are_seen_by_its_run(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import partita.automation.consumer_runs as consumer_runs

    publish(store, KEYS[0])
    ran: list[str] = []
    seen: list[list[int]] = []
    flow = _flow(ran)
    evaluator = TriggerEvaluator(flow, store)
    handed = _due(evaluator)
    # Another event of the key is evaluated between the hand-out and the run's start.
    publish(store, KEYS[0])
    evaluator.evaluate()
    (joined,) = TriggerStore(store).requests("one_key")
    assert len(joined.event_ids) == 2 and len(handed.event_ids) == 1

    with pytest.raises(RequestClaimLost):  # the run would not have seen the new event: it does not start
        run_request(evaluator, handed)
    assert ran == [] and store.list_runs() == []

    original = consumer_runs._triggering_events

    def recorded(evaluator: Any, requests: Any) -> Any:
        events = original(evaluator, requests)
        seen.append(sorted(event.id for event in events))
        return events

    monkeypatch.setattr(consumer_runs, "_triggering_events", recorded)
    assert TriggerDaemon([flow], store).run_once() == 1
    assert ran == [KEYS[0]] and seen == [sorted(joined.event_ids)]
    (request,) = TriggerStore(store).requests("one_key", ALL)
    assert request.status == "finished" and request.event_ids == joined.event_ids


def test_an_unexpected_error_before_the_start_holds_the_request_back_instead_of_looping(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import partita.automation.consumer_runs as consumer_runs

    publish(store, KEYS[0])
    ran: list[str] = []
    calls: list[int] = []

    def broken(evaluator: Any, requests: Any) -> Any:
        calls.append(1)
        raise RuntimeError("a bug before the start")

    monkeypatch.setattr(consumer_runs, "_triggering_events", broken)
    daemon = TriggerDaemon([_flow(ran)], store)
    (evaluator,) = daemon.evaluators
    finished = threading.Event()
    worker = threading.Thread(target=lambda: (daemon.run_once(), finished.set()), daemon=True)
    worker.start()
    assert finished.wait(30), "run_once kept handing the request out again"
    assert calls == [1] and ran == [] and store.list_runs() == []
    (request,) = TriggerStore(store).requests("one_key", ALL)
    assert (request.status, request.run_id) == ("pending", None)
    assert evaluator.due_runs(1) == []  # held back for as long as a stale claim would be


def test_a_request_events_keep_joining_is_claimed_before_its_run_and_runs(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim at the start lost to new events is not retried the same way: the next one claims first."""
    import partita.automation.consumer_runs as consumer_runs

    publish(store, KEYS[0])
    ran: list[str] = []
    daemon = TriggerDaemon([_flow(ran)], store, max_in_flight=1)
    (evaluator,) = daemon.evaluators
    original, emitted = consumer_runs._triggering_events, []

    def busy(evaluator: Any, requests: Any) -> Any:
        if len(emitted) < 3:  # a producer emits for the key again while each of the first runs plans
            publish(store, KEYS[0])
            evaluator.evaluate()
            emitted.append(1)
        return original(evaluator, requests)

    monkeypatch.setattr(consumer_runs, "_triggering_events", busy)
    assert daemon.run_once() == 2
    requests = TriggerStore(store).requests("one_key", ALL)
    assert [r.status for r in requests] == ["finished", "finished"] and ran == [KEYS[0], KEYS[0]]
    first, second = requests  # every event of the key, each served by exactly one run
    assert len(first.event_ids) == 2 and len(second.event_ids) == 2
    assert not set(first.event_ids) & set(second.event_ids)


def test_a_pass_that_finds_its_open_request_claimed_meanwhile_opens_the_next_generation(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: a run's start may claim the request between a pass's two reads; its events go on."""
    if store.dialect != "postgresql":
        pytest.skip("SQLite's write lock serializes a pass and a claim")
    publish(store, KEYS[0])
    ran: list[str] = []
    evaluator = TriggerEvaluator(_flow(ran), store)
    handed = _due(evaluator)
    publish(store, KEYS[0])
    original = TriggerStore._open_requests
    rival = SqlStore(store.connect_url)

    def claimed_meanwhile(self: TriggerStore, connection: Any, ids: list[int]) -> Any:
        if ids:  # another connection's run start claims the request before this pass locks it
            assert run_request(TriggerEvaluator(_flow(ran), rival), handed) is not None
        return original(self, connection, ids)

    monkeypatch.setattr(TriggerStore, "_open_requests", claimed_meanwhile)
    try:
        evaluator.evaluate()
    finally:
        rival.close()
    first, second = TriggerStore(store).requests("one_key", ALL)
    assert (first.status, len(first.event_ids)) == ("finished", 1)
    assert (second.status, second.generation, len(second.event_ids)) == ("pending", 1, 1)
    assert set(first.event_ids).isdisjoint(second.event_ids)
