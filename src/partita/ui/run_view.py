"""What a run's page shows, read with bounded queries: a run of 100,000 attempts renders as fast as one of ten.

The header is the ``partita.runs`` entry of the run plus its trigger launch
(as ``partita runs show`` prints them); tasks are counts per asset and
status; failed and retried attempts are the first `MAX_LISTED` of each,
with their invocations; the timeline is drawn from bars or buckets
(`partita.ui.timeline_svg`); the logs are the newest `LOG_TAIL` lines.
Keys appear only where the run recorded them (``record_partition_keys``).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from partita.documents.runs import run_summary
from partita.results.attempts import attempt_never_started
from partita.results.record import TaskRecord, task_status
from partita.store.protocol import LogQuery, StoredLogLine, StoredRun
from partita.store.run_digest import AttemptGroup, RunDigest
from partita.store.sql import SqlStore
from partita.store.trigger_requests import TriggerRequest
from partita.store.triggers import TriggerLaunch, TriggerStore
from partita.ui.timeline_svg import BUCKETS, MAX_BARS, Timeline, draw_timeline

__all__ = ["LOG_TAIL", "MAX_LISTED", "RunPages", "RunPage", "TaskRow", "log_lines_after", "log_tail"]

#: Failed attempts (and, apart, retried ones) listed on a run's page.
MAX_LISTED = 50
#: Log lines a run's page opens with; newer ones are appended live.
LOG_TAIL = 200
#: Log lines one live update appends at most (a burst is caught up in several).
LOG_BATCH = 500
#: Run pages kept in memory.
KEPT_PAGES = 32
#: The longest a running run's page is shown again without reading the store.
MAX_REUSE_SECONDS = 0.8
#: Run statuses that are stored, and final: such a run's rows never change again.
_FINAL = frozenset({"success", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class TaskRow:
    """One asset of the run, as ``partita runs show`` counts it."""

    asset: str
    status: str
    counts: dict[str, int]
    #: Attempts cut short by a cancellation (cancelled after they began).
    cancelled: int
    #: Running, or left running by an owner that is gone.
    unfinished: int
    #: Never began: cancelled before any invocation, or (run unfinished) not written yet; None when unknown.
    not_started: int | None
    materialized: int


@dataclass(frozen=True, slots=True)
class RunPage:
    run: StoredRun
    #: The ``partita.runs`` entry of the run (what the actions partial reads).
    summary: dict[str, Any]
    launch: TriggerLaunch | None
    request: TriggerRequest | None
    tasks: tuple[TaskRow, ...]
    failures: tuple[TaskRecord, ...]
    failed_total: int
    retried: tuple[TaskRecord, ...]
    timeline: Timeline

    @classmethod
    def read(cls, store: SqlStore, run_id: str) -> RunPage:
        digest = RunDigest(store)
        run, scan = digest.read(run_id, buckets=BUCKETS, now=time.time())
        triggers = TriggerStore(store)
        launch = triggers.launch(run.run_id)
        request = None if launch is None else triggers.request(launch.request_id)
        plan, status = run.plan, run.status
        failed_total = scan.count("failed")
        failures = (
            digest.unsuccessful(plan, run.run_id, status, retried=False, limit=MAX_LISTED) if failed_total else []
        )
        retried = digest.unsuccessful(plan, run.run_id, status, retried=True, limit=MAX_LISTED) if scan.retried else []
        assets = [task["name"] for task in plan["tasks"]]
        return cls(
            run=run,
            summary=run_summary(run),
            launch=launch,
            request=request,
            tasks=tuple(_task_rows(digest, plan, status, list(scan.groups))),
            failures=tuple(failures),
            failed_total=failed_total,
            retried=tuple(retried),
            timeline=draw_timeline(
                assets, digest.timeline(run.run_id, scan, max_bars=MAX_BARS), interrupted=status == "interrupted"
            ),
        )

    @property
    def consumer_key(self) -> str | None:
        """The trigger request's consumer key: a raw key, shown only when the run recorded keys."""
        if self.request is None or not self.run.record_partition_keys:
            return None
        return self.request.partition_key or None


@dataclass(frozen=True, slots=True)
class _Kept:
    page: RunPage
    #: When it was read (monotonic seconds), and what reading it cost.
    read_at: float
    cost: float


class RunPages:
    """The pages of the last `KEPT_PAGES` runs a server showed, read again only when they may have changed.

    A finished run's attempts were written with its end and never change,
    so its page is read from the store once: viewing a run of 100,000
    attempts again costs nothing. A running run's page is shared by every
    page that asks within twice what reading it cost (at most
    `MAX_REUSE_SECONDS`), unless its status changed meanwhile: live pages of
    a large run are redrawn about once a second whatever their number, and
    its end is never shown late.
    """

    def __init__(self, size: int = KEPT_PAGES) -> None:
        self._pages: OrderedDict[str, _Kept] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def read(self, store: SqlStore, run_id: str) -> RunPage:
        with self._lock:
            kept = self._pages.get(run_id)
            if kept is not None:
                self._pages.move_to_end(run_id)
        if kept is not None and self._still_good(store, kept):
            return kept.page
        began = time.monotonic()
        page = RunPage.read(store, run_id)
        fresh = _Kept(page, began, time.monotonic() - began)
        with self._lock:
            for name in {run_id, page.run.run_id}:  # a prefix finds it again too
                self._pages[name] = fresh
            while len(self._pages) > self._size:
                self._pages.popitem(last=False)
        return page

    @staticmethod
    def _still_good(store: SqlStore, kept: _Kept) -> bool:
        status = kept.page.run.status
        if status in _FINAL:
            return True
        if time.monotonic() - kept.read_at >= min(MAX_REUSE_SECONDS, 2 * kept.cost):
            return False
        return store.run_history.run_status(kept.page.run.run_id) == status


def _task_rows(digest: RunDigest, plan: dict[str, Any], status: str, groups: list[AttemptGroup]) -> list[TaskRow]:
    planned = {task["name"]: task["attempt_count"] for task in plan["tasks"]}
    by_asset: dict[str, list[AttemptGroup]] = {}
    for group in groups:
        by_asset.setdefault(group.asset, []).append(group)
    unfinished_run = status in ("running", "interrupted")
    rows = []
    for task in digest.tasks_of(plan, status, groups):
        found = by_asset.get(task.asset, [])
        counts = {group.status: group.count for group in found}
        never = sum(group.uninvoked for group in found if attempt_never_started(group.status, 0))
        recorded = sum(counts.values())
        not_started: int | None = never
        if unfinished_run:
            wanted = planned.get(task.asset)
            not_started = None if wanted is None else never + max(0, wanted - recorded)
        rows.append(
            TaskRow(
                asset=task.asset,
                status=task_status(task, status),
                counts=counts,
                cancelled=counts.get("cancelled", 0) - never,
                unfinished=counts.get("running", 0) + counts.get("interrupted", 0),
                not_started=not_started,
                materialized=sum(group.materialized for group in found),
            )
        )
    return rows


def log_tail(store: SqlStore, run_id: str, limit: int = LOG_TAIL) -> list[StoredLogLine]:
    """The run's newest ``limit`` log lines, in write order."""
    boundary = RunDigest(store).log_boundary(run_id, limit)
    return store.attempt_logs(run_id, LogQuery(after_id=boundary, limit=limit))


def log_lines_after(store: SqlStore, run_id: str, after: int, limit: int = LOG_BATCH) -> list[StoredLogLine]:
    """The run's lines written after line ``after`` (what a live page has not shown yet)."""
    return store.attempt_logs(run_id, LogQuery(after_id=after, limit=limit))
