"""Threads that start many runs keep one event loop; each run still ends as under `asyncio.run`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
from typing import Any

import partita as p
from partita.execution import loop_runner
from partita.execution.loop_runner import ThreadLoops

WAIT = 30.0


def _async_flow(body) -> p.Flow:
    registry = p.AssetRegistry()
    p.asset(name="body", registry=registry)(body)
    return p.Flow(["body"], registry=registry)


def _pool(loops: ThreadLoops) -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(1, initializer=loops.keep)


def test_runs_on_a_thread_that_keeps_a_loop_share_it_and_other_threads_do_not() -> None:
    seen: list[Any] = []

    async def body() -> None:
        seen.append(asyncio.get_running_loop())

    flow = _async_flow(body)
    loops = ThreadLoops()
    pool = _pool(loops)
    try:
        for _ in range(2):
            assert pool.submit(flow.run).result(WAIT).succeeded
    finally:
        pool.shutdown(wait=True)
        loops.close()
    flow.run()  # this thread keeps none: a loop of its own, closed after the run
    assert seen[0] is seen[1]
    assert seen[2] is not seen[0]
    assert seen[0].is_closed() and seen[2].is_closed()


def test_a_task_a_run_left_behind_is_cancelled_before_the_run_returns() -> None:
    left: list[asyncio.Task[None]] = []

    async def body() -> None:
        left.append(asyncio.get_running_loop().create_task(asyncio.sleep(3600)))

    loops = ThreadLoops()
    pool = _pool(loops)
    try:
        assert pool.submit(_async_flow(body).run).result(WAIT).succeeded
        assert left[0].cancelled()
        assert pool.submit(lambda: loop_runner.run(asyncio.sleep(0, "next"))).result(WAIT) == "next"
    finally:
        pool.shutdown(wait=True)
        loops.close()


def test_a_run_that_raises_leaves_the_kept_loop_usable() -> None:
    async def fails() -> None:
        raise ValueError("the coroutine failed")

    loops = ThreadLoops()
    pool = _pool(loops)
    try:
        failed = pool.submit(lambda: loop_runner.run(fails()))
        assert isinstance(failed.exception(WAIT), ValueError)
        assert pool.submit(lambda: loop_runner.run(asyncio.sleep(0, "after"))).result(WAIT) == "after"
    finally:
        pool.shutdown(wait=True)
        loops.close()


def _in_child(queue: Any) -> None:
    kept = loop_runner._local.runner.get_loop()  # the parent thread's loop, copied by the fork

    async def which_loop() -> bool:
        return asyncio.get_running_loop() is kept

    queue.put(loop_runner.run(which_loop()))


def _fork_from_a_thread_that_keeps_a_loop() -> bool:
    loop_runner.run(asyncio.sleep(0))  # the kept loop exists
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    ran_on_the_parents_loop = queue.get(timeout=WAIT)
    child.join(WAIT)
    return bool(ran_on_the_parents_loop)


def test_a_forked_child_runs_on_a_loop_of_its_own() -> None:
    loops = ThreadLoops()
    pool = _pool(loops)
    try:
        assert pool.submit(_fork_from_a_thread_that_keeps_a_loop).result(WAIT) is False
    finally:
        pool.shutdown(wait=True)
        loops.close()


def test_a_daemon_closes_its_consumer_threads_loops_when_it_stops(tmp_path) -> None:
    from partita.automation.daemon import TriggerDaemon

    loops: list[Any] = []

    async def consumer() -> None:
        loops.append(asyncio.get_running_loop())

    registry = p.AssetRegistry()
    keys = p.StaticPartitionDef("keys", ["a", "b", "c"])

    @p.asset(partition_def=keys, registry=registry)
    def source() -> None:
        """Published to from outside."""

    p.asset(name="consumer", partition_def=keys, registry=registry)(consumer)
    flow = p.Flow(["consumer"], registry=registry, name="consumer_flow", trigger=p.OnAssetEvents(["source"]))
    store = p.open_store(f"sqlite:///{tmp_path / 'partita.db'}")
    try:
        for key in ("a", "b", "c"):
            p.publish_event(store, registry, "source", partition_key=key)
        assert TriggerDaemon([flow], store, max_in_flight=1).run_once() == 3
    finally:
        store.close()
    assert len(loops) == 3 and loops[0] is loops[1] is loops[2]
    assert loops[0].is_closed()
