"""`SqlRunHistory`: runs, their attempts and invocations, heartbeats, and reading them back.

The run journal writes through it while a run progresses and the CLI reads
through it. A run left ``running`` by an owner that is gone reads back as
``interrupted``: the status is derived from the owner's liveness, not stored.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, and_, false, func, or_, select

from partita.definitions.launch import Tags
from partita.errors import UnknownRunError
from partita.events.model import EventDraft
from partita.execution.attempt_logs import LogBatch
from partita.results.record import AttemptRecord, TaskRecord
from partita.store.attempt_log_rows import read_logs
from partita.store.attempt_states import read_failed_or_running, read_key_attempts, read_unkeyed_attempts
from partita.store.database import Database
from partita.store.journal_rows import announced_assets
from partita.store.liveness import owner_is_alive
from partita.store.progress_writes import ProgressWriter
from partita.store.protocol import (
    AttemptQuery,
    CancelOutcome,
    CancelRequest,
    KeyAttempts,
    LogQuery,
    ProgressBatch,
    RequestClaim,
    RequestClaimLost,
    RunEnd,
    RunFilter,
    RunStart,
    StoredLogLine,
    StoredRun,
)
from partita.store.retries import retry_transient
from partita.store.run_rows import (
    RUN_START_COLUMNS,
    attempt_records,
    filtered,
    replayed,
    run_start_row,
    stored_run,
    task_records,
)
from partita.store.schema import (
    CLAIM_PENDING_REQUEST,
    FINISH_RUN_REQUESTS,
    RECORD_TRIGGER_LAUNCH,
    attempts,
    invocations,
    run_tags,
    runs,
)
from partita.store.sqlite_verbs import CLAIM_LOST, RUN_END_SQL, RUN_START_SQL, end_successes, run_start_values

__all__ = ["MIN_RUN_ID_PREFIX", "SqlRunHistory"]

#: A shorter prefix would match too many runs to be a useful way of naming one.
MIN_RUN_ID_PREFIX = 4

_STALE_HEARTBEAT_SECONDS = 60.0


class SqlRunHistory:
    """The `RunHistory` of a `Database`: one transaction per verb, transient failures retried."""

    def __init__(self, database: Database) -> None:
        # Write transactions are taken through ``self._database.write`` at each
        # call (not bound here): a fault test replaces the database's ``write``.
        self._database = database
        self._failures = database.failures
        self._connect = database.connect
        self._host = database.host
        sql = database.driver_sql
        marks = ", ".join("?" * len(RUN_START_COLUMNS))
        self._run_start_sql = sql(f"INSERT INTO {runs.name} ({', '.join(RUN_START_COLUMNS)}) VALUES ({marks})")
        self._run_row_sql = sql(f"SELECT owner_token, started_at FROM {runs.name} WHERE run_id = ?")
        self._heartbeat_sql = sql(f"UPDATE {runs.name} SET heartbeat_at = ? WHERE run_id = ?")
        self._run_end_sql = sql(
            f"UPDATE {runs.name} SET status = ?, finished_at = ?, heartbeat_at = ?, summary = ? WHERE run_id = ?"
        )
        # Conditional: only a running run without a request takes one (concurrent askers, the run's end).
        self._cancel_sql = sql(
            f"UPDATE {runs.name} SET cancel_requested_at = ? "
            "WHERE run_id = ? AND status = 'running' AND cancel_requested_at IS NULL"
        )
        # Driver SQL: rows go to ``executemany`` as plain tuples;
        # skipping per-row parameter processing halves the writer's cost.
        self._finish_requests_sql = database.driver_sql(FINISH_RUN_REQUESTS)
        self._claim_sql = database.driver_sql(CLAIM_PENDING_REQUEST)
        self._launch_sql = database.driver_sql(RECORD_TRIGGER_LAUNCH)
        self._tags_sql = database.driver_sql(f"INSERT INTO {run_tags.name} (run_id, key, value) VALUES (?, ?, ?)")
        self._progress = ProgressWriter(database)

    # -- writing -----------------------------------------------------------------

    def record_run_started(self, run: RunStart) -> None:
        """Insert the run's row; a transient failure is retried, and a retry never inserts it twice.

        A one-key consumer run's `RequestClaim` is taken in the same
        transaction: `RequestClaimLost` (nothing written) when the request
        changed since it was read (another daemon claimed or closed it, or
        events joined it). Raises StoreError when the row cannot be written
        (the run must not start). On a SQLite file, a start without tags is
        one statement (`sqlite_verbs`).
        """
        values = run_start_row(run)
        started = values[2]
        tag_rows = [(run.run_id, key, value) for key, value in run.launch.tags]

        def insert(number: int) -> None:
            if not number and not tag_rows and self._database.one_statement_verbs:
                self._start_in_one_statement(values, run.claim)
                return
            with self._database.driver_write() as connection:
                if number and self._run_row_is(connection, run.run_id, run.owner_token, started):
                    return  # an earlier try committed; only its acknowledgement was lost
                if run.claim is not None:
                    self._claim(connection, run.claim, run.run_id)
                connection.exec_driver_sql(self._run_start_sql, values)
                if tag_rows:  # with the run's row: a run is never listed without its tags
                    connection.exec_driver_sql(self._tags_sql, tag_rows)

        with self._failures("record the run's start"):
            retry_transient(insert)

    def _start_in_one_statement(self, values: tuple[Any, ...], claim: RequestClaim | None) -> None:
        """SQLite: the run's row, and its claim and launch, as one statement (`sqlite_verbs`)."""
        try:
            self._database.driver_statement(RUN_START_SQL, run_start_values(values, claim))
        except sqlite3.IntegrityError as exc:
            if claim is not None and str(exc) == CLAIM_LOST:
                raise self._claim_lost(claim) from None
            raise

    @staticmethod
    def _claim_lost(claim: RequestClaim) -> RequestClaimLost:
        return RequestClaimLost(
            f"flow {claim.flow!r}: request {claim.request_id} changed since it was read "
            "(another daemon claimed or closed it, or new events joined it)"
        )

    def _claim(self, connection: Any, claim: RequestClaim, run_id: str) -> None:
        """Claim the run's pending request and record its launch, or raise `RequestClaimLost` (rolled back)."""
        params = (claim.claimed_at, run_id, claim.flow, claim.request_id, claim.event_ids)
        if connection.exec_driver_sql(self._claim_sql, params).rowcount == 0:
            raise self._claim_lost(claim)
        launch = (run_id, claim.request_id, claim.flow, claim.attempt, None, claim.claimed_at)
        connection.exec_driver_sql(self._launch_sql, launch)

    def _run_row_is(self, connection: Any, run_id: str, owner_token: str, started: float) -> bool:
        """Whether this run's row exists as this owner wrote it (not another run with the same id)."""
        row = connection.exec_driver_sql(self._run_row_sql, (run_id,)).fetchone()
        return row is not None and row[0] == owner_token and row[1] == started

    def record_progress(
        self,
        records: Sequence[AttemptRecord],
        run_id: str,
        *,
        new: bool = False,
        outlets: Sequence[EventDraft] = (),
        replay: bool = False,
        logs: LogBatch | None = None,
    ) -> None:
        """Write attempts (running or terminal), their invocations, outlet events and log lines, in one transaction."""
        self.record_batch(run_id, ProgressBatch(records, new, outlets, replay, logs))

    def record_batch(self, run_id: str, batch: ProgressBatch) -> None:
        """Write one `ProgressBatch` (records, rows built already, outlets, log lines) in one transaction."""
        if not batch.attempts and not batch.attempt_rows and not batch.logs:
            return

        def write(number: int) -> None:
            with self._database.driver_write() as connection:
                self._progress.write(connection, run_id, replayed(batch) if number else batch)

        with self._failures("record attempts"):
            retry_transient(write)

    def record_heartbeat(self, run_id: str, at: float) -> None:
        """Tell other hosts the run's owner is alive at ``at``."""

        def write(_: int) -> None:
            with self._database.driver_write() as connection:
                connection.exec_driver_sql(self._heartbeat_sql, (at, run_id))

        with self._failures("record a heartbeat"):
            retry_transient(write)

    def record_run_finished(self, end: RunEnd, progress: Sequence[ProgressBatch] = ()) -> None:
        """The last attempts and the outcome: one transaction, one fsync; retried when transient."""
        finished, summary, serves = end.finished_at.timestamp(), json.dumps(end.summary), end.serves_trigger_flow
        values = (end.status, finished, finished, summary, end.run_id)

        def write(number: int) -> None:
            # A retry writes idempotently, through the transaction: the first try may have committed.
            successes = None if number or not self._database.one_statement_verbs else end_successes(progress)
            if successes is not None:
                text, rows = successes
                self._database.driver_statement(RUN_END_SQL, (end.run_id, end.status, finished, summary, serves, text))
                self._database.events_committed(announced_assets(rows))
                return
            with self._database.driver_write() as connection:
                for batch in progress:
                    self._progress.write(connection, end.run_id, replayed(batch) if number else batch)
                connection.exec_driver_sql(self._run_end_sql, values)
                if serves is not None:
                    requests = (finished, serves, end.run_id)
                    connection.exec_driver_sql(self._finish_requests_sql, requests)

        with self._failures("record the run's end"):
            retry_transient(write)

    # -- cancellation ------------------------------------------------------------

    def request_cancel(self, run_id: str) -> CancelRequest:
        """Record a cancel request for a running run; say what was done (see `RunHistory.request_cancel`).

        The update is conditional on the row (still ``running``, no request
        yet), so the decision holds against a concurrent request or the
        run's end on either backend; a row that refuses it is read again.
        """
        now = time.time()

        def ask(number: int) -> CancelRequest:
            with self._database.write() as connection:
                row = self._find(connection, run_id)
                refused = self._cancel_refused(row, now if number else None)
                if refused is not None:
                    return refused
                if connection.exec_driver_sql(self._cancel_sql, (now, row.run_id)).rowcount == 1:
                    return CancelRequest(row.run_id, CancelOutcome.REQUESTED, "running", now)
                # Another request or the run's end committed after the read: decide from the row as it is now.
                row = self._find(connection, row.run_id)
                refused = self._cancel_refused(row, None)
                assert refused is not None, "a running run without a request takes one"
                return refused

        with self._failures("request the run's cancellation"):
            return retry_transient(ask)

    def _cancel_refused(self, row: Any, mine: float | None) -> CancelRequest | None:
        """Why ``row`` takes no new request, or None when it takes one.

        ``mine`` is this call's request time on a retry: a first try that
        committed, whose acknowledgement was lost, is still this call's request.
        """
        status = self.status(row)
        if status == "interrupted":
            return CancelRequest(row.run_id, CancelOutcome.NOT_RUNNING, status)
        if status != "running":
            return CancelRequest(row.run_id, CancelOutcome.FINISHED, status)
        if row.cancel_requested_at is None:
            return None
        outcome = CancelOutcome.REQUESTED if row.cancel_requested_at == mine else CancelOutcome.ALREADY_REQUESTED
        return CancelRequest(row.run_id, outcome, status, row.cancel_requested_at)

    def cancel_requests(self, run_ids: Sequence[str]) -> frozenset[str]:
        """Which of these runs another process asked to cancel: one indexed read for all of them."""
        if not run_ids:
            return frozenset()
        marks = ", ".join("?" * len(run_ids))
        query = self._database.driver_sql(
            f"SELECT run_id FROM {runs.name} WHERE cancel_requested_at IS NOT NULL AND run_id IN ({marks})"
        )
        with self._failures("read cancel requests"), self._connect() as connection:
            return frozenset(row[0] for row in connection.exec_driver_sql(query, tuple(run_ids)))

    # -- reading -----------------------------------------------------------------

    def status(self, row: Any) -> str:
        """A runs row's status as history shows it: ``running`` becomes ``interrupted`` once its owner is gone.

        ``row`` needs ``status``, ``owner_host``, ``owner_pid``, ``owner_token`` and ``heartbeat_at``.
        """
        if row.status != "running":
            return str(row.status)
        if row.owner_host == self._host:
            alive = owner_is_alive(row.owner_pid, row.owner_token)
        else:
            alive = dt.datetime.now(dt.UTC).timestamp() - row.heartbeat_at < _STALE_HEARTBEAT_SECONDS
        return "running" if alive else "interrupted"

    def run_status(self, run_id: str) -> str | None:
        """The run's status as history shows it (``interrupted`` once its owner is gone), or None before it started."""
        query = select(
            runs.c.status, runs.c.owner_host, runs.c.owner_pid, runs.c.owner_token, runs.c.heartbeat_at
        ).where(runs.c.run_id == run_id)
        with self._failures("read runs"), self._connect() as connection:
            row = connection.execute(query).first()
        return None if row is None else self.status(row)

    def _counts(self, connection: Connection, run_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {run_id: {} for run_id in run_ids}
        if not run_ids:
            return counts
        query = (
            select(attempts.c.run_id, attempts.c.status, func.count())
            .where(attempts.c.run_id.in_(run_ids))
            .group_by(attempts.c.run_id, attempts.c.status)
        )
        for run_id, status, count in connection.execute(query):
            counts[run_id][status] = count
        return counts

    def _tags(self, connection: Connection, run_ids: Sequence[str]) -> dict[str, Tags]:
        found: dict[str, list[tuple[str, str]]] = {run_id: [] for run_id in run_ids}
        if run_ids:
            query = select(run_tags.c.run_id, run_tags.c.key, run_tags.c.value).where(run_tags.c.run_id.in_(run_ids))
            for run_id, key, value in connection.execute(query.order_by(run_tags.c.run_id, run_tags.c.key)):
                found[run_id].append((key, value))
        return {run_id: tuple(pairs) for run_id, pairs in found.items()}

    def list_runs(
        self, *, limit: int = 20, status: str | None = None, where: RunFilter | None = None
    ) -> list[StoredRun]:
        """The latest runs first, at most ``limit``, of one status and matching ``where`` if given.

        Runs that started at the same time are listed by descending id, so
        ``where.before_run_id`` names one place in the order.
        """
        query = filtered(select(runs), where).order_by(runs.c.started_at.desc(), runs.c.run_id.desc())
        if status in ("running", "interrupted"):
            query = query.where(runs.c.status == "running")
        elif status is not None:
            query = query.where(runs.c.status == status).limit(limit)
        else:
            query = query.limit(limit)
        with self._failures("list runs"), self._connect() as connection:
            if where is not None and where.before_run_id is not None:
                anchor = self._find(connection, where.before_run_id)
                query = query.where(
                    or_(
                        runs.c.started_at < anchor.started_at,
                        and_(runs.c.started_at == anchor.started_at, runs.c.run_id < anchor.run_id),
                    )
                )
            rows = list(connection.execute(query))
            if status in ("running", "interrupted"):
                rows = [row for row in rows if self.status(row) == status][:limit]
            ids = [row.run_id for row in rows]
            counts, tags = self._counts(connection, ids), self._tags(connection, ids)
        return [stored_run(row, self.status(row), counts[row.run_id], tags[row.run_id]) for row in rows]

    def _find(self, connection: Connection, run_id: str) -> Any:
        row = connection.execute(select(runs).where(runs.c.run_id == run_id)).first()
        if row is not None:
            return row
        if run_id.isalnum() and len(run_id) < MIN_RUN_ID_PREFIX:
            raise UnknownRunError(
                f"run id prefix {run_id!r} is too short: give at least {MIN_RUN_ID_PREFIX} characters of the run id"
            )
        if run_id.isalnum():
            # Compared as text, not with LIKE: SQLite's LIKE ignores ASCII case, and an id never does.
            prefix = func.substr(runs.c.run_id, 1, len(run_id)) == run_id
            matches = list(connection.execute(select(runs).where(prefix).limit(2)))
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise UnknownRunError(f"run id prefix {run_id!r} matches several runs; give more characters")
        raise UnknownRunError(f"no run with id {run_id!r} in store {self._database.url}")

    def get_run(self, run_id: str) -> StoredRun:
        """The run with this id (or unique id prefix); `UnknownRunError` otherwise."""
        with self._failures("read the run"), self._connect() as connection:
            row = self._find(connection, run_id)
            counts, tags = self._counts(connection, [row.run_id]), self._tags(connection, [row.run_id])
        return stored_run(row, self.status(row), counts[row.run_id], tags[row.run_id])

    def get_tasks(self, run_id: str) -> list[TaskRecord]:
        """The run's tasks in plan order, each with its attempts and their invocations."""
        with self._failures("read the run's attempts"), self._connect() as connection:
            row = self._find(connection, run_id)
            run_status = self.status(row)
            attempt_rows = list(
                connection.execute(
                    select(attempts).where(attempts.c.run_id == row.run_id).order_by(attempts.c.asset, attempts.c.idx)
                )
            )
            invocation_rows = list(
                connection.execute(
                    select(invocations)
                    .where(invocations.c.run_id == row.run_id)
                    .order_by(invocations.c.asset, invocations.c.idx, invocations.c.number)
                )
            )
        return task_records(json.loads(row.plan), run_status, attempt_rows, invocation_rows)

    def key_attempts(self, asset: str) -> dict[str, KeyAttempts]:
        """Each key of ``asset`` with recorded attempts: its newest failure, success, and a live run of it.

        Only runs that recorded keys (``record_partition_keys``) name keys;
        liveness is judged as `status` judges a run.
        """
        with self._failures("read the attempts of an asset's keys"):
            return retry_transient(lambda _: read_key_attempts(self._database, asset, self.status))

    def failed_or_running_keys(self, asset: str) -> dict[str, KeyAttempts]:
        """The keys of `key_attempts` whose newest outcome failed or that a live run is running, with the same entries.

        Only these keys' attempts change a status; reading them alone skips
        building an entry for each of 100,000 keys that succeeded.
        """
        with self._failures("read the attempts of an asset's keys"):
            return retry_transient(lambda _: read_failed_or_running(self._database, asset, self.status))

    def unkeyed_attempts(self, asset: str) -> KeyAttempts:
        """An unpartitioned asset's newest failure and success (among its newest runs) and a live run of it."""
        with self._failures("read the attempts of an asset"):
            return retry_transient(lambda _: read_unkeyed_attempts(self._database, asset, self.status))

    def attempt_logs(self, run_id: str, query: LogQuery | None = None) -> list[StoredLogLine]:
        """The run's kept log lines matching ``query``, in write order; `UnknownRunError` for an unknown run."""
        with self._failures("read the run's logs"), self._connect() as connection:
            row = self._find(connection, run_id)
            return read_logs(connection, row.run_id, LogQuery() if query is None else query)

    def list_attempts(self, run_id: str, query: AttemptQuery) -> list[AttemptRecord]:
        """A page of the run's attempts in (asset, index) order, read through the primary key."""
        with self._failures("read the run's attempts"), self._connect() as connection:
            row = self._find(connection, run_id)
            run_status = self.status(row)
            statement = select(attempts).where(attempts.c.run_id == row.run_id)
            if query.asset is not None:
                statement = statement.where(attempts.c.asset == query.asset)
            if query.status is not None:
                statement = statement.where(*_stored_status(query.status, run_status))
            if query.after is not None:
                asset, index = query.after
                statement = statement.where(
                    or_(attempts.c.asset > asset, and_(attempts.c.asset == asset, attempts.c.idx > index))
                )
            page = list(connection.execute(statement.order_by(attempts.c.asset, attempts.c.idx).limit(query.limit)))
            invocation_rows = self._invocations_of(connection, row.run_id, page)
        return attempt_records(run_status, page, invocation_rows)

    def _invocations_of(self, connection: Connection, run_id: str, page: Sequence[Any]) -> list[Any]:
        """The invocation rows of a page of attempts: only retried or failed attempts have any."""
        wanted = [(att.asset, att.idx) for att in page if att.invocations > 1 or att.status != "success"]
        if not wanted:
            return []
        keys = and_(invocations.c.run_id == run_id, invocations.c.asset.in_(sorted({asset for asset, _ in wanted})))
        low, high = min(index for _, index in wanted), max(index for _, index in wanted)
        rows = connection.execute(select(invocations).where(keys, invocations.c.idx.between(low, high)))
        chosen = set(wanted)
        return [inv for inv in rows if (inv.asset, inv.idx) in chosen]


def _stored_status(status: str, run_status: str) -> tuple[Any, ...]:
    """The condition on stored rows for an attempt status as history shows it.

    An attempt is stored ``running`` until its outcome; history shows it
    ``interrupted`` when its run's owner is gone, so neither status alone
    names the rows.
    """
    if status == "interrupted":
        return (attempts.c.status == "running",) if run_status == "interrupted" else (false(),)
    if status == "running" and run_status == "interrupted":
        return (false(),)
    return (attempts.c.status == status,)
