"""A run recorded in a store cancels when another caller asks through the store (`partita.cancel_run`).

In one process, as a Python program would: the run executes on a thread,
its body blocks on an event, and `cancel_run` asks. The run cancels as
Ctrl-C does but returns its cancelled result instead of raising, and the
task that awaited it is left as it was (no cancellation leaks to it).
"""

from __future__ import annotations

import asyncio
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

import partita as p
from partita.store import open_store

KEYS = ["a", "b", "c"]
WAIT = 30.0


def _blocking_flow(started: threading.Event, release: threading.Event, url: str, **options) -> p.Flow:
    registry = p.AssetRegistry()

    @p.asset(registry=registry, partition_def=p.StaticPartitionDef("tenants", KEYS))
    async def slow(context) -> int:
        started.set()
        while not release.is_set():
            await asyncio.sleep(0.01)  # the body's own work: it runs until cancelled or released
        return 1

    return p.Flow(["slow"], registry=registry, store=url, max_concurrency=1, **options)


def _running_run(url: str) -> str:
    deadline = time.monotonic() + WAIT
    with closing(open_store(url)) as store:
        while not (running := store.list_runs(status="running")):
            assert time.monotonic() < deadline, "the run was never recorded running"
            time.sleep(0.01)
    return running[0].run_id


def test_cancel_run_cancels_a_python_run_which_returns_its_cancelled_result(store_url: str):
    started, release = threading.Event(), threading.Event()
    flow = _blocking_flow(started, release, store_url)
    results: list[p.RunResult] = []
    runner = threading.Thread(target=lambda: results.append(flow.run({"partition_keys": KEYS})))
    runner.start()
    try:
        assert started.wait(WAIT)
        run_id = _running_run(store_url)

        request = p.cancel_run(run_id[:6], store=store_url, wait=True, timeout=WAIT)

        runner.join(WAIT)
    finally:
        release.set()
        runner.join(WAIT)
    assert (request.run_id, request.outcome, request.status) == (run_id, p.CancelOutcome.REQUESTED, "cancelled")
    [result] = results
    assert result.status is p.RunStatus.CANCELLED
    assert [a.status for a in result.tasks["slow"].attempts] == [p.AttemptStatus.CANCELLED] * len(KEYS)
    assert [len(a.invocations) for a in result.tasks["slow"].attempts] == [1, 0, 0]


def test_a_run_cancelled_on_request_leaves_the_awaiting_task_uncancelled(store_url: str):
    started, release = threading.Event(), threading.Event()
    flow = _blocking_flow(started, release, store_url)

    async def main() -> tuple[p.RunResult, int]:
        result = await flow.run_async({"partition_keys": KEYS})
        await asyncio.sleep(0)  # the task goes on awaiting: nothing cancels it later
        task = asyncio.current_task()
        assert task is not None
        return result, task.cancelling()

    def ask() -> None:
        assert started.wait(WAIT)
        p.cancel_run(_running_run(store_url), store=store_url)

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        result, cancelling = asyncio.run(main())
    finally:
        release.set()
        asker.join(WAIT)
    assert result.status is p.RunStatus.CANCELLED
    assert cancelling == 0


def test_a_run_that_finished_is_refused_and_an_unset_store_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    url = f"sqlite:///{tmp_path}/history.db"
    started, release = threading.Event(), threading.Event()
    release.set()
    result = _blocking_flow(started, release, url).run({"partition_keys": KEYS})

    refused = p.cancel_run(result.run_id, store=url, wait=True)

    assert (refused.outcome, refused.status, refused.requested_at) == (p.CancelOutcome.FINISHED, "success", None)
    assert refused.finished and not refused.outcome.recorded
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    with pytest.raises(p.ConfigurationError, match="cancel_run store is not set"):
        p.cancel_run(result.run_id)
    with pytest.raises(p.ConfigurationError, match="timeout"):
        p.cancel_run(result.run_id, store=url, timeout=-1)
    with pytest.raises(p.UnknownRunError):
        p.cancel_run("f" * 32, store=url)
