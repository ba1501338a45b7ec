"""Execution events delivered to observers (SPEC §5, §14).

A run emits `RunStarted`, then `AttemptStarted` per invocation,
`AttemptRetrying` per retried invocation and `AttemptFinished` per attempt
(skipped ones included), and finally `RunFinished` carrying the result.
Observing never changes a run.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
import threading
import time

import pytest

import partita as p

DAYS = p.DatePartitionDef()
KEYS = ["2026-08-08", "2026-08-09", "2026-08-10"]


class Recorder:
    """Keeps every event, the threads that delivered them, and whether two deliveries ever overlapped."""

    def __init__(self, dwell: float = 0.0) -> None:
        self.events: list = []
        self.threads: set[int] = set()
        self.overlapped = False
        self._delivering = 0
        self._dwell = dwell

    def on_event(self, event) -> None:
        self._delivering += 1
        if self._delivering > 1:
            self.overlapped = True
        self.threads.add(threading.get_ident())
        self.events.append(event)
        if self._dwell:
            time.sleep(self._dwell)  # gives another thread the chance to deliver meanwhile, if it could
        self._delivering -= 1

    def of(self, kind) -> list:
        return [event for event in self.events if isinstance(event, kind)]


def _pipeline(registry, *, fail_day=None, retry_day=None):
    """extract -> publish over DAYS; ``fail_day`` fails extract; ``retry_day`` fails it once."""

    @p.asset(partition_def=DAYS, registry=registry, retry=p.RetryPolicy(max_attempts=2, delay=5.0))
    def extract(context):
        day = context.partition_key.day
        if day == fail_day:
            raise RuntimeError("extract failed")
        if day == retry_day and context.invocation_number == 1:
            raise RuntimeError("transient")
        return day

    @p.asset(partition_def=DAYS, registry=registry)
    def publish(context, extract):
        return extract * 10

    return p.Flow(["publish"], registry=registry, clock=p.FastForwardClock())


def _summary(result):
    return {
        name: [(a.partition_key, a.status, a.reason, a.output, len(a.invocations)) for a in task.attempts]
        for name, task in result.tasks.items()
    }


def test_a_run_starts_with_run_started_and_ends_with_run_finished_carrying_the_result():
    registry = p.AssetRegistry()
    flow = _pipeline(registry)
    recorder = Recorder()

    result = flow.run({"partition_keys": KEYS}, observers=[recorder])

    first, last = recorder.events[0], recorder.events[-1]
    assert isinstance(first, p.RunStarted)
    assert first.run_id == result.run_id
    assert isinstance(first.plan, p.FlowPlan)
    assert first.plan.attempt_count == 6
    assert isinstance(last, p.RunFinished)
    assert last.result is result
    assert len(recorder.of(p.RunStarted)) == 1
    assert len(recorder.of(p.RunFinished)) == 1


def test_every_attempt_gets_one_started_and_one_finished_event_in_order():
    registry = p.AssetRegistry()
    flow = _pipeline(registry)
    recorder = Recorder()

    result = flow.run({"partition_keys": KEYS}, observers=[recorder])

    started = recorder.of(p.AttemptStarted)
    finished = recorder.of(p.AttemptFinished)
    assert len(started) == 6
    assert len(finished) == 6
    assert all(event.run_id == result.run_id for event in started + finished)
    assert all(event.invocation == 1 and event.partition_key_present for event in started)
    assert {(e.asset_name, e.partition_key) for e in started} == {
        (name, dt.date(2026, 8, day)) for name in ("extract", "publish") for day in (8, 9, 10)
    }
    # Each attempt's finish follows its start; an upstream finishes before its consumer starts.
    position = {id(event): index for index, event in enumerate(recorder.events)}
    for event in finished:
        attempt = event.attempt
        (start,) = [s for s in started if (s.asset_name, s.partition_key) == (attempt.asset_name, attempt.partition_key)]
        assert position[id(start)] < position[id(event)]
    for start in (s for s in started if s.asset_name == "publish"):
        (upstream,) = [f for f in finished if (f.attempt.asset_name, f.attempt.partition_key) == ("extract", start.partition_key)]
        assert position[id(upstream)] < position[id(start)]
    # The finished events carry the very attempts the result holds.
    result_attempts = {id(a) for a in result.attempts()}
    assert {id(event.attempt) for event in finished} == result_attempts


def test_skipped_attempts_get_a_finished_event_without_a_started_event():
    registry = p.AssetRegistry()
    flow = _pipeline(registry, fail_day=9)
    recorder = Recorder()

    result = flow.run({"partition_keys": KEYS}, observers=[recorder])

    assert result.status is p.RunStatus.FAILED
    finished = recorder.of(p.AttemptFinished)
    assert len(finished) == 6
    skipped = [e.attempt for e in finished if e.attempt.status is p.AttemptStatus.SKIPPED]
    (skip,) = skipped
    assert skip.asset_name == "publish"
    assert skip.partition_key == dt.date(2026, 8, 9)
    assert skip.reason is p.SkipReason.DEPENDENCY_FAILED
    assert ("publish", dt.date(2026, 8, 9)) not in {(e.asset_name, e.partition_key) for e in recorder.of(p.AttemptStarted)}
    failed = [e.attempt for e in finished if e.attempt.status is p.AttemptStatus.FAILED]
    assert [(a.asset_name, a.partition_key) for a in failed] == [("extract", dt.date(2026, 8, 9))]
    assert isinstance(recorder.events[-1], p.RunFinished)
    assert recorder.events[-1].result.status is p.RunStatus.FAILED


def test_deliberately_empty_selection_emits_run_events_and_unpartitioned_attempts_only():
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def settings():
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def daily(context, settings):
        return settings

    recorder = Recorder()
    p.Flow(["daily"], registry=registry).run({"empty_partitions": True}, observers=[recorder])

    kinds = [type(event).__name__ for event in recorder.events]
    assert kinds == ["RunStarted", "AttemptStarted", "AttemptFinished", "RunFinished"]
    assert recorder.events[1].asset_name == "settings"
    assert recorder.events[1].partition_key_present is False


def test_retries_emit_attempt_retrying_between_invocations():
    registry = p.AssetRegistry()
    flow = _pipeline(registry, retry_day=8)
    recorder = Recorder()

    result = flow.run({"partition_keys": ["2026-08-08"]}, observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    extract_events = [
        event
        for event in recorder.events
        if getattr(event, "asset_name", None) == "extract"
        or (isinstance(event, p.AttemptFinished) and event.attempt.asset_name == "extract")
    ]
    assert [type(event).__name__ for event in extract_events] == [
        "AttemptStarted",
        "AttemptRetrying",
        "AttemptStarted",
        "AttemptFinished",
    ]
    first, retrying, second, finished = extract_events
    assert (first.invocation, second.invocation) == (1, 2)
    assert retrying.invocation == 1
    assert retrying.partition_key == dt.date(2026, 8, 8)
    assert retrying.partition_key_present is True
    assert retrying.delay == 5.0
    assert isinstance(retrying.failure, p.FailureInfo)
    assert retrying.failure.message == "transient"
    assert retrying.run_id == result.run_id
    assert finished.attempt.status is p.AttemptStatus.SUCCESS
    assert len(finished.attempt.invocations) == 2


def test_observers_receive_events_one_at_a_time_in_a_consistent_order():
    registry = p.AssetRegistry()
    flow = _pipeline(registry, fail_day=10, retry_day=9)
    recorder = Recorder(dwell=0.001)

    flow.run({"partition_keys": KEYS}, observers=[recorder])

    # Worker threads may settle successes themselves: events come from any of them, never two at once.
    assert not recorder.overlapped
    open_invocations = collections.Counter()
    for event in recorder.events[1:-1]:
        if isinstance(event, p.AttemptStarted):
            open_invocations[(event.asset_name, event.partition_key)] += 1
        elif isinstance(event, p.AttemptRetrying):
            open_invocations[(event.asset_name, event.partition_key)] -= 1
        elif isinstance(event, p.AttemptFinished):
            token = (event.attempt.asset_name, event.attempt.partition_key)
            if event.attempt.status is not p.AttemptStatus.SKIPPED:
                open_invocations[token] -= 1
        assert all(count in (0, 1) for count in open_invocations.values())
    assert all(count == 0 for count in open_invocations.values())


def test_async_bodies_and_run_async_emit_the_same_events():
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    async def daily(context):
        await asyncio.sleep(0)
        return context.partition_key.day

    recorder = Recorder()

    async def main():
        return await p.Flow(["daily"], registry=registry).run_async({"partition_keys": KEYS}, observers=[recorder])

    result = asyncio.run(main())

    kinds = collections.Counter(type(event).__name__ for event in recorder.events)
    assert kinds == {"RunStarted": 1, "AttemptStarted": 3, "AttemptFinished": 3, "RunFinished": 1}
    assert recorder.events[-1].result is result


def test_module_level_run_passes_observers():
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def single():
        return 1

    recorder = Recorder()
    result = p.run(["single"], registry=registry, observers=[recorder])

    assert [type(event).__name__ for event in recorder.events] == [
        "RunStarted",
        "AttemptStarted",
        "AttemptFinished",
        "RunFinished",
    ]
    assert recorder.events[-1].result is result


def test_a_recorder_satisfies_the_observer_protocol():
    assert isinstance(Recorder(), p.ExecutionObserver)


class Exploding:
    def __init__(self, on=None) -> None:
        self.on = on
        self.calls = 0

    def on_event(self, event) -> None:
        self.calls += 1
        if self.on is None or isinstance(event, self.on):
            raise RuntimeError("observer broke")


@pytest.mark.parametrize(
    "raises_on",
    [None, p.RunStarted, p.AttemptStarted, p.AttemptRetrying, p.AttemptFinished, p.RunFinished],
    ids=["every", "run-started", "attempt-started", "attempt-retrying", "attempt-finished", "run-finished"],
)
def test_an_observer_that_raises_does_not_change_the_run(raises_on, caplog):
    plain = _pipeline(p.AssetRegistry(), fail_day=10, retry_day=9).run({"partition_keys": KEYS})

    exploding = Exploding(raises_on)
    recorder = Recorder()
    with caplog.at_level(logging.ERROR):
        observed = _pipeline(p.AssetRegistry(), fail_day=10, retry_day=9).run(
            {"partition_keys": KEYS}, observers=[exploding, recorder]
        )

    assert observed.status is plain.status is p.RunStatus.FAILED
    assert _summary(observed) == _summary(plain)
    assert observed.callback_errors == ()
    # The observer after the broken one still receives every event.
    assert exploding.calls == len(recorder.events)
    assert isinstance(recorder.events[0], p.RunStarted)
    assert isinstance(recorder.events[-1], p.RunFinished)
    assert recorder.events[-1].result is observed


def test_no_observers_gives_the_same_results_as_observing():
    observed = _pipeline(p.AssetRegistry(), fail_day=9, retry_day=10).run({"partition_keys": KEYS}, observers=[Recorder()])
    unobserved = _pipeline(p.AssetRegistry(), fail_day=9, retry_day=10).run({"partition_keys": KEYS})

    assert unobserved.status is observed.status is p.RunStatus.FAILED
    assert _summary(unobserved) == _summary(observed)


def test_several_observers_each_see_the_same_sequence():
    registry = p.AssetRegistry()
    first, second = Recorder(), Recorder()

    _pipeline(registry, retry_day=9).run({"partition_keys": KEYS}, observers=[first, second])

    assert first.events == second.events
    assert [a is b for a, b in zip(first.events, second.events, strict=True)] == [True] * len(first.events)


def test_thousands_of_attempts_each_get_their_events():
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    def daily(context):
        return 1

    first = dt.date(2010, 1, 1)
    keys = [first + dt.timedelta(days=offset) for offset in range(3000)]
    recorder = Recorder()
    p.Flow(["daily"], registry=registry).run({"partition_keys": keys}, observers=[recorder])

    kinds = collections.Counter(type(event).__name__ for event in recorder.events)
    assert kinds == {"RunStarted": 1, "AttemptStarted": 3000, "AttemptFinished": 3000, "RunFinished": 1}
    assert sorted(e.attempt.partition_key for e in recorder.of(p.AttemptFinished)) == keys
