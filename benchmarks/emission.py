"""Durable emissions per second from one asset body, next to a raw baseline.

partita: one asset body calls ``context.emit`` N times into a store (each
call returns only once the event is committed). Baseline: plain sqlite3 (or
psycopg) inserting the same row into the same table (partita's event table,
with its indexes) and committing after each insert, with the same durability
settings (SQLite: WAL, synchronous=NORMAL). Median of ``--repeat`` runs; one
line per figure with the ratio partita/baseline.

    python benchmarks/emission.py [--events 2000] [--repeat 3] [--postgresql URL]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
import uuid

import partita
from partita.store import open_store

ROW_SQL = (
    "INSERT INTO partita_events (asset, partition_key, partition_date, extra, timestamp, source_kind, source_run_id, "
    "source_asset, source_key_present, source_invocation, dedupe_key, payload_hash) "
    "VALUES ({marks})"
)
def partita_rate(store_url: str, count: int) -> float:
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

    store = open_store(store_url)
    try:
        result = partita.Flow(["producer"], registry=registry, store=store).run()
    finally:
        store.close()
    assert result.succeeded and len(result.receipts) == count
    return count / result.output("producer")


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


def report(backend: str, count: int, ours: list[float], base: list[float]) -> None:
    ours_median, base_median = statistics.median(ours), statistics.median(base)
    print(f"emission backend={backend} events={count} partita_per_second={ours_median:,.0f} runs={len(ours)}")
    print(f"emission backend={backend} events={count} baseline_per_second={base_median:,.0f} runs={len(base)}")
    print(f"emission backend={backend} events={count} ratio_partita_over_baseline={ours_median / base_median:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgresql", metavar="URL", help="a PostgreSQL server the benchmark may create databases on")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        ours, base = [], []
        for attempt in range(args.repeat):
            ours.append(partita_rate(f"sqlite:///{folder}/partita-{attempt}.db", args.events))
            base.append(sqlite_rate(f"{folder}/raw-{attempt}.db", args.events))
        report("sqlite", args.events, ours, base)
    if args.postgresql:
        ours, base = [], []
        for _ in range(args.repeat):
            ours.append(partita_rate(fresh_postgresql_database(args.postgresql), args.events))
            base.append(postgresql_rate(fresh_postgresql_database(args.postgresql), args.events))
        report("postgresql", args.events, ours, base)


if __name__ == "__main__":
    main()

