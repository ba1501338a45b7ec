"""Cancelling a run (SPEC §5): stop admitting, cancel async bodies, grace for sync bodies.

Cancelling the task that awaits `Flow.run_async` cancels the run. The
cancelled result reaches observers in `RunFinished` before
`asyncio.CancelledError` propagates; every planned attempt in it is terminal.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time

import pytest

import partita as p
from partita.execution.workers import parked_threads

DAYS = p.DatePartitionDef()
WAIT = 10.0  # seconds any wait for work may take before the test fails


def _days(count: int) -> list[dt.date]:
    first = dt.date(2026, 8, 1)
    return [first + dt.timedelta(days=offset) for offset in range(count)]


class Recorder:
    def __init__(self) -> None:
        self.events: list = []

    def on_event(self, event) -> None:
        self.events.append(event)

    @property
    def result(self) -> p.RunResult:
        finished = [event for event in self.events if isinstance(event, p.RunFinished)]
        assert len(finished) == 1, f"expected one RunFinished, got {len(finished)}"
        return finished[0].result

    def started(self) -> list:
        return [event for event in self.events if isinstance(event, p.AttemptStarted)]


async def _cancel_when(task: asyncio.Task, ready) -> None:
    """Wait (bounded) for ``ready`` — an awaitable — then cancel ``task`` and await its end."""
    await asyncio.wait_for(ready, WAIT)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


def _assert_all_terminal(result: p.RunResult) -> None:
    attempts = list(result.attempts())
    assert len(attempts) == result.plan.attempt_count
    terminal = {p.AttemptStatus.SUCCESS, p.AttemptStatus.FAILED, p.AttemptStatus.SKIPPED, p.AttemptStatus.CANCELLED}
    assert all(attempt.status in terminal for attempt in attempts)
    for attempt in attempts:
        if attempt.status is p.AttemptStatus.CANCELLED:
            assert attempt.reason is p.SkipReason.CANCELLED


def test_cancelling_run_async_cancels_running_async_bodies_and_admits_nothing_new():
    registry = p.AssetRegistry()
    keys = _days(6)
    running: list[dt.date] = []
    saw_cancel: list[dt.date] = []
    two_running = None

    @p.asset(partition_def=DAYS, registry=registry)
    async def slow(context):
        running.append(context.partition_key)
        if len(running) == 2:
            two_running.set()
        try:
            await asyncio.Event().wait()  # never set: only cancellation ends this
        except asyncio.CancelledError:
            saw_cancel.append(context.partition_key)
            raise

    @p.asset(partition_def=DAYS, registry=registry)
    def after(slow):
        return slow

    recorder = Recorder()

    async def main():
        nonlocal two_running
        two_running = asyncio.Event()
        flow = p.Flow(["after"], registry=registry, max_concurrency=2)
        task = asyncio.create_task(flow.run_async({"partition_keys": keys}, observers=[recorder]))
        await _cancel_when(task, two_running.wait())

    asyncio.run(main())

    assert sorted(saw_cancel) == sorted(running) == keys[:2]
    assert len(recorder.started()) == 2
    result = recorder.result
    assert result.status is p.RunStatus.CANCELLED
    _assert_all_terminal(result)
    assert all(a.status is p.AttemptStatus.CANCELLED for a in result.attempts())
    assert len(result.tasks["slow"].attempts) == 6
    assert len(result.tasks["after"].attempts) == 6
    assert isinstance(recorder.events[-1], p.RunFinished)


def test_finished_attempts_keep_their_outcome_when_the_run_is_cancelled():
    registry = p.AssetRegistry()
    keys = _days(5)
    blocked = 0
    both_blocked = None

    @p.asset(partition_def=DAYS, registry=registry)
    async def work(context):
        nonlocal blocked
        if context.partition_key == keys[0]:
            return "done early"
        if context.partition_key == keys[1]:
            raise RuntimeError("failed early")
        blocked += 1
        if blocked == 2:
            both_blocked.set()
        await asyncio.Event().wait()

    recorder = Recorder()

    async def main():
        nonlocal both_blocked
        both_blocked = asyncio.Event()
        flow = p.Flow(["work"], registry=registry, max_concurrency=2)
        task = asyncio.create_task(flow.run_async({"partition_keys": keys}, observers=[recorder]))
        await _cancel_when(task, both_blocked.wait())

    asyncio.run(main())

    result = recorder.result
    assert result.status is p.RunStatus.CANCELLED
    _assert_all_terminal(result)
    statuses = [a.status for a in result.tasks["work"].attempts]
    assert statuses == [
        p.AttemptStatus.SUCCESS,
        p.AttemptStatus.FAILED,
        p.AttemptStatus.CANCELLED,
        p.AttemptStatus.CANCELLED,
        p.AttemptStatus.CANCELLED,
    ]
    assert result.tasks["work"].attempts[0].output == "done early"
    assert [a.partition_key for a in result.tasks["work"].attempts] == keys
    assert result.failed_partition_keys("work") == (keys[1],)
    record = result.to_record()
    assert record["status"] == "cancelled"
    assert record["counts"]["cancelled"] == 3


@pytest.mark.parametrize("outcome", ["success", "failed"])
def test_a_running_sync_body_that_finishes_within_the_grace_period_keeps_its_real_outcome(outcome):
    registry = p.AssetRegistry()
    keys = _days(4)
    started = threading.Event()
    proceed = threading.Event()

    @p.asset(partition_def=DAYS, registry=registry)
    def sync_work(context):
        started.set()
        if not proceed.wait(WAIT):
            raise TimeoutError("the test never released the body")
        if outcome == "failed":
            raise RuntimeError("failed after cancel")
        return context.partition_key.day

    @p.asset(partition_def=DAYS, registry=registry)
    def consumer(sync_work):
        return sync_work

    recorder = Recorder()

    async def main():
        flow = p.Flow(["consumer"], registry=registry, max_concurrency=1, cancel_grace_seconds=WAIT)
        task = asyncio.create_task(flow.run_async({"partition_keys": keys}, observers=[recorder]))
        await asyncio.wait_for(asyncio.to_thread(started.wait, WAIT), WAIT)
        task.cancel()
        await asyncio.sleep(0)  # the run sees the cancellation before the body can finish
        proceed.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    began = time.monotonic()
    asyncio.run(main())
    elapsed = time.monotonic() - began

    assert elapsed < WAIT, "the run waited for the whole grace period although the body had finished"
    result = recorder.result
    assert result.status is p.RunStatus.CANCELLED
    _assert_all_terminal(result)
    first = result.tasks["sync_work"].attempts[0]
    if outcome == "success":
        assert first.status is p.AttemptStatus.SUCCESS
        assert first.output == 1
    else:
        assert first.status is p.AttemptStatus.FAILED
        assert str(first.exception) == "failed after cancel"
    # Nothing new was admitted after the cancellation: not other keys, not the consumer.
    assert len(recorder.started()) == 1
    assert [a.status for a in result.tasks["sync_work"].attempts[1:]] == [p.AttemptStatus.CANCELLED] * 3
    consumers = result.tasks["consumer"].attempts
    assert [a.status for a in consumers[1:]] == [p.AttemptStatus.CANCELLED] * 3
    if outcome == "success":
        assert consumers[0].status is p.AttemptStatus.CANCELLED
    else:
        # A consumer of a failed key is skipped, cancellation or not.
        assert consumers[0].status is p.AttemptStatus.SKIPPED
        assert consumers[0].reason is p.SkipReason.DEPENDENCY_FAILED


def test_a_sync_body_that_blocks_forever_does_not_keep_the_run_from_ending():
    registry = p.AssetRegistry()
    started = threading.Event()
    release = threading.Event()

    @p.asset(registry=registry)
    def stuck():
        started.set()
        release.wait(60)
        return "too late"

    @p.asset(registry=registry)
    def downstream(stuck):
        return stuck

    recorder = Recorder()
    grace = 0.2

    async def main():
        flow = p.Flow(["downstream"], registry=registry, cancel_grace_seconds=grace)
        task = asyncio.create_task(flow.run_async(observers=[recorder]))
        await asyncio.wait_for(asyncio.to_thread(started.wait, WAIT), WAIT)
        cancelled_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - cancelled_at

    try:
        waited = asyncio.run(main())
    finally:
        release.set()

    assert grace <= waited < WAIT
    result = recorder.result
    assert result.status is p.RunStatus.CANCELLED
    _assert_all_terminal(result)
    (attempt,) = result.tasks["stuck"].attempts
    assert attempt.status is p.AttemptStatus.CANCELLED
    assert attempt.reason is p.SkipReason.CANCELLED
    assert attempt.output is None
    assert result.tasks["downstream"].attempts[0].status is p.AttemptStatus.CANCELLED


def test_a_started_sync_body_cut_short_by_cancellation_reports_its_invocation():
    registry = p.AssetRegistry()
    started = threading.Event()
    release = threading.Event()

    @p.asset(registry=registry)
    def stuck():
        started.set()
        release.wait(60)

    @p.asset(registry=registry)
    def downstream(stuck):
        return stuck

    recorder = Recorder()

    async def main():
        flow = p.Flow(["downstream"], registry=registry, cancel_grace_seconds=0.05)
        task = asyncio.create_task(flow.run_async(observers=[recorder]))
        await _cancel_when(task, asyncio.to_thread(started.wait, WAIT))

    try:
        asyncio.run(main())
    finally:
        release.set()

    result = recorder.result
    (attempt,) = result.tasks["stuck"].attempts
    assert attempt.status is p.AttemptStatus.CANCELLED
    assert attempt.failure is None  # cancelled, not failed
    (invocation,) = attempt.invocations
    assert invocation.number == 1
    assert invocation.succeeded is False
    assert invocation.failure is not None and invocation.failure.type == "asyncio.exceptions.CancelledError"
    assert invocation.started_at == recorder.started()[0].started_at
    assert invocation.finished_at >= invocation.started_at
    assert result.tasks["stuck"].never_started is False
    assert result.tasks["downstream"].attempts[0].invocations == ()
    assert result.tasks["downstream"].never_started is True


def test_a_cancelled_async_body_reports_the_invocation_it_was_cut_short_in():
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    async def waits(context):
        running.set()
        await asyncio.sleep(3600)

    recorder = Recorder()
    running = None

    async def main():
        nonlocal running
        running = asyncio.Event()
        flow = p.Flow(["waits"], registry=registry, max_concurrency=1)
        task = asyncio.create_task(flow.run_async({"partition_keys": _days(3)}, observers=[recorder]))
        await _cancel_when(task, running.wait())

    asyncio.run(main())

    attempts = recorder.result.tasks["waits"].attempts
    assert [len(attempt.invocations) for attempt in attempts] == [1, 0, 0]
    assert attempts[0].invocations[0].succeeded is False
    assert recorder.result.tasks["waits"].never_started is False


def test_a_zero_grace_period_ends_the_run_without_waiting_for_sync_bodies():
    registry = p.AssetRegistry()
    started = threading.Event()
    release = threading.Event()

    @p.asset(registry=registry)
    def stuck():
        started.set()
        release.wait(60)

    recorder = Recorder()

    async def main():
        flow = p.Flow(["stuck"], registry=registry, cancel_grace_seconds=0)
        task = asyncio.create_task(flow.run_async(observers=[recorder]))
        await _cancel_when(task, asyncio.to_thread(started.wait, WAIT))

    try:
        asyncio.run(main())
    finally:
        release.set()

    assert recorder.result.tasks["stuck"].attempts[0].status is p.AttemptStatus.CANCELLED


def test_no_event_follows_run_finished_when_a_blocked_body_finishes_late():
    registry = p.AssetRegistry()
    started = threading.Event()
    release = threading.Event()
    body_done = threading.Event()

    worker: list[str] = []

    @p.asset(registry=registry)
    def stuck():
        worker.append(threading.current_thread().name)
        started.set()
        release.wait(60)
        body_done.set()
        return "late"

    recorder = Recorder()

    async def main():
        flow = p.Flow(["stuck"], registry=registry, cancel_grace_seconds=0.05)
        task = asyncio.create_task(flow.run_async(observers=[recorder]))
        await _cancel_when(task, asyncio.to_thread(started.wait, WAIT))
        # The loop keeps running while the abandoned body finishes.
        release.set()
        await asyncio.wait_for(asyncio.to_thread(body_done.wait, WAIT), WAIT)
        deadline = time.monotonic() + WAIT
        while worker[0] not in parked_threads():  # its late completion was posted to the loop
            assert time.monotonic() < deadline, "the worker thread never finished posting the late outcome"
            await asyncio.sleep(0.001)
        for _ in range(10):
            await asyncio.sleep(0)

    try:
        asyncio.run(main())
    finally:
        release.set()

    assert isinstance(recorder.events[-1], p.RunFinished)
    assert recorder.result.status is p.RunStatus.CANCELLED


def test_cancelling_during_a_retry_wait_ends_the_run_and_keeps_the_failed_invocation():
    registry = p.AssetRegistry()

    @p.asset(registry=registry, retry=p.RetryPolicy(max_attempts=5, delay=3600.0))
    def flaky():
        raise RuntimeError("try again in an hour")

    retrying = None

    class RetryWatcher(Recorder):
        def on_event(self, event) -> None:
            super().on_event(event)
            if isinstance(event, p.AttemptRetrying):
                retrying.set()

    recorder = RetryWatcher()

    async def main():
        nonlocal retrying
        retrying = asyncio.Event()
        task = asyncio.create_task(p.Flow(["flaky"], registry=registry).run_async(observers=[recorder]))
        await _cancel_when(task, retrying.wait())

    began = time.monotonic()
    asyncio.run(main())

    assert time.monotonic() - began < WAIT
    result = recorder.result
    assert result.status is p.RunStatus.CANCELLED
    (attempt,) = result.tasks["flaky"].attempts
    assert attempt.status is p.AttemptStatus.CANCELLED
    assert attempt.reason is p.SkipReason.CANCELLED
    assert len(attempt.invocations) == 1
    assert attempt.invocations[0].succeeded is False
    assert len(recorder.started()) == 1


def test_every_planned_attempt_of_a_large_cancelled_run_is_terminal():
    registry = p.AssetRegistry()
    keys = _days(300)
    gate = None
    started = 0

    @p.asset(partition_def=DAYS, registry=registry)
    async def first(context):
        nonlocal started
        started += 1
        if started == 10:
            gate.set()
        if started > 5:
            await asyncio.Event().wait()
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def second(first):
        return first

    @p.asset(registry=registry)
    def summary(second):
        return len(second)

    recorder = Recorder()

    async def main():
        nonlocal gate
        gate = asyncio.Event()
        flow = p.Flow(["summary"], registry=registry, max_concurrency=5)
        task = asyncio.create_task(flow.run_async({"partition_keys": keys}, observers=[recorder]))
        await _cancel_when(task, gate.wait())

    asyncio.run(main())

    result = recorder.result
    assert result.status is p.RunStatus.CANCELLED
    assert result.plan.attempt_count == 601
    _assert_all_terminal(result)
    counts = result.counts()
    assert counts[p.AttemptStatus.CANCELLED] > 0
    assert sum(counts.values()) == 601
    assert result.tasks["summary"].attempts[0].status is p.AttemptStatus.CANCELLED


def test_cancellation_reaches_callers_as_cancelled_error_and_observers_get_the_result_first():
    registry = p.AssetRegistry()
    order: list[str] = []
    started = None

    @p.asset(registry=registry)
    async def waits():
        order.append("body started")
        started.set()
        await asyncio.Event().wait()

    class Ordering:
        def on_event(self, event) -> None:
            if isinstance(event, p.RunFinished):
                order.append(f"run finished {event.result.status.value}")

    async def main():
        nonlocal started
        started = asyncio.Event()
        task = asyncio.create_task(p.Flow(["waits"], registry=registry).run_async(observers=[Ordering()]))
        await asyncio.wait_for(started.wait(), WAIT)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            order.append("caller saw CancelledError")

    asyncio.run(main())

    assert order == ["body started", "run finished cancelled", "caller saw CancelledError"]


def test_flow_run_inside_a_running_event_loop_is_a_configuration_error():
    registry = p.AssetRegistry()
    ran: list[int] = []

    @p.asset(registry=registry)
    def single():
        ran.append(1)
        return 1

    flow = p.Flow(["single"], registry=registry)

    async def main():
        with pytest.raises(p.ConfigurationError) as caught:
            flow.run()
        return str(caught.value)

    message = asyncio.run(main())

    assert "run_async" in message
    assert ran == []


def test_module_level_run_inside_a_running_event_loop_is_a_configuration_error():
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def single():
        return 1

    async def main():
        with pytest.raises(p.ConfigurationError):
            p.run(["single"], registry=registry)

    asyncio.run(main())


@pytest.mark.parametrize("grace", [-1, float("nan"), float("inf"), "5", True])
def test_a_bad_cancel_grace_period_is_rejected(grace):
    with pytest.raises((p.DefinitionError, p.ConfigurationError)):
        p.Flow(["anything"], registry=p.AssetRegistry(), cancel_grace_seconds=grace)
