"""Worker threads settle the successes of the bodies they ran (docs/execution.md, "Where the scheduler runs").

In runs of the default executor without loop-bound policies, a worker that
finished a body settles it under the run's scheduler lock and runs the first
consumer it released. These tests hold that the limits, order and results
stay those of the loop, that no completion is lost or settled twice under
contention, and that runs with loop-bound features settle on the loop.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import threading
import time

import pytest

import partita as p
from partita.execution import readiness as readiness_module
from partita.execution import workers as workers_module
from partita.execution.workers import SchedulerLock

DAYS = p.DatePartitionDef()
WAIT = 30.0


class ThreadsOfEvents:
    """Which thread delivered each kind of event, and every event in order."""

    def __init__(self) -> None:
        self.events: list = []
        self.threads: dict[str, set[str]] = collections.defaultdict(set)
        self.result: p.RunResult | None = None

    def on_event(self, event) -> None:
        self.events.append(event)
        self.threads[type(event).__name__].add(threading.current_thread().name)
        if isinstance(event, p.RunFinished):
            self.result = event.result


def _chain(registry: p.AssetRegistry, body=None, **asset_options) -> None:
    def run_body(context) -> None:
        if body is not None:
            body(context)

    @p.asset(partition_def=DAYS, registry=registry, **asset_options)
    def extract(context) -> None:
        run_body(context)

    @p.asset(partition_def=DAYS, registry=registry)
    def transform(context, extract: None) -> None:
        run_body(context)

    @p.asset(partition_def=DAYS, registry=registry)
    def publish(context, transform: None) -> None:
        run_body(context)


def _keys(count: int) -> list[dt.date]:
    return [dt.date(2001, 1, 1) + dt.timedelta(days=offset) for offset in range(count)]


def test_successes_are_settled_on_the_worker_threads_that_ran_them():
    registry = p.AssetRegistry()
    _chain(registry)
    observer = ThreadsOfEvents()

    result = p.Flow(["publish"], registry=registry).run({"partition_keys": _keys(50)}, observers=[observer])

    assert result.succeeded
    loop_thread = threading.current_thread().name
    workers = {name for name in observer.threads["AttemptFinished"] if name.startswith("partita-worker")}
    # The loop settles only what finished while it held the lock (starting the first bodies).
    assert workers and observer.threads["AttemptFinished"] <= workers | {loop_thread}
    # The consumers a success released start on the workers too.
    assert any(name.startswith("partita-worker") for name in observer.threads["AttemptStarted"])
    assert observer.threads["RunStarted"] == observer.threads["RunFinished"] == {loop_thread}


def test_a_run_with_a_resource_policy_settles_on_the_loop():
    registry = p.AssetRegistry()
    _chain(registry, resource="api")
    observer = ThreadsOfEvents()
    flow = p.Flow(["publish"], registry=registry, resources={"api": p.ResourcePolicy(max_concurrency=2)})

    result = flow.run({"partition_keys": _keys(20)}, observers=[observer])

    assert result.succeeded
    assert observer.threads["AttemptFinished"] == {threading.current_thread().name}


def test_many_short_bodies_each_run_and_settle_exactly_once_within_the_limit():
    registry = p.AssetRegistry()
    running, peak, lock = [0], [0], threading.Lock()
    calls: collections.Counter = collections.Counter()

    def body(context) -> None:
        with lock:
            calls[(context.asset_name, context.partition_key)] += 1
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        if context.partition_key.day % 7 == 0:
            time.sleep(0.001)  # some bodies give the others a chance to overlap them
        with lock:
            running[0] -= 1

    _chain(registry, body)
    observer = ThreadsOfEvents()
    keys = _keys(1500)

    result = p.Flow(["publish"], registry=registry, max_concurrency=4).run(
        {"partition_keys": keys}, observers=[observer]
    )

    assert result.succeeded
    assert len(calls) == 3 * len(keys) and set(calls.values()) == {1}
    assert 1 < peak[0] <= 4
    finished = [event.attempt for event in observer.events if isinstance(event, p.AttemptFinished)]
    assert len(finished) == len({(a.asset_name, a.index) for a in finished}) == 3 * len(keys)
    # Every consumer finished after its input: the order is the loop's order.
    position = {(a.asset_name, a.index): n for n, a in enumerate(finished)}
    for index in range(len(keys)):
        assert position[("extract", index)] < position[("transform", index)] < position[("publish", index)]


def test_failures_and_retries_beside_successes_settled_on_workers():
    registry = p.AssetRegistry()

    def body(context) -> None:
        day = context.partition_key.day
        if context.asset_name == "extract" and day % 5 == 0 and context.invocation_number == 1:
            raise RuntimeError("transient")
        if context.asset_name == "transform" and day % 11 == 0:
            raise RuntimeError("broken")

    _chain(registry, body, retry=p.RetryPolicy(max_attempts=2, delay=0.0))
    keys = _keys(300)

    result = p.Flow(["publish"], registry=registry).run({"partition_keys": keys})

    extract, transform, publish = (result.tasks[name].attempts for name in ("extract", "transform", "publish"))
    assert all(a.status is p.AttemptStatus.SUCCESS for a in extract)
    assert {len(a.invocations) for a in extract if a.partition_key.day % 5 == 0} == {2}
    for attempt, consumer in zip(transform, publish, strict=True):
        broken = attempt.partition_key.day % 11 == 0
        assert attempt.status is (p.AttemptStatus.FAILED if broken else p.AttemptStatus.SUCCESS)
        assert consumer.status is (p.AttemptStatus.SKIPPED if broken else p.AttemptStatus.SUCCESS)


def test_a_scheduler_fault_on_a_worker_ends_the_run_loudly_and_starts_nothing_more(monkeypatch: pytest.MonkeyPatch):
    """A bug in settling (here: the fifth edge walk raises) fails the run with it, never leaves it waiting,
    and the workers do not go on running the rest of the graph once the run has raised."""
    registry = p.AssetRegistry()
    calls = [0]

    def body(context) -> None:
        calls[0] += 1

    _chain(registry, body)
    original, walks = readiness_module.Readiness.decrement, [0]

    def failing_decrement(self, consumer, key_index, blocker):
        walks[0] += 1
        if walks[0] == 5:
            raise RuntimeError("scheduler bug")
        return original(self, consumer, key_index, blocker)

    monkeypatch.setattr(readiness_module.Readiness, "decrement", failing_decrement)
    outcome: list[BaseException] = []
    calls_when_raised: list[int] = []

    def run() -> None:
        try:
            p.Flow(["publish"], registry=registry, max_concurrency=4).run({"partition_keys": _keys(40)})
        except BaseException as error:  # noqa: BLE001 - what the test inspects
            calls_when_raised.append(calls[0])
            outcome.append(error)

    runner = threading.Thread(target=run)
    runner.start()
    runner.join(WAIT)

    assert not runner.is_alive(), "the run hung after a scheduler fault on a worker"
    assert [str(error) for error in outcome] == ["scheduler bug"]
    time.sleep(0.3)
    # Bodies handed to a thread before the fault may still begin; nothing is started after it.
    assert calls[0] - calls_when_raised[0] <= 4
    # The fifth edge walk comes within the first ten settled attempts; four more may be in flight.
    # (Workers that went on settling after the fault ran nearly all 120 bodies.)
    assert calls[0] <= 10 + 4


def test_cancelling_while_workers_settle_leaves_every_attempt_terminal_and_starts_nothing_after():
    registry = p.AssetRegistry()
    gate = threading.Event()

    def body(context) -> None:
        if context.asset_name == "publish" and context.partition_key.day == 20:
            gate.set()
        time.sleep(0.0005)

    _chain(registry, body)
    observer = ThreadsOfEvents()
    flow = p.Flow(["publish"], registry=registry, max_concurrency=4)

    async def main() -> None:
        run = asyncio.ensure_future(flow.run_async({"partition_keys": _keys(3000)}, observers=[observer]))
        while not gate.is_set():
            await asyncio.sleep(0.001)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(main())

    result = observer.result
    assert result is not None and result.status is p.RunStatus.CANCELLED
    attempts = [a for task in result.tasks.values() for a in task.attempts]
    assert len(attempts) == 3 * 3000
    assert all(a.status is not None for a in attempts)
    started = sum(1 for event in observer.events if isinstance(event, p.AttemptStarted))
    assert started == sum(len(a.invocations) for a in attempts)
    assert observer.events[-1] is not None and isinstance(observer.events[-1], p.RunFinished)
    assert any(a.status is p.AttemptStatus.CANCELLED for a in attempts)


def test_a_success_offered_while_the_lock_is_held_is_settled_by_the_holder_on_its_way_out():
    lock, settled = SchedulerLock(), []
    lock.settle = lambda batch, keep: settled.extend(batch)
    completion = (("task", 0), True, None, 0.0, 0.0)

    with lock:
        offered = threading.Thread(target=lambda: lock.offer(completion))
        offered.start()
        offered.join(WAIT)
        assert not offered.is_alive(), "offer waited for the lock"
        assert settled == [] and list(lock.pending) == [completion]

    assert settled == [completion] and not lock.pending


def test_offers_from_many_threads_are_each_settled_once():
    lock, settled = SchedulerLock(), collections.Counter()

    def settle(batch, keep):
        for completion in batch:
            settled[completion[0]] += 1
        time.sleep(0)  # lets another thread offer meanwhile

    lock.settle = settle
    threads = [
        threading.Thread(target=lambda n=n: [lock.offer(((n, i), True, None, 0.0, 0.0)) for i in range(2000)])
        for n in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)

    assert len(settled) == 6 * 2000 and set(settled.values()) == {1}
    assert not lock.pending


def test_the_worker_that_settles_the_last_outstanding_job_leaves_the_pool_before_the_run_ends(
    monkeypatch: pytest.MonkeyPatch,
):
    """A run's end sends that worker no stop message: it gave its thread back (a one-key run's cost)."""
    threads_at_shutdown = []
    shutdown = workers_module.ThreadWorkers.shutdown

    def recording(self, wait=None):
        threads_at_shutdown.append(self._threads)  # decremented under the scheduler lock, before the run ends
        return shutdown(self, wait)

    monkeypatch.setattr(workers_module.ThreadWorkers, "shutdown", recording)
    registry = p.AssetRegistry()
    _chain(registry)
    flow = p.Flow(["publish"], registry=registry)
    for key in _keys(20):
        assert flow.run({"partition_keys": [key]}).succeeded
    assert threads_at_shutdown == [0] * 20


def test_a_retry_after_the_pool_fell_idle_lends_a_thread_again(monkeypatch: pytest.MonkeyPatch):
    """A worker that found nothing outstanding went back to the parking; a retry due later still runs."""
    lends = []
    lend = workers_module._parking.lend
    monkeypatch.setattr(
        workers_module._parking, "lend", lambda workers, prefix: (lends.append(prefix), lend(workers, prefix))
    )
    registry = p.AssetRegistry()
    calls = collections.Counter()

    @p.asset(registry=registry, retry=p.RetryPolicy(max_attempts=3, delay=0.2))
    def flaky() -> None:
        calls["flaky"] += 1
        if calls["flaky"] < 3:
            raise RuntimeError("transient")

    @p.asset(registry=registry)
    def steady() -> None:
        calls["steady"] += 1
        time.sleep(0.05)  # settles on its worker while flaky waits for its retry: nothing is outstanding

    # One thread at a time: flaky starts first and fails; steady then settles with nothing outstanding.
    result = p.Flow(["steady", "flaky"], registry=registry, max_concurrency=1).run()

    assert result.succeeded
    assert calls == {"flaky": 3, "steady": 1}
    assert len(result.tasks["flaky"].attempts[0].invocations) == 3
    assert len(lends) == 2  # the first thread went back when steady settled; the retries got one again
