"""Durable emissions per second, from one asset body and from eight at once, next to a raw baseline.

partita, one emitter: one asset body calls ``context.emit`` N times into a
store (each call returns only once the event is committed). partita,
``--threads`` emitters: that many asset bodies of one run (``max_concurrency``
as many) each emit their share of the N events at once; the figure is all N
over the time from the first body's start to the last one's end. Emissions
of concurrent bodies share transactions (group commit), and each still
returns only once its own event is committed.

Baseline: plain sqlite3 (or psycopg) in one thread inserting the same row
into the same table (partita's event table, with its indexes) and committing
after each insert, with the same durability settings (SQLite: WAL,
synchronous=NORMAL). Both partita figures are compared with that one raw
writer. The raw writer keeps SQLite's default checkpoint (its own thread
copies the log back every 1,000 pages); partita copies it on a background
thread (``partita.store.checkpointer``): that difference is part of what the
SQLite figures measure, and every receipt is in the log before it returns
in both. Median of ``--repeat`` runs, the runs of each figure interleaved with
the baseline's; one line per figure with the ratio partita/baseline.

``--ceiling US ...`` adds what the machine allows at best: ``--threads``
plain threads, each spending US microseconds of Python per event, with an
ideal group commit (one writer thread committing every waiting row in one
transaction over plain sqlite3), as a ratio to the same raw writer; beside
it, partita's own Python per emission without a store. Emitting threads
share one interpreter lock, so their Python runs one at a time.

    python benchmarks/emission.py [--events 2000] [--repeat 3] [--threads 8] [--postgresql URL] [--ceiling US ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import queue
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable

import partita
from partita.store import open_store

ROW_SQL = (
    "INSERT INTO partita_events (asset, partition_key, partition_date, extra, timestamp, source_kind, source_run_id, "
    "source_asset, source_key_present, source_invocation, dedupe_key, payload_hash) "
    "VALUES ({marks})"
)


def emitting_seconds(count: int, store_url: str | None = None) -> float:
    """Seconds one asset body takes to emit ``count`` events: into the store at ``store_url``, or with no store."""
    registry = partita.AssetRegistry()
    batches = partita.StaticPartitionDef("batches", [f"b{i}" for i in range(count)])

    @partita.asset(partition_def=batches, registry=registry)
    def batch() -> None:
        return None

    @partita.asset(registry=registry)
    def producer(context: partita.AssetContext) -> float:
        started = time.perf_counter()
        for index in range(count):
            context.emit("batch", partition_key=f"b{index}", extra={"rows": index})
        return time.perf_counter() - started

    store = None if store_url is None else open_store(store_url)
    try:
        result = partita.Flow(["producer"], registry=registry, store=store).run()
    finally:
        if store is not None:
            store.close()
    assert result.succeeded and len(result.receipts) == count
    return float(result.output("producer"))


def partita_rate(store_url: str, count: int) -> float:
    return count / emitting_seconds(count, store_url)


def partita_threads_rate(store_url: str, count: int, threads: int) -> float:
    """Events per second of ``threads`` bodies of one run emitting ``count`` events in all, at once."""
    registry = partita.AssetRegistry()
    batches = partita.StaticPartitionDef("batches", [f"b{i}" for i in range(count)])
    workers = partita.StaticPartitionDef("workers", [str(n) for n in range(threads)])
    start = threading.Barrier(threads)

    @partita.asset(partition_def=batches, registry=registry)
    def batch() -> None:
        return None

    @partita.asset(partition_def=workers, registry=registry)
    def producer(context: partita.AssetContext) -> tuple[float, float]:
        mine = range(int(context.partition_key), count, threads)
        start.wait()
        started = time.perf_counter()
        for index in mine:
            context.emit("batch", partition_key=f"b{index}", extra={"rows": index})
        return started, time.perf_counter()

    store = open_store(store_url)
    try:
        flow = partita.Flow(["producer"], registry=registry, store=store, max_concurrency=threads)
        result = flow.run({"partition_keys": workers.keys})
    finally:
        store.close()
    assert result.succeeded and len(result.receipts) == count
    spans = [attempt.output for attempt in result.tasks["producer"].attempts]
    return count / (max(end for _, end in spans) - min(begin for begin, _ in spans))


def sqlite_rate(path: str, count: int) -> float:
    open_store(f"sqlite:///{path}").close()  # the same table and indexes, created by partita
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    sql = ROW_SQL.format(marks=", ".join("?" * 12))
    started = time.perf_counter()
    for index in range(count):
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(
            sql,
            ("batch", f"b{index}", None, json.dumps({"rows": index}), time.time(), "attempt", "run", "producer",
             False, 1, uuid.uuid4().hex, "0" * 64),
        )
        connection.execute("COMMIT")
    elapsed = time.perf_counter() - started
    connection.close()
    return count / elapsed


def memory_emit_us(count: int) -> float:
    """Microseconds of one ``context.emit`` without a store: the Python an emission does before any store work."""
    return emitting_seconds(count) / count * 1e6


def ceiling_rate(path: str, count: int, threads: int, python_us: float) -> float:
    """Events per second of ``threads`` plain threads with an ideal group commit over plain sqlite3.

    Each thread spends ``python_us`` of Python per event (holding the
    interpreter's lock, as an emission's own work does), hands its row to one
    writer thread and waits until the transaction that carried it commits;
    the writer commits whatever rows are waiting, in one transaction. No
    validation, no receipts, no store: what the interpreter and SQLite allow
    here for that much Python per event.
    """
    open_store(f"sqlite:///{path}").close()
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    sql = ROW_SQL.format(marks=", ".join("?" * 12))
    waiting: queue.SimpleQueue[tuple[tuple[object, ...], threading.Lock] | None] = queue.SimpleQueue()

    def write() -> None:
        while (first := waiting.get()) is not None:
            batch = [first]
            with contextlib.suppress(queue.Empty):
                while len(batch) < 64:
                    item = waiting.get_nowait()
                    if item is None:
                        waiting.put(None)  # stop after this transaction
                        break
                    batch.append(item)
            connection.execute("BEGIN IMMEDIATE")
            for row, _ in batch:
                connection.execute(sql, row)
            connection.execute("COMMIT")
            for _, committed in batch:
                committed.release()

    start = threading.Barrier(threads)
    spans: list[tuple[float, float]] = []

    def emit(first: int) -> None:
        start.wait()
        began = time.perf_counter()
        for index in range(first, count, threads):
            until = time.perf_counter() + python_us / 1e6
            while time.perf_counter() < until:
                pass
            row = ("batch", f"b{index}", None, json.dumps({"rows": index}), time.time(), "attempt", "run",
                   "producer", False, 1, uuid.uuid4().hex, "0" * 64)  # fmt: skip
            committed = threading.Lock()
            committed.acquire()
            waiting.put((row, committed))
            committed.acquire()
        spans.append((began, time.perf_counter()))

    writer = threading.Thread(target=write)
    writer.start()
    emitters = [threading.Thread(target=emit, args=(first,)) for first in range(threads)]
    for thread in emitters:
        thread.start()
    for thread in emitters:
        thread.join()
    waiting.put(None)
    writer.join()
    connection.close()
    return count / (max(end for _, end in spans) - min(begin for begin, _ in spans))


def postgresql_rate(url: str, count: int) -> float:
    import psycopg

    open_store(url).close()  # the same table and indexes, created by partita
    with psycopg.connect(url) as connection:
        started = time.perf_counter()
        insert_with_a_commit_each(connection, count, "b")
        return count / (time.perf_counter() - started)


def insert_with_a_commit_each(connection: object, count: int, key_prefix: str) -> None:
    """``count`` event rows through a psycopg connection, committing after each one."""
    sql = ROW_SQL.format(marks=", ".join(["%s"] * 12))
    for index in range(count):
        connection.execute(  # type: ignore[attr-defined]
            sql,
            ("batch", f"{key_prefix}{index}", None, json.dumps({"rows": index}), time.time(), "attempt", "run",
             "producer", False, 1, uuid.uuid4().hex, "0" * 64),
        )
        connection.commit()  # type: ignore[attr-defined]


def fresh_postgresql_database(server_url: str) -> str:
    import psycopg

    name = f"partita_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + f"/{name}"


def report(backend: str, count: int, ours: list[float], base: list[float], threads: int = 1) -> None:
    ours_median, base_median = statistics.median(ours), statistics.median(base)
    label = f"emission backend={backend}" + (f" threads={threads}" if threads > 1 else "") + f" events={count}"
    print(f"{label} partita_per_second={ours_median:,.0f} runs={len(ours)}")
    print(f"{label} baseline_per_second={base_median:,.0f} runs={len(base)}")
    print(f"{label} ratio_partita_over_baseline={ours_median / base_median:.2f}")


def measure(repeat: int, ours: Callable[[int], float], base: Callable[[int], float]) -> tuple[list[float], list[float]]:
    """``repeat`` runs of each, interleaved: the machine's load changes alike for both."""
    ours_rates, base_rates = [], []
    for attempt in range(repeat):
        ours_rates.append(ours(attempt))
        base_rates.append(base(attempt))
    return ours_rates, base_rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8, help="bodies emitting at once for the second figure (1: none)")
    parser.add_argument("--postgresql", metavar="URL", help="a PostgreSQL server the benchmark may create databases on")
    parser.add_argument(
        "--ceiling", type=float, nargs="+", metavar="US",
        help="also measure an ideal group commit of --threads plain threads spending US of Python per event (SQLite)",
    )  # fmt: skip
    args = parser.parse_args()
    count, threads = args.events, args.threads
    with tempfile.TemporaryDirectory() as folder:
        if args.ceiling:
            print(f"emission python_us_per_event_without_store={memory_emit_us(count):.1f} (partita's own, before any store work)")
        for python_us in args.ceiling or ():
            ours, base = measure(
                args.repeat,
                lambda n, python_us=python_us: ceiling_rate(f"{folder}/ceiling-{python_us}-{n}.db", count, threads, python_us),
                lambda n, python_us=python_us: sqlite_rate(f"{folder}/raw-ceiling-{python_us}-{n}.db", count),
            )
            print(
                f"emission ceiling threads={threads} python_us_per_event={python_us:g} events={count} "
                f"ratio_ideal_over_baseline={statistics.median(ours) / statistics.median(base):.2f} runs={args.repeat}"
            )
        ours, base = measure(
            args.repeat,
            lambda n: partita_rate(f"sqlite:///{folder}/partita-{n}.db", count),
            lambda n: sqlite_rate(f"{folder}/raw-{n}.db", count),
        )
        report("sqlite", count, ours, base)
        if threads > 1:
            ours, base = measure(
                args.repeat,
                lambda n: partita_threads_rate(f"sqlite:///{folder}/threads-{n}.db", count, threads),
                lambda n: sqlite_rate(f"{folder}/raw-threads-{n}.db", count),
            )
            report("sqlite", count, ours, base, threads)
    if args.postgresql:
        server = args.postgresql
        ours, base = measure(
            args.repeat,
            lambda _: partita_rate(fresh_postgresql_database(server), count),
            lambda _: postgresql_rate(fresh_postgresql_database(server), count),
        )
        report("postgresql", count, ours, base)
        if threads > 1:
            ours, base = measure(
                args.repeat,
                lambda _: partita_threads_rate(fresh_postgresql_database(server), count, threads),
                lambda _: postgresql_rate(fresh_postgresql_database(server), count),
            )
            report("postgresql", count, ours, base, threads)


if __name__ == "__main__":
    main()
