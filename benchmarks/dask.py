"""The Dask executor's three figures, each a ratio measured in one run on a two-worker LocalCluster.

1. ``chain``: attempts per second of a no-op three-asset chain (3 x
   ``--keys`` attempts) next to raw ``distributed`` running the same
   dependency chain with ``client.submit`` and futures, every key submitted
   at once. Raw and partita alternate on one cluster; the figure is the
   median of the per-pair ratios (target >= 0.7x).
2. ``memory``: the driver's peak resident memory for a chain passing 10 MB
   outputs (``first -> second -> third``, the first two return 10 MB) at
   100 and at 1,000 keys, each in a fresh process with a cluster of its
   own, next to the same chain with 1-byte outputs: the difference is
   output data in the driver, which stays flat (near 0) when outputs never
   reach it; what grows with the keys in both is per-attempt bookkeeping.
3. ``emission``: events per second from two bodies on two workers calling
   ``context.emit`` into PostgreSQL, next to the same two workers inserting
   the same rows with raw psycopg, a commit each (target >= 0.5x). Needs a
   PostgreSQL server the benchmark may create databases on
   (``--postgresql URL`` or ``$PARTITA_BENCH_POSTGRES_URL``); skipped without one.

    python benchmarks/dask.py [--only chain|memory|emission] [--keys 3334] [--repeat 5]
        [--max-concurrency 256] [--events 2000] [--postgresql URL]

This file is named after the executor; its own folder is taken off the
import path first, so that ``import dask`` finds the library.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import dask  # noqa: E402
import distributed  # noqa: E402

import partita  # noqa: E402

sys.path.append(_HERE)  # after dask: the emission benchmark's helpers, without shadowing it
from emission import fresh_postgresql_database, insert_with_a_commit_each  # noqa: E402

OUTPUT_BYTES = 10 * 1024 * 1024


def print_ratio(figure: str, ratios: list[float], target: float) -> None:
    """The median of per-pair ratios partita/raw, and their range."""
    ordered = sorted(ratios)
    print(f"{figure} ratio partita/raw: median {statistics.median(ordered):.2f}x, "
          f"range {ordered[0]:.2f}-{ordered[-1]:.2f}x (target >= {target}x)")


def local_cluster() -> tuple[distributed.LocalCluster, distributed.Client]:
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    return cluster, distributed.Client(cluster, set_as_default=False)


# -- 1. chain throughput --------------------------------------------------------------


def noop(*_inputs: object) -> int:
    return 1


def raw_chain_seconds(client: distributed.Client, keys: int) -> float:
    started = time.perf_counter()
    leaves = []
    for index in range(keys):
        first = client.submit(noop, key=f"raw-{started}-first-{index}", pure=False)
        second = client.submit(noop, first, key=f"raw-{started}-second-{index}", pure=False)
        leaves.append(client.submit(noop, second, key=f"raw-{started}-third-{index}", pure=False))
    client.gather(leaves)
    return time.perf_counter() - started


def chain_registry(keys: int, output: bytes | None = None) -> tuple[partita.AssetRegistry, list[str]]:
    """``first -> second -> third`` over ``keys`` static keys; the first two return ``output`` (or 1)."""
    registry = partita.AssetRegistry()
    names = [f"k{index}" for index in range(keys)]
    definition = partita.StaticPartitionDef("bench", names)
    size = None if output is None else len(output)

    @partita.asset(partition_def=definition, registry=registry)
    def first() -> object:
        return 1 if size is None else b"x" * size

    @partita.asset(partition_def=definition, registry=registry)
    def second(first: object) -> object:
        return first if size is None else first[:-1] + b"y"  # a new 10 MB value, not the same object

    @partita.asset(partition_def=definition, registry=registry)
    def third(second: object) -> int:
        return 1 if size is None else len(second)

    return registry, names


def partita_chain_seconds(
    client: distributed.Client, keys: int, max_concurrency: int, output: bytes | None = None
) -> float:
    registry, names = chain_registry(keys, output)
    flow = partita.Flow(
        ["third"],
        registry=registry,
        # Kept outputs would keep their lineage in the scheduler (in this process for a LocalCluster).
        executor=partita.DaskExecutor(client=client, keep_unread_outputs=False),
        max_concurrency=max_concurrency,
        store=False,
    )
    started = time.perf_counter()
    result = flow.run({"partition_keys": names})
    elapsed = time.perf_counter() - started
    assert result.status is partita.RunStatus.SUCCESS, result
    return elapsed


def chain(args: argparse.Namespace) -> None:
    cluster, client = local_cluster()
    try:
        partita_chain_seconds(client, 50, args.max_concurrency)  # warm both paths up
        raw_chain_seconds(client, 50)
        pairs = []
        for _ in range(args.repeat):
            raw = raw_chain_seconds(client, args.keys)
            ours = partita_chain_seconds(client, args.keys, args.max_concurrency)
            pairs.append((raw, ours))
            print(f"chain pair {len(pairs)}: raw {raw:.2f} s, partita {ours:.2f} s, ratio {raw / ours:.2f}x", flush=True)
    finally:
        client.close()
        cluster.close()
    attempts = 3 * args.keys
    raw = statistics.median(pair[0] for pair in pairs)
    ours = statistics.median(pair[1] for pair in pairs)
    print(f"chain raw distributed: {attempts / raw:,.0f} tasks/s (median of {len(pairs)}: {raw:.2f} s)")
    print(f"chain partita on dask: {attempts / ours:,.0f} attempts/s (median of {len(pairs)}: {ours:.2f} s)")
    print_ratio("chain", [raw_seconds / our_seconds for raw_seconds, our_seconds in pairs], 0.7)


# -- 2. driver memory with 10 MB outputs ------------------------------------------------


def memory_child(keys: int, output_bytes: int, max_concurrency: int) -> None:
    """In a fresh process: run the chain over ``keys`` keys with outputs of ``output_bytes``; print the peak RSS."""
    cluster, client = local_cluster()
    try:
        elapsed = partita_chain_seconds(client, keys, max_concurrency, output=b"x" * output_bytes)
    finally:
        client.close()
        cluster.close()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"keys": keys, "peak_mib": peak_kib / 1024, "seconds": elapsed}))


def memory(args: argparse.Namespace) -> None:
    """Peaks with 10 MB and with 1-byte outputs at 100 and 1,000 keys: the difference is output data in the driver."""
    peaks: dict[tuple[int, int], list[float]] = {(keys, size): [] for keys in (100, 1000) for size in (OUTPUT_BYTES, 1)}
    for _ in range(max(1, args.repeat // 2)):
        for keys, size in peaks:
            command = [sys.executable, __file__, "--memory-child", str(keys), "--output-bytes", str(size),
                       "--max-concurrency", "16"]
            output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            figures = json.loads(output.strip().splitlines()[-1])
            peaks[keys, size].append(figures["peak_mib"])
            print(f"memory keys={keys} output_bytes={size:,} driver_peak={figures['peak_mib']:.0f} MiB "
                  f"({figures['seconds']:.1f} s)", flush=True)
    median = {case: statistics.median(values) for case, values in peaks.items()}
    for keys in (100, 1000):
        big, tiny = median[keys, OUTPUT_BYTES], median[keys, 1]
        print(f"memory {keys:,} keys: driver peak {big:.0f} MiB with 10 MB outputs, {tiny:.0f} MiB with 1-byte "
              f"outputs: outputs add {big - tiny:+.0f} MiB")
    produced = 2 * 1000 * OUTPUT_BYTES / 2**30
    growth = median[1000, OUTPUT_BYTES] / median[100, OUTPUT_BYTES]
    print(f"memory ratio 1,000/100 keys with 10 MB outputs: {growth:.2f} (the 1,000-key run produced "
          f"{produced:.0f} GiB of outputs; the growth beside the 1-byte run's is bookkeeping, not outputs)")


# -- 3. emissions from two workers into PostgreSQL -------------------------------------


def emit_many(context: partita.AssetContext) -> tuple[float, float]:
    count = int(os.environ["PARTITA_BENCH_EVENTS"])
    started = time.time()
    for index in range(count):
        context.emit("batch", partition_key=f"b{index}", extra={"rows": index})
    return started, time.time()


def raw_inserts(url: str, worker: str, count: int) -> tuple[float, float]:
    import psycopg

    with psycopg.connect(url) as connection:
        started = time.time()
        insert_with_a_commit_each(connection, count, f"{worker}-")
        return started, time.time()


def partita_emission_rate(client: distributed.Client, url: str, count: int) -> float:
    registry = partita.AssetRegistry()
    batches = partita.StaticPartitionDef("batches", [f"b{index}" for index in range(count)])
    workers = partita.StaticPartitionDef("workers", ["w0", "w1"])
    partita.asset(partition_def=batches, registry=registry, name="batch")(lambda: None)
    partita.asset(partition_def=workers, registry=registry, name="producer")(emit_many)
    flow = partita.Flow(["producer"], registry=registry, executor=partita.DaskExecutor(client=client), store=url)
    result = flow.run({"partition_keys": ["w0", "w1"]})
    assert result.status is partita.RunStatus.SUCCESS, [a.failure for a in result.attempts()]
    import psycopg

    with psycopg.connect(url) as connection:
        (stored,) = connection.execute("SELECT count(*) FROM partita_events WHERE asset = 'batch'").fetchone()
    assert stored == 2 * count, stored
    spans = [result.output("producer", key) for key in ("w0", "w1")]
    return 2 * count / (max(end for _, end in spans) - min(start for start, _ in spans))


def raw_emission_rate(client: distributed.Client, url: str, count: int) -> float:
    from partita.store import open_store

    open_store(url).close()  # partita's event table and indexes
    addresses = list(client.scheduler_info()["workers"])[:2]
    futures = [
        client.submit(raw_inserts, url, f"w{index}", count, workers=[address], pure=False)
        for index, address in enumerate(addresses)
    ]
    spans = client.gather(futures)
    return 2 * count / (max(end for _, end in spans) - min(start for start, _ in spans))


def emission(args: argparse.Namespace) -> None:
    server = args.postgresql or os.environ.get("PARTITA_BENCH_POSTGRES_URL")
    if not server:
        print("emission skipped: give --postgresql URL or $PARTITA_BENCH_POSTGRES_URL")
        return
    os.environ["PARTITA_BENCH_EVENTS"] = str(args.events)
    cluster, client = local_cluster()
    client.run(lambda count=args.events: os.environ.__setitem__("PARTITA_BENCH_EVENTS", str(count)))
    try:
        pairs = []
        for _ in range(args.repeat):
            ours = partita_emission_rate(client, fresh_postgresql_database(server), args.events)
            raw = raw_emission_rate(client, fresh_postgresql_database(server), args.events)
            pairs.append((ours, raw))
    finally:
        client.close()
        cluster.close()
    ours = statistics.median(pair[0] for pair in pairs)
    raw = statistics.median(pair[1] for pair in pairs)
    print(f"emission partita from two workers: {ours:,.0f} events/s (median of {len(pairs)})")
    print(f"emission raw psycopg from two workers, a commit each: {raw:,.0f} inserts/s")
    print_ratio("emission", [our_rate / raw_rate for our_rate, raw_rate in pairs], 0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("chain", "memory", "emission"))
    parser.add_argument("--keys", type=int, default=3334, help="keys of the chain (3 attempts each)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--max-concurrency", type=int, default=256, help="partita's in-flight attempts")
    parser.add_argument("--events", type=int, default=2000, help="events each of the two workers emits")
    parser.add_argument("--postgresql", metavar="URL", help="a PostgreSQL server the benchmark may create databases on")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--output-bytes", type=int, default=OUTPUT_BYTES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.output_bytes, args.max_concurrency)
        return
    for name, figure in (("chain", chain), ("memory", memory), ("emission", emission)):
        if args.only in (None, name):
            figure(args)


if __name__ == "__main__":
    main()
