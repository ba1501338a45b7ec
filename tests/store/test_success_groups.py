"""Plain successes written as compact per-asset rows (`sqlite_success_groups`) store what whole rows store.

The compact form only changes how rows travel to SQLite: every attempts row
and outlet event must land with the same values as through the whole-row
statements the run's end uses, outlet events in the rows' order within each
asset, and a value JSON cannot carry exactly makes the caller fall back.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import partita as p
from partita.results.record import RESOLUTION_TEXT
from partita.store import bulk_writes, open_store
from partita.store.journal import StoreJournal
from partita.store.journal_rows import sqlite_success_attempts, sqlite_success_groups, sqlite_success_outlets
from partita.store.liveness import current_owner_token
from partita.store.protocol import ProgressBatch, RunStart
from partita.store.sql import SqlStore
from partita.store.sqlite_verbs import END_ROWS_MAX

pytestmark = pytest.mark.skipif(not bulk_writes._SQLITE_JSON, reason="SQLite before 3.38 has no ->>")

RUN = "5d1c0e4b9a8f4e2d8c7b6a5f4e3d2c1b"
NOW = dt.datetime(2026, 12, 7, 5, 0, tzinfo=dt.UTC)
RESOLUTIONS = [text for text in RESOLUTION_TEXT.values() if text is not None]
EVENT_COLUMNS = (
    "asset, partition_key, partition_date, extra, timestamp, source_kind, source_run_id, source_asset, "
    "source_key_present, source_invocation, dedupe_key, payload_hash"
)


def _database(path: Path) -> sqlite3.Connection:
    """A store file with the run's row, opened as a plain connection."""
    open_store(f"sqlite:///{path}").close()
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute(
        "INSERT INTO partita_runs (run_id, status, started_at, targets, selection_kind, plan, record_partition_keys, "
        "owner_host, owner_pid, owner_token, heartbeat_at) VALUES (?, 'running', 0, '[]', 'keys', '{}', 0, 'h', 1, 't', 0)",
        (RUN,),
    )
    return connection


def _whole(connection: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    text = bulk_writes.sqlite_json_text(rows)
    connection.execute(sqlite_success_attempts("?", "?"), (RUN, text))
    connection.execute(sqlite_success_outlets("?", "?"), (RUN, text))


def _grouped(connection: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> int:
    statements = sqlite_success_groups(RUN, rows)
    assert statements is not None
    for statement, parameters in statements:
        connection.execute(statement, parameters)
    return len(statements)


def _stored(connection: sqlite3.Connection) -> tuple[list[tuple[Any, ...]], dict[str, list[tuple[Any, ...]]]]:
    """Every attempts row, and each asset's outlet events in id order."""
    attempts = connection.execute("SELECT * FROM partita_attempts ORDER BY asset, idx").fetchall()
    events: dict[str, list[tuple[Any, ...]]] = {}
    for row in connection.execute(f"SELECT {EVENT_COLUMNS} FROM partita_events ORDER BY id"):
        events.setdefault(row[0], []).append(row)
    return attempts, events


@pytest.fixture
def databases(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
    whole, grouped = _database(tmp_path / "whole.db"), _database(tmp_path / "grouped.db")
    yield whole, grouped
    whole.close()
    grouped.close()


def _row(asset: str, index: int, *, key: str | None = "k", record: bool = False, resolution: str = "executed",
         materialization: str | None = None, announced: bool = True, started: float = 1_790_000_000.25) -> tuple[Any, ...]:  # fmt: skip
    """A `success_row` tuple."""
    finished = started + 0.125 + index * 1e-6
    present = key is not None
    return (asset, index, present, key if record else None, started, finished, resolution, materialization, key, announced)


_KEY_TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))


@st.composite
def success_rows(draw: Any) -> list[tuple[Any, ...]]:
    """Interleaved rows of up to four assets: some uniform (compact), some mixed in any of the columns that decide it."""
    assets = draw(st.lists(st.sampled_from(["load", "clean", "stage", "ü/asset"]), min_size=1, max_size=40))
    uniform = {asset: draw(st.booleans()) for asset in set(assets)}
    shared = {asset: draw(_row_shape()) for asset in set(assets)}
    rows, counts = [], dict.fromkeys(assets, 0)
    for asset in assets:
        index = counts[asset]
        counts[asset] += 1
        keyed, record, resolution, materialization, announced = shared[asset] if uniform[asset] else draw(_row_shape())
        key = draw(_KEY_TEXT) if keyed else None
        started = draw(st.floats(min_value=0, max_value=4e9, allow_nan=False))
        rows.append(
            _row(asset, index, key=key, record=record, resolution=resolution, materialization=materialization,
                 announced=announced, started=started)
        )  # fmt: skip
    return rows


def _row_shape() -> st.SearchStrategy[tuple[Any, ...]]:
    """Key presence, whether the key is recorded, resolution, materialization id, announcement."""
    materialization = st.one_of(st.none(), st.none(), st.text(max_size=12, alphabet="abc-0123"))
    return st.tuples(st.booleans(), st.booleans(), st.sampled_from(RESOLUTIONS), materialization, st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=success_rows())
def test_compact_rows_store_what_whole_rows_store(databases, rows):
    whole, grouped = databases
    for connection in databases:
        connection.execute("DELETE FROM partita_attempts")
        connection.execute("DELETE FROM partita_events")
    _whole(whole, rows)
    _grouped(grouped, rows)
    assert _stored(grouped) == _stored(whole)


def test_uniform_assets_go_as_compact_rows_and_two_statements(databases):
    whole, grouped = databases
    rows = [_row(asset, index, key=f"2026-01-{index + 1:02d}") for index in range(9) for asset in ("a", "b", "c")]
    statements = sqlite_success_groups(RUN, rows)
    assert statements is not None and len(statements) == 2
    assert all("value->>4" not in statement for statement, _ in statements)  # no whole row was read
    _whole(whole, rows)
    _grouped(grouped, rows)
    assert _stored(grouped) == _stored(whole)


def test_many_assets_take_one_statement_per_hundred(databases):
    whole, grouped = databases
    rows = [_row(f"asset-{number:03d}", 0) for number in range(250)]
    _whole(whole, rows)
    assert _grouped(grouped, rows) == 6  # 100, 100 and 50 assets, for attempts and for outlets
    assert _stored(grouped) == _stored(whole)


def test_a_value_json_cannot_carry_makes_the_caller_fall_back():
    assert sqlite_success_groups(RUN, [_row("load", 0, key="nul\x00inside")]) is None
    mixed = [_row("load", 0, key="nul\x00inside", materialization="m"), _row("load", 1, key="ok")]
    assert sqlite_success_groups(RUN, mixed) is None


@pytest.fixture
def store(sqlite_store: SqlStore) -> SqlStore:
    """SQLite only: these tests read the statements SQLite runs."""
    return sqlite_store


def _start(store: SqlStore, keys: list[str]) -> None:
    """Record the start of run `RUN` of ``load`` over ``keys``, keys recorded."""
    registry = p.AssetRegistry()
    tenants = p.StaticPartitionDef("tenants", keys)

    @p.asset(partition_def=tenants, registry=registry)
    def load() -> None:
        return None

    plan = p.Flow(["load"], registry=registry).plan({"partition_keys": keys}).to_dict()
    start = RunStart(RUN, NOW, plan, True, socket.gethostname(), os.getpid(), current_owner_token())
    store.record_run_started(start)


def _traced(store: SqlStore) -> list[str]:
    """The statements the store's shared write connection runs from now on (SQLite's expanded text)."""
    statements: list[str] = []
    shared = store.database.shared_writer
    assert shared is not None
    shared.get().set_trace_callback(statements.append)
    return statements


def test_a_progress_batch_of_plain_successes_goes_as_compact_rows(store):
    """Through the store's own writer: two compact inserts, and the rows read back as they went in."""
    keys = [f"2026-01-{day:02d}" for day in range(1, 13)]
    _start(store, keys)
    rows = [_row("load", index, key=key, record=True) for index, key in enumerate(keys)]
    statements = _traced(store)
    store.record_batch(RUN, ProgressBatch((), True, attempt_rows=rows))
    inserts = [statement for statement in statements if statement.startswith("INSERT")]
    assert len(inserts) == 2 and all("FROM json_each(" in insert and "value->>4" not in insert for insert in inserts)
    (task,) = store.get_tasks(RUN)
    assert [(attempt.partition_key, attempt.started_at, attempt.finished_at) for attempt in task.attempts] == [
        (row[3], row[4], row[5]) for row in rows
    ]
    assert sorted(event.partition_key for event in store.list_events(run_id=RUN)) == keys


def test_a_value_json_cannot_carry_is_stored_row_by_row(store):
    rows = [_row("load", index, key=f"k{index}\x00", record=True) for index in range(10)]
    _start(store, [f"k{index}" for index in range(10)])  # a key with a NUL is stored, never declared
    store.record_batch(RUN, ProgressBatch((), True, attempt_rows=rows))
    (task,) = store.get_tasks(RUN)
    assert [attempt.partition_key for attempt in task.attempts] == [row[3] for row in rows]
    assert sorted(event.partition_key for event in store.list_events(run_id=RUN)) == sorted(row[8] for row in rows)


@pytest.mark.parametrize("keys", [END_ROWS_MAX, END_ROWS_MAX + 1])
def test_a_run_ends_with_any_number_of_plain_successes_recorded(store, keys, monkeypatch):
    """Up to `END_ROWS_MAX` the end is one statement; beyond, the transaction's compact inserts: the same rows."""
    registry = p.AssetRegistry()
    days = p.StaticPartitionDef("numbers", [f"n{number:03d}" for number in range(keys)])

    @p.asset(partition_def=days, registry=registry)
    def numbers() -> int:
        return 1

    flow = p.Flow(["numbers"], registry=registry, store=store, record_partition_keys=True)
    flow.run({"partition_keys": days.keys[:1]})  # opens the shared connection, to trace it
    # No periodic flush: every success reaches the end, whatever the machine's speed.
    monkeypatch.setattr(StoreJournal, "_tick", lambda self: None)
    statements = _traced(store)
    result = flow.run({"partition_keys": days.keys})
    assert result.succeeded
    ended_in_one = any("INSERT INTO temp.partita_run_end" in statement for statement in statements)
    assert ended_in_one is (keys <= END_ROWS_MAX)
    if not ended_in_one:
        compact = [statement for statement in statements if "FROM json_each(" in statement]
        assert len(compact) == 2 and not any("value->>4" in statement for statement in compact)
    run = store.get_run(result.run_id)
    (task,) = store.get_tasks(result.run_id)
    assert run.status == "success"
    assert [(attempt.partition_key, attempt.status) for attempt in task.attempts] == [(k, "success") for k in days.keys]
    live = {attempt.partition_key: attempt for attempt in result.tasks["numbers"].attempts}
    for attempt in task.attempts:
        assert (attempt.started_at, attempt.finished_at) == (
            live[attempt.partition_key].started_at,
            live[attempt.partition_key].finished_at,
        )
    outlets = store.list_events(run_id=result.run_id)
    assert sorted(event.partition_key for event in outlets) == list(days.keys)
