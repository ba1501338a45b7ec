"""One-key runs back to back, as a trigger daemon's consumer threads start them: the fixed cost of a run.

    python benchmarks/one_key_runs.py [--runs 3000] [--threads 1 4] [--store none sqlite] [--repeat 3]
                                      [--registry-size 0 500]

A one-run-per-key triggered flow pays, for every key, what a whole run
costs: a plan, an event loop turn, a worker thread, and with a store the
run's two transactions. Here ``--threads`` threads start ``--runs`` one-key
runs of a no-op asset between them, each thread keeping one event loop as
the daemon's consumer threads do (`partita.execution.loop_runner`). Without
the daemon, its claims and the producer, the figure is the runs' own cost,
and its growth from one thread to several is what concurrent runs cost each
other on this machine.

``--registry-size`` registers that many other assets beside the one that
runs: a run's cost should not grow with its registry's size.

One line per (store, threads, registry size): the median over ``--repeat`` rounds of wall
microseconds per run, processor microseconds per run (all threads), and
thread switches per run (voluntary and involuntary, the whole process). On
SQLite each round uses a new file in a temporary folder.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from partita import AssetContext, AssetRegistry, Flow, StaticPartitionDef, asset, open_store
from partita.execution.loop_runner import ThreadLoops


def _switches() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def _noop_body() -> Callable[[], None]:
    """A new body for an asset that is only registered (a function is one asset's)."""

    def noop() -> None:
        return None

    return noop


def one_round(runs: int, threads: int, store_kind: str, others: int = 0) -> tuple[float, float, float]:
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
    loops = ThreadLoops()
    ready = threading.Barrier(threads + 1)

    def start_runs(first: int) -> None:
        loops.keep()
        flow.run(flow.plan_from_text({"partition_keys": [keys.keys[first]]}))  # warm: the loop and a worker
        ready.wait()
        for index in range(first + threads, runs, threads):
            flow.run(flow.plan_from_text({"partition_keys": [keys.keys[index]]}))

    workers = [
        threading.Thread(target=start_runs, args=(first,), name=f"partita-consumer_{first}") for first in range(threads)
    ]
    for worker in workers:
        worker.start()
    ready.wait()
    began, cpu, switches = time.perf_counter(), time.process_time(), _switches()
    for worker in workers:
        worker.join()
    measured = runs - threads
    wall = (time.perf_counter() - began) / measured * 1e6
    processor = (time.process_time() - cpu) / measured * 1e6
    switched = (_switches() - switches) / measured
    loops.close()
    if store is not None:
        store.close()
    return wall, processor, switched


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3000, help="one-key runs per round (default 3000)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 4], help="threads starting runs (default 1 4)")
    parser.add_argument("--store", choices=("none", "sqlite"), nargs="+", default=["none", "sqlite"])
    parser.add_argument("--repeat", type=int, default=3, help="rounds per figure, interleaved (default 3)")
    parser.add_argument(
        "--registry-size", type=int, nargs="+", default=[0],
        help="other assets registered beside the one that runs, never run; each value is measured (default 0)",
    )  # fmt: skip
    args = parser.parse_args()
    figures = [
        (store, threads, others) for store in args.store for threads in args.threads for others in args.registry_size
    ]
    rounds: dict[tuple[str, int, int], list[tuple[float, float, float]]] = {figure: [] for figure in figures}
    for _ in range(args.repeat):  # interleaved: a shared machine's drift hits every figure alike
        for store, threads, others in figures:
            rounds[(store, threads, others)].append(one_round(args.runs, threads, store, others))
    for (store, threads, others), measured in rounds.items():
        wall, processor, switched = (statistics.median(values) for values in zip(*measured, strict=True))
        print(
            f"one_key_runs store={store} threads={threads} other_assets={others} runs={args.runs} "
            f"median_us_per_run={wall:.0f} cpu_us_per_run={processor:.0f} switches_per_run={switched:.1f} "
            f"rounds={args.repeat}"
        )


if __name__ == "__main__":
    main()
