"""A run summarized inside the database, for a page about it: its attempts never leave it one by one.

A run of 100,000 attempts is read in one grouped pass over its range of the
attempts' primary key (`RunScan`: counts per asset, status and time bucket
of their starts, which give the task table, the run's counts and the
aggregated timeline at once), plus small reads: the first failed and
retried attempts with their invocations, and each attempt's bar when few
started. SQLite and PostgreSQL run the same SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, and_, or_, select

from partita.definitions.launch import Tags
from partita.results.record import TaskRecord
from partita.store.protocol import StoredRun
from partita.store.run_rows import stored_run, task_records
from partita.store.schema import attempt_logs, attempts, invocations, run_tags, runs
from partita.store.sql import SqlStore

__all__ = ["AttemptGroup", "RunDigest", "RunScan", "TimelineBar", "TimelineBucket", "TimelineRows"]


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
    #: Of them, attempts invoked more than once (retried).
    retried: int = 0


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


@dataclass(frozen=True, slots=True)
class RunScan:
    """One grouped pass over a run's attempts: counts per asset and status, and per time bucket of their starts."""

    groups: tuple[AttemptGroup, ...]
    buckets: tuple[TimelineBucket, ...]
    start: float
    end: float
    bucket_seconds: float

    def count(self, status: str) -> int:
        return sum(group.count for group in self.groups if group.status == status)

    @property
    def retried(self) -> int:
        return sum(group.retried for group in self.groups)


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
        self._store = store
        self._database = store.database
        self._failures = store.database.failures

    def read(self, run_id: str, *, buckets: int, now: float) -> tuple[StoredRun, RunScan]:
        """The run (an id or unique prefix) and its attempts' `RunScan`, with one scan of its attempts in all.

        The run's counts come from the scan, not from a second pass
        (`SqlStore.get_run` counts them itself); its timeline spans its start
        to its finish, or to ``now`` while it runs.
        """
        with self._failures("read the run"), self._database.connect() as connection:
            row = connection.execute(select(runs).where(runs.c.run_id == run_id)).first()
        if row is None:  # a prefix: the store resolves it (and says why when it cannot)
            run_id = self._store.get_run(run_id).run_id
            with self._failures("read the run"), self._database.connect() as connection:
                row = connection.execute(select(runs).where(runs.c.run_id == run_id)).one()
        status = self._store.run_history.status(row)
        start = float(row.started_at)
        if row.finished_at is not None:
            end = float(row.finished_at)
        else:  # an interrupted run ended, unrecorded, after its owner's last sign of life
            end = now if status == "running" else float(row.heartbeat_at)
        scan = self._scan(row.run_id, start, max(start, end), buckets)
        counts: dict[str, int] = {}
        for group in scan.groups:
            counts[group.status] = counts.get(group.status, 0) + group.count
        return stored_run(row, status, counts, self._tags(row.run_id)), scan

    def _tags(self, run_id: str) -> Tags:
        query = select(run_tags.c.key, run_tags.c.value).where(run_tags.c.run_id == run_id).order_by(run_tags.c.key)
        with self._failures("read the run's tags"), self._database.connect() as connection:
            return tuple((key, value) for key, value in connection.execute(query))

    def _scan(self, run_id: str, start: float, end: float, buckets: int) -> RunScan:
        width = max(end - start, 1e-3) / buckets
        with self._failures("summarize the run's attempts"), self._database.connect() as connection:
            found = self._database.rows(connection, self._scan_sql(), (start, width, buckets - 1, run_id))
        groups: dict[tuple[str, str], list[int]] = {}
        counted: list[TimelineBucket] = []
        for asset, status, bucket, uninvoked, retried, materialized, count, first_start, last_finish in found:
            sums = groups.setdefault((asset, status), [0, 0, 0, 0, 0])
            count = int(count)
            sums[0] += count
            sums[1] += count if uninvoked else 0
            sums[2] += count if materialized else 0
            sums[3] += 0 if bucket is None else count
            sums[4] += count if retried else 0
            if bucket is not None:
                counted.append(
                    TimelineBucket(
                        asset, min(max(int(bucket), 0), buckets - 1), status, count, first_start, last_finish
                    )
                )
        return RunScan(
            tuple(AttemptGroup(asset, status, *sums) for (asset, status), sums in groups.items()),
            tuple(counted),
            start,
            end,
            width,
        )

    def _scan_sql(self) -> str:
        # SQLite's CAST truncates toward zero; PostgreSQL's rounds, so FLOOR. The bucket is clamped to the
        # drawing in SQL: a start outside the run's span (another host's clock) must not add a group per attempt.
        number = "MIN(MAX(CAST((started_at - ?) / ? AS INTEGER), 0), ?)"
        if self._database.dialect == "postgresql":
            number = "LEAST(GREATEST(CAST(FLOOR((started_at - ?) / ?) AS INTEGER), 0), ?)"
        return (  # ? placeholders: `Database.rows` adapts them
            f"SELECT asset, status, CASE WHEN started_at IS NULL THEN NULL ELSE {number} END AS bucket, "
            "CASE WHEN invocations = 0 THEN 1 ELSE 0 END AS uninvoked, "
            "CASE WHEN invocations > 1 THEN 1 ELSE 0 END AS retried, "
            "CASE WHEN resolution = 'materialized' THEN 1 ELSE 0 END AS materialized, "
            f"COUNT(*), MIN(started_at), MAX(finished_at) FROM {attempts.name} WHERE run_id = ? "
            "GROUP BY asset, status, bucket, uninvoked, retried, materialized"
        )

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

    def timeline(self, run_id: str, scan: RunScan, *, max_bars: int) -> TimelineRows:
        """Each started attempt's bar when there are at most ``max_bars``; otherwise the scan's buckets."""
        if sum(group.started for group in scan.groups) > max_bars:
            return TimelineRows(scan.start, scan.end, scan.bucket_seconds, None, scan.buckets)
        c = attempts.c
        query = (
            select(c.asset, c.idx, c.status, c.started_at, c.finished_at, c.partition_key)
            .where(c.run_id == run_id, c.started_at.is_not(None))
            .order_by(c.asset, c.started_at)
            .limit(max_bars)
        )
        with self._failures("read the run's timeline"), self._database.connect() as connection:
            bars = tuple(TimelineBar(*row) for row in connection.execute(query))
        return TimelineRows(scan.start, scan.end, scan.bucket_seconds, bars, scan.buckets)

    def log_boundary(self, run_id: str, newest: int) -> int:
        """The id after which the run's ``newest`` log lines start (0 when it has no more than that)."""
        logs = attempt_logs.c
        query = select(logs.id).where(logs.run_id == run_id).order_by(logs.id.desc()).limit(1).offset(newest - 1)
        with self._failures("read the run's logs"), self._database.connect() as connection:
            found = connection.execute(query).scalar()
        return 0 if found is None else int(found) - 1
