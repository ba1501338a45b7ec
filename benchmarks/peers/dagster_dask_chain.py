"""Reference for benchmarks/dask.py (chain): Dagster's Dask executor on a no-op three-step chain.

Dagster runs one partition per run; each run here executes ``exports ->
daily_total -> archive`` (no-op ops) through ``dagster_dask.dask_executor``
on a local Dask cluster of two worker processes that the executor starts
for the run. Prints the wall time per run and per step attempt.

Needs its own environment (Dagster is not a dependency of partita):

    python3 -m venv /tmp/dgv && /tmp/dgv/bin/pip install dagster dagster-dask
    /tmp/dgv/bin/python benchmarks/peers/dagster_dask_chain.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from dagster import DagsterInstance, In, Nothing, execute_job, job, op, reconstructable
from dagster_dask import dask_executor


@op
def exports() -> int:
    return 1


@op
def daily_total(value: int) -> int:
    return value + 1


@op(ins={"value": In(int)})
def archive(value: int) -> Nothing:
    return None


@job(executor_def=dask_executor)
def chain() -> None:
    archive(daily_total(exports()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    arguments = parser.parse_args()
    config = {"execution": {"config": {"cluster": {"local": {"n_workers": 2, "threads_per_worker": 1, "processes": True}}}}}
    timings = []
    with tempfile.TemporaryDirectory() as home, DagsterInstance.local_temp(home) as instance:
        for _ in range(arguments.runs):
            started = time.perf_counter()
            with execute_job(reconstructable(chain), instance=instance, run_config=config) as result:
                assert result.success
            timings.append(time.perf_counter() - started)
    median = statistics.median(timings)
    print(f"dagster-dask: {arguments.runs} runs of a three-step chain, median {median:.2f} s per run, "
          f"{median / 3 * 1000:.0f} ms per step attempt (each run starts its own two-worker LocalCluster)")


if __name__ == "__main__":
    main()
