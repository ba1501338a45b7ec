"""Run history rows built from records and records rebuilt from rows, without I/O.

Kept apart from `SqlRunHistory` so the store's class holds transactions and
queries only; what a row holds, and how a run, its attempts and their
invocations read back, can be followed (and changed) here on its own.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, select

from partita.definitions.launch import Tags
from partita.results.model import FailureInfo
from partita.results.record import AttemptRecord, InvocationRecord, RunHeader, TaskRecord
from partita.store.protocol import ProgressBatch, RunFilter, RunStart, StoredRun
from partita.store.rows import utc_datetime
from partita.store.schema import run_tags, runs

__all__ = [
    "RUN_START_COLUMNS",
    "attempt_records",
    "filtered",
    "progress_rows",
    "replayed",
    "run_start_row",
    "stored_run",
    "task_records",
]

#: The runs columns a run's start writes, in `run_start_row` order.
RUN_START_COLUMNS = (
    "run_id", "status", "started_at", "targets", "selection_kind", "domain", "key_count", "attempt_count",
    "plan", "record_partition_keys", "owner_host", "owner_pid", "owner_token", "heartbeat_at",
    "launched_by", "flow_name",
)  # fmt: skip


def replayed(batch: ProgressBatch) -> ProgressBatch:
    """The batch as a retry writes it: its first write may have committed."""
    return batch if batch.replay else dataclasses.replace(batch, replay=True)


def run_start_row(run: RunStart) -> tuple[Any, ...]:
    """The runs row of a run that starts, in `RUN_START_COLUMNS` order."""
    plan = run.plan
    started = run.started_at.timestamp()
    return (
        run.run_id,
        "running",
        started,
        json.dumps(plan["targets"]),
        plan["selection"]["kind"],
        plan["selection"]["domain"],
        plan["selection"]["key_count"],
        plan["attempt_count"],
        json.dumps(plan),
        run.record_partition_keys,
        run.owner_host,
        run.owner_pid,
        run.owner_token,
        started,
        run.launch.kind.value,
        run.launch.flow_name,
    )


def filtered(query: Select[Any], where: RunFilter | None) -> Select[Any]:
    """``query`` over runs restricted to the runs ``where`` describes (each tag is one indexed lookup)."""
    if where is None:
        return query
    if where.flow_name is not None:
        query = query.where(runs.c.flow_name == where.flow_name)
    if where.launched_by is not None:
        query = query.where(runs.c.launched_by == where.launched_by)
    if where.since is not None:
        query = query.where(runs.c.started_at >= where.since)
    if where.before is not None:
        query = query.where(runs.c.started_at < where.before)
    for key, value in where.tags:
        tagged = select(run_tags.c.run_id).where(run_tags.c.key == key, run_tags.c.value == value)
        query = query.where(runs.c.run_id.in_(tagged))
    return query


def _attempt_row(run_id: str, record: AttemptRecord) -> tuple[Any, ...]:
    failure = record.failure
    return (
        run_id,
        record.asset,
        record.index,
        record.status,
        record.reason,
        record.partition_key_present,
        record.partition_key,
        len(record.invocations),
        record.started_at,
        record.finished_at,
        record.duration,
        None if failure is None else failure.type,
        None if failure is None else failure.message,
        None if failure is None else failure.traceback,
        json.dumps(record.blocked_by) if record.blocked_by else None,
        record.resolution,
        record.materialization_id,
    )


def progress_rows(run_id: str, records: Sequence[AttemptRecord]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Attempt rows (the latest record of each attempt) and the invocation rows they need."""
    latest: dict[tuple[str, int], AttemptRecord] = {}
    for record in records:
        latest[(record.asset, record.index)] = record
    attempt_rows: list[tuple[Any, ...]] = []
    invocation_rows: list[tuple[Any, ...]] = []
    for record in latest.values():
        attempt_rows.append(_attempt_row(run_id, record))
        # One successful invocation is fully described by its attempt row;
        # only retried or failed attempts need invocation rows.
        if len(record.invocations) > 1 or (record.invocations and not record.invocations[0].succeeded):
            invocation_rows.extend(
                (
                    run_id,
                    record.asset,
                    record.index,
                    invocation.number,
                    invocation.started_at,
                    invocation.finished_at,
                    invocation.succeeded,
                    invocation.failure_type,
                    invocation.failure_message,
                )
                for invocation in record.invocations
            )
    return attempt_rows, invocation_rows


def stored_run(row: Any, status: str, counts: dict[str, int], tags: Tags = ()) -> StoredRun:
    """A runs row read back, with its status as history shows it and its attempt counts by status."""
    summary = json.loads(row.summary) if row.summary else {}
    if status == "interrupted" and "running" in counts:
        counts = dict(counts)
        counts["interrupted"] = counts.pop("running")
    header = RunHeader(
        run_id=row.run_id,
        status=status,
        started_at=utc_datetime(row.started_at),  # type: ignore[arg-type]
        finished_at=utc_datetime(row.finished_at),
        targets=tuple(json.loads(row.targets)),
        selection_kind=row.selection_kind,
        domain=row.domain,
        key_count=row.key_count,
        resources=summary.get("resources", {}),
        callback_errors=tuple(summary.get("callback_errors", ())),
        discovered_key_counts=summary.get("discovered_key_counts", {}),
    )
    return StoredRun(
        header=header,
        attempt_count=row.attempt_count,
        plan=json.loads(row.plan),
        record_partition_keys=bool(row.record_partition_keys),
        counts=counts,
        launched_by=row.launched_by,
        flow_name=row.flow_name,
        tags=tags,
        cancel_requested_at=row.cancel_requested_at,
    )


def _invocations_of(
    attempt: Any, by_attempt: dict[tuple[str, int], list[InvocationRecord]]
) -> tuple[InvocationRecord, ...]:
    stored = by_attempt.get((attempt.asset, attempt.idx))
    if stored:
        return tuple(stored)
    if attempt.invocations == 1:  # a single invocation lives on the attempt row
        succeeded = attempt.status == "success"
        return (
            InvocationRecord(
                1,
                attempt.started_at,
                attempt.finished_at,
                succeeded,
                None if succeeded else attempt.failure_type,
                None if succeeded else attempt.failure_message,
            ),
        )
    return ()


def _attempt_record(
    att: Any, run_status: str, by_attempt: dict[tuple[str, int], list[InvocationRecord]]
) -> AttemptRecord:
    status = att.status
    if status == "running" and run_status == "interrupted":
        status = "interrupted"
    failure = None
    if att.failure_type is not None:
        failure = FailureInfo(att.failure_type, att.failure_message or "", att.failure_traceback or "")
    return AttemptRecord(
        asset=att.asset,
        index=att.idx,
        partition_key_present=bool(att.partition_key_present),
        status=status,
        reason=att.reason,
        partition_key=att.partition_key,
        blocked_by=tuple((a, i) for a, i in json.loads(att.blocked_by)) if att.blocked_by else (),
        invocations=_invocations_of(att, by_attempt),
        started_at=att.started_at,
        finished_at=att.finished_at,
        duration=att.duration,
        failure=failure,
        resolution=att.resolution,
        materialization_id=att.materialization_id,
    )


def attempt_records(
    run_status: str, attempt_rows: Sequence[Any], invocation_rows: Sequence[Any]
) -> list[AttemptRecord]:
    """Attempt rows as history shows them, each with its invocation rows (any order)."""
    by_attempt: dict[tuple[str, int], list[InvocationRecord]] = {}
    for inv in invocation_rows:
        by_attempt.setdefault((inv.asset, inv.idx), []).append(
            InvocationRecord(
                inv.number,
                inv.started_at,
                inv.finished_at,
                bool(inv.succeeded),
                inv.failure_type,
                inv.failure_message,
            )
        )
    for invocations_of_attempt in by_attempt.values():
        invocations_of_attempt.sort(key=lambda invocation: invocation.number)
    return [_attempt_record(att, run_status, by_attempt) for att in attempt_rows]


def task_records(
    plan: dict[str, Any], run_status: str, attempt_rows: Sequence[Any], invocation_rows: Sequence[Any]
) -> list[TaskRecord]:
    """The plan's tasks with their attempts (rows in asset and index order) as history shows them."""
    by_asset: dict[str, list[AttemptRecord]] = {}
    for record in attempt_records(run_status, attempt_rows, invocation_rows):
        by_asset.setdefault(record.asset, []).append(record)
    empty = plan["selection"]["kind"] == "empty"

    def skip_reason(task: dict[str, Any]) -> str | None:
        if empty and task["partitioned"]:
            return "no_partition_keys"
        # A cancelled run wrote every attempt it had: a task with none never got its keys.
        return "cancelled" if run_status == "cancelled" and task["name"] not in by_asset else None

    return [
        TaskRecord(
            asset=task["name"],
            partitioned=task["partitioned"],
            attempts=tuple(by_asset.get(task["name"], ())),
            skip_reason=skip_reason(task),
        )
        for task in plan["tasks"]
    ]
