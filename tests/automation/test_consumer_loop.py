"""A daemon's consumer runs are tasks of one event loop: each ends as under `asyncio.run`, none stops the others."""

from __future__ import annotations

import asyncio
import contextvars
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
    other_started, release_other = threading.Event(), threading.Event()

    async def leaves_tasks() -> str:
        loop = asyncio.get_running_loop()
        left.append(loop.create_task(asyncio.sleep(3600)))
        left.append(loop.create_task(asyncio.sleep(3600), context=contextvars.copy_context()))  # given a context

        async def spawns() -> None:  # a task's own task is the call's too
            left.append(asyncio.get_running_loop().create_task(asyncio.sleep(3600)))
            await asyncio.sleep(3600)

        left.append(loop.create_task(spawns()))
        await asyncio.sleep(0)  # the spawning task runs and makes its own
        return "done"

    async def other_call() -> str:
        loop = asyncio.get_running_loop()
        waiting = loop.create_task(asyncio.to_thread(release_other.wait, WAIT))  # this call's own task
        other_started.set()
        await waiting
        return "other"

    other = runs_loop.submit(other_call)
    try:
        assert other_started.wait(WAIT)
        assert runs_loop.submit(leaves_tasks).result(WAIT) == "done"
        assert len(left) == 4 and all(task.cancelled() for task in left)
        assert not other.done()  # another call's task in flight is not the finished call's
    finally:
        release_other.set()  # shutdown waits for it
    assert other.result(WAIT) == "other"


def test_a_failed_call_leaves_no_task_behind_either(runs_loop) -> None:
    left: list[asyncio.Task[Any]] = []

    async def fails() -> None:
        left.append(asyncio.get_running_loop().create_task(asyncio.sleep(3600)))
        raise ValueError("failed after making a task")

    assert isinstance(runs_loop.submit(fails).exception(WAIT), ValueError)
    assert left[0].cancelled()


def test_a_task_of_a_call_that_raises_system_exit_leaves_the_loop_to_the_other_calls(runs_loop) -> None:
    release = threading.Event()

    async def exits_in_a_task() -> str:
        asyncio.get_running_loop().create_task(_raise(SystemExit(2)))
        await asyncio.sleep(0.05)  # the task raised meanwhile, out of the loop's turn
        return "went on"

    async def in_flight() -> str:
        await asyncio.to_thread(release.wait, WAIT)
        return "finished"

    other = runs_loop.submit(in_flight)
    try:
        assert runs_loop.submit(exits_in_a_task).result(WAIT) == "went on"
    finally:
        release.set()
    assert other.result(WAIT) == "finished"
    assert runs_loop.submit(_answer).result(WAIT) == 42


async def _raise(exc: BaseException) -> None:
    raise exc


async def _answer() -> int:
    return 42


def test_a_call_after_shutdown_gets_a_new_loop() -> None:
    runs_loop = ConsumerLoop()
    try:
        assert runs_loop.submit(_answer).result(WAIT) == 42
        runs_loop.shutdown()
        assert runs_loop.submit(_answer).result(WAIT) == 42
    finally:
        runs_loop.shutdown()


def test_shutdown_from_a_call_on_the_loop_is_refused(runs_loop) -> None:
    async def shuts_down() -> None:
        runs_loop.shutdown()

    with pytest.raises(RuntimeError, match="its own loop"):
        runs_loop.submit(shuts_down).result(WAIT)


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
    child = context.Process(target=_submit_in_child, args=(runs_loop, queue), daemon=True)
    child.start()
    try:
        assert queue.get(timeout=WAIT) == 42
        child.join(WAIT)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
            child.join(WAIT)


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
    threads: list[str] = []

    @p.asset(partition_def=keys, registry=registry)
    def consumer(context: p.AssetContext) -> None:
        together.wait()

    @p.asset(name="loop_probe", partition_def=keys, registry=registry)
    async def loop_probe() -> None:
        loops.append(asyncio.get_running_loop())
        threads.append(threading.current_thread().name)

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
    assert threads == ["partita-consumer-loop"] * 2  # the daemon's loop thread, not a thread per run
    assert loops[0].is_closed()


@pytest.mark.parametrize("after_a_sync_body", [False, True], ids=["root", "released-by-a-sync-body"])
def test_an_async_body_that_leaves_a_task_does_not_leave_it_running_in_the_daemon(tmp_path, after_a_sync_body) -> None:
    registry = p.AssetRegistry()
    keys = p.StaticPartitionDef("keys", ["a", "b"])
    left: list[asyncio.Task[Any]] = []
    seen_cancelled: list[bool] = []

    @p.asset(partition_def=keys, registry=registry)
    def first() -> int:
        """A sync body on a worker thread: its completion releases the async body from that thread."""
        return 1

    async def leaves_a_task() -> None:
        seen_cancelled.extend(task.cancelled() for task in left)  # the runs before this one's
        left.append(asyncio.get_running_loop().create_task(asyncio.sleep(3600)))

    async def consumer(first: int) -> None:
        await leaves_a_task()

    async def consumer_root() -> None:
        await leaves_a_task()

    p.asset(name="consumer", partition_def=keys, registry=registry)(consumer if after_a_sync_body else consumer_root)
    targets = ["first", "consumer"] if after_a_sync_body else ["consumer"]

    @p.asset(partition_def=keys, registry=registry)
    def source() -> None:
        """Published to from outside."""

    flow = p.Flow(targets, registry=registry, name="consumer_flow", trigger=p.OnAssetEvents(["source"]))
    store = p.open_store(f"sqlite:///{tmp_path / 'partita.db'}")
    try:
        for key in ("a", "b"):
            p.publish_event(store, registry, "source", partition_key=key)
        daemon = TriggerDaemon([flow], store, max_in_flight=1)  # one run after the other
        assert daemon.run_once() == 2 and daemon.succeeded_runs == 2
    finally:
        store.close()
    assert seen_cancelled == [True]  # cancelled as its run ended, not when the daemon stopped
