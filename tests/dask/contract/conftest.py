"""What every engine-contract module shares: the executor under test.

Each behaviour runs over the in-process ("thread"), process and Dask
executors. The Dask case reuses the session's two-worker LocalCluster
(`dask_client`); the process executor forks its workers when a run starts,
so an environment variable set with monkeypatch before the run reaches them.
Bodies leave marks in the folder the `marks` fixture (tests/dask/conftest.py)
names, on the driver and on every Dask worker.
"""

from __future__ import annotations

from typing import Any

import pytest

import partita as p


@pytest.fixture(params=["thread", "process", "dask"])
def executor_kind(request: pytest.FixtureRequest) -> Any:
    """An executor option for `Flow(executor=...)`, per kind."""
    if request.param == "dask":
        return p.DaskExecutor(client=request.getfixturevalue("dask_client"))
    return request.param
