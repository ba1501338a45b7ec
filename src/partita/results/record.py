"""Portable run records: JSON-safe projections of a RunResult (SPEC §6).

Records keep whether an attempt had a partition key, never the raw key.
Failure messages and tracebacks are application text and can still repeat
sensitive values: records are diagnostics, not redacted data.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from partita.results.model import AttemptResult, AttemptStatus, FailureInfo

if TYPE_CHECKING:
    from partita.results.model import RunResult

__all__ = ["RECORD_SCHEMA", "SUPPORTED_RECORD_VERSIONS", "run_record"]

RECORD_SCHEMA = "partita.run-record"
SUPPORTED_RECORD_VERSIONS = (1,)


def _timestamp(value: dt.datetime | float | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, float):
        value = dt.datetime.fromtimestamp(value, dt.UTC)
    return value.isoformat()


def _failure(failure: FailureInfo | None) -> dict[str, str] | None:
    if failure is None:
        return None
    return {"type": failure.type, "message": failure.message, "traceback": failure.traceback}


def _counts(statuses: dict[AttemptStatus, int]) -> dict[str, int]:
    return {status.value: count for status, count in statuses.items()}


def run_record(result: RunResult, version: int = 1) -> dict[str, Any]:
    """Project ``result`` into the portable record of the given version."""
    if isinstance(version, bool) or version not in SUPPORTED_RECORD_VERSIONS:
        supported = ", ".join(map(str, SUPPORTED_RECORD_VERSIONS))
        raise ValueError(f"record version must be one of {supported}")

    def attempt_record(attempt: AttemptResult) -> dict[str, Any]:
        return {
            "index": attempt.index,
            "partition_key_present": attempt.partition_key_present,
            "status": attempt.status.value,
            "reason": None if attempt.reason is None else attempt.reason.value,
            "blocked_by": [{"asset": blocker.asset_name, "attempt": blocker.index} for blocker in attempt.blocked_by],
            "invocations": len(attempt.invocations),
            "started_at": _timestamp(attempt.started_at),
            "finished_at": _timestamp(attempt.finished_at),
            "duration_seconds": attempt.duration,
            "failure": _failure(attempt.failure),
        }

    plan = result.plan
    return {
        "schema": RECORD_SCHEMA,
        "version": version,
        "run_id": result.run_id,
        "status": result.status.value,
        "started_at": _timestamp(result.started_at),
        "finished_at": _timestamp(result.finished_at),
        "duration_seconds": result.duration,
        "targets": list(plan.targets),
        "selection": {
            "kind": plan.selection.kind.value,
            "domain": plan.selection.domain,
            "key_count": plan.selection.key_count,
        },
        "counts": _counts(result.counts()),
        "tasks": [
            {
                "asset": task.asset_name,
                "partitioned": task.partitioned,
                "status": task.status.value,
                "reason": None if task.reason is None else task.reason.value,
                "counts": _counts(task.counts()),
                "attempts": [attempt_record(attempt) for attempt in task.attempts],
            }
            for task in result.tasks.values()
        ],
    }
