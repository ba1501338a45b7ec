"""Cancelling a run ends it the same way on every executor (SPEC §5, §15).

In the first test the run executes on a thread of its own, recorded in a
store; once two bodies are inside, `partita.cancel_run` asks, as another
caller would. Nothing new is admitted, the running sync bodies get the grace
period and are then abandoned, every attempt without an outcome is recorded
cancelled, and `Flow.run` returns the cancelled result. In the second, the
task awaiting `Flow.run_async` is cancelled and the running bodies finish
within the grace period, so they keep their outcome. In the third, the
running bodies are async and are cancelled at once. Bodies leave a mark
when they start and wait for a release mark the test writes.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from contextlib import closing
from pathlib import Path

import partita as p

MARKS = "PARTITA_TEST_DASK_MARKS"
SHARDS = p.StaticPartitionDef("contract_shards", ["s1", "s2", "s3", "s4", "s5"])
REGISTRY = p.AssetRegistry()
GRACE = 0.3  # seconds the run waits for sync bodies that are running when it is cancelled
POLL = 0.5  # about how often the run's journal looks for cancel requests (partita.store.journal)
WAIT = 30.0


@p.asset(partition_def=SHARDS, registry=REGISTRY)
def blocks_until_released(context):
    folder = Path(os.environ[MARKS])
    (folder / f"pid-{context.partition_key}").write_text(str(os.getpid()))
    os.replace(folder / f"pid-{context.partition_key}", folder / f"started-{context.partition_key}")  # whole or absent
    deadline = time.monotonic() + WAIT
    while not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    (folder / f"left-{context.partition_key}").write_text("")
    return context.partition_key


@p.asset(partition_def=SHARDS, registry=REGISTRY)
def after_the_release(blocks_until_released):
    return blocks_until_released


@p.asset(partition_def=SHARDS, registry=REGISTRY)
async def awaits_until_released(context):
    folder = Path(os.environ[MARKS])
    (folder / f"pid-{context.partition_key}").write_text(str(os.getpid()))
    os.replace(folder / f"pid-{context.partition_key}", folder / f"started-{context.partition_key}")
    deadline = time.monotonic() + WAIT
    try:
        while not (folder / "release").exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    except asyncio.CancelledError:
        (folder / f"cancelled-{context.partition_key}").write_text("")
        raise
    return context.partition_key


def _running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _running_run_id(url: str, poll) -> str:
    with closing(p.open_store(url)) as store:
        poll(lambda: store.list_runs(status="running"), "the run to be recorded running")
        (run,) = store.list_runs(status="running")
    return run.run_id


def _started(folder: Path) -> dict[str, int]:
    return {path.name.removeprefix("started-"): int(path.read_text()) for path in folder.glob("started-*")}


def test_a_run_cancelled_from_another_thread_starts_nothing_new_and_ends_within_the_grace(
    executor_kind, marks, tmp_path, poll
):
    url = f"sqlite:///{tmp_path}/contract.db"
    flow = p.Flow(
        ["after_the_release"], registry=REGISTRY, executor=executor_kind, store=url,
        max_concurrency=2, cancel_grace_seconds=GRACE,
    )
    returned: list[tuple[p.RunResult, float]] = []
    runner = threading.Thread(
        target=lambda: returned.append((flow.run({"partition_keys": SHARDS.keys}), time.monotonic()))
    )
    runner.start()
    try:
        poll(lambda: len(_started(marks)) == 2, "two bodies to start")
        run_id = _running_run_id(url, poll)
        asked = time.monotonic()
        request = p.cancel_run(run_id, store=url)
        runner.join(WAIT)
        started = _started(marks)
    finally:
        (marks / "release").write_text("")
        runner.join(WAIT)

    assert request.outcome is p.CancelOutcome.REQUESTED
    [(result, ended)] = returned
    assert GRACE <= ended - asked < POLL + GRACE + 3.0
    assert result.status is p.RunStatus.CANCELLED
    cancelled = (p.AttemptStatus.CANCELLED, p.SkipReason.CANCELLED)
    blocked = result.tasks["blocks_until_released"].attempts
    assert [(a.status, a.reason) for a in result.attempts()] == [cancelled] * 10
    assert sorted(started) == ["s1", "s2"]  # admitted in selection order, two at a time
    assert [len(a.invocations) for a in blocked] == [1, 1, 0, 0, 0]  # the others never started
    for attempt in blocked[:2]:
        (invocation,) = attempt.invocations
        assert invocation.succeeded is False
        assert invocation.failure.type == "asyncio.exceptions.CancelledError"
    assert result.tasks["after_the_release"].never_started is True
    if executor_kind == "process":  # an abandoned body ends with its worker
        poll(lambda: not any(_running(pid) for pid in started.values()), "the abandoned bodies' workers to end")
    else:  # released, the abandoned bodies finish where they ran; nothing else started meanwhile
        poll(lambda: all((marks / f"left-{key}").exists() for key in started), "the abandoned bodies to finish")
    assert _started(marks) == started
    with closing(p.open_store(url)) as store:
        assert store.get_run(run_id).status == "cancelled"


def test_bodies_that_finish_within_the_grace_keep_their_outcome_and_nothing_new_starts(executor_kind, marks, poll):
    flow = p.Flow(
        ["after_the_release"], registry=REGISTRY, executor=executor_kind, max_concurrency=2, cancel_grace_seconds=WAIT,
    )
    finished: list[p.RunResult] = []

    class Finished:
        def on_event(self, event):
            if isinstance(event, p.RunFinished):
                finished.append(event.result)

    async def main() -> float:
        task = asyncio.create_task(flow.run_async({"partition_keys": SHARDS.keys}, observers=[Finished()]))
        try:
            await asyncio.to_thread(poll, lambda: len(_started(marks)) == 2, "two bodies to start")
            task.cancel()
            await asyncio.sleep(0)  # the run sees the cancellation before the bodies can finish
        finally:
            (marks / "release").write_text("")
        released = time.monotonic()
        try:
            await task
        except asyncio.CancelledError:
            return time.monotonic() - released
        raise AssertionError("the cancelled run_async returned instead of raising CancelledError")

    waited = asyncio.run(main())

    assert waited < WAIT / 3, "the run waited out the grace period although its bodies had finished"
    [result] = finished
    assert result.status is p.RunStatus.CANCELLED
    success, cancelled = (p.AttemptStatus.SUCCESS, None), (p.AttemptStatus.CANCELLED, p.SkipReason.CANCELLED)
    assert [(a.status, a.reason) for a in result.tasks["blocks_until_released"].attempts] == [success] * 2 + [cancelled] * 3
    assert [result.output("blocks_until_released", key) for key in ("s1", "s2")] == ["s1", "s2"]
    assert [(a.status, a.reason) for a in result.tasks["after_the_release"].attempts] == [cancelled] * 5
    assert sorted(_started(marks)) == ["s1", "s2"]


def test_cancelling_a_run_cancels_its_running_async_bodies_at_once(executor_kind, marks, poll):
    grace = 1.0
    flow = p.Flow(
        ["awaits_until_released"], registry=REGISTRY, executor=executor_kind, max_concurrency=2,
        cancel_grace_seconds=grace,
    )
    finished: list[p.RunResult] = []

    class Finished:
        def on_event(self, event):
            if isinstance(event, p.RunFinished):
                finished.append(event.result)

    async def main() -> float:
        task = asyncio.create_task(flow.run_async({"partition_keys": SHARDS.keys}, observers=[Finished()]))
        await asyncio.to_thread(poll, lambda: len(_started(marks)) == 2, "two bodies to start")
        cancelled_at = time.monotonic()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return time.monotonic() - cancelled_at
        raise AssertionError("the cancelled run_async returned instead of raising CancelledError")

    try:
        waited = asyncio.run(main())
        saw_cancel = sorted(path.name.removeprefix("cancelled-") for path in marks.glob("cancelled-*"))
    finally:
        (marks / "release").write_text("")  # a body nobody cancelled ends too

    [result] = finished
    assert result.status is p.RunStatus.CANCELLED
    attempts = result.tasks["awaits_until_released"].attempts
    assert [(a.status, a.reason) for a in attempts] == [(p.AttemptStatus.CANCELLED, p.SkipReason.CANCELLED)] * 5
    assert [len(a.invocations) for a in attempts] == [1, 1, 0, 0, 0]
    assert sorted(_started(marks)) == ["s1", "s2"]
    assert waited < grace, f"the run waited {waited:.2f} s: its async bodies ran on to the end of the grace period"
    assert saw_cancel == ["s1", "s2"]
