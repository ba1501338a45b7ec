"""Reads of one key's history: its attempts across runs, newest first.

Attempts name their key only in runs that recorded keys
(``record_partition_keys``); those are read from the partial index
``ix_partita_attempts_asset_key`` (asset, key, finish time), so a key's
history costs an index range however many runs the store holds. A running
attempt of a run whose owner is gone reads ``interrupted``, as its run does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from partita.store.attempt_states import RunLiveness
from partita.store.database import Database
from partita.store.retries import retry_transient
from partita.store.schema import attempts, runs
from partita.store.sql import SqlStore

__all__ = ["KeyAttemptRow", "KeyHistory"]

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

    def _read(self, action: str, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        database: Database = self._database

        def read(_: int) -> list[tuple[Any, ...]]:
            with database.connect() as connection:
                return database.rows(connection, sql, parameters)

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
