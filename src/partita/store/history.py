"""Reading history across runs: the comparison behind ``partita runs compare``."""

from __future__ import annotations

from typing import Any

from partita.results.record import TaskRecord, task_status
from partita.store.protocol import Store, StoredRun

__all__ = ["compare_runs"]


#: Attempt statuses whose keys a comparison lists, when the run recorded keys.
_UNSUCCESSFUL = ("failed", "skipped")


def _task_summary(task: TaskRecord, run: StoredRun) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for attempt in task.attempts:
        counts[attempt.status] = counts.get(attempt.status, 0) + 1
    summary: dict[str, Any] = {
        "status": task_status(task, run.status),
        "attempts": len(task.attempts),
        "counts": counts,
        "duration_seconds": sum(attempt.duration for attempt in task.attempts),
    }
    if run.record_partition_keys:
        # Only a run that opted in holds key text; the others say nothing rather than an empty list.
        summary["failed_keys"] = sorted(
            attempt.partition_key
            for attempt in task.attempts
            if attempt.status in _UNSUCCESSFUL and attempt.partition_key is not None
        )
    return summary


def _changes(left: dict[str, Any] | None, right: dict[str, Any] | None) -> list[str]:
    if left is None:
        return ["only in B"]
    if right is None:
        return ["only in A"]
    changes = []
    if left["status"] != right["status"]:
        changes.append(f"status {left['status']} -> {right['status']}")
    if left["attempts"] != right["attempts"]:
        changes.append(f"attempts {left['attempts']} -> {right['attempts']}")
    for status in sorted(set(left["counts"]) | set(right["counts"])):
        before, after = left["counts"].get(status, 0), right["counts"].get(status, 0)
        if before != after and left["attempts"] == right["attempts"]:
            changes.append(f"{status} {before} -> {after}")
    if "failed_keys" in left and "failed_keys" in right:
        before_keys, after_keys = set(left["failed_keys"]), set(right["failed_keys"])
        if after_keys - before_keys:
            changes.append(f"newly failed or skipped: {', '.join(sorted(after_keys - before_keys))}")
        if before_keys - after_keys:
            changes.append(f"no longer failed or skipped: {', '.join(sorted(before_keys - after_keys))}")
    return changes


def _run_summary(run: StoredRun) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "status": run.status,
        "started_at": run.header.started_at.isoformat(),
        "duration_seconds": run.duration,
        "targets": list(run.header.targets),
        "selection": {
            "kind": run.header.selection_kind,
            "domain": run.header.domain,
            "key_count": run.header.key_count,
        },
    }


def compare_runs(store: Store, first: str, second: str) -> dict[str, Any]:
    """Per-asset status, attempts and duration in runs A and B, and what changed."""
    run_a, run_b = store.get_run(first), store.get_run(second)
    tasks_a = {task.asset: _task_summary(task, run_a) for task in store.get_tasks(run_a.run_id)}
    tasks_b = {task.asset: _task_summary(task, run_b) for task in store.get_tasks(run_b.run_id)}
    assets = list(tasks_a) + [name for name in tasks_b if name not in tasks_a]
    rows = []
    for asset in assets:
        left, right = tasks_a.get(asset), tasks_b.get(asset)
        rows.append({"asset": asset, "a": left, "b": right, "changes": _changes(left, right)})
    a, b = _run_summary(run_a), _run_summary(run_b)
    return {
        "a": a,
        "b": b,
        "status_changed": a["status"] != b["status"],
        "duration_delta_seconds": None
        if a["duration_seconds"] is None or b["duration_seconds"] is None
        else b["duration_seconds"] - a["duration_seconds"],
        "assets": rows,
        "changed": any(row["changes"] for row in rows) or a["status"] != b["status"],
    }
