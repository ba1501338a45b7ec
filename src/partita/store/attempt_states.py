"""What the attempts of an asset say about each of its keys: its newest outcome and a live run.

`SqlRunHistory.key_attempts`, `failed_or_running_keys` and
`unkeyed_attempts` read through here for ``partita status``. Keyed attempts
exist only where runs recorded keys (``record_partition_keys``) and are read
from the partial index ``ix_partita_attempts_asset_key`` alone, which holds
every column read; an unpartitioned asset's attempts are found from its
newest runs, never by scanning every attempt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection

from partita.store.database import Database
from partita.store.protocol import AttemptMark, KeyAttempts
from partita.store.schema import attempts, runs

__all__ = ["read_failed_or_running", "read_key_attempts", "read_unkeyed_attempts"]

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


def _failed_sql() -> str:
    """Per key its failed attempts that no outcome finished after: the keys whose newest outcome failed.

    A status needs only these (and running keys), a few among 100,000: the
    index is walked once without grouping, and each failure is checked by
    one probe of the same index (key, then finish time). A failure without
    a finish time counts as the oldest outcome.
    """
    outcomes = ", ".join(_OUTCOMES)
    return (
        f"SELECT f.partition_key, f.run_id, f.finished_at FROM {attempts.name} f "
        "WHERE f.asset = ? AND f.partition_key IS NOT NULL AND f.status = 'failed' AND NOT EXISTS ("
        f"SELECT 1 FROM {attempts.name} s WHERE s.asset = f.asset AND s.partition_key IS NOT NULL "
        f"AND s.partition_key = f.partition_key AND s.status IN ({outcomes}) "
        "AND s.finished_at > COALESCE(f.finished_at, 0.0))"
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


def _mark(run_id: Any, timestamp: Any) -> AttemptMark:
    return AttemptMark(str(run_id), 0.0 if timestamp is None else float(timestamp))


def _live_running(connection: Connection, database: Database, asset: str, status: RunLiveness) -> list[tuple[Any, ...]]:
    """The running attempts of ``asset``'s keys in runs whose owner lives."""
    return [row for row in database.rows(connection, _running_sql(), (asset,)) if status(_RunRow(row[3:])) == "running"]


def _with_running(found: dict[str, KeyAttempts], running: list[tuple[Any, ...]]) -> dict[str, KeyAttempts]:
    for key, run_id, started, *_ in running:
        mark = _mark(run_id, started)
        recorded = found.get(key)
        found[key] = KeyAttempts(key, running=mark) if recorded is None else recorded._replace(running=mark)
    return found


def read_key_attempts(database: Database, asset: str, status: RunLiveness) -> dict[str, KeyAttempts]:
    """Each recorded key of ``asset``: its newest outcome, and a live run with it running."""
    with database.connect() as connection:
        outcomes = database.rows(connection, _outcome_sql(database.dialect), (asset,))
        running = _live_running(connection, database, asset, status)
    found = {key: KeyAttempts(key, run_id, finished, outcome == "failed") for key, run_id, finished, outcome in outcomes}
    return _with_running(found, running)


def read_failed_or_running(database: Database, asset: str, status: RunLiveness) -> dict[str, KeyAttempts]:
    """The recorded keys of ``asset`` whose newest outcome failed or that a live run is running.

    The same entries `read_key_attempts` gives those keys; the keys left out
    are those whose attempts cannot change their status.
    """
    with database.connect() as connection:
        failures = database.rows(connection, _failed_sql(), (asset,))
        running = _live_running(connection, database, asset, status)
    found = {key: KeyAttempts(key, run_id, finished, True) for key, run_id, finished in failures}
    return _with_running(found, running)


def read_unkeyed_attempts(database: Database, asset: str, status: RunLiveness) -> KeyAttempts:
    """An unpartitioned asset's newest outcome among its newest runs, and a live run of it."""
    newest: tuple[Any, ...] | None = None
    live = None
    with database.connect() as connection:
        rows = database.rows(connection, _unkeyed_sql(), (asset, False))
    for outcome, run_id, started, finished, *run in rows:
        if outcome == "running":
            if live is None and status(_RunRow(tuple(run))) == "running":
                live = _mark(run_id, started)
        elif outcome in ("success", "failed") and (newest is None or (finished or 0.0) > (newest[1] or 0.0)):
            newest = (run_id, finished, outcome == "failed")
    if newest is None:
        return KeyAttempts(None, running=live)
    return KeyAttempts(None, newest[0], newest[1], newest[2], live)
