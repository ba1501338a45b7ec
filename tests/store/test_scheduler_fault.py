"""A run whose scheduler faults still ends in the store (`partita.execution.engine`).

The fault is a bug in partita's own settling, not in an asset: the run
raises it. Before, the run's record stayed ``running`` for as long as the
process lived (its heartbeat went on), and the trigger requests a consumer
run served stayed claimed, so their keys never ran again while the daemon
lived.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pytest

import partita as p
from partita.automation.daemon import TriggerDaemon
from partita.errors import StoreError
from partita.execution import discovery as discovery_module
from partita.execution import engine as engine_module
from partita.execution import readiness as readiness_module
from partita.execution import run_result as run_result_module
from partita.store.journal import StoreJournal
from partita.store.sql import SqlStore
from partita.store.triggers import TriggerStore

DAYS = p.DatePartitionDef(start="2001-01-01")
KEYS = [dt.date(2001, 1, 1) + dt.timedelta(days=offset) for offset in range(20)]


def _chain(registry: p.AssetRegistry) -> None:
    @p.asset(partition_def=DAYS, registry=registry)
    def extract() -> int:
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def publish(extract: int) -> int:
        return extract


def _fault_at_walk(monkeypatch: pytest.MonkeyPatch, walk: int) -> None:
    """The ``walk``-th edge walk of settling raises, as a bug there would."""
    original, walks = readiness_module.Readiness.decrement, [0]

    def failing(self: Any, consumer: Any, key_index: int, blocker: Any) -> Any:
        walks[0] += 1
        if walks[0] == walk:
            raise RuntimeError("scheduler bug")
        return original(self, consumer, key_index, blocker)

    monkeypatch.setattr(readiness_module.Readiness, "decrement", failing)


def _faulting_chain(monkeypatch: pytest.MonkeyPatch) -> p.AssetRegistry:
    """The chain, whose third edge walk of settling raises."""
    registry = p.AssetRegistry()
    _chain(registry)
    _fault_at_walk(monkeypatch, 3)
    return registry


def _run_into_the_fault(store: SqlStore, registry: p.AssetRegistry, caplog: pytest.LogCaptureFixture) -> None:
    """Run the chain: the fault is raised, whatever else fails while the run ends (errors are logged)."""
    with caplog.at_level(logging.ERROR, logger="partita.execution"), pytest.raises(RuntimeError, match="scheduler"):
        p.Flow(["publish"], registry=registry, store=store).run({"partition_keys": KEYS})


def _attempts(store: SqlStore, run_id: str) -> list[Any]:
    return [attempt for task in store.get_tasks(run_id) for attempt in task.attempts]


class Ends:
    """The results observers are given when a run ends."""

    def __init__(self) -> None:
        self.results: list[p.RunResult] = []

    def on_event(self, event: object) -> None:
        if isinstance(event, p.RunFinished):
            self.results.append(event.result)


def test_a_faulted_run_is_recorded_failed_with_its_unfinished_attempts_failed_by_the_fault(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = p.AssetRegistry()
    _chain(registry)
    _fault_at_walk(monkeypatch, 5)
    flow = p.Flow(["publish"], registry=registry, store=store, max_concurrency=2)

    with pytest.raises(RuntimeError, match="scheduler bug"):  # the caller still gets the fault
        flow.run({"partition_keys": KEYS})

    [run] = store.list_runs(limit=5)
    assert store.get_run(run.run_id).status == "failed"
    attempts = _attempts(store, run.run_id)
    assert len(attempts) == 2 * len(KEYS)  # every planned attempt recorded once, none left running
    statuses = {attempt.status for attempt in attempts}
    assert statuses <= {"success", "failed"} and "failed" in statuses
    failed = [attempt for attempt in attempts if attempt.status == "failed"]
    assert all("scheduler bug" in attempt.failure.message for attempt in failed)


def test_a_fault_whose_end_the_store_refuses_is_logged_and_the_fault_still_raised(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    registry = _faulting_chain(monkeypatch)

    def refused(self: StoreJournal, result: p.RunResult) -> None:
        self.abandon()  # as the real end does before its write, which the store refuses here
        raise StoreError("the store is gone")

    monkeypatch.setattr(StoreJournal, "end", refused)
    _run_into_the_fault(store, registry, caplog)
    assert "was not recorded: the store is gone" in caplog.text


def test_a_fault_after_every_attempt_succeeded_still_records_the_run_failed(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No attempt is left to fail, yet the run raised: it is not recorded a success."""
    registry = p.AssetRegistry()
    _chain(registry)

    async def broken(*args: object, **kwargs: object) -> p.RunResult:
        raise RuntimeError("scheduler bug in the flow callbacks")

    monkeypatch.setattr(engine_module, "run_flow_callbacks", broken)
    ends = Ends()
    with pytest.raises(RuntimeError, match="flow callbacks"):
        p.Flow(["publish"], registry=registry, store=store).run({"partition_keys": KEYS[:3]}, observers=[ends])

    [run] = store.list_runs(limit=5)
    assert store.get_run(run.run_id).status == "failed"
    assert {attempt.status for attempt in _attempts(store, run.run_id)} == {"success"}
    assert [result.status for result in ends.results] == [p.RunStatus.FAILED]


def test_a_fault_during_discovery_fails_the_run_and_names_the_keys_never_discovered(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")

    @p.asset(partition_def=domain, registry=registry)
    def tenants(context: p.AssetContext) -> None:
        context.partition_keys = ["a", "b"]

    @p.asset(partition_def=domain, registry=registry)
    def load(tenants: object) -> None:
        pass

    def broken(self: object, task: object, keys: object) -> None:
        raise RuntimeError("scheduler bug in the fan-out")

    monkeypatch.setattr(discovery_module.FanOut, "_size", broken)
    ends = Ends()
    with pytest.raises(RuntimeError, match="fan-out"):
        p.Flow(["load"], registry=registry, store=store).run(observers=[ends])

    [result] = ends.results
    assert result.status is p.RunStatus.FAILED
    assert result.tasks["load"].attempts == ()
    assert result.tasks["load"].reason is p.SkipReason.PARTITION_NOT_DISCOVERED  # not "no partition keys"
    [run] = store.list_runs(limit=5)
    assert store.get_run(run.run_id).status == "failed"


def test_a_second_error_while_ending_a_faulted_run_never_hides_the_fault(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    registry = _faulting_chain(monkeypatch)

    def broken(self: object, fault: BaseException) -> None:
        raise ValueError("the state the fault left")

    monkeypatch.setattr(run_result_module.RunResultBuilder, "fail_unfinished", broken)
    _run_into_the_fault(store, registry, caplog)
    assert "failing its unfinished attempts failed" in caplog.text and "the state the fault left" in caplog.text
    [run] = store.list_runs(limit=5)
    assert store.get_run(run.run_id).status == "failed"  # recorded all the same, from what could be built


def test_a_faulted_run_with_no_result_to_record_stops_its_heartbeat(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing can be recorded: the journal is abandoned, so the run is not kept alive by its heartbeat."""
    from partita.store import journal as journal_module

    registry = _faulting_chain(monkeypatch)
    build = run_result_module.RunResultBuilder.build

    def broken(self: object, started_at: object, errors: object, *, failed: bool = False) -> object:
        if failed:
            raise ValueError("the state the fault left")
        return build(self, started_at, errors, failed=failed)  # type: ignore[arg-type]

    monkeypatch.setattr(run_result_module.RunResultBuilder, "build", broken)
    _run_into_the_fault(store, registry, caplog)
    assert "no result could be built after its scheduler fault" in caplog.text
    [run] = store.list_runs(limit=5)
    flushed = {journal._run_id for journal in journal_module._flusher._journals}  # noqa: SLF001
    assert run.run_id not in flushed  # no heartbeat, no flush: nothing of the run is kept alive


def test_a_consumer_run_that_faults_finishes_its_request_instead_of_holding_it_claimed(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    def raw() -> int:
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def consumer() -> None:
        """Settling its success walks the edge to ``downstream``: that walk faults."""

    @p.asset(partition_def=DAYS, registry=registry)
    def downstream(consumer: None) -> None:
        pass

    flow = p.Flow(["downstream"], registry=registry, name="faulty", trigger=p.OnAssetEvents(["raw"]))
    p.publish_event(store, registry, "raw", partition_key="2001-01-01")
    _fault_at_walk(monkeypatch, 1)
    daemon = TriggerDaemon([flow], store, max_in_flight=1)
    daemon.run_once()  # the consumer run's fault is logged; the daemon goes on
    assert (daemon.succeeded_runs, daemon.failed_runs, daemon.unstarted_runs) == (0, 0, 1)

    counts = TriggerStore(store).request_counts("faulty")
    assert counts.get("claimed", 0) == 0, counts  # its run ended: the request is not held
    assert counts.get("finished") == 1, counts
    [run] = store.list_runs(limit=5)
    assert store.get_run(run.run_id).status == "failed"
