"""Attempt log rows: written with a run's progress, read back in write order.

Writing happens inside the progress transaction the journal already takes,
so a run's lines cost no commit of their own. A cut deletes the rows its
range covers (lines written before the tail window pushed them out, and the
previous marker) and inserts the new marker, before the batch's lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, and_, or_, select

from partita.execution.attempt_logs import LogBatch
from partita.results.logs import LogLine, LogStream
from partita.store.database import Database
from partita.store.protocol import LogQuery, StoredLogLine
from partita.store.schema import attempt_logs, attempts

__all__ = ["read_logs", "sorted_for_reading", "write_logs"]


def _rows(run_id: str, lines: Sequence[LogLine]) -> list[tuple[Any, ...]]:
    """Rows in column order: a line is in that order after the run id."""
    return [
        (run_id, *line) for line in lines
    ]


def write_logs(database: Database, connection: Connection, run_id: str, batch: LogBatch, replay: bool) -> None:
    """One batch's cuts and lines; a replay first deletes what an earlier try may have written."""
    table = attempt_logs.name
    sql = database.driver_sql
    if batch.cuts:
        connection.exec_driver_sql(
            sql(f"DELETE FROM {table} WHERE run_id = ? AND asset = ? AND idx = ? AND seq BETWEEN ? AND ?"),
            [(run_id, cut.asset, cut.index, cut.first_seq, cut.last_seq) for cut in batch.cuts],
        )
    if replay and batch.lines:
        connection.exec_driver_sql(
            sql(f"DELETE FROM {table} WHERE run_id = ? AND asset = ? AND idx = ? AND seq = ? AND stream <> ?"),
            [(run_id, line.asset, line.index, line.seq, LogStream.CUT.value) for line in batch.lines],
        )
    rows = _rows(run_id, [cut.marker for cut in batch.cuts])
    rows.extend(_rows(run_id, batch.lines))
    if rows:
        database.insert(connection, attempt_logs, rows, skip=1)


def read_logs(connection: Connection, run_id: str, query: LogQuery) -> list[StoredLogLine]:
    """The run's kept lines matching ``query``, in write order (``id``), with recorded key text if any."""
    logs = attempt_logs.c
    key = attempts.c.partition_key
    statement = (
        select(attempt_logs, key)
        .select_from(
            attempt_logs.outerjoin(
                attempts,
                and_(attempts.c.run_id == logs.run_id, attempts.c.asset == logs.asset, attempts.c.idx == logs.idx),
            )
        )
        .where(logs.run_id == run_id, logs.id > query.after_id)
        .order_by(logs.id)
    )
    if query.asset is not None:
        statement = statement.where(logs.asset == query.asset)
    if query.partition_key is not None:
        statement = statement.where(key == query.partition_key)
    if query.min_level is not None:
        # Captured output and cut markers have no level: a level filter keeps them.
        statement = statement.where(or_(logs.level.is_(None), logs.level >= query.min_level))
    if query.limit is not None:
        statement = statement.limit(query.limit)
    return [_stored(row) for row in connection.execute(statement)]


def _stored(row: Any) -> StoredLogLine:
    line = LogLine(
        row.asset, row.idx, row.invocation or 1, row.seq, row.at, row.stream, row.level, row.logger,
        row.message,
    )
    return StoredLogLine(row.id, line, row.partition_key)


def sorted_for_reading(lines: Sequence[StoredLogLine]) -> list[StoredLogLine]:
    """Lines in the order they were logged: a cut marker, written late, goes where its lines were."""
    return sorted(lines, key=lambda stored: (stored.line.at, stored.line.seq, stored.id))
