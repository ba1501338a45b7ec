"""A run's start and end on a SQLite file as one statement each (`sqlite_verbs`), with the same rows as before.

The statements go into temporary views whose triggers make every write of
the verb; a run whose end holds more than plain successes, a retry and a
run with tags keep the transaction of several statements. The views live
in each connection's ``temp`` schema, never in the database file.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import partita as p
from partita.store import open_store
from partita.store.sql import SqlStore

KEYS = ["a", "b"]


def _flow(store: SqlStore, *, fail: bool = False, tags: dict[str, str] | None = None) -> p.Flow:
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.StaticPartitionDef("letters", KEYS), registry=registry)
    def letters(context: p.AssetContext) -> None:
        if fail and context.partition_key == "b":
            raise ValueError("no b")

    return p.Flow(["letters"], registry=registry, store=store, name="letters", record_partition_keys=True, tags=tags)


@pytest.fixture
def store(sqlite_store: SqlStore) -> SqlStore:
    """SQLite only: these tests read the statements SQLite runs."""
    return sqlite_store


@contextlib.contextmanager
def _traced(store: SqlStore) -> Iterator[list[str]]:
    """The statements the shared write connection runs meanwhile (SQLite traces a statement again for each
    statement its triggers run: those repeats and trigger comment lines are left out)."""
    seen: list[str] = []
    shared = store.database.shared_writer
    assert shared is not None
    connection = shared.get()
    connection.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        connection.set_trace_callback(None)
    seen[:] = [line for i, line in enumerate(seen) if not line.startswith("--") and (i == 0 or seen[i - 1] != line)]


@pytest.fixture
def transactions_store(tmp_path: Path) -> Iterator[SqlStore]:
    """A store on another file whose verbs keep their transactions: the rows to compare with."""
    opened = open_store(f"sqlite:///{tmp_path}/transactions.db")
    opened.database.one_statement_verbs = False
    try:
        yield opened
    finally:
        opened.close()


def _rows(path: str, query: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return connection.execute(query).fetchall()


_RUN = (
    "SELECT status, targets, selection_kind, domain, key_count, attempt_count, record_partition_keys, "
    "owner_host, owner_pid, launched_by, flow_name, summary, finished_at = heartbeat_at, finished_at >= started_at "
    "FROM partita_runs"
)
_ATTEMPTS = (
    "SELECT asset, idx, status, reason, partition_key_present, partition_key, invocations, duration = "
    "finished_at - started_at, failure_type, resolution, materialization_id FROM partita_attempts ORDER BY idx"
)
_OUTLETS = (
    "SELECT e.asset, e.partition_key, e.partition_date, e.extra, e.timestamp = a.finished_at, e.source_kind, "
    "e.source_asset, e.source_key_present, e.source_invocation, e.dedupe_key FROM partita_events e "
    "JOIN partita_attempts a ON a.run_id = e.source_run_id AND a.partition_key = e.partition_key ORDER BY e.id"
)


def test_a_plain_run_starts_and_ends_in_one_statement_each(store: SqlStore) -> None:
    flow = _flow(store)
    with _traced(store) as seen:
        result = flow.run({"partition_keys": KEYS})
    assert result.succeeded
    # The journal may flush while the run goes on; its start and its end are one statement each.
    starts = [line for line in seen if "partita_run_start" in line]
    ends = [line for line in seen if "partita_run_end" in line]
    assert len(starts) == 1 and len(ends) == 1
    assert not any(line.startswith("BEGIN") for line in seen[: seen.index(starts[0]) + 1])
    assert not store.database.shared_writer.get().in_transaction


def test_the_one_statement_verbs_write_the_rows_the_transactions_write(
    store: SqlStore, transactions_store: SqlStore
) -> None:
    for each in (store, transactions_store):
        assert _flow(each).run({"partition_keys": KEYS}).succeeded
    one, several = store.database.sqlite_path, transactions_store.database.sqlite_path
    assert store.database.one_statement_verbs and not transactions_store.database.one_statement_verbs
    for query in (_RUN, _ATTEMPTS, _OUTLETS):
        rows = _rows(one, query)
        assert rows and rows == _rows(several, query), query
    assert len(_rows(one, "SELECT * FROM partita_events")) == len(KEYS)


def test_a_run_end_with_a_failure_keeps_its_transaction(store: SqlStore) -> None:
    with _traced(store) as seen:
        result = _flow(store, fail=True).run({"partition_keys": KEYS})
    assert not result.succeeded
    assert any(line.startswith("BEGIN") for line in seen) and not any("partita_run_end" in line for line in seen)
    statuses = _rows(store.database.sqlite_path, "SELECT partition_key, status FROM partita_attempts ORDER BY idx")
    assert statuses == [("a", "success"), ("b", "failed")]
    assert _rows(store.database.sqlite_path, "SELECT status FROM partita_runs") == [("failed",)]


def test_a_run_with_tags_keeps_its_start_transaction(store: SqlStore) -> None:
    with _traced(store) as seen:
        assert _flow(store, tags={"team": "data"}).run({"partition_keys": KEYS}).succeeded
    assert not any("partita_run_start" in line for line in seen)
    assert _rows(store.database.sqlite_path, "SELECT key, value FROM partita_run_tags") == [("team", "data")]


def test_the_views_are_the_connections_own_not_the_files(store: SqlStore) -> None:
    assert _flow(store).run({"partition_keys": KEYS}).succeeded
    path = store.database.sqlite_path
    names = {name for (name,) in _rows(path, "SELECT name FROM sqlite_master")}
    assert not {"partita_run_start", "partita_run_end"} & names
    assert _rows(path, "SELECT name FROM sqlite_temp_master") == []
    temp = {name for (name,) in store.database.shared_writer.get().execute("SELECT name FROM sqlite_temp_master")}
    assert {"partita_run_start", "partita_run_end", "partita_run_start_writes", "partita_run_end_writes"} <= temp


def test_a_reopened_connection_gets_the_views_again(store: SqlStore) -> None:
    shared = store.database.shared_writer
    shared.drop()  # as after a driver error
    assert _flow(store).run({"partition_keys": KEYS}).succeeded
    assert _rows(store.database.sqlite_path, "SELECT count(*) FROM partita_runs WHERE status = 'success'") == [(1,)]
