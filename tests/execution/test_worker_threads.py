"""Worker threads outlive runs: parked between runs, lent to the next, never to two runs at once."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time

import pytest

import partita as p
from partita.execution import workers
from partita.execution.workers import parked_threads

WAIT = 10.0


def _wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.001)


def _flow(body, **options) -> p.Flow:
    registry = p.AssetRegistry()
    p.asset(name="body", registry=registry)(body)
    return p.Flow(["body"], registry=registry, max_concurrency=1, **options)


def test_the_next_run_takes_the_thread_the_last_run_parked() -> None:
    names: list[str] = []
    flow = _flow(lambda: names.append(threading.current_thread().name))
    flow.run()
    _wait_until(lambda: names[0] in parked_threads(), "the first run's thread never parked")
    flow.run()
    assert names[1] == names[0]
    assert names[0].startswith("partita-worker-")


def test_a_body_that_outlives_its_run_keeps_its_thread_until_it_returns() -> None:
    release, started = threading.Event(), threading.Event()
    stuck_thread: list[str] = []

    def stuck() -> str:
        stuck_thread.append(threading.current_thread().name)
        started.set()
        release.wait(WAIT)
        return "late"

    async def cancelled_run() -> None:
        task = asyncio.create_task(_flow(stuck, cancel_grace_seconds=0).run_async())
        await asyncio.to_thread(started.wait, WAIT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(cancelled_run())
        seen: list[str] = []
        result = _flow(lambda: seen.append(threading.current_thread().name)).run()
        assert result.succeeded
        assert seen[0] != stuck_thread[0]  # the busy thread was not lent
        assert stuck_thread[0] not in parked_threads()
    finally:
        release.set()
    _wait_until(lambda: stuck_thread[0] in parked_threads(), "the late body's thread never parked")


def test_a_thread_parked_longer_than_the_limit_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "PARKED_SECONDS", 0.05)
    names: list[str] = []
    flow = _flow(lambda: names.append(threading.current_thread().name))
    flow.run()  # a thread parked before the limit changed may serve it: the next park uses 0.05 s
    flow.run()
    name = names[-1]
    _wait_until(lambda: name not in {thread.name for thread in threading.enumerate()}, "the parked thread never ended")
    assert name not in parked_threads()
    names.clear()
    assert flow.run().succeeded and names  # a new thread serves the next run


def _run_in_child(queue: multiprocessing.Queue) -> None:
    ran: list[str] = []
    result = _flow(lambda: ran.append(threading.current_thread().name)).run()
    queue.put((result.status.value, len(ran), sorted(parked_threads())))


def test_a_forked_child_starts_its_own_threads_instead_of_waiting_for_the_parents() -> None:
    flow = _flow(lambda: None)
    flow.run()
    _wait_until(lambda: any(name.startswith("partita-worker") for name in parked_threads()), "nothing parked")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_run_in_child, args=(queue,))
    child.start()
    status, ran, _ = queue.get(timeout=WAIT)
    child.join(WAIT)
    assert (status, ran, child.exitcode) == ("success", 1, 0)


def test_shutdown_reports_a_body_still_running_and_then_its_return() -> None:
    loop = asyncio.new_event_loop()
    try:
        release, started = threading.Event(), threading.Event()
        pool = workers.ThreadWorkers(loop, lambda batch: None, 2, "partita-test-shutdown")

        def body() -> None:
            started.set()
            release.wait(WAIT)

        pool.submit("token", body, {})
        assert started.wait(WAIT)
        assert pool.shutdown(wait=0) is False
        release.set()
        assert pool.shutdown(wait=WAIT) is True
    finally:
        loop.close()
