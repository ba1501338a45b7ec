"""The scheduler: readiness per (asset, key), admission, outcomes.

Every operation is proportional to the edges it touches: finishing an attempt
updates only its direct consumers' pending counts, so a run's cost grows
linearly with its attempts, never with a scan over all of them per step.
Policies (groups, resources, retries, callbacks, observers) add work only to
flows that use them.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import functools
import itertools
import logging
import os
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from partita.definitions.policies import ResourcePolicy
from partita.errors import PartitaError
from partita.events.emission import (
    Emitter,
    EventLog,
    LazyEmitter,
    MemoryEventLog,
    RunLiveness,
    activate,
    catalog_of,
)
from partita.events.model import EmissionReceipt, SourceKind
from partita.execution.admission import GroupGate, ResourceGate
from partita.execution.callbacks import CallbackRunner
from partita.execution.clock import Clock, SystemClock
from partita.execution.context import AssetContext, CallbackContext
from partita.execution.discovery import (
    DiscoveryCollector,
    FanOut,
    discovery_event,
    run_discovering_body,
    run_discovering_body_async,
)
from partita.execution.events import (
    AttemptFinished,
    AttemptRetrying,
    AttemptStarted,
    ExecutionObserver,
    ObserverFanout,
    RunFinished,
    RunStarted,
)
from partita.execution.executors import Executor, InProcessExecutor
from partita.execution.graph import Edge, TaskState, build_graph
from partita.execution.inputs import PartitionedOutputs
from partita.execution.journal import RunJournal
from partita.execution.retries import FailNow, OpenCircuitNow, RetryLater, decide_after_failure
from partita.execution.reuse import OutputReuse
from partita.execution.workers import Completion
from partita.planning.plan import FlowPlan
from partita.results.model import (
    AttemptResult,
    AttemptStatus,
    FailureInfo,
    Invocation,
    Resolution,
    RunResult,
    RunStatus,
    SkipReason,
    TaskResult,
)

__all__ = ["DEFAULT_MAX_CONCURRENCY", "RunOptions", "execute_plan", "new_run_id"]

#: Invocation limit when neither the flow nor the run sets one.
DEFAULT_MAX_CONCURRENCY = min(32, (os.cpu_count() or 1) + 4)
#: How long a cancelled run waits for sync bodies that are already running.
DEFAULT_CANCEL_GRACE_SECONDS = 10.0

_INFINITY = float("inf")
#: The last invocation of a started attempt that the run's cancellation cut short.
_CUT_SHORT = FailureInfo.from_exception(asyncio.CancelledError("the run was cancelled while this invocation ran"))
Token = tuple[TaskState, int]


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Everything besides the plan that shapes one execution."""

    resources: Mapping[str, ResourcePolicy] = field(default_factory=dict)
    executor: Executor | None = None
    clock: Clock | None = None
    observers: Sequence[ExecutionObserver] = ()
    on_success: Callable[[CallbackContext], Any] | None = None
    on_failure: Callable[[CallbackContext], Any] | None = None
    on_complete: Callable[[CallbackContext], Any] | None = None
    cancel_grace_seconds: float = DEFAULT_CANCEL_GRACE_SECONDS
    random: Callable[[], float] | None = None
    journal: RunJournal | None = None
    #: Where emissions go (memory when None); ``store_url`` lets worker processes reconnect.
    event_log: EventLog | None = None
    store_url: str | None = None
    #: Events that made a trigger start this run (`AssetContext.triggering_events`).
    triggering_events: tuple[Any, ...] = ()


class _Run:
    """State of one executing plan; lives on the event loop thread."""

    def __init__(self, plan: FlowPlan, run_id: str, options: RunOptions) -> None:
        self.plan = plan
        self.run_id = run_id
        self.options = options
        self.max_concurrency = plan.options.max_concurrency or DEFAULT_MAX_CONCURRENCY
        self.tasks = build_graph(plan)
        self.clock = options.clock or SystemClock()
        journal = [options.journal] if options.journal is not None else []
        self.observers = ObserverFanout([*journal, *options.observers])
        self.executor = options.executor or InProcessExecutor()
        self.event_log: EventLog = options.event_log if options.event_log is not None else MemoryEventLog()
        self.catalog = catalog_of(plan.registry.definitions())
        self.receipts: list[EmissionReceipt] = []
        self.liveness = RunLiveness()
        self.gates: dict[str, ResourceGate] = {}
        self.groups: list[GroupGate] = []
        self._bind_policies()
        self.has_callbacks = any(
            t.definition.on_success or t.definition.on_failure or t.definition.on_retry for t in self.tasks
        )
        self.free: collections.deque[tuple[int, TaskState, int]] = collections.deque()
        self.sequence = itertools.count()
        self.remaining = sum(task.size for task in self.tasks)
        self.running = 0
        self.in_executor = 0
        self.cancelling = False
        self.finished = False
        self.retry_history: dict[Token, list[Invocation]] = {}
        #: Start times of the invocations under way; a cancelled run reports them.
        self.in_flight: dict[Token, float] = {}
        self.retry_timers: dict[Token, asyncio.Task[None]] = {}
        self.timers: set[asyncio.Task[None]] = set()
        self.async_bodies: set[asyncio.Task[None]] = set()
        self.done: asyncio.Future[None] | None = None
        self.drained: asyncio.Event | None = None
        self.callbacks: CallbackRunner | None = None
        self._dispatch = self._dispatch_free if not self.gates else self._dispatch_gated
        materialized = any(task.definition.materialization is not None for task in self.tasks)
        self.reuse: OutputReuse | None = OutputReuse(self) if materialized else None
        self.fan_out: FanOut | None = FanOut(self) if any(task.discovers for task in self.tasks) else None

    def _bind_policies(self) -> None:
        for task in self.tasks:
            name = task.definition.resource
            if name is not None:
                gate = self.gates.get(name)
                if gate is None:
                    gate = self.gates[name] = ResourceGate(name, self.options.resources[name])
                task.gate = gate
        by_name = {task.name: task for task in self.tasks}
        for group in self.plan.groups:
            gate = GroupGate(group, first=by_name[group.assets[0]])
            self.groups.append(gate)
            for position, member in enumerate(group.assets):
                by_name[member].group = gate
                by_name[member].group_position = position

    # -- lifecycle -----------------------------------------------------------

    async def execute(self) -> RunResult:
        loop = asyncio.get_running_loop()
        started_at = dt.datetime.now(dt.UTC)
        self.done = loop.create_future()
        self.drained = asyncio.Event()
        self.drained.set()
        self.callbacks = CallbackRunner(loop)
        journal = self.options.journal
        if journal is not None:
            journal.begin(self.run_id, self.plan, started_at)  # a refusal stops the run before any body
        self.executor.start(loop, self._on_completions, self.max_concurrency)
        if self.observers:
            self.observers.emit(RunStarted(self.run_id, self.plan))
        try:
            # Collect roots first: settling one root can cascade skips into
            # attempts that must not be visited a second time here.
            roots = [(task, k) for task in self.tasks for k in range(task.size) if task.pending[k] == 0]
            for task, key_index in roots:
                self._became_ready(task, key_index)
            self._dispatch()
            if self.remaining:
                await self.done
            await self.callbacks.drain()
            result = await self._finish_with_flow_callbacks(started_at)
        except asyncio.CancelledError:
            result = await self._cancel(started_at)
            self.observers.emit(RunFinished(result))
            if journal is not None:
                journal.end(result)
            raise
        finally:
            self.liveness.ended = True
            for timer in list(self.timers):
                timer.cancel()
            self.executor.shutdown(wait=0)
            self.callbacks.shutdown()
            if self.reuse is not None:
                self.reuse.shutdown()
        self.observers.emit(RunFinished(result))
        if journal is not None:
            try:
                # Synchronously: the run is over, and a thread hop costs more than the final flush.
                journal.end(result)
            except PartitaError as error:
                error.result = result  # type: ignore[attr-defined]
                raise
        return result

    async def _finish_with_flow_callbacks(self, started_at: dt.datetime) -> RunResult:
        assert self.callbacks is not None
        result = self._result(started_at)
        options = self.options
        chosen = [("on_success", options.on_success)] if result.status is RunStatus.SUCCESS else []
        if result.status is RunStatus.FAILED:
            chosen.append(("on_failure", options.on_failure))
        chosen.append(("on_complete", options.on_complete))
        ran = False
        for label, callback in chosen:
            if callback is not None:
                emitter = Emitter(
                    self.event_log,
                    self.catalog,
                    SourceKind.FLOW,
                    self.run_id,
                    receipts=self.receipts,
                    role=label,
                    liveness=self.liveness,
                )
                context = CallbackContext(self.run_id, None, None, False, result=result, emitter=emitter)
                self.callbacks.call(f"flow.{label}", callback, context)
                await self.callbacks.drain()
                ran = True
        return self._result(started_at) if ran else result

    async def _cancel(self, started_at: dt.datetime) -> RunResult:
        """Stop admitting, cancel async bodies, give sync bodies a grace period."""
        self.cancelling = True
        for body in list(self.async_bodies):
            body.cancel()
        for timer in list(self.retry_timers.values()):
            timer.cancel()
        if self.in_executor and self.drained is not None:
            try:
                await asyncio.wait_for(self.drained.wait(), self.options.cancel_grace_seconds)
            except (TimeoutError, asyncio.CancelledError):
                pass
        for task in self.tasks:
            if task.deferred and task.size == 0:
                task.empty_reason = SkipReason.CANCELLED  # the discovery never finished
            for key_index in range(task.size):
                if task.results[key_index] is None:
                    cancelled = self._attempt(
                        task,
                        key_index,
                        AttemptStatus.CANCELLED,
                        reason=SkipReason.CANCELLED,
                        invocations=self._cancelled_invocations((task, key_index)),
                    )
                    task.results[key_index] = cancelled
                    self.observers.emit(AttemptFinished(self.run_id, cancelled))
        self.finished = True
        return self._result(started_at)

    def _cancelled_invocations(self, token: Token) -> tuple[Invocation, ...]:
        """Earlier invocations, plus the one the cancellation cut short if the body had started.

        An attempt with no invocations never started.
        """
        earlier = tuple(self.retry_history.get(token, ()))
        started = self.in_flight.get(token)
        if started is None:
            return earlier
        return (*earlier, Invocation(len(earlier) + 1, started, max(started, _now()), False, _CUT_SHORT))

    # -- readiness and admission ---------------------------------------------

    def _became_ready(self, task: TaskState, key_index: int) -> None:
        blockers = task.blockers.pop(key_index, None)
        if blockers:
            self._skip(task, key_index, SkipReason.DEPENDENCY_FAILED, tuple(blockers))
        elif task.undiscovered and key_index in task.undiscovered:
            self._skip(task, key_index, SkipReason.PARTITION_NOT_DISCOVERED, ())
        elif task.skip_when_ready is not None:
            self._skip(task, key_index, task.skip_when_ready, ())
        elif task.group is not None and task.group_position == 0:
            task.group.request(key_index)
            self._admit_group(task.group)
        else:
            self._admitted(task, key_index)

    def _admitted(self, task: TaskState, key_index: int) -> None:
        """Past dependencies and group admission: prepare reuse, or queue the body."""
        if self.reuse is not None and task.definition.materialization is not None:
            self.reuse.prepare(task, key_index)
        else:
            self._enqueue(task, key_index)

    def enqueue_after_preparation(self, task: TaskState, key_index: int) -> None:
        self._enqueue(task, key_index)

    def dispatch(self) -> None:
        self._dispatch()

    def decrement(self, consumer: TaskState, key_index: int, blocker: AttemptResult | None) -> None:
        self._decrement(consumer, key_index, blocker)

    def became_ready(self, task: TaskState, key_index: int) -> None:
        self._became_ready(task, key_index)

    def record_discovery(self, task: TaskState, domain: str, declared: tuple[Any, ...], invocation: int) -> None:
        """Publish one discovery event per key (with its extra) and update the partition registry."""
        drafts = [discovery_event(self.run_id, task.name, key, invocation) for key in declared]
        self.event_log.record_discovery(domain, self.run_id, drafts)  # type: ignore[attr-defined]

    def _admit_group(self, group: GroupGate) -> None:
        # Admitting can settle attempts at once (an open circuit skips them),
        # which frees the slot again: loop here instead of recursing per key.
        if group.admitting:
            group.readmit = True
            return
        group.admitting = True
        try:
            while True:
                group.readmit = False
                for key_index in group.admit():
                    self._admitted(group.first, key_index)
                if not group.readmit:
                    return
        finally:
            group.admitting = False

    def _enqueue(self, task: TaskState, key_index: int) -> None:
        gate = task.gate
        if gate is None:
            self.free.append((next(self.sequence), task, key_index))
        elif gate.circuit_open:
            self._skip(task, key_index, SkipReason.RESOURCE_CIRCUIT_OPEN, ())
        else:
            gate.queue.append((next(self.sequence), task, key_index))

    def _dispatch_free(self) -> None:
        free, limit = self.free, self.max_concurrency
        while free and self.running < limit and not self.cancelling:
            _, task, key_index = free.popleft()
            self._start(task, key_index)

    def _dispatch_gated(self) -> None:
        limit = self.max_concurrency
        while self.running < limit and not self.cancelling:
            now = self.clock.monotonic()
            best: tuple[int, TaskState, int] | None = self.free[0] if self.free else None
            source: ResourceGate | None = None
            for gate in self.gates.values():
                if not gate.queue:
                    continue
                head = gate.queue[0]
                if best is not None and head[0] > best[0]:
                    continue
                opens = gate.earliest_start(now)
                if opens is not None:
                    # Ready work denied by this policy while a global slot is free.
                    gate.note_denied((head[1], head[2]), now)
                    if opens != _INFINITY:
                        self._wake_gate_at(gate, opens)
                    continue
                best, source = head, gate
            if best is None:
                return
            if source is None:
                self.free.popleft()
            else:
                source.queue.popleft()
                source.note_started((best[1], best[2]), now)
            self._start(best[1], best[2])

    def _timer(self, waiting: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Start a clock wait; tracked so a finished run leaves none pending."""
        timer = asyncio.get_running_loop().create_task(waiting)
        self.timers.add(timer)
        timer.add_done_callback(self.timers.discard)
        return timer

    def _wake_gate_at(self, gate: ResourceGate, when: float) -> None:
        if gate.wake_scheduled_for is not None and gate.wake_scheduled_for <= when:
            return
        gate.wake_scheduled_for = when
        self._timer(self._wake_gate(gate, when))

    async def _wake_gate(self, gate: ResourceGate, when: float) -> None:
        await self.clock.sleep(max(0.0, when - self.clock.monotonic()))
        if gate.wake_scheduled_for == when:
            gate.wake_scheduled_for = None
        self._dispatch()

    # -- invocation ------------------------------------------------------------

    def _start(self, task: TaskState, key_index: int) -> None:
        self.running += 1
        definition = task.definition
        invocation = 1
        if self.retry_history:
            invocation += len(self.retry_history.get((task, key_index), ()))
        started = _now()
        self.in_flight[(task, key_index)] = started
        kwargs = self._inputs_for(task, key_index)
        emitter: Any
        if self.executor.runs_async_bodies:
            emitter = self._emitter(task, key_index, invocation)  # crosses a process boundary: built now
        else:
            emitter = LazyEmitter(self._emitter, task, key_index, invocation)
        fn = definition.fn
        collector = None
        if task.discovers:
            assert self.fan_out is not None
            collector = self.fan_out.collector_for(task)
            runner = run_discovering_body_async if definition.is_async else run_discovering_body
            fn = functools.partial(runner, definition.fn, collector)
        if definition.context_parameter is not None:
            kwargs[definition.context_parameter] = self._context(task, key_index, invocation, emitter, collector)
        if self.observers:
            self.observers.emit(
                AttemptStarted(
                    self.run_id, task.name, key_index, task.keys[key_index], task.partitioned, invocation, started
                )
            )
        if definition.is_async and not self.executor.runs_async_bodies:
            body = asyncio.get_running_loop().create_task(self._run_async(task, key_index, fn, kwargs, emitter))
            self.async_bodies.add(body)
            body.add_done_callback(self.async_bodies.discard)
        else:
            self.in_executor += 1
            assert self.drained is not None
            self.drained.clear()
            self.executor.submit((task, key_index), fn, kwargs, task.name, emitter)

    def _inputs_for(self, task: TaskState, key_index: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        for param, upstream, edge in task.inputs:
            if edge is Edge.SAME_KEY:
                kwargs[param] = upstream.outputs[key_index]
            elif edge is Edge.DISCOVERY:
                kwargs[param] = upstream.discovered_outputs[key_index]  # type: ignore[index]
            elif edge is Edge.GATHER:
                assert upstream.definition.partition_def is not None
                kwargs[param] = PartitionedOutputs(upstream.definition.partition_def, upstream.keys, upstream.outputs)
            else:
                kwargs[param] = upstream.outputs[0]
        return kwargs

    def _emitter(self, task: TaskState, key_index: int, invocation: int, role: str = "body") -> Emitter:
        partition_def = task.definition.partition_def
        return Emitter(
            self.event_log,
            self.catalog,
            SourceKind.ATTEMPT,
            self.run_id,
            task.name,
            task.partitioned,
            invocation,
            task.keys[key_index],
            None if partition_def is None else partition_def.format_key,
            self.receipts,
            self.options.store_url,
            role,
            self.liveness,
        )

    def _context(
        self,
        task: TaskState,
        key_index: int,
        invocation: int,
        emitter: Any,
        discovery: DiscoveryCollector | None = None,
    ) -> AssetContext:
        if task.logger is None:
            task.logger = logging.getLogger(f"partita.asset.{task.name}")
        return AssetContext(
            asset_name=task.name,
            run_id=self.run_id,
            partition_key=task.keys[key_index],
            partition_key_present=task.partitioned,
            invocation_number=invocation,
            logger=task.logger,
            emitter=emitter,
            discovery=discovery,
            triggering_events=self.options.triggering_events,
        )

    async def _run_async(
        self, task: TaskState, key_index: int, fn: Callable[..., Any], kwargs: dict[str, Any], emitter: Any
    ) -> None:
        activate(emitter)  # this task's own context: nothing to reset
        started = _now()
        try:
            value = await fn(**kwargs)
            completion: Completion = ((task, key_index), True, value, started, _now())
        except asyncio.CancelledError:
            if self.cancelling:
                raise
            error = asyncio.CancelledError("the asset body cancelled itself")
            completion = ((task, key_index), False, error, started, _now())
        except BaseException as exc:  # noqa: BLE001 - recorded as the attempt's failure
            completion = ((task, key_index), False, exc, started, _now())
        self._on_completions([completion], from_loop=True)

    def _on_completions(self, batch: list[Completion], from_loop: bool = False) -> None:
        if self.finished:
            return  # a body outlived the cancellation grace period: its outcome is no longer recorded
        try:
            for token, succeeded, value, started, finished in batch:
                task, key_index = token
                self.in_flight.pop(token, None)
                self.running -= 1
                if not from_loop:
                    self.in_executor -= 1
                gate = task.gate
                if gate is not None:
                    gate.note_finished(succeeded, finished - started)
                if succeeded:
                    self._succeeded(task, key_index, value, started, finished)
                else:
                    self._invocation_failed(task, key_index, value, started, finished)
            if self.in_executor == 0 and self.drained is not None:
                self.drained.set()
            self._dispatch()
        except BaseException as exc:
            # A scheduler fault must end the run loudly, never leave it waiting.
            if self.done is not None and not self.done.done():
                self.done.set_exception(exc)
            raise

    # -- outcomes ---------------------------------------------------------------

    def _invocations(self, token: Token, last: Invocation) -> tuple[Invocation, ...]:
        if not self.retry_history:
            return (last,)
        earlier = self.retry_history.pop(token, None)
        return (last,) if earlier is None else (*earlier, last)

    def _succeeded(self, task: TaskState, key_index: int, output: Any, started: float, finished: float) -> None:
        token = (task, key_index)
        number = 1 if not self.retry_history else 1 + len(self.retry_history.get(token, ()))
        invocations = self._invocations(token, Invocation(number, started, finished, True))
        if task.discovers:
            assert self.fan_out is not None
            try:
                output = self.fan_out.accept(task, output, number)
            except PartitaError as exc:
                self.fail_attempt(task, key_index, exc, invocations)
                return
        if self.reuse is not None and task.definition.materialization is not None:
            self.reuse.commit(task, key_index, output, invocations)
            return
        self.settle_executed(task, key_index, output, invocations, None)

    def settle_executed(
        self,
        task: TaskState,
        key_index: int,
        output: Any,
        invocations: tuple[Invocation, ...],
        materialization_id: str | None,
    ) -> None:
        self._settle_success(task, key_index, output, invocations, Resolution.EXECUTED, materialization_id)

    def settle_materialized(self, task: TaskState, key_index: int, output: Any, materialization_id: str) -> None:
        self._settle_success(task, key_index, output, (), Resolution.MATERIALIZED, materialization_id)

    def _settle_success(
        self,
        task: TaskState,
        key_index: int,
        output: Any,
        invocations: tuple[Invocation, ...],
        resolution: Resolution,
        materialization_id: str | None,
    ) -> None:
        task.outputs[key_index] = output
        # Built inline: the hot path of every successful attempt.
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
        self._settle(task, key_index, result, None)
        if self.has_callbacks and task.definition.on_success is not None:
            self._asset_callback("on_success", task, key_index, None, len(invocations))

    def fail_attempt(
        self,
        task: TaskState,
        key_index: int,
        exc: BaseException,
        invocations: tuple[Invocation, ...],
        failure: FailureInfo | None = None,
    ) -> None:
        """The attempt ends failed (body, policy, discovery, resolve, load or commit failures alike)."""
        result = self._attempt(
            task,
            key_index,
            AttemptStatus.FAILED,
            exception=exc,
            failure=failure or FailureInfo.from_exception(exc),
            invocations=invocations,
        )
        self._settle(task, key_index, result, result)
        if self.has_callbacks and task.definition.on_failure is not None:
            self._asset_callback("on_failure", task, key_index, exc, len(invocations))

    def _invocation_failed(
        self, task: TaskState, key_index: int, exc: BaseException, started: float, finished: float
    ) -> None:
        token = (task, key_index)
        earlier = self.retry_history.get(token, [])
        number = len(earlier) + 1
        failure = FailureInfo.from_exception(exc)
        invocation = Invocation(number, started, finished, False, failure)
        gate = task.gate
        decision = decide_after_failure(
            exc,
            number,
            retry=task.definition.retry,
            resource_name=task.definition.resource,
            resource=None if gate is None else gate.policy,
            random=self.options.random,
        )
        if isinstance(decision, RetryLater) and not self.cancelling:
            if gate is not None and gate.circuit_open:
                self.retry_history[token] = [*earlier, invocation]
                self._skip(task, key_index, SkipReason.RESOURCE_CIRCUIT_OPEN, ())
                return
            self._schedule_retry(task, key_index, exc, earlier, invocation, decision)
            return
        if isinstance(decision, FailNow) and decision.exception is not None:
            exc = decision.exception
            failure = FailureInfo.from_exception(exc)
        self.retry_history.pop(token, None)
        self.fail_attempt(task, key_index, exc, (*earlier, invocation), failure)
        if isinstance(decision, OpenCircuitNow) and gate is not None:
            self._open_circuit(gate)

    def _schedule_retry(
        self,
        task: TaskState,
        key_index: int,
        exc: BaseException,
        earlier: list[Invocation],
        invocation: Invocation,
        decision: RetryLater,
    ) -> None:
        token = (task, key_index)
        self.retry_history[token] = [*earlier, invocation]
        gate = task.gate
        if gate is not None:
            gate.retries += 1
            if decision.cooldown_resource:
                gate.cooldown_until = max(gate.cooldown_until, self.clock.monotonic() + decision.delay)
        if self.observers:
            assert invocation.failure is not None
            self.observers.emit(
                AttemptRetrying(
                    self.run_id,
                    task.name,
                    key_index,
                    task.keys[key_index],
                    task.partitioned,
                    invocation.number,
                    decision.delay,
                    invocation.failure,
                )
            )
        if self.has_callbacks and task.definition.on_retry is not None:
            self._asset_callback("on_retry", task, key_index, exc, invocation.number)
        self.retry_timers[token] = self._timer(self._retry_after(token, decision.delay))

    async def _retry_after(self, token: Token, delay: float) -> None:
        await self.clock.sleep(delay)
        self.retry_timers.pop(token, None)
        task, key_index = token
        if task.results[key_index] is None and not self.cancelling:
            self._enqueue(task, key_index)
            self._dispatch()

    def _open_circuit(self, gate: ResourceGate) -> None:
        if gate.circuit_open:
            return
        gate.circuit_open = True
        while gate.queue:
            _, task, key_index = gate.queue.popleft()
            gate.forget((task, key_index))
            self._skip(task, key_index, SkipReason.RESOURCE_CIRCUIT_OPEN, ())
        for token, timer in list(self.retry_timers.items()):
            task, key_index = token
            if task.gate is gate:
                timer.cancel()
                del self.retry_timers[token]
                self._skip(task, key_index, SkipReason.RESOURCE_CIRCUIT_OPEN, ())

    def _skip(
        self, task: TaskState, key_index: int, reason: SkipReason, blocked_by: tuple[AttemptResult, ...]
    ) -> None:
        earlier = self.retry_history.pop((task, key_index), None) if self.retry_history else None
        result = self._attempt(
            task,
            key_index,
            AttemptStatus.SKIPPED,
            reason=reason,
            blocked_by=blocked_by,
            invocations=tuple(earlier or ()),
        )
        self._settle(task, key_index, result, result)

    def _attempt(self, task: TaskState, key_index: int, status: AttemptStatus, **fields: Any) -> AttemptResult:
        """An attempt result of this task and key position (the identity fields are always the same)."""
        return AttemptResult(
            asset_name=task.name,
            index=key_index,
            partition_key=task.keys[key_index],
            partition_key_present=task.partitioned,
            status=status,
            **fields,
        )

    def _settle(self, task: TaskState, key_index: int, result: AttemptResult, blocker: AttemptResult | None) -> None:
        """Record a terminal attempt and count it against its consumers."""
        task.results[key_index] = result
        self.remaining -= 1
        if self.observers:
            self.observers.emit(AttemptFinished(self.run_id, result))
        group = task.group
        if group is not None and group.member_finished(key_index):
            self._admit_group(group)
        for consumer, edge in task.consumers:
            if edge is Edge.SAME_KEY:
                self._decrement(consumer, key_index, blocker)
            elif edge is Edge.FAN_OUT:
                for consumer_key in range(consumer.size):
                    self._decrement(consumer, consumer_key, blocker)
            elif edge is not Edge.DISCOVERY:
                self._decrement(consumer, 0, blocker)
        if task.discovers:
            assert self.fan_out is not None
            self.fan_out.after_producer(task, result)
        if self.remaining == 0 and self.done is not None and not self.done.done():
            self.done.set_result(None)

    def _decrement(self, consumer: TaskState, key_index: int, blocker: AttemptResult | None) -> None:
        if blocker is not None:
            consumer.blockers.setdefault(key_index, []).append(blocker)
        consumer.pending[key_index] -= 1
        if consumer.pending[key_index] == 0:
            self._became_ready(consumer, key_index)

    def _asset_callback(
        self, label: str, task: TaskState, key_index: int, exception: BaseException | None, invocation: int
    ) -> None:
        callback = getattr(task.definition, label)
        assert self.callbacks is not None
        context = CallbackContext(
            run_id=self.run_id,
            asset_name=task.name,
            partition_key=task.keys[key_index] if task.partitioned else None,
            partition_key_present=task.partitioned,
            exception=exception,
            invocation_number=invocation,
            emitter=self._emitter(task, key_index, invocation, label),
        )
        self.callbacks.call(label, callback, context)

    # -- result -----------------------------------------------------------------

    def _result(self, started_at: dt.datetime) -> RunResult:
        tasks: dict[str, TaskResult] = {}
        any_failed = any_cancelled = False
        for task in self.tasks:
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
        status = RunStatus.CANCELLED if any_cancelled else RunStatus.FAILED if any_failed else RunStatus.SUCCESS
        events, events_error = self._published_events()
        return RunResult(
            run_id=self.run_id,
            status=status,
            started_at=started_at,
            finished_at=dt.datetime.now(dt.UTC),
            tasks=tasks,
            plan=self.plan,
            resources={name: gate.statistics() for name, gate in self.gates.items()},
            callback_errors=tuple(self.callbacks.errors) if self.callbacks is not None else (),
            events=events,
            events_error=events_error,
            receipts=tuple(self.receipts),
            discoveries={} if self.fan_out is None else dict(self.fan_out.discoveries),
        )

    def _published_events(self) -> tuple[tuple[Any, ...], FailureInfo | None]:
        """The events this run published, read back from the log, and why that failed if it did.

        Asked of the log, not of local receipts, when worker processes may have
        emitted. The read is a report, not part of the outcome: a failure
        (an undecodable value, a lost connection after the store's retries)
        leaves ``events`` empty and the run's status, and its recording, intact.
        """
        if not (self.receipts or self.liveness.exported):
            return (), None
        try:
            return self.event_log.events_of_run(self.run_id), None  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - RecursionError and StoreError alike
            return (), FailureInfo.from_exception(exc)


_now = time.time


def new_run_id() -> str:
    return uuid.uuid4().hex


async def execute_plan(plan: FlowPlan, options: RunOptions | None = None, *, run_id: str | None = None) -> RunResult:
    """Run every planned attempt to a terminal status and return the result."""
    run = _Run(plan, run_id or new_run_id(), options or RunOptions())
    return await run.execute()
