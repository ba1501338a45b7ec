"""`EventWriter.commit`: several events in one transaction, on both backends.

SQLite's group commit hands it the events of several threads; PostgreSQL
commits one per call today, but the writer is the same, so what it promises
for a list is held on both: one outcome per event in order, a taken dedupe
key answered with the stored event (also when taken earlier in the same
list), a row the database refuses failing alone while the others are
written, and every written event visible to another connection.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from partita.events.identity import payload_hash
from partita.events.model import EventDraft, EventSource, SourceKind
from partita.store.rows import event_row


def _item(asset: Any, dedupe_key: str, extra: dict[str, Any]) -> tuple[tuple[Any, ...], str]:
    draft = EventDraft(
        asset,
        None,
        None,
        extra,
        EventSource(SourceKind.EXTERNAL),
        dedupe_key,
        payload_hash(str(asset), None, None, extra),
        time.time(),
    )
    return event_row(draft), dedupe_key


def _count(store: Any) -> int:
    with store.database.connect() as connection:
        return int(connection.exec_driver_sql("SELECT count(*) FROM partita_events").scalar_one())


def test_one_transaction_writes_each_event_and_answers_a_taken_key_with_the_stored_event(store):
    writer = store.event_store._writer  # noqa: SLF001 - the writer is what is tested
    earlier = writer.commit([_item("plain", "key:old", {"n": 0})])[0]

    outcomes = writer.commit(
        [
            _item("plain", "key:a", {"n": 1}),
            _item("plain", "key:old", {"n": 0}),
            _item("plain", "key:b", {"n": 2}),
            _item("plain", "key:a", {"n": 1}),  # taken earlier in the same transaction
        ]
    )

    a, old, b, a_again = outcomes
    assert a[1] is None and b[1] is None and b[0] > a[0] > earlier[0]
    assert old[0] is None and old[1][0] == earlier[0]
    assert a_again[0] is None and a_again[1][0] == a[0]
    assert _count(store) == 3


def test_a_row_the_database_refuses_fails_alone_and_the_others_are_written(store):
    writer = store.event_store._writer  # noqa: SLF001

    outcomes = writer.commit(
        [
            _item("plain", "key:first", {"n": 1}),
            _item(None, "key:refused", {}),  # an event needs an asset: NOT NULL
            _item("plain", "key:second", {"n": 2}),
        ]
    )

    first, refused, second = outcomes
    assert isinstance(refused, store.database.driver_errors)
    assert "null" in str(refused).lower()
    assert first[1] is None and second[1] is None
    assert {event.id for event in store.list_events()} == {first[0], second[0]}


@pytest.mark.parametrize("size", [1, 3])
def test_after_a_store_failure_every_event_of_the_transaction_has_it_and_nothing_is_written(store, size):
    writer = store.event_store._writer  # noqa: SLF001
    with store.database.connect() as connection:
        connection.exec_driver_sql("ALTER TABLE partita_events RENAME TO partita_events_away")
        connection.commit()
    try:
        outcomes = writer.commit([_item("plain", f"key:{n}", {"n": n}) for n in range(size)])
    finally:
        with store.database.connect() as connection:
            connection.exec_driver_sql("ALTER TABLE partita_events_away RENAME TO partita_events")
            connection.commit()

    assert len({id(outcome) for outcome in outcomes}) == 1  # one error, every event's
    assert isinstance(outcomes[0], store.database.driver_errors)
    assert _count(store) == 0
    assert writer.commit([_item("plain", "key:after", {})])[0][1] is None  # a new connection works


# -- SQLite: one statement per commit --------------------------------------------------------


@pytest.fixture
def sqlite_writer(tmp_path):
    from partita.store import open_store

    opened = open_store(f"sqlite:///{tmp_path / 'partita.db'}")
    try:
        yield opened, opened.event_store._writer  # noqa: SLF001
    finally:
        opened.close()


def _traced(store: Any) -> list[str]:
    """The statements SQLite runs on the store's shared write connection from now on."""
    statements: list[str] = []
    store.database.shared_writer.get().set_trace_callback(statements.append)
    return statements


@pytest.mark.parametrize("size", [1, 3])
def test_on_sqlite_a_commit_is_one_statement_that_ends_its_own_transaction(sqlite_writer, tmp_path, size):
    import sqlite3

    store, writer = sqlite_writer
    writer.commit([_item("plain", "key:warm", {})])
    statements = _traced(store)

    outcomes = writer.commit([_item("plain", f"key:{n}", {"n": n}) for n in range(size)])

    assert all(outcome[1] is None for outcome in outcomes)
    assert len(statements) == 1 and statements[0].startswith("INSERT INTO partita_events")
    assert not store.database.shared_writer.get().in_transaction
    other = sqlite3.connect(tmp_path / "partita.db", timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # the write lock is free at once: the commit is over
        other.execute("ROLLBACK")
        assert other.execute("SELECT count(*) FROM partita_events").fetchone()[0] == size + 1
    finally:
        other.close()


def test_events_without_a_dedupe_key_each_get_their_own_id(sqlite_writer):
    store, writer = sqlite_writer

    outcomes = writer.commit(
        [_item("plain", None, {"n": 1}), _item("plain", "key:a", {"n": 2}), _item("plain", None, {"n": 3})]
    )

    assert [outcome[1] for outcome in outcomes] == [None, None, None]
    stored = {event.id: event.extra["n"] for event in store.list_events()}
    assert [stored[outcome[0]] for outcome in outcomes] == [1, 2, 3]


def test_a_statement_interrupted_midway_writes_nothing_and_the_next_commit_works(sqlite_writer):
    store, writer = sqlite_writer
    writer.commit([_item("plain", "key:warm", {})])
    store.database.shared_writer.get().set_progress_handler(lambda: 1, 1)  # SQLite stops the statement

    outcomes = writer.commit([_item("plain", f"key:{n}", {"n": n}) for n in range(3)])

    assert len({id(outcome) for outcome in outcomes}) == 1
    assert "interrupted" in str(outcomes[0])
    assert _count(store) == 1
    assert writer.commit([_item("plain", "key:after", {})])[0][1] is None  # a new connection, without the handler
    assert _count(store) == 2


class _StopsBeforeItsRowsAreRead:
    """The shared connection's cursor, interrupted (as by Ctrl-C) after a RETURNING statement began, before its rows."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor
        self.connection = cursor.connection
        self._interrupted = False

    def execute(self, statement: str, parameters: Any = ()) -> Any:
        self._cursor.execute(statement, parameters)
        return self

    def fetchall(self) -> Any:
        if not self._interrupted:
            self._interrupted = True
            raise KeyboardInterrupt
        return self._cursor.fetchall()


def test_an_emission_interrupted_before_its_rows_are_read_writes_nothing_and_holds_no_lock(sqlite_writer, tmp_path):
    import sqlite3

    store, writer = sqlite_writer
    writer.commit([_item("plain", "key:warm", {})])
    shared = store.database.shared_writer.get()
    kept = shared.cursor()
    writer._shared_cursor = (shared, _StopsBeforeItsRowsAreRead(kept))  # noqa: SLF001

    with pytest.raises(KeyboardInterrupt):
        writer.commit([_item("plain", f"key:{n}", {"n": n}) for n in range(3)])

    assert not shared.in_transaction
    other = sqlite3.connect(tmp_path / "partita.db", timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # the write lock is free
        other.execute("ROLLBACK")
    finally:
        other.close()
    writer._shared_cursor = (shared, kept)  # noqa: SLF001
    assert _count(store) == 1  # nothing of the interrupted statement, now or when its cursor is used again
    again = writer.commit([_item("plain", f"key:{n}", {"n": n}) for n in range(3)])
    assert all(outcome[1] is None for outcome in again)  # new events, not duplicates of a late commit
    assert _count(store) == 4


def test_a_store_that_cannot_be_reopened_fails_the_events_and_does_not_raise(sqlite_writer, monkeypatch):
    import sqlite3

    store, writer = sqlite_writer
    writer.commit([_item("plain", "key:warm", {})])
    shared = store.database.shared_writer
    reconnect = shared.connect
    shared.drop()

    def unable() -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(shared, "connect", unable)
    outcomes = writer.commit([_item("plain", f"key:{n}", {"n": n}) for n in range(3)])

    assert all(isinstance(outcome, sqlite3.OperationalError) for outcome in outcomes)
    monkeypatch.setattr(shared, "connect", reconnect)
    assert writer.commit([_item("plain", "key:after", {})])[0][1] is None
    assert _count(store) == 2


def test_an_in_memory_store_writes_each_event_in_a_transaction_of_its_own(tmp_path):
    from partita.store import open_store

    store = open_store("sqlite://")
    try:
        writer = store.event_store._writer  # noqa: SLF001
        statements: list[str] = []
        writer._connection().set_trace_callback(statements.append)  # noqa: SLF001 - the engine's one connection

        outcomes = writer.commit([_item("plain", "key:a", {}), _item("plain", "key:b", {})])

        assert all(outcome[1] is None for outcome in outcomes)
        assert statements[0] == "BEGIN IMMEDIATE"  # an INSERT alone could join a reader's open transaction
        assert _count(store) == 2
    finally:
        store.close()
