"""`ProgressWriter`: a run's attempts, invocations, outlet events and log lines, written inside a transaction.

The run history opens the transaction (a progress batch, or the run's end
with its last batches); this writes one batch into it, in the backend's
fastest bulk form, and idempotently when the batch is a replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from partita.events.model import SourceKind
from partita.store.attempt_log_rows import write_logs
from partita.store.bulk_writes import sqlite_json_pays
from partita.store.database import Database
from partita.store.journal_rows import (
    announced_assets,
    outlet_shape,
    sqlite_success_groups,
    success_attempt_rows,
    success_outlet_rows,
    success_shape,
)
from partita.store.protocol import ProgressBatch
from partita.store.rows import event_row
from partita.store.run_rows import progress_rows
from partita.store.schema import attempts, events, invocations

__all__ = ["ProgressWriter"]


class ProgressWriter:
    """Writes `ProgressBatch` rows of one `Database` inside the caller's write transaction."""

    def __init__(self, database: Database) -> None:
        self._database = database
        # Upserts as driver SQL: rows go to ``executemany`` as plain tuples;
        # skipping per-row parameter processing halves the writer's cost.
        self._upsert_attempts = database.upsert_sql(attempts, ("run_id", "asset", "idx"))
        self._upsert_invocations = database.upsert_sql(invocations, ("run_id", "asset", "idx", "number"))

    def write(self, connection: Any, run_id: str, batch: ProgressBatch) -> None:
        """Attempt, invocation and outlet rows of one batch.

        A replay (a retry, or a batch whose earlier write had an unknown
        outcome) writes idempotently: attempts and invocations are upserted
        and outlet events already stored for their attempt are left out.
        """
        replay = batch.replay
        database = self._database
        if batch.logs:
            # Before the attempts: the lines a body logged are stored no later than its outcome.
            write_logs(database, connection, run_id, batch.logs, replay)
        attempt_rows, invocation_rows = progress_rows(run_id, batch.attempts)
        successes = batch.attempt_rows
        if not attempt_rows and not successes:
            return
        # Outlet events commit in the same transaction as the successes they announce.
        built = list(batch.outlet_rows)
        if batch.new and not replay:
            if attempt_rows:
                database.insert(connection, attempts, attempt_rows)
            if successes and not self._successes_from_json(connection, run_id, successes):
                database.insert(connection, attempts, success_attempt_rows(successes), shape=success_shape(run_id))
                built[:0] = success_outlet_rows(successes)
            if invocation_rows:
                database.insert(connection, invocations, invocation_rows)
        else:  # an upsert takes whole rows
            if successes:
                attempt_rows.extend(success_shape(run_id).in_table_order(attempts, success_attempt_rows(successes)))
                built[:0] = success_outlet_rows(successes)
            database.upsert(connection, self._upsert_attempts, attempt_rows)
            if invocation_rows:
                database.upsert(connection, self._upsert_invocations, invocation_rows)
        outlets = [event_row(draft) for draft in batch.outlets] if batch.outlets else []
        if replay and (outlets or built):  # both kinds of rows carry (asset, partition_key) first
            stored = self._stored_outlets(connection, run_id, {row[0] for row in (*outlets, *built)})
            outlets = [row for row in outlets if (row[0], row[1]) not in stored]
            built = [row for row in built if (row[0], row[1]) not in stored]
        if outlets:
            database.insert(connection, events, outlets, skip=1)
        if built:
            database.insert(connection, events, built, shape=outlet_shape(run_id))

    def _successes_from_json(self, connection: Any, run_id: str, rows: Sequence[tuple[Any, ...]]) -> bool:
        """SQLite: write plain successes (`journal_rows.success_row`) and their outlet events from JSON texts.

        False where that does not apply (another backend, a small batch, a
        value JSON would not carry): the caller writes them as rows.
        """
        use_json = self._database.dialect == "sqlite" and sqlite_json_pays(len(rows))
        statements = sqlite_success_groups(run_id, rows) if use_json else None
        if statements is None:
            return False
        for statement, parameters in statements:
            connection.exec_driver_sql(statement, parameters)
        self._database.events_written(connection, announced_assets(rows))
        return True

    def _stored_outlets(self, connection: Any, run_id: str, assets: set[str]) -> set[tuple[str, str | None]]:
        """The (asset, key) outlet events of ``assets`` the run stored already: a run announces each success once."""
        names = sorted(assets)
        query = (
            f"SELECT asset, partition_key FROM {events.name} WHERE source_run_id = ? AND source_kind = ? "
            f"AND asset IN ({', '.join('?' * len(names))})"
        )
        rows = connection.exec_driver_sql(self._database.driver_sql(query), (run_id, SourceKind.OUTLET.value, *names))
        return {(asset, key) for asset, key in rows}
