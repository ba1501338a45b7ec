"""Reads of a bounded part of one asset's keys: one key's attempts across runs, a window's last successes and attempts.

Attempts name their key only in runs that recorded keys
(``record_partition_keys``); those are read from the partial index
``ix_partita_attempts_asset_key`` (asset, key, finish time), so a key's
history costs an index range however many runs the store holds. A running
attempt of a run whose owner is gone reads ``interrupted``, as its run does.

A window (keys whose text lies between two texts) is read the way
`SqlEventStore.last_successes` and `SqlRunHistory.key_attempts` read every
key, over the same indexes, but only over that range of them: the asset
page's 30 days cost 30 index entries, not one per key the asset ever had.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from partita.events.model import SourceKind
from partita.store.attempt_states import RunLiveness
from partita.store.database import Database
from partita.store.protocol import AttemptMark, KeyAttempts, LastSuccess
from partita.store.retries import retry_transient
from partita.store.schema import attempts, events, runs
from partita.store.sql import SqlStore

__all__ = ["KeyAttemptRow", "KeyHistory"]

#: Keys per ``IN (...)`` list: well under every backend's parameter limit.
_CHUNK = 500
_COLUMNS = (
    "a.run_id, a.idx, a.status, a.reason, a.invocations, a.started_at, a.finished_at, a.duration, "
    "a.failure_type, a.failure_message, r.launched_by, r.status, r.owner_host, r.owner_pid, r.owner_token, "
    "r.heartbeat_at"
)


@dataclass(frozen=True, slots=True)
class KeyAttemptRow:
    """One recorded attempt of the key: its run, outcome and times (POSIX seconds), and how its run was launched."""

    run_id: str
    index: int
    status: str
    reason: str | None
    invocations: int
    started_at: float | None
    finished_at: float | None
    duration: float
    failure_type: str | None
    failure_message: str | None
    launched_by: str | None
    run_status: str


class _RunRow:
    """The runs columns `SqlRunHistory.status` reads, from a joined row."""

    __slots__ = ("heartbeat_at", "owner_host", "owner_pid", "owner_token", "status")

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.status, self.owner_host, self.owner_pid, self.owner_token, self.heartbeat_at = values


class KeyHistory:
    """Reads of one key's attempts over a `SqlStore`'s database."""

    def __init__(self, store: SqlStore) -> None:
        self._database = store.database
        self._status: RunLiveness = store.run_history.status

    def last_successes(
        self, asset: str, first: str, last: str, *, keys: Sequence[str] | None = None
    ) -> dict[str, LastSuccess]:
        """Each key of ``asset`` whose text lies in ``first`` .. ``last`` (and among ``keys`` when given) with its newest outlet event."""
        where = (
            f"asset = ? AND source_kind = '{SourceKind.OUTLET.value}' AND partition_key IS NOT NULL "
            "AND partition_key BETWEEN ? AND ?"
        )
        found: dict[str, LastSuccess] = {}
        chunks = [None] if keys is None else [keys[start : start + _CHUNK] for start in range(0, len(keys), _CHUNK)]
        for chunk in chunks:
            chosen = where if chunk is None else f"{where} AND partition_key IN ({', '.join('?' * len(chunk))})"
            if self._database.dialect == "sqlite":
                sql = f"SELECT partition_key, MAX(id), source_run_id, timestamp FROM {events.name} WHERE {chosen} GROUP BY partition_key"
            else:
                sql = (
                    f"SELECT DISTINCT ON (partition_key) partition_key, id, source_run_id, timestamp FROM {events.name} "
                    f"WHERE {chosen} ORDER BY partition_key, id DESC"
                )
            rows = self._read("read the last successes", sql, (asset, first, last, *(chunk or ())))
            make = LastSuccess._make
            found.update((row[0], make(row)) for row in rows)
        return found

    def succeeded_keys(self, asset: str, first: str, last: str) -> set[str]:
        """The keys of ``asset`` in ``first`` .. ``last`` with an outlet event: one text per key, no aggregate."""
        sql = (
            f"SELECT DISTINCT partition_key FROM {events.name} WHERE asset = ? AND source_kind = '{SourceKind.OUTLET.value}' "
            "AND partition_key IS NOT NULL AND partition_key BETWEEN ? AND ?"
        )
        return {row[0] for row in self._read("read the keys with a success", sql, (asset, first, last))}

    def key_attempts(self, asset: str, first: str, last: str, *, deciding: bool = False) -> dict[str, KeyAttempts]:
        """The same as `SqlRunHistory.key_attempts`, for the keys whose text lies in ``first`` .. ``last``.

        With ``deciding``, only the keys whose attempts can change their state: a newest outcome that
        failed, or a live run (what a grid of states needs; a success adds nothing to its event).
        """
        bounds = (asset, first, last)
        window = "a.asset = ? AND a.partition_key BETWEEN ? AND ? AND a.status IN ('success', 'failed')"
        if self._database.dialect == "sqlite":
            outcome_sql = (
                f"SELECT a.partition_key, a.run_id, MAX(a.finished_at), a.status FROM {attempts.name} a "
                f"WHERE {window} GROUP BY a.partition_key" + (" HAVING a.status = 'failed'" if deciding else "")
            )
        else:
            outcome_sql = (
                f"SELECT DISTINCT ON (a.partition_key) a.partition_key, a.run_id, a.finished_at, a.status "
                f"FROM {attempts.name} a WHERE {window} ORDER BY a.partition_key, a.finished_at DESC NULLS LAST"
            )
            if deciding:
                outcome_sql = f"SELECT * FROM ({outcome_sql}) newest WHERE newest.status = 'failed'"
        running_sql = (
            f"SELECT a.partition_key, a.run_id, a.started_at, r.status, r.owner_host, r.owner_pid, r.owner_token, "
            f"r.heartbeat_at FROM {attempts.name} a JOIN {runs.name} r ON r.run_id = a.run_id "
            "WHERE a.asset = ? AND a.partition_key BETWEEN ? AND ? AND a.status = 'running' AND r.status = 'running'"
        )
        outcomes = self._read("read the attempts of an asset's keys", outcome_sql, bounds)
        running = self._read("read the attempts of an asset's keys", running_sql, bounds)
        found = {key: KeyAttempts(key, run_id, finished, outcome == "failed") for key, run_id, finished, outcome in outcomes}
        for key, run_id, started, *run in running:
            if self._status(_RunRow(tuple(run))) != "running":
                continue  # its owner is gone: nothing works on the key any more
            mark = AttemptMark(str(run_id), 0.0 if started is None else float(started))
            recorded = found.get(key)
            found[key] = KeyAttempts(key, running=mark) if recorded is None else recorded._replace(running=mark)
        return found

    def _read(self, action: str, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        database: Database = self._database

        def read(_: int) -> list[tuple[Any, ...]]:
            with database.connect() as connection:
                # The DBAPI cursor: thousands of SQLAlchemy rows would cost more than the query.
                cursor = connection.connection.cursor()
                try:
                    cursor.execute(database.driver_sql(sql), parameters)
                    return list(cursor.fetchall())
                finally:
                    cursor.close()

        with database.failures(action):
            return retry_transient(read)

    def attempts(self, asset: str, key: str, *, limit: int, before: float | None = None) -> list[KeyAttemptRow]:
        """Up to ``limit`` recorded attempts of ``asset``'s ``key``: unfinished first, then by finish time, newest first.

        ``before`` (a finish time) continues a listing: only attempts that finished earlier.
        """
        where = "a.asset = ? AND a.partition_key = ?"
        parameters: tuple[Any, ...] = (asset, key)
        if before is not None:
            where += " AND a.finished_at < ?"
            parameters += (before,)
        sql = (
            f"SELECT {_COLUMNS} FROM {attempts.name} a JOIN {runs.name} r ON r.run_id = a.run_id "
            f"WHERE {where} ORDER BY a.finished_at DESC NULLS FIRST, a.run_id DESC, a.idx DESC LIMIT ?"
        )
        with self._database.failures("read the key's attempts"), self._database.connect() as connection:
            rows = list(connection.exec_driver_sql(self._database.driver_sql(sql), (*parameters, limit)))
        return [self._row(tuple(row)) for row in rows]

    def _row(self, row: tuple[Any, ...]) -> KeyAttemptRow:
        run_status = self._status(_RunRow(row[11:16]))
        status = row[2]
        if status == "running" and run_status != "running":
            status = "interrupted"  # its run's owner is gone: nothing works on it any more
        return KeyAttemptRow(
            run_id=row[0], index=int(row[1]), status=status, reason=row[3], invocations=int(row[4]),
            started_at=row[5], finished_at=row[6], duration=float(row[7]), failure_type=row[8],
            failure_message=row[9], launched_by=row[10], run_status=run_status,
        )  # fmt: skip
