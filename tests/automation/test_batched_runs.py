"""Batched consumer runs (``max_keys_per_run``): many due keys as attempts of one run, each key started once."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import update

import partita as p
from partita.automation import partial_batches
from partita.automation.daemon import TriggerDaemon
from partita.automation.evaluation import TriggerEvaluator, run_request
from partita.errors import DefinitionError
from partita.store.schema import trigger_requests
from partita.store.sql import SqlStore
from partita.store.triggers import TriggerStore

from .conftest import publish

KEYS = [f"2024-01-{day:02d}" for day in range(1, 11)]


class Seen:
    """What each consumer attempt saw: its run and its triggering events' keys."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.attempts: list[tuple[str, str, list[str | None]]] = []

    def add(self, context: p.AssetContext) -> None:
        keys = [event.partition_key for event in context.triggering_events]
        with self.lock:
            self.attempts.append((str(context.partition_key), context.run_id, keys))

    def keys(self) -> list[str]:
        return sorted(key for key, _, _ in self.attempts)

    def runs(self) -> set[str]:
        return {run_id for _, run_id, _ in self.attempts}


def _flow(seen: Seen, max_keys_per_run: int | None, *, last_day: str | None = None) -> p.Flow:
    registry = p.AssetRegistry()
    days = p.DatePartitionDef(start="2024-01-01", end=last_day) if last_day else p.DatePartitionDef()

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def raw() -> int:
        return 1

    @p.asset(partition_def=days, registry=registry)
    def consumer(context: p.AssetContext) -> None:
        seen.add(context)

    trigger = p.OnAssetEvents(["raw"], max_keys_per_run=max_keys_per_run)
    return p.Flow(["consumer"], registry=registry, name="batched", trigger=trigger, record_partition_keys=True)


@pytest.fixture
def seeded(store_url: str) -> Iterator[str]:
    with contextlib.closing(SqlStore(store_url)) as store:
        publish(store, *KEYS)
    yield store_url


def test_due_keys_run_as_batches_with_each_keys_own_events(seeded: str) -> None:
    seen = Seen()
    with contextlib.closing(SqlStore(seeded)) as store:
        publish(store, KEYS[0])  # a second event of the first key joins its request
        daemon = TriggerDaemon([_flow(seen, 4)], store, max_in_flight=2)
        assert daemon.run_once() == 3  # 10 keys, 4 a run
        counts = TriggerStore(store).request_counts("batched")
    assert seen.keys() == KEYS
    assert len(seen.runs()) == 3
    for key, _, event_keys in seen.attempts:
        assert event_keys == [key] * (2 if key == KEYS[0] else 1)
    assert counts.get("finished") == len(KEYS) and counts.get("pending", 0) == 0


def test_without_max_keys_per_run_each_key_has_its_own_run(seeded: str) -> None:
    seen = Seen()
    with contextlib.closing(SqlStore(seeded)) as store:
        assert TriggerDaemon([_flow(seen, None)], store).run_once() == len(KEYS)
    assert seen.keys() == KEYS and len(seen.runs()) == len(KEYS)


def test_two_daemons_racing_over_batches_start_each_key_once(seeded: str) -> None:
    seen = Seen()
    flow = _flow(seen, 3)
    stores = [SqlStore(seeded) for _ in range(2)]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def serve(store: SqlStore) -> None:
        try:
            barrier.wait()
            TriggerDaemon([flow], store, max_in_flight=2).run_once()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=serve, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert not errors
    assert seen.keys() == KEYS  # every key once, whichever daemon won it


def test_a_claim_lost_in_part_runs_only_the_keys_won(seeded: str) -> None:
    seen = Seen()
    flow = _flow(seen, 10)
    with contextlib.closing(SqlStore(seeded)) as store:
        first, second = TriggerEvaluator(flow, store), TriggerEvaluator(flow, store)
        first.evaluate()
        (batch,) = first.due_runs(4)
        taken = first.claim_run(batch[:4])  # another daemon took these meanwhile
        assert taken is not None and len(taken) == 4
        claimed = second.claim_run(batch)
        assert claimed is not None and [r.partition_key for r in claimed] == KEYS[4:]
        assert first.claim_run(batch[:4]) is None
        run_request(second, claimed)
        run_request(first, taken)
    assert seen.keys() == KEYS and len(seen.runs()) == 2


def test_a_pass_whose_claim_another_daemon_won_refills_the_slot_at_once(
    seeded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass reads only what its free slots take: a lost claim makes it read again, not end empty."""
    seen = Seen()
    flow = _flow(seen, None)
    with contextlib.closing(SqlStore(seeded)) as store:
        daemon = TriggerDaemon([flow], store, max_in_flight=1)
        (evaluator,) = daemon.evaluators
        rival, read, won = TriggerEvaluator(flow, store), evaluator.due_runs, []

        def raced(runs: int, *starting: Any) -> list[Any]:
            batches = read(runs, *starting)
            assert len(batches) <= runs
            if not won:  # the rival claims the first read's run between the read and this daemon's claim
                won.append(rival.claim_run(batches[0]))
            return batches

        monkeypatch.setattr(evaluator, "due_runs", raced)
        # run_once ends at the first pass that claims nothing: the lost claim must not be that pass.
        assert daemon.run_once() == len(KEYS) - 1
        assert won[0] is not None and won[0][0].partition_key == KEYS[0]
    assert seen.keys() == KEYS[1:]


def test_a_stale_batch_claim_is_taken_over_whole_and_runs_once(seeded: str) -> None:
    seen = Seen()
    flow = _flow(seen, 10)
    with contextlib.closing(SqlStore(seeded)) as store:
        dead = TriggerEvaluator(flow, store)
        dead.evaluate()
        (batch,) = dead.due_runs(4)
        claimed = dead.claim_run(batch)  # its daemon dies before starting the run
        assert claimed is not None and len(claimed) == len(KEYS)
        with store.database.write() as connection:
            connection.execute(update(trigger_requests).values(claimed_at=claimed[0].claimed_at - 3600))
        survivor = TriggerEvaluator(flow, store)
        (stale,) = survivor.due_runs(4)
        assert [r.partition_key for r in stale] == KEYS
        taken = survivor.claim_run(stale)
        assert taken is not None and {r.run_id for r in taken} == {claimed[0].run_id}  # the same run id
        assert dead.claim_run(batch) is None  # the dead daemon's pending view is stale: nothing is pending
        run_request(survivor, taken)
        assert survivor.due_runs(4) == []
        # The dead daemon wakes up and starts the run it claimed: the store refuses a second start.
        assert run_request(dead, claimed) is None
    assert seen.keys() == KEYS and seen.runs() == {claimed[0].run_id}


def test_a_key_the_plan_refuses_is_abandoned_alone(seeded: str) -> None:
    seen = Seen()
    with contextlib.closing(SqlStore(seeded)) as store:
        TriggerEvaluator(_flow(seen, 10), store).evaluate()  # every key is requested
        # A new release ends the consumer's days before the last three requested keys.
        TriggerDaemon([_flow(seen, 10, last_day="2024-01-07")], store).run_once()
        abandoned = TriggerStore(store).requests("batched", ("abandoned",))
    assert seen.keys() == KEYS[:7] and len(seen.runs()) == 1
    assert sorted(r.partition_key for r in abandoned) == KEYS[7:]
    assert all(r.last_error for r in abandoned)


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "10"])
def test_max_keys_per_run_must_be_a_whole_number_of_keys(value: Any) -> None:
    with pytest.raises(DefinitionError, match="OnAssetEvents max_keys_per_run must be a whole number"):
        p.OnAssetEvents(["raw"], max_keys_per_run=value)
    with pytest.raises(DefinitionError, match="CronPartitions max_keys_per_run must be a whole number"):
        p.CronPartitions("0 0 * * *", start="2024-01-01", max_keys_per_run=value)


def test_a_schedule_catches_up_missed_partitions_in_batches(store: SqlStore) -> None:
    registry = p.AssetRegistry()
    hours = p.HourlyPartitionDef("UTC")
    seen: list[tuple[str, str]] = []

    @p.asset(partition_def=hours, registry=registry)
    def scheduled(context: p.AssetContext) -> None:
        seen.append((hours.format_key(context.partition_key), context.run_id))

    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    trigger = p.CronPartitions("0 * * * *", start=start, max_keys_per_run=2)
    flow = p.Flow(["scheduled"], registry=registry, name="hourly", trigger=trigger)
    evaluator = TriggerEvaluator(flow, store)
    assert len(evaluator.evaluate(now=start + dt.timedelta(hours=5, minutes=1)).scheduled) == 5
    for batch in evaluator.due_runs(10):
        claimed = evaluator.claim_run(batch)
        assert claimed is not None
        run_request(evaluator, claimed)
    assert [key for key, _ in seen] == [f"2024-01-01T0{hour}" for hour in range(5)]
    runs = [run_id for _, run_id in seen]
    assert [runs.count(run_id) for run_id in dict.fromkeys(runs)] == [2, 2, 1]


@contextlib.contextmanager
def _serving(daemon: TriggerDaemon) -> Iterator[None]:
    thread = threading.Thread(target=daemon.serve)
    thread.start()
    try:
        yield
    finally:
        daemon.stop()
        thread.join()


def _held_flow(seen: Seen, max_keys_per_run: int, held: str, release: threading.Event) -> p.Flow:
    """A batched consumer whose attempt of ``held`` waits for ``release``: its run stays in flight."""
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def consumer(context: p.AssetContext) -> None:
        seen.add(context)
        if str(context.partition_key) == held:
            assert release.wait(30)

    trigger = p.OnAssetEvents(["raw"], max_keys_per_run=max_keys_per_run)
    return p.Flow(["consumer"], registry=registry, name="batched", trigger=trigger, record_partition_keys=True)


def _until(condition: Any, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@contextlib.contextmanager
def _first_key_held(
    store: SqlStore, seen: Seen, release: threading.Event, max_keys_per_run: int
) -> Iterator[TriggerDaemon]:
    """A serving daemon whose run of the first key (a batch of one) is in flight until ``release``."""
    flow = _held_flow(seen, max_keys_per_run, KEYS[0], release)
    daemon = TriggerDaemon([flow], store, max_in_flight=4, poll_interval=0.05)
    with _serving(daemon):
        publish(store, KEYS[0])
        _until(lambda: len(seen.attempts) == 1)
        yield daemon


def test_keys_due_while_a_partial_batch_runs_start_together_when_it_ends(store_url: str) -> None:
    seen, release = Seen(), threading.Event()
    with contextlib.closing(SqlStore(store_url)) as store, _first_key_held(store, seen, release, 10) as daemon:
        # The first key's batch runs: it is held.
        for key in KEYS[1:6]:
            publish(store, key)
        time.sleep(0.5)  # ten polls: the requests are recorded, but a second partial batch waits
        assert len(seen.attempts) == 1 and daemon.started_runs == 0
        assert TriggerStore(store).request_counts("batched").get("pending") == 5
        release.set()
        _until(lambda: len(seen.attempts) == 6)
        _until(lambda: daemon.started_runs == 2)
    assert seen.keys() == KEYS[:6]
    runs = [run_id for _, run_id, _ in seen.attempts]
    assert [runs.count(run_id) for run_id in dict.fromkeys(runs)] == [1, 5]  # the five keys in one run
    for key, _, event_keys in seen.attempts:
        assert event_keys == [key]


def test_full_batches_start_while_a_partial_batch_runs(store_url: str) -> None:
    seen, release = Seen(), threading.Event()
    with contextlib.closing(SqlStore(store_url)) as store, _first_key_held(store, seen, release, 3) as daemon:
        publish(store, *KEYS[1:8])  # two full batches of three, and one key over
        _until(lambda: len(seen.attempts) == 7)  # the full batches run beside the held one
        time.sleep(0.3)
        assert sorted(seen.keys()) == sorted(KEYS[:7])  # the key over waits for the partial batch
        release.set()
        _until(lambda: len(seen.attempts) == 8)
        _until(lambda: daemon.started_runs == 4)
    assert seen.keys() == KEYS[:8] and len(seen.runs()) == 4


def test_one_key_runs_never_wait_for_each_other(store_url: str) -> None:
    seen, release = Seen(), threading.Event()
    with contextlib.closing(SqlStore(store_url)) as store, _first_key_held(store, seen, release, 1) as daemon:
        publish(store, *KEYS[1:4])
        _until(lambda: len(seen.attempts) == 4)  # each its own run, beside the held one
        release.set()
        _until(lambda: daemon.started_runs == 4)
    assert len(seen.runs()) == 4


def test_keys_stop_waiting_for_a_partial_batch_that_outlives_the_wait(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partial batch stuck in a slow body holds the flow's later keys back only for `PARTIAL_BATCH_WAIT`."""
    monkeypatch.setattr(partial_batches, "PARTIAL_BATCH_WAIT", 0.5)
    seen, release = Seen(), threading.Event()
    with contextlib.closing(SqlStore(store_url)) as store, _first_key_held(store, seen, release, 10) as daemon:
        publish(store, *KEYS[1:4])
        time.sleep(0.2)
        assert len(seen.attempts) == 1  # within the wait, the keys wait for the held batch
        _until(lambda: len(seen.attempts) == 4, seconds=10)  # then they run beside it, held still
        assert not release.is_set()
        release.set()
        _until(lambda: daemon.started_runs == 2)
    runs = [run_id for _, run_id, _ in seen.attempts]
    assert [runs.count(run_id) for run_id in dict.fromkeys(runs)] == [1, 3]


def test_a_partial_batch_that_ended_at_once_holds_the_next_one_back_for_the_gap(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flow starts a partial batch at most every `PARTIAL_BATCH_GAP`, however soon the last one ended.

    Without it, a run that ends quickly leaves only the keys due meanwhile to
    the next one: a steady producer then got a run per handful of keys.
    """
    monkeypatch.setattr(partial_batches, "PARTIAL_BATCH_GAP", 0.6)
    seen = Seen()
    with contextlib.closing(SqlStore(store_url)) as store:
        daemon = TriggerDaemon([_flow(seen, 10)], store, max_in_flight=4, poll_interval=0.05)
        with _serving(daemon):
            publish(store, KEYS[0])
            _until(lambda: daemon.started_runs == 1)  # a partial batch of one, over at once
            began = time.monotonic()
            publish(store, *KEYS[1:4])
            time.sleep(0.2)
            if time.monotonic() - began < 0.5:  # still within the gap (a slow machine may have passed it)
                assert len(seen.attempts) == 1
            _until(lambda: len(seen.attempts) == 4)  # after the gap, a poll starts them together
            _until(lambda: daemon.started_runs == 2)
    runs = [run_id for _, run_id, _ in seen.attempts]
    assert [runs.count(run_id) for run_id in dict.fromkeys(runs)] == [1, 3]
