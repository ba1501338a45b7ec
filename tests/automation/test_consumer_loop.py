"""A daemon's consumer runs are tasks of one event loop: each ends as under `asyncio.run`, none stops the others."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from typing import Any

import pytest

import partita as p
from partita.automation.consumer_loop import ConsumerLoop
from partita.automation.daemon import TriggerDaemon

WAIT = 30.0


@pytest.fixture
def runs_loop():
    loop = ConsumerLoop()
    yield loop
    loop.shutdown()


def test_a_call_returns_its_result_on_the_loop_thread(runs_loop) -> None:
    async def where() -> str:
        return threading.current_thread().name

    assert runs_loop.submit(where).result(WAIT) == "partita-consumer-loop"


def test_calls_in_flight_share_the_loop_and_run_at_once(runs_loop) -> None:
    both = asyncio.Event()  # set by the second call while the first still waits: both are in flight

    async def first() -> asyncio.AbstractEventLoop:
        await asyncio.wait_for(both.wait(), WAIT)
        return asyncio.get_running_loop()

    async def second() -> asyncio.AbstractEventLoop:
        both.set()
        return asyncio.get_running_loop()

    waiting, setting = runs_loop.submit(first), runs_loop.submit(second)
    assert waiting.result(WAIT) is setting.result(WAIT)


def test_an_exception_ends_its_future_only(runs_loop) -> None:
    async def fails(exc: BaseException) -> None:
        raise exc

    async def after() -> str:
        return "after"

    assert isinstance(runs_loop.submit(fails, ValueError("a run's bug")).exception(WAIT), ValueError)
    # A run's SystemExit would stop the loop under the other runs: the future carries it instead.
    assert isinstance(runs_loop.submit(fails, SystemExit(3)).exception(WAIT), SystemExit)
    assert isinstance(runs_loop.submit(fails, KeyboardInterrupt()).exception(WAIT), KeyboardInterrupt)
    assert runs_loop.submit(after).result(WAIT) == "after"


def test_the_tasks_a_call_left_behind_are_cancelled_at_its_end_and_no_others(runs_loop) -> None:
    left: list[asyncio.Task[Any]] = []
    other_started = threading.Event()
    release_other = asyncio.Event()

    async def leaves_tasks() -> str:
        left.append(asyncio.get_running_loop().create_task(asyncio.sleep(3600)))

        async def spawns() -> None:  # a task's own task is the call's too
            left.append(asyncio.get_running_loop().create_task(asyncio.sleep(3600)))
            await asyncio.sleep(3600)

        left.append(asyncio.get_running_loop().create_task(spawns()))
        await asyncio.sleep(0)  # the spawning task runs and makes its own
        return "done"

    async def other_call() -> str:
        task = asyncio.get_running_loop().create_task(release_other.wait())
        other_started.set()
        await task
        return "other"

    other = runs_loop.submit(other_call)
    try:
        assert other_started.wait(WAIT)
        assert runs_loop.submit(leaves_tasks).result(WAIT) == "done"
        assert len(left) == 3 and all(task.cancelled() for task in left)
        assert not other.done()  # another call's task in flight is not the finished call's
    finally:
        runs_loop._running_loop().call_soon_threadsafe(release_other.set)  # shutdown waits for it
    assert other.result(WAIT) == "other"


def test_a_failed_call_leaves_no_task_behind_either(runs_loop) -> None:
    left: list[asyncio.Task[Any]] = []

    async def fails() -> None:
        left.append(asyncio.get_running_loop().create_task(asyncio.sleep(3600)))
        raise ValueError("failed after making a task")

    assert isinstance(runs_loop.submit(fails).exception(WAIT), ValueError)
    assert left[0].cancelled()


def test_shutdown_lets_calls_in_flight_finish_and_closes_the_loop() -> None:
    runs_loop = ConsumerLoop()

    async def slow() -> str:
        await asyncio.sleep(0.2)
        return "finished"

    async def which_loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    loop = runs_loop.submit(which_loop).result(WAIT)
    in_flight = runs_loop.submit(slow)
    runs_loop.shutdown()
    assert in_flight.result(0) == "finished"
    assert loop.is_closed()
    runs_loop.shutdown()  # again: nothing to do


def _submit_in_child(runs_loop: ConsumerLoop, queue: Any) -> None:
    async def answer() -> int:
        return 42

    queue.put(runs_loop.submit(answer).result(WAIT))


def test_a_forked_child_gets_a_loop_of_its_own(runs_loop) -> None:
    async def warm() -> None:
        return None

    runs_loop.submit(warm).result(WAIT)  # the parent's loop thread exists; a forked child has no such thread
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_submit_in_child, args=(runs_loop, queue))
    child.start()
    assert queue.get(timeout=WAIT) == 42
    child.join(WAIT)
    assert child.exitcode == 0


def _consumer_flow(registry: p.AssetRegistry, keys: p.StaticPartitionDef) -> p.Flow:
    @p.asset(partition_def=keys, registry=registry)
    def source() -> None:
        """Published to from outside."""

    return p.Flow(["consumer"], registry=registry, name="consumer_flow", trigger=p.OnAssetEvents(["source"]))


def test_a_daemons_runs_in_flight_run_at_once_on_one_loop_closed_when_it_stops(tmp_path) -> None:
    registry = p.AssetRegistry()
    keys = p.StaticPartitionDef("keys", ["a", "b"])
    together = threading.Barrier(2, timeout=WAIT)  # sync bodies, on worker threads: both runs in flight at once
    loops: list[asyncio.AbstractEventLoop] = []

    @p.asset(partition_def=keys, registry=registry)
    def consumer(context: p.AssetContext) -> None:
        together.wait()

    @p.asset(name="loop_probe", partition_def=keys, registry=registry)
    async def loop_probe() -> None:
        loops.append(asyncio.get_running_loop())

    flow = _consumer_flow(registry, keys)
    probe = p.Flow(["loop_probe"], registry=registry, name="probe_flow", trigger=p.OnAssetEvents(["source"]))
    store = p.open_store(f"sqlite:///{tmp_path / 'partita.db'}")
    try:
        for key in ("a", "b"):
            p.publish_event(store, registry, "source", partition_key=key)
        daemon = TriggerDaemon([flow, probe], store, max_in_flight=2)
        assert daemon.run_once() == 4
        assert daemon.succeeded_runs == 4
    finally:
        store.close()
    assert len(loops) == 2 and loops[0] is loops[1]
    assert loops[0].is_closed()


def test_an_async_body_that_leaves_a_task_does_not_leave_it_running_in_the_daemon(tmp_path) -> None:
    registry = p.AssetRegistry()
    keys = p.StaticPartitionDef("keys", ["a", "b"])
    left: list[asyncio.Task[Any]] = []
    seen_cancelled: list[bool] = []

    @p.asset(partition_def=keys, registry=registry)
    async def consumer() -> None:
        seen_cancelled.extend(task.cancelled() for task in left)  # the runs before this one's
        left.append(asyncio.get_running_loop().create_task(asyncio.sleep(3600)))

    flow = _consumer_flow(registry, keys)
    store = p.open_store(f"sqlite:///{tmp_path / 'partita.db'}")
    try:
        for key in ("a", "b"):
            p.publish_event(store, registry, "source", partition_key=key)
        assert TriggerDaemon([flow], store, max_in_flight=1).run_once() == 2  # one run after the other
    finally:
        store.close()
    assert seen_cancelled == [True]  # cancelled as its run ended, not when the daemon stopped
