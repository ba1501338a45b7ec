"""One real LocalCluster of two worker processes for the whole session (it takes a second or more to start).

Tests hand it to `DaskExecutor(client=...)`; the executor never closes a
client it was given. The scheduler is created here with
``allowed-failures: 0``, as the executor configures the clusters it
starts, so a worker that dies fails its task at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: The folder bodies leave marks in; set on the workers (and here) by the `marks` fixture.
MARKS = "PARTITA_TEST_DASK_MARKS"


@pytest.fixture(scope="session")
def dask_client() -> Iterator[Any]:
    distributed = pytest.importorskip("distributed")
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0"
        )
    client = distributed.Client(cluster, set_as_default=False)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@pytest.fixture
def marks(dask_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder every worker (and this process) knows through $PARTITA_TEST_DASK_MARKS."""
    monkeypatch.setenv(MARKS, str(tmp_path))
    folder = str(tmp_path)
    dask_client.run(lambda: os.environ.__setitem__(MARKS, folder))  # a lambda travels by value
    return tmp_path
