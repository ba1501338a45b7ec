"""Typed outcomes of a run: `RunResult`, `TaskResult`, `AttemptResult` (SPEC §6, §14)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from partita.events.model import AssetEvent, EmissionReceipt
    from partita.partitions.runtime import PartitionKey
    from partita.planning.plan import FlowPlan

from partita.errors import SelectionError
from partita.partitions.base import apply_key_rule
from partita.results.attempts import (
    AttemptResult,
    AttemptStatus,
    FailureInfo,
    Invocation,
    Resolution,
    RunStatus,
    SkipReason,
    task_never_started,
)
from partita.results.deferred import resolved
from partita.results.logs import LogLine, LogRow
from partita.results.record import run_record

__all__ = [
    "AttemptResult",
    "AttemptStatus",
    "CallbackError",
    "FailureInfo",
    "Invocation",
    "Resolution",
    "ResourceStatistics",
    "RunResult",
    "RunStatus",
    "SkipReason",
    "TaskResult",
]


@dataclass(frozen=True, slots=True)
class ResourceStatistics:
    """Run-level figures for one resource (a frozen snapshot).

    ``wait_count``/``wait_duration`` count attempts that were ready and were
    denied by this resource's policy, timed from the first denial to the
    start; they exclude dependency waits and global-only queueing.
    """

    name: str
    invocations: int
    succeeded: int
    failed: int
    retries: int
    wait_count: int
    wait_duration: float
    invocation_duration: float


@dataclass(frozen=True, slots=True, eq=False)
class CallbackError:
    """A lifecycle callback that raised; recorded, never changing an outcome."""

    callback: str
    asset_name: str | None
    partition_key_present: bool
    exception: BaseException = field(repr=False)
    failure: FailureInfo = field(repr=False)


_SEVERITY = (AttemptStatus.FAILED, AttemptStatus.CANCELLED, AttemptStatus.SKIPPED, AttemptStatus.SUCCESS)
_STATUSES = tuple(AttemptStatus)


def _counted(statuses: list[AttemptStatus]) -> dict[AttemptStatus, int]:
    """Attempts per status, every status present: counted by identity (an enum member hashes in Python)."""
    return {status: statuses.count(status) for status in _STATUSES}


@dataclass(frozen=True, slots=True, eq=False)
class TaskResult:
    """All attempts of one asset, in selection order."""

    asset_name: str
    partitioned: bool
    attempts: tuple[AttemptResult, ...]
    skip_reason: SkipReason | None = None

    @property
    def status(self) -> AttemptStatus:
        """The most severe attempt status: failed, cancelled, skipped, success.

        A partitioned task with no attempts (deliberately empty selection) is
        skipped.
        """
        if not self.attempts:
            return AttemptStatus.SKIPPED
        present = {attempt.status for attempt in self.attempts}
        return next(status for status in _SEVERITY if status in present)

    @property
    def reason(self) -> SkipReason | None:
        if not self.attempts:
            return self.skip_reason
        return None

    @property
    def never_started(self) -> bool:
        """True when the run was cancelled before any of this task's attempts began.

        Its attempts are then all cancelled without an invocation (a
        runtime-domain task whose discovery never finished has none). A
        started attempt that the cancellation cut short lists that invocation.
        """
        return task_never_started(((a.status, len(a.invocations)) for a in self.attempts), self.skip_reason)

    def __repr__(self) -> str:
        return (
            f"TaskResult(asset_name={self.asset_name!r}, status={self.status.value}, attempts={len(self.attempts)})"
        )

    def counts(self) -> dict[AttemptStatus, int]:
        return _counted([attempt.status for attempt in self.attempts])


@dataclass(frozen=True, slots=True, eq=False)
class RunResult:
    """The live result of one run; keeps outputs and original key objects."""

    run_id: str
    status: RunStatus
    started_at: dt.datetime
    finished_at: dt.datetime
    tasks: Mapping[str, TaskResult]
    plan: FlowPlan = field(repr=False)
    resources: Mapping[str, ResourceStatistics] = field(default_factory=dict)
    callback_errors: tuple[CallbackError, ...] = ()
    #: Events this run published from bodies and callbacks (outlet events live in the store).
    events: tuple[AssetEvent, ...] = ()
    #: Every receipt `emit` returned during the run, duplicates included.
    receipts: tuple[EmissionReceipt, ...] = ()
    #: Discovering producer -> the keys it declared, in discovery order.
    discoveries: Mapping[str, tuple[PartitionKey, ...]] = field(default_factory=dict)
    #: Why `events` is empty although the run published events: reading them back
    #: failed. The run's outcome and its recording do not depend on that read.
    events_error: FailureInfo | None = field(default=None, repr=False)
    #: (asset, attempt index) -> the attempt's kept log lines; application data, never in a record.
    #: Plain `LogRow` tuples, as the run kept them; `logs` names their fields.
    attempt_logs: Mapping[tuple[str, int], tuple[LogRow, ...]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", MappingProxyType(dict(self.tasks)))
        object.__setattr__(self, "resources", MappingProxyType(dict(self.resources)))
        object.__setattr__(self, "discoveries", MappingProxyType(dict(self.discoveries)))
        object.__setattr__(self, "attempt_logs", MappingProxyType(dict(self.attempt_logs)))

    def __repr__(self) -> str:
        # A summary: a full repr of a 300,000-attempt run would be enormous.
        attempts = sum(len(task.attempts) for task in self.tasks.values())
        return f"RunResult(run_id={self.run_id!r}, status={self.status.value}, tasks={len(self.tasks)}, attempts={attempts})"

    @property
    def duration(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()

    @property
    def succeeded(self) -> bool:
        return self.status is RunStatus.SUCCESS

    def attempts(self) -> Iterator[AttemptResult]:
        """Every attempt, task by task in plan order."""
        for task in self.tasks.values():
            yield from task.attempts

    def counts(self) -> dict[AttemptStatus, int]:
        return _counted([attempt.status for task in self.tasks.values() for attempt in task.attempts])

    def output(self, asset_name: str, partition_key: Any = None) -> Any:
        """Convenience: the output of one successful attempt.

        ``partition_key`` is taken as a selection takes it: a key object or
        its canonical text (``"2026-08-08"`` for a date). A key the definition
        rejects is a `SelectionError` naming the rule; a valid key this run
        did not attempt is a ``LookupError``. An output a Dask cluster kept
        is fetched from it here (a released one is a ``LookupError``).
        """
        attempt = self._attempt(asset_name, partition_key)
        if attempt.status is not AttemptStatus.SUCCESS:
            raise LookupError(f"asset {asset_name!r} attempt did not succeed ({attempt.status.value})")
        return resolved(attempt.output)  # an output kept on a cluster is fetched now, once

    def logs(self, asset_name: str, partition_key: Any = None) -> tuple[LogLine, ...]:
        """The log lines one attempt kept (``partition_key`` as `output` takes it), in order.

        Records of ``context.logger`` and, with output capture, stdout and
        stderr lines; a `LogStream.CUT` line stands for the lines cut
        between the head and the tail. Empty for an attempt that logged nothing.
        """
        attempt = self._attempt(asset_name, partition_key)
        return tuple(map(LogLine._make, self.attempt_logs.get((asset_name, attempt.index), ())))

    def _attempt(self, asset_name: str, partition_key: Any) -> AttemptResult:
        task = self.tasks[asset_name]
        definition = self.plan.task(asset_name).definition.partition_def
        wanted = None
        if definition is not None and task.partitioned:
            try:
                key = apply_key_rule(definition, definition.normalize_key, partition_key, "normalize_key")
            except ValueError as exc:
                raise SelectionError(
                    f"partition_key is rejected by asset {asset_name!r} ({definition.domain}): {exc}"
                ) from None
            wanted = definition.key_identity(key)
        for attempt in task.attempts:
            if wanted is None or definition.key_identity(attempt.partition_key) == wanted:  # type: ignore[union-attr]
                return attempt
        raise LookupError(f"asset {asset_name!r} has no attempt for that partition key")

    def _partitioned_task(self, asset_name: str) -> TaskResult:
        task = self.tasks.get(asset_name)
        if task is None:
            raise KeyError(asset_name)
        if not task.partitioned:
            raise ValueError(f"asset {asset_name!r} is not partitioned; it has no partition keys")
        return task

    def failed_partition_keys(self, asset_name: str) -> tuple[Any, ...]:
        """Keys whose attempt ended failed, as original key objects in attempt order.

        A recovered attempt (a retry succeeded) is not failed. Unknown asset:
        ``KeyError``; unpartitioned asset: ``ValueError``.
        """
        task = self._partitioned_task(asset_name)
        return tuple(attempt.partition_key for attempt in task.attempts if attempt.status is AttemptStatus.FAILED)

    def discovered_partition_keys(self, asset_name: str) -> tuple[str, ...]:
        """The keys a discovering producer declared in this run, in discovery order.

        Unknown asset: ``KeyError``; an asset that did not discover: ``ValueError``.
        """
        if asset_name not in self.tasks:
            raise KeyError(asset_name)
        declared = self.discoveries.get(asset_name)
        if declared is None:
            raise ValueError(f"asset {asset_name!r} did not discover partitions in this run")
        return tuple(key.key for key in declared)

    def circuit_skipped_partition_keys(self, asset_name: str) -> tuple[Any, ...]:
        """Keys skipped because their resource's circuit opened, in attempt order.

        Only skips with reason ``resource_circuit_open`` count; dependency
        skips downstream of them do not.
        """
        task = self._partitioned_task(asset_name)
        return tuple(
            attempt.partition_key
            for attempt in task.attempts
            if attempt.status is AttemptStatus.SKIPPED and attempt.reason is SkipReason.RESOURCE_CIRCUIT_OPEN
        )

    def to_record(self, version: int = 1, *, record_partition_keys: bool = False) -> dict[str, Any]:
        """The portable, JSON-safe record of this run, versions 1 to 4.

        Raw partition keys are omitted unless ``record_partition_keys=True``
        (then each attempt carries its canonical key text).
        """
        return run_record(self, version, record_partition_keys=record_partition_keys)
