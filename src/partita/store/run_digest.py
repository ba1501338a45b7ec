"""A run summarized inside the database, for a page about it: its attempts never leave it one by one.

A run of 100,000 attempts is read as counts per asset and status, a page of
its failed and retried attempts (with their invocations), and a timeline
that is either each attempt's bar (few attempts) or counts per asset, time
bucket and status (many). Each is one query over the run's range of the
attempts' primary key, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, and_, case, func, or_, select

from partita.results.record import TaskRecord
from partita.store.run_rows import task_records
from partita.store.schema import attempt_logs, attempts, invocations
from partita.store.sql import SqlStore

__all__ = ["AttemptGroup", "RunDigest", "TimelineBar", "TimelineBucket", "TimelineRows"]


class AttemptGroup(NamedTuple):
    """The attempts of one asset with one stored status."""

    asset: str
    status: str
    count: int
    #: Of them, attempts without any invocation (a ``cancelled`` one of those never began).
    uninvoked: int
    #: Of them, successes whose output was loaded from a materialization instead of computed.
    materialized: int
    #: Of them, attempts with a start time (drawn on the timeline).
    started: int


class TimelineBar(NamedTuple):
    """One attempt from its start to its finish (None while it runs); its key only when the run recorded keys."""

    asset: str
    index: int
    status: str
    started_at: float
    finished_at: float | None
    partition_key: str | None


class TimelineBucket(NamedTuple):
    """The attempts of one asset and status that started within one time bucket."""

    asset: str
    bucket: int
    status: str
    count: int
    first_start: float
    last_finish: float | None


@dataclass(frozen=True, slots=True)
class TimelineRows:
    """A run's timeline from the store: each attempt's bar, or (too many to draw) counts per bucket."""

    start: float
    end: float
    bucket_seconds: float
    bars: tuple[TimelineBar, ...] | None
    buckets: tuple[TimelineBucket, ...]


class _Row(NamedTuple):
    """A stand-in attempts row: what `task_records` reads of one."""

    asset: str
    idx: int
    status: str
    invocations: int
    reason: str | None = None
    partition_key_present: bool = False
    partition_key: str | None = None
    blocked_by: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    duration: float = 0.0
    failure_type: str | None = None
    failure_message: str | None = None
    failure_traceback: str | None = None
    resolution: str | None = None
    materialization_id: str | None = None


class RunDigest:
    """Read-only summaries of one run's attempts (the run id is a full id, as `SqlStore.get_run` returns it)."""

    def __init__(self, store: SqlStore) -> None:
        self._database = store.database
        self._failures = store.database.failures

    def groups(self, run_id: str) -> list[AttemptGroup]:
        """Counts per asset and stored status (one grouped scan of the run's attempts)."""
        c = attempts.c
        query = (
            select(
                c.asset,
                c.status,
                func.count(),
                func.sum(case((c.invocations == 0, 1), else_=0)),
                func.sum(case((c.resolution == "materialized", 1), else_=0)),
                func.count(c.started_at),
            )
            .where(c.run_id == run_id)
            .group_by(c.asset, c.status)
        )
        with self._failures("summarize the run's attempts"), self._database.connect() as connection:
            found = list(connection.execute(query))
        return [AttemptGroup(row[0], row[1], int(row[2]), int(row[3] or 0), int(row[4] or 0), int(row[5])) for row in found]

    def tasks_of(self, plan: dict[str, Any], run_status: str, groups: Sequence[AttemptGroup]) -> list[TaskRecord]:
        """The plan's tasks, each with one stand-in attempt per kind of group, so `task_status` judges it as history does."""
        rows: list[_Row] = []
        for group in groups:
            if group.uninvoked:
                rows.append(_Row(group.asset, len(rows), group.status, 0))
            if group.count > group.uninvoked:
                rows.append(_Row(group.asset, len(rows), group.status, 1))
        rows.sort(key=lambda row: row.asset)
        return task_records(plan, run_status, rows, [])

    def unsuccessful(
        self, plan: dict[str, Any], run_id: str, run_status: str, *, retried: bool, limit: int
    ) -> list[TaskRecord]:
        """The first ``limit`` failed attempts (``retried=False``) or attempts invoked more than once, with invocations.

        In asset and index order; each task holds only the attempts found.
        """
        c = attempts.c
        condition = c.invocations > 1 if retried else c.status == "failed"
        query = select(attempts).where(c.run_id == run_id, condition).order_by(c.asset, c.idx).limit(limit)
        with self._failures("read the run's failed attempts"), self._database.connect() as connection:
            rows = list(connection.execute(query))
            invocation_rows = self._invocations(connection, run_id, [(row.asset, row.idx) for row in rows])
        return [task for task in task_records(plan, run_status, rows, invocation_rows) if task.attempts]

    def _invocations(self, connection: Connection, run_id: str, wanted: Sequence[tuple[str, int]]) -> list[Any]:
        if not wanted:
            return []
        i = invocations.c
        pairs = or_(*(and_(i.asset == asset, i.idx == index) for asset, index in wanted))
        query = select(invocations).where(i.run_id == run_id, pairs).order_by(i.asset, i.idx, i.number)
        return list(connection.execute(query))

    def timeline(self, run_id: str, start: float, end: float, *, max_bars: int, buckets: int) -> TimelineRows:
        """Bars for at most ``max_bars`` started attempts; otherwise counts in ``buckets`` equal spans of [start, end]."""
        span = max(end - start, 1e-3)
        width = span / buckets
        c = attempts.c
        with self._failures("read the run's timeline"), self._database.connect() as connection:
            bar_query = (
                select(c.asset, c.idx, c.status, c.started_at, c.finished_at, c.partition_key)
                .where(c.run_id == run_id, c.started_at.is_not(None))
                .order_by(c.asset, c.started_at)
                .limit(max_bars + 1)
            )
            bars = [TimelineBar(*row) for row in connection.execute(bar_query)]
            if len(bars) <= max_bars:
                return TimelineRows(start, end, width, tuple(bars), ())
            found = connection.exec_driver_sql(self._bucket_sql(), (start, width, run_id))
            counted = tuple(
                TimelineBucket(row[0], min(max(int(row[1]), 0), buckets - 1), row[2], int(row[3]), row[4], row[5])
                for row in found
            )
        return TimelineRows(start, end, width, None, counted)

    def log_boundary(self, run_id: str, newest: int) -> int:
        """The id after which the run's ``newest`` log lines start (0 when it has no more than that)."""
        logs = attempt_logs.c
        query = select(logs.id).where(logs.run_id == run_id).order_by(logs.id.desc()).limit(1).offset(newest - 1)
        with self._failures("read the run's logs"), self._database.connect() as connection:
            found = connection.execute(query).scalar()
        return 0 if found is None else int(found) - 1

    def _bucket_sql(self) -> str:
        # SQLite's CAST truncates toward zero (starts are never before the run's); PostgreSQL's rounds, so FLOOR.
        number = "CAST((started_at - ?) / ? AS INTEGER)"
        if self._database.dialect == "postgresql":
            number = "CAST(FLOOR((started_at - ?) / ?) AS INTEGER)"
        return self._database.driver_sql(
            f"SELECT asset, {number} AS bucket, status, COUNT(*), MIN(started_at), MAX(finished_at) "
            f"FROM {attempts.name} WHERE run_id = ? AND started_at IS NOT NULL GROUP BY asset, bucket, status"
        )
