"""Execution semantics of the core engine (SPEC §5)."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time

import pytest

import partita
from partita import (
    AssetRegistry,
    AttemptStatus,
    DatePartitionDef,
    Flow,
    PartitionDef,
    RunStatus,
    SkipReason,
    StaticPartitionDef,
    asset,
)

DAYS = DatePartitionDef()
KEYS = ["2026-08-08", "2026-08-09", "2026-08-10"]


class AnyKey(PartitionDef):
    """A custom definition: identity normalization, every value is a key."""

    @property
    def domain(self) -> str:
        return "custom:any"


def test_each_selected_key_gets_one_attempt_and_its_own_upstream_output():
    registry = AssetRegistry()
    calls: list[tuple[str, dt.date]] = []

    @asset(partition_def=DAYS, registry=registry)
    def extract(context):
        calls.append(("extract", context.partition_key))
        return context.partition_key.day

    @asset(partition_def=DAYS, registry=registry)
    def load(context, extract):
        calls.append(("load", context.partition_key))
        return (context.partition_key.day, extract)

    result = Flow(["load"], registry=registry).run({"partition_keys": KEYS})

    assert result.status is RunStatus.SUCCESS
    assert sorted(calls) == sorted(
        [("extract", dt.date(2026, 8, d)) for d in (8, 9, 10)] + [("load", dt.date(2026, 8, d)) for d in (8, 9, 10)]
    )
    outputs = [attempt.output for attempt in result.tasks["load"].attempts]
    assert outputs == [(8, 8), (9, 9), (10, 10)]
    assert [attempt.partition_key for attempt in result.tasks["load"].attempts] == [
        dt.date(2026, 8, 8),
        dt.date(2026, 8, 9),
        dt.date(2026, 8, 10),
    ]


def test_unpartitioned_upstream_feeds_every_key_and_runs_once():
    registry = AssetRegistry()
    runs = []

    @asset(registry=registry)
    def rates():
        runs.append(1)
        return 2

    @asset(partition_def=DAYS, registry=registry)
    def priced(context, rates):
        return context.partition_key.day * rates

    result = Flow(["priced"], registry=registry).run({"partition_keys": KEYS})
    assert runs == [1]
    assert [a.output for a in result.tasks["priced"].attempts] == [16, 18, 20]
    assert result.tasks["rates"].attempts[0].partition_key_present is False


def test_unpartitioned_consumer_receives_every_selected_key_in_selection_order():
    registry = AssetRegistry()

    @asset(partition_def=DAYS, registry=registry)
    def daily(context):
        return context.partition_key.day

    @asset(registry=registry)
    def summary(daily):
        return list(daily.items())

    result = Flow(["summary"], registry=registry).run({"partition_keys": ["2026-08-10", "2026-08-08"]})
    assert result.output("summary") == [(dt.date(2026, 8, 10), 10), (dt.date(2026, 8, 8), 8)]


def test_a_failed_key_skips_only_its_own_downstream_and_names_the_blocker():
    registry = AssetRegistry()

    @asset(partition_def=DAYS, registry=registry)
    def extract(context):
        if context.partition_key.day == 9:
            raise RuntimeError("source unavailable")
        return context.partition_key.day

    @asset(partition_def=DAYS, registry=registry)
    def transform(extract):
        return extract * 10

    @asset(partition_def=DAYS, registry=registry)
    def publish(transform):
        return transform + 1

    @asset(partition_def=DAYS, registry=registry)
    def independent(context):
        return "ok"

    result = Flow(["publish", "independent"], registry=registry).run({"partition_keys": KEYS})

    assert result.status is RunStatus.FAILED
    assert [a.status for a in result.tasks["extract"].attempts] == [
        AttemptStatus.SUCCESS,
        AttemptStatus.FAILED,
        AttemptStatus.SUCCESS,
    ]
    failed = result.tasks["extract"].attempts[1]
    assert isinstance(failed.exception, RuntimeError)
    assert failed.failure is not None and failed.failure.type == "builtins.RuntimeError"
    assert "source unavailable" in failed.failure.traceback

    skipped_transform = result.tasks["transform"].attempts[1]
    assert skipped_transform.status is AttemptStatus.SKIPPED
    assert skipped_transform.reason is SkipReason.DEPENDENCY_FAILED
    assert skipped_transform.blocked_by == (failed,)
    skipped_publish = result.tasks["publish"].attempts[1]
    assert skipped_publish.reason is SkipReason.DEPENDENCY_FAILED
    assert skipped_publish.blocked_by == (skipped_transform,)

    assert [a.output for a in result.tasks["publish"].attempts if a.status is AttemptStatus.SUCCESS] == [81, 101]
    assert all(a.status is AttemptStatus.SUCCESS for a in result.tasks["independent"].attempts)


def test_dependencies_are_all_or_nothing_per_key():
    registry = AssetRegistry()
    consumed = []

    @asset(partition_def=DAYS, registry=registry)
    def left(context):
        if context.partition_key.day == 8:
            raise ValueError("left broke")
        return "L"

    @asset(partition_def=DAYS, registry=registry)
    def right(context):
        return "R"

    @asset(partition_def=DAYS, registry=registry)
    def joined(context, left, right):
        consumed.append(context.partition_key)
        return left + right

    result = Flow(["joined"], registry=registry).run({"partition_keys": KEYS[:2]})
    assert consumed == [dt.date(2026, 8, 9)]
    blocked = result.tasks["joined"].attempts[0]
    assert blocked.reason is SkipReason.DEPENDENCY_FAILED
    assert [b.asset_name for b in blocked.blocked_by] == ["left"]


def test_unpartitioned_consumer_of_a_partly_failed_task_is_skipped_with_all_blockers():
    registry = AssetRegistry()

    @asset(partition_def=DAYS, registry=registry)
    def daily(context):
        if context.partition_key.day != 9:
            raise RuntimeError("no data")
        return 1

    @asset(registry=registry)
    def summary(daily):
        raise AssertionError("must not run with incomplete input")

    result = Flow(["summary"], registry=registry).run({"partition_keys": KEYS})
    attempt = result.tasks["summary"].attempts[0]
    assert attempt.reason is SkipReason.DEPENDENCY_FAILED
    assert [b.partition_key for b in attempt.blocked_by] == [dt.date(2026, 8, 8), dt.date(2026, 8, 10)] or [
        b.partition_key for b in attempt.blocked_by
    ] == [dt.date(2026, 8, 10), dt.date(2026, 8, 8)]


def test_ordering_only_dependency_waits_but_passes_no_input():
    registry = AssetRegistry()
    order = []

    @asset(registry=registry)
    def setup():
        order.append("setup")

    @asset(deps=[setup], registry=registry)
    def work():
        order.append("work")
        return "done"

    result = Flow(["work"], registry=registry).run()
    assert order == ["setup", "work"]
    assert result.output("work") == "done"


def test_empty_partitions_skip_partitioned_tasks_with_no_partition_keys():
    registry = AssetRegistry()
    ran = []

    @asset(partition_def=DAYS, registry=registry)
    def daily():
        ran.append("daily")

    @asset(registry=registry)
    def summary(daily):
        ran.append("summary")

    @asset(registry=registry)
    def after(summary):
        ran.append("after")

    result = Flow(["after"], registry=registry).run({"empty_partitions": True})
    assert ran == []
    assert result.status is RunStatus.SUCCESS
    daily_task = result.tasks["daily"]
    assert daily_task.attempts == ()
    assert daily_task.status is AttemptStatus.SKIPPED
    assert daily_task.reason is SkipReason.NO_PARTITION_KEYS
    assert result.tasks["summary"].attempts[0].reason is SkipReason.NO_PARTITION_KEYS
    after_attempt = result.tasks["after"].attempts[0]
    assert after_attempt.reason is SkipReason.DEPENDENCY_FAILED
    assert after_attempt.blocked_by == result.tasks["summary"].attempts


def test_max_concurrency_bounds_simultaneous_sync_bodies_and_is_reached():
    registry = AssetRegistry()
    lock = threading.Lock()
    active = 0
    peak = 0
    barrier = threading.Barrier(3, timeout=10)

    @asset(partition_def=StaticPartitionDef("n", [str(i) for i in range(12)]), registry=registry)
    def work(context):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        if int(context.partition_key) < 3:
            barrier.wait()  # proves three bodies really run at the same time
        time.sleep(0.005)
        with lock:
            active -= 1

    keys = [str(i) for i in range(12)]
    result = Flow(["work"], registry=registry).run({"partition_keys": keys, "max_concurrency": 3})
    assert result.status is RunStatus.SUCCESS
    assert peak == 3


def test_flow_max_concurrency_is_the_default_and_config_overrides_it():
    registry = AssetRegistry()

    @asset(partition_def=DAYS, registry=registry)
    def daily():
        return None

    flow = Flow(["daily"], registry=registry, max_concurrency=2)
    assert flow.plan({"partition_keys": KEYS}).options.max_concurrency == 2
    assert flow.plan({"partition_keys": KEYS, "max_concurrency": 5}).options.max_concurrency == 5


def test_async_bodies_run_on_the_event_loop_and_overlap():
    registry = AssetRegistry()
    threads = set()
    started = 0
    all_started = None

    @asset(partition_def=DAYS, registry=registry)
    async def fetch(context):
        nonlocal started
        threads.add(threading.get_ident())
        started += 1
        if started == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), timeout=10)
        return context.partition_key.day

    async def main():
        nonlocal all_started
        all_started = asyncio.Event()
        result = await Flow(["fetch"], registry=registry).run_async({"partition_keys": KEYS})
        return result, threading.get_ident()

    result, loop_thread = asyncio.run(main())
    assert threads == {loop_thread}
    assert [a.output for a in result.tasks["fetch"].attempts] == [8, 9, 10]


def test_sync_bodies_run_in_worker_threads():
    registry = AssetRegistry()
    seen = []

    @asset(registry=registry)
    def body():
        seen.append(threading.current_thread().name)

    Flow(["body"], registry=registry).run()
    assert seen and seen[0].startswith("partita-worker")


def test_run_inside_a_running_loop_points_to_run_async():
    registry = AssetRegistry()

    @asset(registry=registry)
    def body():
        return 1

    async def main():
        with pytest.raises(partita.ConfigurationError, match="run_async"):
            Flow(["body"], registry=registry).run()

    asyncio.run(main())


def test_context_describes_the_attempt():
    registry = AssetRegistry()
    seen = []

    @asset(partition_def=DAYS, registry=registry)
    def daily(context):
        seen.append(context)

    result = Flow(["daily"], registry=registry).run({"partition_keys": KEYS[:1]})
    (context,) = seen
    assert context.asset_name == "daily"
    assert context.run_id == result.run_id
    assert context.partition_key == dt.date(2026, 8, 8)
    assert context.partition_key_present is True
    assert context.invocation_number == 1
    assert context.logger.name == "partita.asset.daily"


def test_keyboard_interrupt_inside_a_worker_thread_fails_only_that_attempt():
    registry = AssetRegistry()

    @asset(partition_def=DAYS, registry=registry)
    def fragile(context):
        if context.partition_key.day == 9:
            raise KeyboardInterrupt
        return "ok"

    result = Flow(["fragile"], registry=registry).run({"partition_keys": KEYS})
    statuses = [a.status for a in result.tasks["fragile"].attempts]
    assert statuses == [AttemptStatus.SUCCESS, AttemptStatus.FAILED, AttemptStatus.SUCCESS]


class TestFailedPartitionKeys:
    def _run(self, keys):
        registry = AssetRegistry()

        @asset(partition_def=AnyKey(), registry=registry)
        def check(context):
            if not context.partition_key or context.partition_key == "bad":
                raise ValueError("falsey keys fail in this test")
            return context.partition_key

        @asset(registry=registry)
        def plain():
            return 1

        return Flow(["check", "plain"], registry=registry).run({"partition_keys": keys})

    def test_returns_original_falsey_keys_in_attempt_order(self):
        result = self._run(["a", 0, "bad", "", False, "b"])
        failed = result.failed_partition_keys("check")
        assert failed == (0, "bad", "", False)
        assert [type(key) for key in failed] == [int, str, str, bool]
        assert isinstance(failed, tuple)

    def test_unknown_asset_is_a_key_error(self):
        with pytest.raises(KeyError):
            self._run(["a"]).failed_partition_keys("missing")

    def test_unpartitioned_asset_is_a_value_error(self):
        with pytest.raises(ValueError):
            self._run(["a"]).failed_partition_keys("plain")

    def test_no_failures_is_an_empty_tuple(self):
        assert self._run(["a", "b"]).failed_partition_keys("check") == ()

    def test_returned_keys_select_a_follow_up_run(self):
        result = self._run(["a", 0, "b"])
        retry_keys = result.failed_partition_keys("check")
        plan = result.plan
        assert retry_keys == (0,)
        assert plan.key_count == 3


def test_thousands_of_failing_keys_finish_quickly():
    registry = AssetRegistry()

    @asset(partition_def=DAYS, registry=registry)
    def extract():
        raise RuntimeError("down")

    @asset(partition_def=DAYS, registry=registry)
    def transform(extract):
        return extract

    @asset(registry=registry)
    def summary(transform):
        return transform

    start = dt.date(2000, 1, 1)
    keys = [start + dt.timedelta(days=i) for i in range(5000)]
    began = time.perf_counter()
    result = Flow(["summary"], registry=registry).run({"partition_keys": keys})
    elapsed = time.perf_counter() - began
    assert len(result.failed_partition_keys("extract")) == 5000
    assert len(result.tasks["summary"].attempts[0].blocked_by) == 5000
    assert elapsed < 20  # generous: a quadratic scan would take minutes


def test_every_planned_attempt_reaches_a_terminal_status():
    registry = AssetRegistry()

    @asset(partition_def=DAYS, registry=registry)
    def a(context):
        if context.partition_key.day % 2:
            raise RuntimeError("odd")

    @asset(partition_def=DAYS, registry=registry)
    def b(a):
        return None

    plan = Flow(["b"], registry=registry).plan({"partition_range": ("2026-08-01", "2026-08-31")})
    result = Flow(["b"], registry=registry).run(plan)
    attempts = list(result.attempts())
    assert len(attempts) == plan.attempt_count == 62
    assert all(a.status in AttemptStatus for a in attempts)
