"""What the attempts of an asset say about each of its keys: its newest outcome and a live run.

`SqlRunHistory.key_attempts` and `unkeyed_attempts` read through here for
``partita status``. Keyed attempts exist only where runs recorded keys
(``record_partition_keys``) and are read from the partial index
``ix_partita_attempts_asset_key`` alone, which holds every column read; an
unpartitioned asset's attempts are found from its newest runs, never by
scanning every attempt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection

from partita.store.database import Database
from partita.store.protocol import AttemptMark, KeyAttempts
from partita.store.schema import attempts, runs

__all__ = ["read_key_attempts", "read_unkeyed_attempts"]

#: Only outcomes of work decide a key's state: skipped and cancelled attempts did none for it.
_OUTCOMES = ("'success'", "'failed'")
#: How many of an unpartitioned asset's newest runs are read for its latest outcome and live run.
_UNKEYED_RUNS = 50
_RUN_COLUMNS = "r.status, r.owner_host, r.owner_pid, r.owner_token, r.heartbeat_at"

#: How a runs row reads back (`SqlRunHistory.status`): ``running`` only while its owner lives.
RunLiveness = Callable[[Any], str]


def _outcome_sql(dialect: str) -> str:
    """Per key its newest attempt that ran to an outcome: status, run and finish time.

    Grouped by key alone, so SQLite walks the keyed partial index in its
    order with no sort; SQLite takes the bare columns of a ``MAX`` aggregate
    from the row holding the maximum, PostgreSQL says the same with ``DISTINCT ON``.
    """
    where = f"asset = ? AND partition_key IS NOT NULL AND status IN ({', '.join(_OUTCOMES)})"
    if dialect == "sqlite":
        return (
            f"SELECT partition_key, run_id, MAX(finished_at), status FROM {attempts.name} "
            f"WHERE {where} GROUP BY partition_key"
        )
    return (
        f"SELECT DISTINCT ON (partition_key) partition_key, run_id, finished_at, status "
        f"FROM {attempts.name} WHERE {where} ORDER BY partition_key, finished_at DESC NULLS LAST"
    )


def _running_sql() -> str:
    return (
        f"SELECT a.partition_key, a.run_id, a.started_at, {_RUN_COLUMNS} FROM {attempts.name} a "
        f"JOIN {runs.name} r ON r.run_id = a.run_id "
        "WHERE a.asset = ? AND a.partition_key IS NOT NULL AND a.status = 'running' AND r.status = 'running'"
    )


def _unkeyed_sql() -> str:
    # Newest runs first through the runs' start index, each probed by the attempts' primary key.
    return (
        f"SELECT a.status, a.run_id, a.started_at, a.finished_at, {_RUN_COLUMNS} FROM {runs.name} r "
        f"JOIN {attempts.name} a ON a.run_id = r.run_id AND a.asset = ? "
        f"WHERE a.partition_key_present = ? ORDER BY r.started_at DESC LIMIT {_UNKEYED_RUNS}"
    )


class _RunRow:
    """The runs columns `SqlRunHistory.status` reads, from a joined row."""

    __slots__ = ("heartbeat_at", "owner_host", "owner_pid", "owner_token", "status")

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.status, self.owner_host, self.owner_pid, self.owner_token, self.heartbeat_at = values


def _rows(connection: Connection, database: Database, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    # The DBAPI cursor: 100,000 SQLAlchemy rows would cost more than the query.
    cursor = connection.connection.cursor()
    try:
        cursor.execute(database.driver_sql(sql), parameters)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _mark(run_id: Any, timestamp: Any) -> AttemptMark:
    return AttemptMark(str(run_id), 0.0 if timestamp is None else float(timestamp))


def read_key_attempts(database: Database, asset: str, status: RunLiveness) -> dict[str, KeyAttempts]:
    """Each recorded key of ``asset``: its newest outcome, and a live run with it running."""
    with database.connect() as connection:
        outcomes = _rows(connection, database, _outcome_sql(database.dialect), (asset,))
        running = [
            row for row in _rows(connection, database, _running_sql(), (asset,)) if status(_RunRow(row[3:])) == "running"
        ]
    found = {key: KeyAttempts(key, run_id, finished, outcome == "failed") for key, run_id, finished, outcome in outcomes}
    for key, run_id, started, *_ in running:
        mark = _mark(run_id, started)
        recorded = found.get(key)
        found[key] = KeyAttempts(key, running=mark) if recorded is None else recorded._replace(running=mark)
    return found


def read_unkeyed_attempts(database: Database, asset: str, status: RunLiveness) -> KeyAttempts:
    """An unpartitioned asset's newest outcome among its newest runs, and a live run of it."""
    newest: tuple[Any, ...] | None = None
    live = None
    with database.connect() as connection:
        rows = _rows(connection, database, _unkeyed_sql(), (asset, False))
    for outcome, run_id, started, finished, *run in rows:
        if outcome == "running":
            if live is None and status(_RunRow(tuple(run))) == "running":
                live = _mark(run_id, started)
        elif outcome in ("success", "failed") and (newest is None or (finished or 0.0) > (newest[1] or 0.0)):
            newest = (run_id, finished, outcome == "failed")
    if newest is None:
        return KeyAttempts(None, running=live)
    return KeyAttempts(None, newest[0], newest[1], newest[2], live)
