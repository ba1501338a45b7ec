"""One-key runs back to back, as a trigger daemon's consumer loop starts them: the fixed cost of a run.

    python benchmarks/one_key_runs.py [--runs 3000] [--in-flight 1 4] [--store none sqlite] [--repeat 3]
                                      [--registry-size 0 500]

A one-run-per-key triggered flow pays, for every key, what a whole run
costs: a plan, the event loop's turns, a worker thread, and with a store
the run's two transactions. Here ``--runs`` one-key runs of a no-op asset
are submitted one at a time, ``--in-flight`` at once, each as a task of
one event loop on a thread of its own, as a daemon submits its consumer
runs (`partita.automation.consumer_loop`). Without the
daemon, its claims and the producer, the figure is the runs' own cost, and
its change from one run in flight to several is what concurrent runs cost
(or save) each other on this machine.

``--registry-size`` registers that many other assets beside the one that
runs: a run's cost should not grow with its registry's size.

One line per (store, in flight, registry size): the median over ``--repeat`` rounds of wall
microseconds per run, processor microseconds per run (all threads), and
thread switches per run (voluntary and involuntary, the whole process). On
SQLite each round uses a new file in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from partita import AssetContext, AssetRegistry, Flow, StaticPartitionDef, asset, open_store
from partita.automation.consumer_loop import ConsumerLoop


def _switches() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def _noop_body() -> Callable[[], None]:
    """A new body for an asset that is only registered (a function is one asset's)."""

    def noop() -> None:
        return None

    return noop


def one_round(runs: int, in_flight: int, store_kind: str, others: int = 0) -> tuple[float, float, float]:
    """Wall and processor microseconds, and thread switches, per run."""
    registry = AssetRegistry()
    keys = StaticPartitionDef("bench_keys", [f"k{index:06d}" for index in range(runs)])

    @asset(partition_def=keys, registry=registry)
    def consumer(context: AssetContext) -> None:
        """A no-op body: the run's own cost is measured."""

    for index in range(others):  # registered beside it, never run: a run's cost must not grow with them
        asset(name=f"other_{index}", registry=registry)(_noop_body())

    store = (
        open_store(f"sqlite:///{Path(tempfile.mkdtemp(prefix='partita-bench-'), 'partita.db')}")
        if store_kind == "sqlite"
        else None
    )
    flow = Flow(["consumer"], registry=registry, name="one_key", store=store)

    async def one_run(index: int) -> None:
        # As a daemon's consumer run: a plan of the one key, executed on the running loop.
        await flow._execute(flow.plan_from_text({"partition_keys": [keys.keys[index]]}))

    async def warm() -> None:  # the loop's first turns, and the worker threads the runs will take
        await asyncio.gather(*(one_run(index) for index in range(in_flight)))

    runs_loop = ConsumerLoop()
    runs_loop.submit(warm).result()
    began, cpu, switches = time.perf_counter(), time.process_time(), _switches()
    in_progress: set[concurrent.futures.Future[None]] = set()
    for index in range(in_flight, runs):  # as the daemon does: a run is submitted as a slot frees
        if len(in_progress) == in_flight:
            done, in_progress = concurrent.futures.wait(in_progress, return_when=concurrent.futures.FIRST_COMPLETED)
            for finished in done:
                finished.result()
        in_progress.add(runs_loop.submit(one_run, index))
    for finished in concurrent.futures.as_completed(in_progress):
        finished.result()
    measured = runs - in_flight
    wall = (time.perf_counter() - began) / measured * 1e6
    processor = (time.process_time() - cpu) / measured * 1e6
    switched = (_switches() - switches) / measured
    runs_loop.shutdown()
    if store is not None:
        store.close()
    return wall, processor, switched


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3000, help="one-key runs per round (default 3000)")
    parser.add_argument(
        "--in-flight", type=int, nargs="+", default=[1, 4], help="one-key runs at once on the loop (default 1 4)"
    )
    parser.add_argument("--store", choices=("none", "sqlite"), nargs="+", default=["none", "sqlite"])
    parser.add_argument("--repeat", type=int, default=3, help="rounds per figure, interleaved (default 3)")
    parser.add_argument(
        "--registry-size", type=int, nargs="+", default=[0],
        help="other assets registered beside the one that runs, never run; each value is measured (default 0)",
    )  # fmt: skip
    args = parser.parse_args()
    figures = [
        (store, in_flight, others)
        for store in args.store
        for in_flight in args.in_flight
        for others in args.registry_size
    ]
    rounds: dict[tuple[str, int, int], list[tuple[float, float, float]]] = {figure: [] for figure in figures}
    for _ in range(args.repeat):  # interleaved: a shared machine's drift hits every figure alike
        for store, in_flight, others in figures:
            rounds[(store, in_flight, others)].append(one_round(args.runs, in_flight, store, others))
    for (store, in_flight, others), measured in rounds.items():
        wall, processor, switched = (statistics.median(values) for values in zip(*measured, strict=True))
        print(
            f"one_key_runs store={store} in_flight={in_flight} other_assets={others} runs={args.runs} "
            f"median_us_per_run={wall:.0f} cpu_us_per_run={processor:.0f} switches_per_run={switched:.1f} "
            f"rounds={args.repeat}"
        )


if __name__ == "__main__":
    main()
