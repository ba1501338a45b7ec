"""A sync body abandoned on a Dask worker by a cancelled run cannot emit once the run has ended.

The body keeps running on its worker (a thread cannot be interrupted), but
the run's end reaches every worker, and its emitter refuses from then on,
as an abandoned thread's does in the driver. Assets are module level so
workers import this module by name.
"""

from __future__ import annotations

import asyncio
import os
import time
from contextlib import closing
from pathlib import Path

import pytest

import partita as p
from partita.store import open_store

MARKS = "PARTITA_TEST_DASK_MARKS"
REGISTRY = p.AssetRegistry()
WAIT = 30.0


@p.asset(registry=REGISTRY)
def announced():
    return None


@p.asset(registry=REGISTRY)
def emits_before_and_after_the_release(context):
    folder = Path(os.environ[MARKS])
    context.emit("announced", extra={"when": "before"})
    (folder / "started").write_text("")
    deadline = time.monotonic() + WAIT
    while not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        context.emit("announced", extra={"when": "after"})
    except p.EmissionError as exc:
        (folder / "refused").write_text(str(exc))
    else:
        (folder / "emitted").write_text("")


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + WAIT
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {path.name}")
        time.sleep(0.01)


def test_a_body_abandoned_on_a_worker_cannot_emit_after_its_cancelled_run_ended(dask_client, marks, tmp_path):
    store = f"sqlite:///{tmp_path}/abandoned.db"
    flow = p.Flow(
        ["emits_before_and_after_the_release"], registry=REGISTRY, executor=p.DaskExecutor(client=dask_client),
        store=store, cancel_grace_seconds=0.2,
    )

    async def main() -> None:
        task = asyncio.create_task(flow.run_async())
        await asyncio.to_thread(_wait_for, marks / "started")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    (marks / "release").write_text("")  # the abandoned body goes on, and tries to emit
    _wait_for(marks / "refused")

    assert "run has finished" in (marks / "refused").read_text()
    assert not (marks / "emitted").exists()
    with closing(open_store(store)) as opened:
        assert [event.extra["when"] for event in opened.list_events(asset="announced")] == ["before"]
