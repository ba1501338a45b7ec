"""Attempt log rows: written with a run's progress, read back in write order.

Writing happens inside the progress transaction the journal already takes,
so a run's lines cost no commit of their own. A row is keyed by its run and
its number in the run's write order, which the writer assigns: rows are one
tree in run and write order (no second index for every line to update), and
``runs logs --follow`` reads on from the last number it saw. A cut deletes
the rows it names (lines written before the tail window pushed them out,
and the previous marker) and writes the new marker, before the batch's lines.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, and_, or_, select

from partita.execution.attempt_logs import LogBatch
from partita.results.logs import LogLine
from partita.store.database import Database
from partita.store.protocol import LogQuery, StoredLogLine
from partita.store.schema import attempt_logs, attempts

__all__ = ["read_logs", "sorted_for_reading", "write_logs"]


def write_logs(database: Database, connection: Connection, run_id: str, batch: LogBatch, replay: bool) -> None:
    """One batch's cuts and lines; a replay first deletes what an earlier try may have written."""
    table = attempt_logs.name
    sql = database.driver_sql
    gone = [(run_id, row_id) for cut in batch.cuts for row_id in cut.gone]
    if gone:
        connection.exec_driver_sql(sql(f"DELETE FROM {table} WHERE run_id = ? AND id = ?"), gone)
    lines: Sequence[Any] = batch.lines
    if batch.cuts:
        lines = [*(cut.marker for cut in batch.cuts), *lines]
    if not lines:
        return
    first = batch.first_id
    if replay:
        connection.exec_driver_sql(
            sql(f"DELETE FROM {table} WHERE run_id = ? AND id BETWEEN ? AND ?"), (run_id, first, first + len(lines) - 1)
        )
    # Rows in column order: the run, the row's number, then a line's fields in their order.
    rows = [(run_id, row_id, *line) for row_id, line in zip(itertools.count(first), lines)]
    database.insert(connection, attempt_logs, rows)


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
