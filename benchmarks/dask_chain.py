"""Attempts per second of a no-op three-asset chain on a two-worker LocalCluster, next to raw `distributed`.

partita: ``Flow(executor=DaskExecutor(client=...))`` runs ``first -> second
-> third`` over N keys (3N attempts; each is a body task and its summary
task on the cluster, decided and settled in the driver). Baseline: the same
dependency chain with ``client.submit`` and futures, every key submitted at
once, waited for with ``distributed.wait``. One cluster serves both; the
median of ``--repeat`` runs each; one line per figure and the ratio.

    python benchmarks/dask_chain.py [--keys 3334] [--repeat 3] [--max-concurrency 256]
"""

from __future__ import annotations

import argparse
import statistics
import time

import dask
import distributed

import partita


def noop(*_inputs: object) -> int:
    return 1


def raw_seconds(client: distributed.Client, keys: int) -> float:
    started = time.perf_counter()
    leaves = []
    for index in range(keys):
        first = client.submit(noop, key=f"raw-{started}-first-{index}", pure=False)
        second = client.submit(noop, first, key=f"raw-{started}-second-{index}", pure=False)
        leaves.append(client.submit(noop, second, key=f"raw-{started}-third-{index}", pure=False))
    client.gather(leaves)
    elapsed = time.perf_counter() - started
    del leaves
    return elapsed


def partita_seconds(client: distributed.Client, keys: int, max_concurrency: int) -> float:
    registry = partita.AssetRegistry()
    definition = partita.StaticPartitionDef("bench", [f"k{index}" for index in range(keys)])

    @partita.asset(partition_def=definition, registry=registry)
    def first() -> int:
        return 1

    @partita.asset(partition_def=definition, registry=registry)
    def second(first: int) -> int:
        return first

    @partita.asset(partition_def=definition, registry=registry)
    def third(second: int) -> int:
        return second

    flow = partita.Flow(
        ["third"],
        registry=registry,
        executor=partita.DaskExecutor(client=client, keep_unread_outputs=False),
        max_concurrency=max_concurrency,
        store=False,
    )
    started = time.perf_counter()
    result = flow.run({"partition_keys": [f"k{index}" for index in range(keys)]})
    elapsed = time.perf_counter() - started
    assert result.status is partita.RunStatus.SUCCESS, result
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=3334, help="keys per asset (3 attempts each)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-concurrency", type=int, default=256, help="partita's in-flight attempts")
    args = parser.parse_args()
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    client = distributed.Client(cluster, set_as_default=False)
    try:
        attempts = 3 * args.keys
        raw = statistics.median(raw_seconds(client, args.keys) for _ in range(args.repeat))
        ours = statistics.median(partita_seconds(client, args.keys, args.max_concurrency) for _ in range(args.repeat))
        print(f"raw distributed: {attempts / raw:,.0f} tasks/s ({raw:.2f} s for {attempts} tasks)")
        print(f"partita on dask: {attempts / ours:,.0f} attempts/s ({ours:.2f} s for {attempts} attempts)")
        print(f"ratio partita/raw: {raw / ours:.2f}x (target >= 0.7x)")
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
