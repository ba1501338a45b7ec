"""The run's result: assembled from the attempt graph once the run settles or is cancelled.

Apart from the coordinator because it reads every collaborator's record (task
results, gate statistics, receipts, discoveries, invocations under way) and
changes none of them, except marking what a cancellation left unfinished.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Mapping, Sequence
from typing import Any

from partita.events.emission import EventLog, RunLiveness
from partita.events.model import EmissionReceipt
from partita.execution.admission import ResourceGate
from partita.execution.attempt_logs import RunLogs
from partita.execution.discovery import FanOut
from partita.execution.events import ObserverFanout
from partita.execution.graph import TaskState, Token
from partita.execution.readiness import attempt_result
from partita.planning.plan import FlowPlan
from partita.results.model import (
    AttemptStatus,
    CallbackError,
    FailureInfo,
    Invocation,
    RunResult,
    RunStatus,
    SkipReason,
    TaskResult,
)

__all__ = ["RunResultBuilder"]

#: The last invocation of a started attempt that the run's cancellation cut short.
_CUT_SHORT = FailureInfo.from_exception(asyncio.CancelledError("the run was cancelled while this invocation ran"))


class RunResultBuilder:
    """Builds the `RunResult` of one run from its tasks, gates, receipts and event log."""

    def __init__(
        self,
        plan: FlowPlan,
        tasks: Sequence[TaskState],
        run_id: str,
        *,
        gates: Mapping[str, ResourceGate],
        event_log: EventLog,
        receipts: list[EmissionReceipt],
        liveness: RunLiveness,
        fan_out: FanOut | None,
        observers: ObserverFanout,
        retry_history: Mapping[Token, list[Invocation]],
        in_flight: Mapping[Token, float],
        logs: RunLogs | None = None,
    ) -> None:
        self._plan = plan
        self._tasks = tasks
        self._run_id = run_id
        self._gates = gates
        self._event_log = event_log
        self._receipts = receipts
        self._liveness = liveness
        self._fan_out = fan_out
        self._observers = observers
        self._retry_history = retry_history
        self._in_flight = in_flight
        self._logs = logs

    def build(
        self, started_at: dt.datetime, callback_errors: Sequence[CallbackError], *, failed: bool = False
    ) -> RunResult:
        """The result as the attempts stand; ``failed`` whatever they say (a scheduler fault ended the run)."""
        tasks: dict[str, TaskResult] = {}
        any_failed = any_cancelled = False
        for task in self._tasks:
            attempts = tuple(result for result in task.results if result is not None)
            for attempt in attempts:
                if attempt.status is AttemptStatus.FAILED:
                    any_failed = True
                elif attempt.status is AttemptStatus.CANCELLED:
                    any_cancelled = True
            empty_reason = None
            if task.partitioned and task.size == 0:
                empty_reason = task.empty_reason or SkipReason.NO_PARTITION_KEYS
            tasks[task.name] = TaskResult(task.name, task.partitioned, attempts, empty_reason)
        any_failed = any_failed or failed
        status = RunStatus.CANCELLED if any_cancelled else RunStatus.FAILED if any_failed else RunStatus.SUCCESS
        events, events_error = self._published_events()
        return RunResult(
            run_id=self._run_id,
            status=status,
            started_at=started_at,
            finished_at=dt.datetime.now(dt.UTC),
            tasks=tasks,
            plan=self._plan,
            resources={name: gate.statistics() for name, gate in self._gates.items()},
            callback_errors=tuple(callback_errors),
            events=events,
            events_error=events_error,
            receipts=tuple(self._receipts),
            discoveries={} if self._fan_out is None else dict(self._fan_out.discoveries),
            attempt_logs={} if self._logs is None else self._logs.snapshot(),
        )

    def _published_events(self) -> tuple[tuple[Any, ...], FailureInfo | None]:
        """The events this run published, read back from the log, and why that failed if it did.

        Asked of the log, not of local receipts, when worker processes may have
        emitted. The read is a report, not part of the outcome: a failure
        (an undecodable value, a lost connection after the store's retries)
        leaves ``events`` empty and the run's status, and its recording, intact.
        """
        if not (self._receipts or self._liveness.exported):
            return (), None
        try:
            return self._event_log.events_of_run(self._run_id), None
        except Exception as exc:  # noqa: BLE001 - RecursionError and StoreError alike
            return (), FailureInfo.from_exception(exc)

    def cancel_unfinished(self) -> None:
        """Mark every attempt without a result cancelled (a discovery that never finished too)."""
        self._name_undiscovered(SkipReason.CANCELLED)
        self._end_unfinished(AttemptStatus.CANCELLED, _CUT_SHORT, reason=SkipReason.CANCELLED)

    def fail_unfinished(self, fault: BaseException) -> None:
        """After a scheduler fault: every attempt without a result failed with it (a discovery left unfinished too)."""
        self._name_undiscovered(SkipReason.PARTITION_NOT_DISCOVERED)
        failure = FailureInfo.from_exception(fault)
        self._end_unfinished(AttemptStatus.FAILED, failure, exception=fault, failure=failure)

    def _name_undiscovered(self, reason: SkipReason) -> None:
        """Why a task whose keys a discovery was still to give has none (not one whose discovery ended or failed)."""
        for task in self._tasks:
            if task.deferred and task.size == 0 and task.empty_reason is None:
                task.empty_reason = reason

    def _end_unfinished(self, status: AttemptStatus, cut_short: FailureInfo, **fields: Any) -> None:
        """Give every attempt without a result ``status``, and tell the observers (the journal among them)."""
        for task in self._tasks:
            for key_index in range(task.size):
                if task.results[key_index] is None:
                    ended = attempt_result(
                        task,
                        key_index,
                        status,
                        invocations=self._unfinished_invocations((task, key_index), cut_short),
                        **fields,
                    )
                    task.results[key_index] = ended
                    self._observers.attempt_finished(self._run_id, ended)

    def _unfinished_invocations(self, token: Token, cut_short: FailureInfo) -> tuple[Invocation, ...]:
        """Earlier invocations, plus the one the run's end cut short (``cut_short``) if the body had started.

        An attempt with no invocations never started.
        """
        earlier = tuple(self._retry_history.get(token, ()))
        started = self._in_flight.get(token)
        if started is None:
            return earlier
        return (*earlier, Invocation(len(earlier) + 1, started, max(started, time.time()), False, cut_short))
