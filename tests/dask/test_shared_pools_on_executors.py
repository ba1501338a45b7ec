"""A shared pool's limit holds on every executor: the driver leases, the bodies run on threads, processes or Dask.

Another holder (as another process would) keeps one of the pool's two
slots, so at most one body of the run is inside at once although the run's
own gate would admit two. Bodies return their enter and exit times; assets
are module level so worker processes find them.
"""

from __future__ import annotations

import time
from contextlib import closing

import pytest

import partita as p
from partita.execution.pools import SlotRequest
from partita.store import open_store
from partita.store.pools import SqlPoolLeases

KEYS = [str(number) for number in range(4)]
REGISTRY = p.AssetRegistry()


@p.asset(partition_def=p.StaticPartitionDef("calls", KEYS), registry=REGISTRY, resource="api")
def timed_call(context):
    entered = time.time()
    time.sleep(0.1)  # the call itself
    return (entered, time.time())


@pytest.fixture(params=["thread", "process", "dask"])
def executor_kind(request):
    if request.param == "dask":
        return p.DaskExecutor(client=request.getfixturevalue("dask_client"))
    return request.param


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    moments = sorted([(entered, 1) for entered, _ in intervals] + [(left, -1) for _, left in intervals])
    inside = peak = 0
    for _, change in moments:
        inside += change
        peak = max(peak, inside)
    return peak


def test_a_shared_pool_bounds_bodies_on_every_executor(executor_kind, tmp_path):
    url = f"sqlite:///{tmp_path}/pools.db"
    with closing(open_store(url)) as store:
        leases = SqlPoolLeases(store.database)
        other = leases.acquire_slot(SlotRequest("api", 2, "other-run", "elsewhere", 0, None, 1, 60.0))
        assert other is not None
        flow = p.Flow(
            ["timed_call"], registry=REGISTRY, executor=executor_kind, store=url,
            resources={"api": p.ResourcePolicy(max_concurrency=2, shared=True)},
        )
        result = flow.run({"partition_keys": KEYS})
        assert result.status is p.RunStatus.SUCCESS
        assert _max_overlap([result.output("timed_call", key) for key in KEYS]) == 1
        assert [holder.run_id for holder in leases.holders()] == ["other-run"]
