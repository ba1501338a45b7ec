"""Per-attempt engine overhead on a three-asset daily chain with no-op bodies.

Prints one line per size: workload, N keys, attempts, median microseconds per
attempt over several runs, and peak traced memory per attempt. Run by hand:

    python benchmarks/engine_overhead.py [--sizes 1000 10000 100000] [--repeat 3]
        [--store none|sqlite|postgresql] [--executor in-process|process]

With ``--store`` each run is also recorded: ``sqlite`` in a temporary file,
``postgresql`` at ``$PARTITA_BENCH_POSTGRES_URL``. The store is opened once,
as a long-lived process would; the no-store figure is measured in the same
invocation so the ratio is comparable. With ``--executor process`` every body
runs in a worker process; the in-process figure is measured alongside for the
ratio (pick smaller sizes: a process round trip costs far more than a thread's).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import statistics
import tempfile
import time
import tracemalloc

import partita
from partita.store import Store, open_store

# Module level, so that worker processes of the process executor find the bodies.
REGISTRY = partita.AssetRegistry()
DAYS = partita.DatePartitionDef()


@partita.asset(partition_def=DAYS, registry=REGISTRY)
def extract() -> None:
    return None


@partita.asset(partition_def=DAYS, registry=REGISTRY)
def transform(extract: None) -> None:
    return None


@partita.asset(partition_def=DAYS, registry=REGISTRY)
def publish(transform: None) -> None:
    return None


def build_flow(store: Store | bool = False, executor: str | None = None) -> partita.Flow:
    return partita.Flow(["publish"], registry=REGISTRY, store=store, executor=executor)


def keys_for(count: int) -> list[dt.date]:
    start = dt.date(1800, 1, 1)
    return [start + dt.timedelta(days=offset) for offset in range(count)]


def measure(flow: partita.Flow, keys: list[dt.date]) -> float:
    """Seconds for plan + run of the whole selection."""
    gc.collect()
    started = time.perf_counter()
    result = flow.run({"partition_keys": keys})
    elapsed = time.perf_counter() - started
    assert result.succeeded, result.status
    assert sum(len(task.attempts) for task in result.tasks.values()) == 3 * len(keys)
    return elapsed


def peak_memory(flow: partita.Flow, keys: list[dt.date]) -> int:
    gc.collect()
    tracemalloc.start()
    result = flow.run({"partition_keys": keys})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--store", choices=["none", "sqlite", "postgresql"], default="none")
    parser.add_argument("--executor", choices=["in-process", "process"], default="in-process")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        flows = {"none": build_flow()}
        if args.executor == "process":
            flows["process"] = build_flow(executor="process")
        if args.store == "sqlite":
            flows["sqlite"] = build_flow(open_store(f"sqlite:///{folder}/bench.db"))
        elif args.store == "postgresql":
            url = os.environ.get("PARTITA_BENCH_POSTGRES_URL")
            if not url:
                raise SystemExit("set PARTITA_BENCH_POSTGRES_URL to a PostgreSQL database the benchmark may write to")
            flows["postgresql"] = build_flow(open_store(url))
        for flow in flows.values():
            flow.run({"partition_keys": keys_for(100)})  # warm-up: imports, threads, schema
        for size in args.sizes:
            keys = keys_for(size)
            attempts = 3 * size
            medians = {}
            for name, flow in flows.items():
                medians[name] = statistics.median(measure(flow, keys) for _ in range(args.repeat))
                baseline = "in_process" if name == "process" else "no_store"
                ratio = "" if name == "none" else f" ratio_to_{baseline}={medians[name] / medians['none']:.2f}"
                peak = f" peak_bytes_per_attempt={peak_memory(flow, keys) / attempts:.0f}" if name == "none" else ""
                store, executor = ("none", name) if name == "process" else (name, "in-process")
                print(
                    f"engine_overhead chain=3 store={store} executor={executor} keys={size} attempts={attempts} "
                    f"median_us_per_attempt={medians[name] / attempts * 1e6:.1f}{peak}{ratio} runs={args.repeat}"
                )


if __name__ == "__main__":
    main()
