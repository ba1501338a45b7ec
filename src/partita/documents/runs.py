"""The ``partita.runs`` and ``partita.run`` documents: recorded runs as the CLI and the API show them."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from partita.results.record import render_record
from partita.store import SqlStore, StoredRun
from partita.store.run_digest import AttemptGroup, RunDigest
from partita.store.trigger_requests import TriggerRequest
from partita.store.triggers import TriggerLaunch, TriggerStore

__all__ = ["MAX_LISTED_ATTEMPTS", "RUN_DOCUMENT_RECORD_VERSION", "RunView", "launch_fields", "run_summary"]

#: partita.run version 1 embeds a version 4 record; a newer record means a new document version.
RUN_DOCUMENT_RECORD_VERSION = 4
#: A run planned with more attempts is described without them unless they are asked for (the API):
#: its record would run to tens of megabytes; its attempts are read in pages instead.
MAX_LISTED_ATTEMPTS = 1_000


def run_summary(run: StoredRun) -> dict[str, Any]:
    """One entry of ``partita.runs``."""
    header = run.header
    return {
        "run_id": run.run_id,
        "status": run.status,
        "started_at": header.started_at.isoformat(),
        "finished_at": None if header.finished_at is None else header.finished_at.isoformat(),
        "duration_seconds": run.duration,
        "targets": list(header.targets),
        "selection": {"kind": header.selection_kind, "domain": header.domain, "key_count": header.key_count},
        "attempt_count": run.attempt_count,
        "counts": run.counts,
        **launch_fields(run),
    }


def launch_fields(run: StoredRun) -> dict[str, Any]:
    """How the run was launched, its flow and its tags (null for runs recorded before launches were)."""
    return {"launched_by": run.launched_by, "flow": run.flow_name, "tags": dict(run.tags)}


@dataclass(frozen=True)
class RunView:
    """One recorded run with what ``runs show`` prints about it: its record, and the trigger launch behind it."""

    run: StoredRun
    record: dict[str, Any]
    launch: TriggerLaunch | None
    request: TriggerRequest | None
    #: Whether the record lists every attempt (else each task has its status and counts, no attempt).
    attempts_listed: bool = True

    @classmethod
    def read(cls, store: SqlStore, run_id: str, *, attempts: bool | None = True) -> RunView:
        """The run ``run_id`` names (an exact id or a unique prefix); `UnknownRunError` when none does.

        ``attempts``: list every attempt (True), none (False), or only when
        the run was planned with at most `MAX_LISTED_ATTEMPTS` (None).
        """
        run = store.get_run(run_id)
        if attempts is None:
            attempts = run.attempt_count <= MAX_LISTED_ATTEMPTS
        if attempts:
            tasks = store.get_tasks(run.run_id)
            record = render_record(
                run.header, tasks, RUN_DOCUMENT_RECORD_VERSION, record_partition_keys=run.record_partition_keys
            )
        else:
            run, record = _record_without_attempts(store, run.run_id)
        triggers = TriggerStore(store)
        launch = triggers.launch(run.run_id)
        request = None if launch is None else triggers.request(launch.request_id)
        return cls(run, record, launch, request, attempts)

    def body(self) -> dict[str, Any]:
        """The body of the ``partita.run`` document."""
        return {
            "run": self.record,
            "launch": None if self.launch is None else _launch_document(self.launch),
            **launch_fields(self.run),
            "trigger_request": None if self.request is None else self._request_document(self.request),
            "attempts_listed": self.attempts_listed,
        }

    def _request_document(self, request: TriggerRequest) -> dict[str, Any]:
        """The trigger request the run serves; its consumer key only when the run recorded keys (it is a raw key)."""
        key = request.partition_key if self.run.record_partition_keys else None
        return {"generation": request.generation, "consumer_key": key}


def _record_without_attempts(store: SqlStore, run_id: str) -> tuple[StoredRun, dict[str, Any]]:
    """The run's record with each task's status and counts but no attempt, from one grouped pass (`RunDigest`)."""
    digest = RunDigest(store)
    run, scan = digest.read(run_id, buckets=1, now=time.time())
    # One stand-in attempt per kind of group lets the record judge each task's status as history does.
    tasks = digest.tasks_of(run.plan, run.status, scan.groups)
    record = render_record(
        run.header, tasks, RUN_DOCUMENT_RECORD_VERSION, record_partition_keys=run.record_partition_keys
    )
    by_asset = _counts_by_asset(scan.groups, interrupted=run.status == "interrupted")
    for task in record["tasks"]:
        task["counts"] = by_asset.get(task["asset"], _zero_counts())
        task["attempts"] = []
    record["counts"] = {**_zero_counts(), **run.counts}  # the digest counted the run's attempts from the same scan
    return run, record


def _zero_counts() -> dict[str, int]:
    return {"success": 0, "failed": 0, "skipped": 0, "cancelled": 0}


def _counts_by_asset(groups: tuple[AttemptGroup, ...], *, interrupted: bool) -> dict[str, dict[str, int]]:
    """Attempts per asset and status as the record counts them (a dead run's ``running`` ones are interrupted)."""
    counts: dict[str, dict[str, int]] = {}
    for group in groups:
        status = "interrupted" if interrupted and group.status == "running" else group.status
        asset = counts.setdefault(group.asset, _zero_counts())
        asset[status] = asset.get(status, 0) + group.count
    return counts


def _launch_document(launch: TriggerLaunch) -> dict[str, Any]:
    return {
        "kind": "trigger",
        "flow": launch.flow,
        "request": launch.request_id,
        "try": launch.attempt,
        "follows_run_id": launch.follows_run_id,
    }
