"""Portable run records: JSON-safe projections of a run (SPEC §6).

A live `RunResult` and a run read back from the store project into the same
record through the same neutral rows (`RunHeader`, `AttemptRecord`), so the
document does not depend on where the run came from.

Versions add sections and never change earlier fields:

- 1: run header, tasks, attempts (status, reason, blockers, timing, failure);
- 2: each attempt's invocations in detail;
- 3: resource statistics and callback errors;
- 4: materialization provenance (resolution and materialization id), and
  the number of keys each discovering producer declared.

Every version reports a task none of whose attempts began before the run
was cancelled or interrupted as ``not_started`` (its attempts, if any, are
``cancelled`` with no invocations); a started attempt that the cancellation
cut short lists that invocation.

Records keep whether an attempt had a partition key, never the raw key,
unless the caller opts in (``record_partition_keys=True``; then the canonical
key text is included). Failure messages and tracebacks are application text
and can repeat sensitive values: records are diagnostics, not redacted data.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from partita.results.attempts import (
    AttemptResult,
    AttemptStatus,
    FailureInfo,
    Resolution,
    SkipReason,
    task_never_started,
)


class LiveRun(Protocol):
    """What a record needs of a live run: `partita.results.model.RunResult` provides it."""

    run_id: str
    status: Any  # RunStatus
    started_at: dt.datetime
    finished_at: dt.datetime | None
    plan: Any  # the FlowPlan that ran
    resources: Mapping[str, Any]
    callback_errors: Sequence[Any]
    discoveries: Mapping[str, Any]
    tasks: Mapping[str, Any]

__all__ = [
    "AttemptRecord",
    "InvocationRecord",
    "RECORD_SCHEMA",
    "RunHeader",
    "SUPPORTED_RECORD_VERSIONS",
    "TaskRecord",
    "NOT_STARTED",
    "RESOLUTION_TEXT",
    "attempt_document",
    "attempt_record_of",
    "render_record",
    "run_record",
    "task_status",
]

RECORD_SCHEMA = "partita.run-record"
SUPPORTED_RECORD_VERSIONS = (1, 2, 3, 4)
LATEST_RECORD_VERSION = 4
_STATUS_ORDER = ("failed", "interrupted", "running", "cancelled", "skipped", "success")
#: Task status of a task none of whose attempts began before the run stopped.
NOT_STARTED = "not_started"
_UNFINISHED_RUN_STATUSES = ("running", "interrupted", "cancelled")


class InvocationRecord(NamedTuple):
    number: int
    started_at: float | None
    finished_at: float | None
    succeeded: bool
    failure_type: str | None = None
    failure_message: str | None = None


class AttemptRecord(NamedTuple):
    """One attempt as it is stored and recorded: no raw key unless opted in.

    A named tuple rather than a frozen dataclass: the store's journal builds
    one per attempt, and tuple construction is several times cheaper.
    """

    asset: str
    index: int
    partition_key_present: bool
    status: str
    reason: str | None = None
    partition_key: str | None = None
    blocked_by: tuple[tuple[str, int], ...] = ()
    invocations: tuple[InvocationRecord, ...] = ()
    started_at: float | None = None
    finished_at: float | None = None
    duration: float = 0.0
    failure: FailureInfo | None = None
    resolution: str | None = None
    materialization_id: str | None = None


@dataclass(frozen=True, slots=True)
class TaskRecord:
    asset: str
    partitioned: bool
    attempts: tuple[AttemptRecord, ...]
    skip_reason: str | None = None


@dataclass(frozen=True, slots=True)
class RunHeader:
    run_id: str
    status: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    targets: tuple[str, ...]
    selection_kind: str
    domain: str | None
    key_count: int
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    callback_errors: tuple[dict[str, Any], ...] = ()
    #: Discovering producer -> how many keys it declared (counts only, never the keys).
    discovered_key_counts: dict[str, int] = field(default_factory=dict)


def _iso(value: dt.datetime | float | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        value = dt.datetime.fromtimestamp(value, dt.UTC)
    return value.isoformat()


def _failure(failure: FailureInfo | None) -> dict[str, str] | None:
    if failure is None:
        return None
    return {"type": failure.type, "message": failure.message, "traceback": failure.traceback}


_STATUS_TEXT = {status: status.value for status in AttemptStatus}
_REASON_TEXT: dict[SkipReason | None, str | None] = {reason: reason.value for reason in SkipReason}
_REASON_TEXT[None] = None
#: How a resolution is stored and recorded (None: no resolution).
RESOLUTION_TEXT: dict[Resolution | None, str | None] = {resolution: resolution.value for resolution in Resolution}
RESOLUTION_TEXT[None] = None


def attempt_record_of(attempt: AttemptResult, key_text: Callable[[Any], str] | None = None) -> AttemptRecord:
    """Project a live attempt; ``key_text`` (opt-in) formats its raw key."""
    runs = attempt.invocations
    if len(runs) == 1 and runs[0].failure is None and not attempt.blocked_by:
        # The common case, kept lean: one successful invocation.
        only = runs[0]
        return AttemptRecord(
            attempt.asset_name,
            attempt.index,
            attempt.partition_key_present,
            _STATUS_TEXT[attempt.status],
            _REASON_TEXT[attempt.reason],
            key_text(attempt.partition_key) if key_text and attempt.partition_key_present else None,
            (),
            (InvocationRecord(only.number, only.started_at, only.finished_at, only.succeeded),),
            only.started_at,
            only.finished_at,
            only.finished_at - only.started_at,
            attempt.failure,
            RESOLUTION_TEXT[attempt.resolution],
            attempt.materialization_id,
        )
    invocations = tuple(
        InvocationRecord(
            number=invocation.number,
            started_at=invocation.started_at,
            finished_at=invocation.finished_at,
            succeeded=invocation.succeeded,
            failure_type=None if invocation.failure is None else invocation.failure.type,
            failure_message=None if invocation.failure is None else invocation.failure.message,
        )
        for invocation in attempt.invocations
    )
    return AttemptRecord(
        asset=attempt.asset_name,
        index=attempt.index,
        partition_key_present=attempt.partition_key_present,
        status=_STATUS_TEXT[attempt.status],
        reason=_REASON_TEXT[attempt.reason],
        partition_key=key_text(attempt.partition_key) if key_text and attempt.partition_key_present else None,
        blocked_by=tuple((blocker.asset_name, blocker.index) for blocker in attempt.blocked_by),
        invocations=invocations,
        started_at=attempt.started_at,
        finished_at=attempt.finished_at,
        duration=attempt.duration,
        failure=attempt.failure,
        resolution=RESOLUTION_TEXT[attempt.resolution],
        materialization_id=attempt.materialization_id,
    )


def _counts(attempts: Sequence[AttemptRecord]) -> dict[str, int]:
    counts = {"success": 0, "failed": 0, "skipped": 0, "cancelled": 0}
    for attempt in attempts:
        counts[attempt.status] = counts.get(attempt.status, 0) + 1
    return counts


def task_status(task: TaskRecord, run_status: str) -> str:
    """The most severe attempt status, or ``not_started`` / ``skipped`` for a task that never ran.

    ``not_started``: the run was cancelled, interrupted or is still running
    and none of the task's attempts began (it has none yet, or only
    cancelled ones without an invocation). ``skipped``: a finished run
    selected no keys for it.
    """
    pairs = ((attempt.status, len(attempt.invocations)) for attempt in task.attempts)
    if task_never_started(pairs, task.skip_reason, run_unfinished=run_status in _UNFINISHED_RUN_STATUSES):
        return NOT_STARTED
    if not task.attempts:
        return "skipped"
    present = {attempt.status for attempt in task.attempts}
    return next((status for status in _STATUS_ORDER if status in present), "success")


def attempt_document(attempt: AttemptRecord, version: int, with_keys: bool) -> dict[str, Any]:
    document: dict[str, Any] = {
        "index": attempt.index,
        "partition_key_present": attempt.partition_key_present,
        "status": attempt.status,
        "reason": attempt.reason,
        "blocked_by": [{"asset": asset, "attempt": index} for asset, index in attempt.blocked_by],
        "invocations": len(attempt.invocations),
        "started_at": _iso(attempt.started_at),
        "finished_at": _iso(attempt.finished_at),
        "duration_seconds": attempt.duration,
        "failure": _failure(attempt.failure),
    }
    if with_keys:
        document["partition_key"] = attempt.partition_key
    if version >= 2:
        document["invocation_details"] = [
            {
                "number": invocation.number,
                "started_at": _iso(invocation.started_at),
                "finished_at": _iso(invocation.finished_at),
                "succeeded": invocation.succeeded,
                "failure": None
                if invocation.failure_type is None
                else {"type": invocation.failure_type, "message": invocation.failure_message or ""},
            }
            for invocation in attempt.invocations
        ]
    if version >= 4:
        document["resolution"] = attempt.resolution
        document["materialization_id"] = attempt.materialization_id
    return document


def _task_document(task: TaskRecord, header: RunHeader, version: int, with_keys: bool) -> dict[str, Any]:
    document: dict[str, Any] = {
        "asset": task.asset,
        "partitioned": task.partitioned,
        "status": task_status(task, header.status),
        "reason": task.skip_reason if not task.attempts else None,
        "counts": _counts(task.attempts),
        "attempts": [attempt_document(attempt, version, with_keys) for attempt in task.attempts],
    }
    if version >= 4 and task.asset in header.discovered_key_counts:
        document["discovered_key_count"] = header.discovered_key_counts[task.asset]
    return document


def render_record(
    header: RunHeader, tasks: Sequence[TaskRecord], version: int = 1, *, record_partition_keys: bool = False
) -> dict[str, Any]:
    """The portable record document of the given version."""
    if type(version) is not int or version not in SUPPORTED_RECORD_VERSIONS:
        supported = ", ".join(map(str, SUPPORTED_RECORD_VERSIONS))
        raise ValueError(f"record version must be one of {supported}")
    all_attempts = [attempt for task in tasks for attempt in task.attempts]
    finished = header.finished_at
    document: dict[str, Any] = {
        "schema": RECORD_SCHEMA,
        "version": version,
        "run_id": header.run_id,
        "status": header.status,
        "started_at": _iso(header.started_at),
        "finished_at": _iso(finished),
        "duration_seconds": None if finished is None else (finished - header.started_at).total_seconds(),
        "targets": list(header.targets),
        "selection": {"kind": header.selection_kind, "domain": header.domain, "key_count": header.key_count},
        "partition_keys_recorded": record_partition_keys,
        "counts": _counts(all_attempts),
        "tasks": [_task_document(task, header, version, record_partition_keys) for task in tasks],
    }
    if version >= 3:
        document["resources"] = header.resources
        document["callback_errors"] = list(header.callback_errors)
    return document


def run_header_of(result: LiveRun) -> RunHeader:
    plan = result.plan
    return RunHeader(
        run_id=result.run_id,
        status=result.status.value,
        started_at=result.started_at,
        finished_at=result.finished_at,
        targets=plan.targets,
        selection_kind=plan.selection.kind.value,
        domain=plan.selection.domain,
        key_count=plan.selection.key_count,
        resources={
            name: {
                "invocations": stats.invocations,
                "succeeded": stats.succeeded,
                "failed": stats.failed,
                "retries": stats.retries,
                "wait_count": stats.wait_count,
                "wait_duration_seconds": stats.wait_duration,
                "invocation_duration_seconds": stats.invocation_duration,
            }
            for name, stats in result.resources.items()
        },
        callback_errors=tuple(
            {
                "callback": error.callback,
                "asset": error.asset_name,
                "partition_key_present": error.partition_key_present,
                "failure": _failure(error.failure),
            }
            for error in result.callback_errors
        ),
        discovered_key_counts={asset: len(keys) for asset, keys in result.discoveries.items()},
    )


def run_record(result: LiveRun, version: int = 1, *, record_partition_keys: bool = False) -> dict[str, Any]:
    """Project a live ``result`` into the portable record of the given version."""
    formats = {
        task.name: task.definition.partition_def.format_key
        for task in result.plan.tasks
        if record_partition_keys and task.definition.partition_def is not None
    }
    tasks = [
        TaskRecord(
            asset=task.asset_name,
            partitioned=task.partitioned,
            attempts=tuple(attempt_record_of(attempt, formats.get(task.asset_name)) for attempt in task.attempts),
            skip_reason=None if task.reason is None else task.reason.value,
        )
        for task in result.tasks.values()
    ]
    return render_record(run_header_of(result), tasks, version, record_partition_keys=record_partition_keys)
