"""What every engine-contract module shares: the executor under test and a bounded wait.

Each behaviour runs over the in-process ("thread"), process and Dask
executors. The Dask case reuses the session's two-worker LocalCluster
(`dask_client`); the process executor forks its workers when a run starts,
so an environment variable set with monkeypatch before the run reaches them.
Bodies leave marks in the folder the `marks` fixture (tests/dask/conftest.py)
names, on the driver and on every Dask worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

import partita as p

#: Seconds any wait for work may take before the test fails.
WAIT = 30.0


@pytest.fixture(params=["thread", "process", "dask"])
def executor_kind(request: pytest.FixtureRequest) -> Any:
    """An executor option for `Flow(executor=...)`, per kind."""
    if request.param == "dask":
        return p.DaskExecutor(client=request.getfixturevalue("dask_client"))
    return request.param


@pytest.fixture
def poll() -> Callable[..., None]:
    """``poll(condition, what)``: wait, with a deadline, until ``condition()`` is true."""

    def wait(condition: Callable[[], bool], what: str, seconds: float = WAIT) -> None:
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what} ({seconds} s)")
            time.sleep(0.01)

    return wait
