"""Trigger declarations and evaluation (SPEC §12) on both store backends."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

import partita as p
from partita.automation.daemon import TriggerDaemon
from partita.automation.evaluation import TriggerEvaluator, run_request
from partita.errors import DefinitionError
from partita.store.sql import SqlStore
from partita.store.triggers import TriggerStore

from .conftest import process

DAYS = p.DatePartitionDef()
UTC_HOURS = p.HourlyPartitionDef("UTC")


# -- declarations ------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: p.CronPartitions("not a cron", start="2024-01-01T00:00"),
        lambda: p.CronPartitions("61 * * * *", start="2024-01-01T00:00"),
        lambda: p.CronPartitions("0 * * *", start="2024-01-01T00:00"),
        lambda: p.CronPartitions("0 * * * *", start=None),
        lambda: p.CronPartitions("0 * * * *", start="yesterday"),
        lambda: p.CronPartitions("0 * * * *", start="2024-01-01T00:00", timezone="Mars/Olympus"),
        lambda: p.OnAssetEvents([]),
        lambda: p.OnAssetEvents(["raw"], mapper="identity"),
        lambda: p.Flow(["x"], trigger="0 * * * *"),
    ],
)
def test_bad_declarations_are_definition_errors(build: Any) -> None:
    with pytest.raises(DefinitionError):
        build()


def test_cron_start_is_required() -> None:
    with pytest.raises((TypeError, DefinitionError)):
        p.CronPartitions("0 * * * *")  # type: ignore[call-arg]


def test_declarations_describe_themselves() -> None:
    trigger = p.OnAssetEvents("raw", mapper=p.RollupMapper("day"))
    assert trigger.assets == ("raw",)
    assert trigger.describe()["kind"] == "asset_events"
    cron = p.CronPartitions("0 * * * *", start="2024-01-01T00:00", timezone="Europe/Berlin")
    assert cron.start.tzinfo is not None and cron.start.utcoffset() == dt.timedelta(hours=1)
    assert cron.describe() == {
        "kind": "cron",
        "cron": "0 * * * *",
        "timezone": "Europe/Berlin",
        "start": cron.start.isoformat(),
        "catchup": "all",
        "max_keys_per_run": 1,
    }


# -- helpers -------------------------------------------------------------------------


class Setup:
    def __init__(
        self,
        store: SqlStore,
        up_def: Any = DAYS,
        down_def: Any = DAYS,
        mapper: Any = None,
        name: str = "consumer_flow",
        extra_assets: bool = False,
    ) -> None:
        self.store = store
        self.registry = p.AssetRegistry()
        self.seen: list[tuple[Any, list[int]]] = []

        @p.asset(partition_def=up_def, registry=self.registry)
        def raw() -> int:
            return 1

        @p.asset(partition_def=up_def, registry=self.registry)
        def other() -> int:
            return 1

        @p.asset(partition_def=down_def, registry=self.registry)
        def consumer(context: Any) -> int:
            self.seen.append((context.partition_key, sorted(event.id for event in context.triggering_events)))
            return 1

        self.flow = p.Flow(
            ["consumer"], registry=self.registry, name=name, trigger=p.OnAssetEvents(["raw"], mapper=mapper)
        )
        self.evaluator = TriggerEvaluator(self.flow, store)

    def publish(self, key: Any, asset: str = "raw") -> int:
        return p.publish_event(self.store, self.registry, asset, partition_key=key).id

    def pass_(self) -> list[Any]:
        return process(self.evaluator)


# -- asset-event triggers -----------------------------------------------------------------


def test_identity_trigger_one_run_per_key_with_triggering_events(store: SqlStore) -> None:
    setup = Setup(store)
    first = setup.publish("2024-01-01")
    second = setup.publish("2024-01-02")
    results = setup.pass_()
    assert len(results) == 2
    assert all(result.status == p.RunStatus.SUCCESS for result in results)
    assert sorted(setup.seen) == [(dt.date(2024, 1, 1), [first]), (dt.date(2024, 1, 2), [second])]
    assert len(store.list_runs()) == 2
    # Nothing new: a second pass starts nothing.
    assert setup.pass_() == []
    assert len(store.list_runs()) == 2


def test_coalescing_events_before_run_starts_one_run(store: SqlStore) -> None:
    setup = Setup(store)
    first = setup.publish("2024-01-01")
    report = setup.evaluator.evaluate()
    assert report.ready == {"2024-01-01": [first]}
    second = setup.publish("2024-01-01")
    results = setup.pass_()
    assert len(results) == 1
    assert setup.seen == [(dt.date(2024, 1, 1), [first, second])]


def test_event_after_run_started_queues_one_follow_up(store: SqlStore) -> None:
    setup = Setup(store)
    first = setup.publish("2024-01-01")
    setup.evaluator.evaluate()
    (request,) = setup.evaluator.due_requests()
    claimed = setup.evaluator.claim(request)
    assert claimed is not None
    # Two events arrive while the first run is under way: one follow-up run for both.
    second = setup.publish("2024-01-01")
    run_request(setup.evaluator, claimed)
    third = setup.publish("2024-01-01")
    assert len(setup.pass_()) == 1
    assert setup.seen == [(dt.date(2024, 1, 1), [first]), (dt.date(2024, 1, 1), [second, third])]
    assert setup.pass_() == []


def test_rollup_waits_until_window_complete(store: SqlStore) -> None:
    setup = Setup(store, up_def=UTC_HOURS, down_def=DAYS, mapper=p.RollupMapper("day"))
    ids = [setup.publish(f"2024-03-31T{hour:02d}") for hour in range(23)]
    report = setup.evaluator.evaluate()
    assert report.ready == {}
    assert set(report.waiting) == {"2024-03-31"}
    assert setup.pass_() == []
    assert [w.partition_key for w in TriggerStore(store).waiting("consumer_flow")] == ["2024-03-31"]
    # Still waiting after later passes (never silently dropped).
    assert set(setup.evaluator.evaluate(record=False).waiting) == {"2024-03-31"}
    ids.append(setup.publish("2024-03-31T23"))
    assert len(setup.pass_()) == 1
    assert setup.seen == [(dt.date(2024, 3, 31), ids)]
    assert TriggerStore(store).waiting("consumer_flow") == []


def _counting_key_reads(monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    asked: list[set[str]] = []
    real = TriggerStore.keys_with_events

    def counted(self: TriggerStore, asset: str, keys: Any) -> set[str]:
        asked.append(set(keys))
        return real(self, asset, keys)

    monkeypatch.setattr(TriggerStore, "keys_with_events", counted)
    return asked


def test_a_pass_asks_the_store_only_about_keys_its_own_events_do_not_name(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _counting_key_reads(monkeypatch)
    setup = Setup(store)
    setup.publish("2024-01-01")
    assert setup.evaluator.evaluate().ready.keys() == {"2024-01-01"}
    assert asked == []  # the event itself says its key has one
    # A day over hours: the hours published in an earlier pass are asked for, this pass's own are not.
    rollup = Setup(store, up_def=UTC_HOURS, down_def=DAYS, mapper=p.RollupMapper("day"), name="rollup_flow")
    for hour in range(20):
        rollup.publish(f"2024-03-31T{hour:02d}")
    assert rollup.evaluator.evaluate().waiting.keys() == {"2024-03-31"}
    asked.clear()
    for hour in range(20, 24):
        rollup.publish(f"2024-03-31T{hour:02d}")
    report = rollup.evaluator.evaluate()
    assert report.ready.keys() == {"2024-03-31"}
    assert report.progress["2024-03-31"].present == 24
    assert len(asked) == 1 and len(asked[0]) == 20 and "2024-03-31T20" not in asked[0]


def test_rollup_minimum_count(store: SqlStore) -> None:
    setup = Setup(store, up_def=UTC_HOURS, down_def=DAYS, mapper=p.RollupMapper("day", minimum=3))
    setup.publish("2024-03-31T00")
    setup.publish("2024-03-31T01")
    assert setup.pass_() == []
    setup.publish("2024-03-31T05")
    assert len(setup.pass_()) == 1
    assert setup.seen[0][0] == dt.date(2024, 3, 31)
    assert len(setup.seen[0][1]) == 3


def test_rollup_max_missing_starts_once_all_but_that_many_hours_have_events(store: SqlStore) -> None:
    setup = Setup(store, up_def=UTC_HOURS, down_def=DAYS, mapper=p.RollupMapper("day", max_missing=2))
    for hour in range(21):
        setup.publish(f"2024-06-01T{hour:02d}")
    assert setup.pass_() == []
    setup.publish("2024-06-01T23")
    assert len(setup.pass_()) == 1
    assert len(setup.seen[0][1]) == 22


def test_a_fan_out_trigger_starts_every_hour_of_the_published_day(store: SqlStore) -> None:
    setup = Setup(store, up_def=DAYS, down_def=p.HourlyPartitionDef("Europe/Berlin"), mapper=p.FanOutMapper())
    setup.publish("2024-03-31")  # Berlin's spring-forward day: 23 hours
    results = setup.pass_()
    assert len(results) == 23 and all(result.status == p.RunStatus.SUCCESS for result in results)


def test_paused_flow_starts_nothing(store: SqlStore) -> None:
    setup = Setup(store)
    setup.publish("2024-01-01")
    triggers = TriggerStore(store)
    triggers.set_paused("consumer_flow", True, 0.0)
    report = setup.evaluator.evaluate()
    assert report.paused
    assert setup.pass_() == []
    assert store.list_runs() == []
    triggers.set_paused("consumer_flow", False, 1.0)
    assert len(setup.pass_()) == 1


def test_event_for_unconsumed_asset_is_ignored(store: SqlStore) -> None:
    setup = Setup(store)
    setup.publish("2024-01-01", asset="other")
    report = setup.evaluator.evaluate()
    assert report.new_events == 0 and report.ready == {} and report.rejected == []
    assert setup.pass_() == []
    assert store.list_runs() == []


def test_key_rejected_by_consumer_definition_does_not_block_others(store: SqlStore) -> None:
    upstream = p.StaticPartitionDef("regions_up", ["eu", "us", "asia"])
    downstream = p.StaticPartitionDef("regions", ["eu", "us"])
    setup = Setup(store, up_def=upstream, down_def=downstream)
    bad = setup.publish("asia")
    setup.publish("eu")
    report = setup.evaluator.evaluate(record=False)
    assert [event_id for event_id, _ in report.rejected] == [bad]
    assert len(setup.pass_()) == 1
    assert [key for key, _ in setup.seen] == ["eu"]


class ValueErrorMapper(p.PartitionMapper):
    def downstream_keys(self, upstream_key: str, upstream: Any, downstream: Any) -> tuple[str, ...]:
        if upstream_key == "2024-01-01":
            raise ValueError("bad key")
        return (upstream_key,)

    def requirement(self, downstream_key: str, upstream: Any, downstream: Any) -> Any:
        return p.IdentityMapper().requirement(downstream_key, upstream, downstream)


class BuggyMapper(ValueErrorMapper):
    def downstream_keys(self, upstream_key: str, upstream: Any, downstream: Any) -> tuple[str, ...]:
        if upstream_key == "2024-01-01":
            raise RuntimeError("mapper bug")
        return (upstream_key,)


def test_mapper_raising_value_error_rejects_that_event_only(store: SqlStore) -> None:
    setup = Setup(store, mapper=ValueErrorMapper())
    bad = setup.publish("2024-01-01")
    setup.publish("2024-01-02")
    report = setup.evaluator.evaluate(record=False)
    assert [event_id for event_id, _ in report.rejected] == [bad]
    assert len(setup.pass_()) == 1
    assert [key for key, _ in setup.seen] == [dt.date(2024, 1, 2)]


def test_mapper_raising_any_exception_rejects_that_event_only(store: SqlStore) -> None:
    setup = Setup(store, mapper=BuggyMapper())
    bad = setup.publish("2024-01-01")
    setup.publish("2024-01-02")
    report = setup.evaluator.evaluate(record=False)
    assert [event_id for event_id, _ in report.rejected] == [bad]
    assert len(setup.pass_()) == 1


# -- cron schedules -------------------------------------------------------------------


def _cron_setup(store: SqlStore, partition_def: Any, trigger: p.CronPartitions) -> tuple[TriggerEvaluator, list[Any]]:
    registry = p.AssetRegistry()
    seen: list[Any] = []

    @p.asset(partition_def=partition_def, registry=registry)
    def scheduled(context: Any) -> int:
        seen.append(context.partition_key)
        return 1

    flow = p.Flow(["scheduled"], registry=registry, name="scheduled_flow", trigger=trigger)
    return TriggerEvaluator(flow, store), seen


def test_cron_hourly_keys_strictly_after_start_and_once(store: SqlStore) -> None:
    start = dt.datetime(2024, 1, 1, 0, 0, tzinfo=dt.UTC)
    evaluator, seen = _cron_setup(store, UTC_HOURS, p.CronPartitions("0 * * * *", start=start))
    report = evaluator.evaluate(now=start + dt.timedelta(hours=3, minutes=30))
    # Ticks at 01, 02, 03 name the hours that end there: 00, 01, 02 (nothing before start).
    assert report.scheduled == ["2024-01-01T00", "2024-01-01T01", "2024-01-01T02"]
    again = evaluator.evaluate(now=start + dt.timedelta(hours=3, minutes=45))
    assert again.scheduled == []
    later = evaluator.evaluate(now=start + dt.timedelta(hours=4))
    assert later.scheduled == ["2024-01-01T03"]
    requests = evaluator.due_requests()
    assert [r.partition_key for r in requests] == ["2024-01-01T00", "2024-01-01T01", "2024-01-01T02", "2024-01-01T03"]
    for request in requests:
        claimed = evaluator.claim(request)
        assert claimed is not None
        run_request(evaluator, claimed)
    assert len(seen) == 4
    assert evaluator.due_requests() == []


def test_cron_daily_in_timezone(store: SqlStore) -> None:
    start = dt.datetime(2024, 3, 29)
    trigger = p.CronPartitions("0 0 * * *", start=start, timezone="Europe/Berlin")
    evaluator, _ = _cron_setup(store, DAYS, trigger)
    from zoneinfo import ZoneInfo

    now = dt.datetime(2024, 4, 1, 0, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    report = evaluator.evaluate(now=now)
    assert report.scheduled == ["2024-03-29", "2024-03-30", "2024-03-31"]


def test_cron_nothing_before_first_tick(store: SqlStore) -> None:
    start = dt.datetime(2024, 1, 1, 0, 0, tzinfo=dt.UTC)
    evaluator, _ = _cron_setup(store, UTC_HOURS, p.CronPartitions("0 * * * *", start=start))
    assert evaluator.evaluate(now=start + dt.timedelta(minutes=59)).scheduled == []
    assert evaluator.due_requests() == []


# -- daemon passes -----------------------------------------------------------------


def test_a_full_daemon_still_evaluates_every_flow(store: SqlStore) -> None:
    """One flow's backlog filling the slots must not hide another flow's events."""
    registry = p.AssetRegistry()
    release = threading.Event()

    @p.asset(partition_def=DAYS, registry=registry)
    def left_raw() -> int:
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def right_raw() -> int:
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def left(context: Any) -> int:
        release.wait(30)
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def right(context: Any) -> int:
        return 1

    left_flow = p.Flow(["left"], name="left_flow", registry=registry, trigger=p.OnAssetEvents(["left_raw"]))
    right_flow = p.Flow(["right"], name="right_flow", registry=registry, trigger=p.OnAssetEvents(["right_raw"]))
    for key in ("2026-08-01", "2026-08-02"):
        p.publish_event(store, registry, "left_raw", partition_key=key)
    p.publish_event(store, registry, "right_raw", partition_key="2026-08-01")
    daemon = TriggerDaemon([left_flow, right_flow], store, max_in_flight=1)
    try:
        assert daemon._pass() == 1  # noqa: SLF001 - one pass, the slot taken by the left flow
        pending = TriggerStore(store).requests("right_flow", ("pending",))
        assert [request.partition_key for request in pending] == ["2026-08-01"]
    finally:
        release.set()
    assert daemon.run_once() == 2  # the left flow's second request, then the right flow's
