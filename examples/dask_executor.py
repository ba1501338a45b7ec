"""The same asset code with its bodies on a Dask cluster: the executor forms of docs/scale-out.md.

Runs a two-asset daily chain on a LocalCluster of two worker processes that
the executor starts for the run and closes after it; outputs pass from worker
to worker, and the driver fetches only the target's outputs. Needs the extra:
``pip install 'partita[dask]'``.
"""

from __future__ import annotations

import os

from partita import DaskExecutor, DatePartitionDef, Flow, asset

days = DatePartitionDef(start="2026-08-01")


@asset(partition_def=days)
def orders(context) -> dict[str, int]:
    return {"day": context.partition_key.day, "worker_pid": os.getpid()}


@asset(partition_def=days)
def report(orders: dict[str, int]) -> int:
    return orders["day"] * 10


def executor_forms(client: object) -> list[Flow]:
    """Each way to name the executor; only the first is run below (the others need a scheduler or a client)."""
    return [
        Flow([report], executor="dask"),                        # a LocalCluster per run, on this machine
        Flow([report], executor="dask://scheduler:8786"),       # a running Dask scheduler
        Flow([report], executor=DaskExecutor(n_workers=4, threads_per_worker=1)),  # LocalCluster options
        Flow([report], executor=DaskExecutor(client=client)),   # your own distributed.Client
    ]


if __name__ == "__main__":
    flow = Flow([report], executor=DaskExecutor(n_workers=2, threads_per_worker=1))
    result = flow.run({"partition_range": ("2026-08-01", "2026-08-03")})
    print(f"run status: {result.status.value}")
    print(f"reports: {[result.output('report', day) for day in ('2026-08-01', '2026-08-02', '2026-08-03')]}")
