"""Settlement: how an invocation's outcome ends its attempt, or runs it again.

A failure is decided by one small function, `after_failure`, that returns a
typed transition (`RetryScheduled`, `Failed`, `CircuitOpened`, `Skipped`); `Settlement`
applies it. A success needs no transition object: its `AttemptResult` is
built once and settled, because it is the hot path of every attempt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from partita.errors import PartitaError
from partita.execution.admission import ResourceGate
from partita.execution.clock import Clock
from partita.execution.dispatch import Dispatcher
from partita.execution.events import AttemptRetrying, ObserverFanout
from partita.execution.graph import TaskState, Token
from partita.execution.readiness import Readiness, attempt_result
from partita.execution.retries import FailNow, OpenCircuitNow, RetryLater, decide_after_failure
from partita.execution.reuse import OutputReuse
from partita.execution.workers import NO_LOCK
from partita.results.deferred import DeferredOutput, resolved
from partita.results.model import AttemptResult, AttemptStatus, FailureInfo, Invocation, Resolution, SkipReason
from partita.results.plain_success import succeeded_attempt, succeeded_invocation

__all__ = ["CircuitOpened", "Failed", "RetryScheduled", "Settlement", "Skipped", "Transition", "after_failure"]

#: ``(label, task, key_index, exception, invocation number)``: runs an asset's lifecycle callback.
AssetCallback = Callable[[str, TaskState, int, BaseException | None, int], None]


@dataclass(frozen=True, slots=True)
class RetryScheduled:
    """The attempt runs again after ``delay`` seconds; ``history`` holds its invocations so far."""

    history: list[Invocation]
    delay: float
    cooldown_resource: bool


@dataclass(frozen=True, slots=True)
class Failed:
    """The attempt ends failed."""

    exception: BaseException
    failure: FailureInfo
    invocations: tuple[Invocation, ...]


@dataclass(frozen=True, slots=True)
class CircuitOpened:
    """The attempt ends ``failed``, and its failure opens ``gate``'s circuit: nothing queued or retrying starts."""

    failed: Failed
    gate: ResourceGate


@dataclass(frozen=True, slots=True)
class Skipped:
    """The attempt would retry, but its resource's circuit is open: it ends skipped."""

    reason: SkipReason
    history: list[Invocation]


Transition = RetryScheduled | Failed | CircuitOpened | Skipped


def after_failure(
    task: TaskState,
    exc: BaseException,
    earlier: list[Invocation],
    invocation: Invocation,
    *,
    cancelling: bool,
    random: Callable[[], float] | None,
) -> Transition:
    """What the failed ``invocation`` (its failure recorded on it) does to its attempt."""
    gate = task.gate
    decision = decide_after_failure(
        exc,
        invocation.number,
        retry=task.definition.retry,
        resource_name=task.definition.resource,
        resource=None if gate is None else gate.policy,
        random=random,
    )
    history = [*earlier, invocation]
    if isinstance(decision, RetryLater) and not cancelling:
        if gate is not None and gate.circuit_open:
            return Skipped(SkipReason.RESOURCE_CIRCUIT_OPEN, history)
        return RetryScheduled(history, decision.delay, decision.cooldown_resource)
    failure = invocation.failure
    assert failure is not None
    if isinstance(decision, FailNow) and decision.exception is not None:
        exc = decision.exception
        failure = FailureInfo.from_exception(exc)
    failed = Failed(exc, failure, tuple(history))
    if isinstance(decision, OpenCircuitNow) and gate is not None:
        return CircuitOpened(failed, gate)
    return failed


class Settlement:
    """Ends attempts from their invocations' outcomes: success, failure, retry, open circuit."""

    __slots__ = (
        "retry_timers",
        "asset_callback",
        "_run_id",
        "_settle",
        "_skip",
        "_dispatcher",
        "_retry_history",
        "_fan_out",
        "_reuse",
        "_observers",
        "_clock",
        "_random",
        "has_callbacks",
        "scheduler",
    )

    def __init__(
        self,
        run_id: str,
        readiness: Readiness,
        dispatcher: Dispatcher,
        *,
        retry_history: dict[Token, list[Invocation]],
        reuse: OutputReuse | None,
        observers: ObserverFanout,
        clock: Clock,
        random: Callable[[], float] | None,
        has_callbacks: bool,
    ) -> None:
        self._run_id = run_id
        self._settle = readiness.settle
        self._skip = readiness.skip
        self._fan_out = readiness.fan_out
        self._dispatcher = dispatcher
        self._retry_history = retry_history
        self._reuse = reuse
        self._observers = observers
        self._clock = clock
        self._random = random
        self.retry_timers: dict[Token, asyncio.Task[None]] = {}
        #: Set when the run starts (it needs the loop); called only when ``has_callbacks``.
        self.asset_callback: AssetCallback | None = None
        self.has_callbacks = has_callbacks
        #: Held while a timer's retry enters the scheduler (a lock when workers settle too).
        self.scheduler: AbstractContextManager[Any] = NO_LOCK

    def _invocations(self, token: Token, last: Invocation) -> tuple[Invocation, ...]:
        if not self._retry_history:
            return (last,)
        earlier = self._retry_history.pop(token, None)
        return (last,) if earlier is None else (*earlier, last)

    def succeeded(self, task: TaskState, key_index: int, output: Any, started: float, finished: float) -> None:
        token = (task, key_index)
        history = self._retry_history
        driver_uses_output = task.discovers or (self._reuse is not None and task.definition.materialization is not None)
        if not driver_uses_output and (not history or token not in history):
            # The hot path of every attempt: one invocation, nothing for the driver to do with the output.
            result = succeeded_attempt(task.name, task.keys[key_index], task.partitioned, output, started, finished, key_index)
            self._settle_succeeded(task, key_index, result, 1)
            return
        number = 1 if not history else 1 + len(history.get(token, ()))
        invocations = self._invocations(token, succeeded_invocation(number, started, finished))
        if driver_uses_output and isinstance(output, DeferredOutput):
            # The driver itself needs this value (declared keys, a commit): fetched once, here.
            try:
                output = resolved(output)
            except Exception as exc:  # noqa: BLE001 - a lost output fails its attempt
                self.fail_attempt(task, key_index, exc, invocations)
                return
        if task.discovers:
            assert self._fan_out is not None
            try:
                output = self._fan_out.accept(task, output, number)
            except PartitaError as exc:
                self.fail_attempt(task, key_index, exc, invocations)
                return
        if self._reuse is not None and task.definition.materialization is not None:
            self._reuse.commit(task, key_index, output, invocations)
            return
        self.settle_success(task, key_index, output, invocations, Resolution.EXECUTED, None)

    def settle_executed(
        self,
        task: TaskState,
        key_index: int,
        output: Any,
        invocations: tuple[Invocation, ...],
        materialization_id: str | None,
    ) -> None:
        self.settle_success(task, key_index, output, invocations, Resolution.EXECUTED, materialization_id)

    def settle_materialized(self, task: TaskState, key_index: int, output: Any, materialization_id: str) -> None:
        self.settle_success(task, key_index, output, (), Resolution.MATERIALIZED, materialization_id)

    def settle_success(
        self,
        task: TaskState,
        key_index: int,
        output: Any,
        invocations: tuple[Invocation, ...],
        resolution: Resolution,
        materialization_id: str | None,
    ) -> None:
        result = AttemptResult(
            task.name,
            task.keys[key_index],
            task.partitioned,
            AttemptStatus.SUCCESS,
            output=output,
            invocations=invocations,
            resolution=resolution,
            materialization_id=materialization_id,
            index=key_index,
        )
        self._settle_succeeded(task, key_index, result, len(invocations))

    def _settle_succeeded(self, task: TaskState, key_index: int, result: AttemptResult, invocations: int) -> None:
        task.outputs[key_index] = result.output
        self._settle(task, key_index, result, None)
        if self.has_callbacks:
            self._call_back("on_success", task, key_index, None, invocations)

    def fail_attempt(
        self,
        task: TaskState,
        key_index: int,
        exc: BaseException,
        invocations: tuple[Invocation, ...],
        failure: FailureInfo | None = None,
    ) -> None:
        """The attempt ends failed (body, policy, discovery, resolve, load or commit failures alike)."""
        result = attempt_result(
            task,
            key_index,
            AttemptStatus.FAILED,
            exception=exc,
            failure=failure or FailureInfo.from_exception(exc),
            invocations=invocations,
        )
        self._settle(task, key_index, result, result)
        if self.has_callbacks:
            self._call_back("on_failure", task, key_index, exc, len(invocations))

    def invocation_failed(
        self, task: TaskState, key_index: int, exc: BaseException, started: float, finished: float
    ) -> None:
        token = (task, key_index)
        earlier = self._retry_history.get(token, [])
        invocation = Invocation(len(earlier) + 1, started, finished, False, FailureInfo.from_exception(exc))
        transition = after_failure(
            task, exc, earlier, invocation, cancelling=self._dispatcher.cancelling, random=self._random
        )
        if isinstance(transition, RetryScheduled):
            self._schedule_retry(task, key_index, exc, transition)
        elif isinstance(transition, Skipped):
            self._retry_history[token] = transition.history
            self._skip(task, key_index, transition.reason, ())
        else:
            self._retry_history.pop(token, None)
            failed = transition.failed if isinstance(transition, CircuitOpened) else transition
            self.fail_attempt(task, key_index, failed.exception, failed.invocations, failed.failure)
            if isinstance(transition, CircuitOpened):
                self.open_circuit(transition.gate)

    def _schedule_retry(self, task: TaskState, key_index: int, exc: BaseException, retry: RetryScheduled) -> None:
        token = (task, key_index)
        self._retry_history[token] = retry.history
        invocation = retry.history[-1]
        gate = task.gate
        if gate is not None:
            gate.retries += 1
            if retry.cooldown_resource:
                gate.cooldown_until = max(gate.cooldown_until, self._clock.monotonic() + retry.delay)
        if self._observers.active:
            assert invocation.failure is not None
            self._observers.emit(
                AttemptRetrying(
                    self._run_id,
                    task.name,
                    key_index,
                    task.keys[key_index],
                    task.partitioned,
                    invocation.number,
                    retry.delay,
                    invocation.failure,
                )
            )
        if self.has_callbacks:
            self._call_back("on_retry", task, key_index, exc, invocation.number)
        self.retry_timers[token] = self._dispatcher.timer(self._retry_after(token, retry.delay))

    async def _retry_after(self, token: Token, delay: float) -> None:
        await self._clock.sleep(delay)
        with self.scheduler:
            self.retry_timers.pop(token, None)
            task, key_index = token
            if task.results[key_index] is None and not self._dispatcher.cancelling:
                self._dispatcher.enqueue(task, key_index)
                self._dispatcher.dispatch()

    def open_circuit(self, gate: ResourceGate) -> None:
        """Skip every queued and retrying attempt of the gate's resource; none starts again."""
        if gate.circuit_open:
            return
        gate.circuit_open = True
        queued, gate.queue = sorted(gate.queue), []
        for _, task, key_index in queued:
            gate.forget((task, key_index))
            self._skip(task, key_index, SkipReason.RESOURCE_CIRCUIT_OPEN, ())
        for token, timer in list(self.retry_timers.items()):
            task, key_index = token
            if task.gate is gate:
                timer.cancel()
                del self.retry_timers[token]
                self._skip(task, key_index, SkipReason.RESOURCE_CIRCUIT_OPEN, ())

    def _call_back(self, label: str, task: TaskState, key_index: int, exc: BaseException | None, number: int) -> None:
        """Run the asset's ``label`` callback when it declares one (the run has callbacks at all)."""
        if getattr(task.definition, label) is not None:
            assert self.asset_callback is not None
            self.asset_callback(label, task, key_index, exc, number)

    def cancel_retries(self) -> None:
        for timer in list(self.retry_timers.values()):
            timer.cancel()
