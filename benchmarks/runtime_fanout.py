"""Runtime fan-out: one producer discovers N keys, two downstream assets per key.

With the SQLite store on (discovery events, the partition registry, every
attempt and outlet event are recorded). Printed next to the static-chain
workload of engine_overhead.py with the same store, measured in the same run,
as microseconds per attempt and their ratio.

    python benchmarks/runtime_fanout.py [--sizes 10000 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import partita
from partita.store import open_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_overhead import build_flow, keys_for  # noqa: E402


def fanout_flow(size: int, store: partita.Store) -> partita.Flow:
    registry = partita.AssetRegistry()
    domain = partita.PartitionAtRuntime("bench")

    @partita.asset(partition_def=domain, registry=registry)
    def discover(context: partita.AssetContext) -> None:
        context.partition_keys = [f"key-{index:07d}" for index in range(size)]

    @partita.asset(partition_def=domain, registry=registry)
    def transform(discover: None) -> None:
        return None

    @partita.asset(partition_def=domain, registry=registry)
    def publish(transform: None) -> None:
        return None

    return partita.Flow(["publish"], registry=registry, store=store)


def timed(flow: partita.Flow, config: dict[str, object] | None) -> float:
    started = time.perf_counter()
    result = flow.run(config)
    elapsed = time.perf_counter() - started
    assert result.succeeded, result.status
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            fanout_seconds, chain_seconds = [], []
            for attempt in range(args.repeat):
                store = open_store(f"sqlite:///{folder}/fanout-{size}-{attempt}.db")
                fanout_seconds.append(timed(fanout_flow(size, store), None))
                store.close()
                store = open_store(f"sqlite:///{folder}/chain-{size}-{attempt}.db")
                chain_seconds.append(timed(build_flow(store), {"partition_keys": keys_for(size)}))
                store.close()
            fanout, chain = statistics.median(fanout_seconds), statistics.median(chain_seconds)
            fanout_attempts, chain_attempts = 1 + 2 * size, 3 * size
            fanout_us = fanout / fanout_attempts * 1e6
            chain_us = chain / chain_attempts * 1e6
            print(
                f"runtime_fanout store=sqlite keys={size} attempts={fanout_attempts} "
                f"median_seconds={fanout:.2f} median_us_per_attempt={fanout_us:.1f} runs={args.repeat}"
            )
            print(
                f"static_chain store=sqlite keys={size} attempts={chain_attempts} "
                f"median_seconds={chain:.2f} median_us_per_attempt={chain_us:.1f} runs={args.repeat}"
            )
            print(f"runtime_fanout keys={size} ratio_per_attempt_fanout_over_chain={fanout_us / chain_us:.2f}")


if __name__ == "__main__":
    main()
