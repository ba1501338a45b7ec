"""The run coordinator: wires one run's collaborators together and drives its lifecycle.

Readiness (`readiness`), dispatch (`dispatch`), invocation (`invocation`),
settlement (`settlement`), callbacks and result assembly (`run_result`) each
do one job; this module starts them, waits for the last attempt to settle,
and cancels. Every operation is proportional to the edges it touches:
finishing an attempt updates only its direct consumers' pending counts, so a
run's cost grows linearly with its attempts, never with a scan over all of
them per step. Policies (groups, resources, retries, callbacks, observers)
add work only to flows that use them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from partita.definitions.policies import ResourcePolicy
from partita.errors import PartitaError
from partita.events.emission import EventLog, MemoryEventLog, RunLiveness
from partita.events.model import EmissionReceipt
from partita.execution import log_capture
from partita.execution.admission import bind_gates
from partita.execution.attempt_logs import RunLogs
from partita.execution.callbacks import AssetCallbacks, CallbackRunner, run_flow_callbacks
from partita.execution.cancellation import DEFAULT_CANCEL_GRACE_SECONDS, RunCancellation
from partita.execution.clock import Clock, SystemClock
from partita.execution.context import CallbackContext, TriggeringEvents
from partita.execution.dispatch import Dispatcher
from partita.execution.events import ExecutionObserver, ObserverFanout, RunFinished, RunStarted
from partita.execution.executors import Executor, InProcessExecutor
from partita.execution.graph import TaskState, Token, build_graph
from partita.execution.inputs import OutputRelease
from partita.execution.invocation import Invoker, RunEmitters
from partita.execution.journal import RunJournal, RunningAttempt
from partita.execution.pools import PoolAccess, SharedPools
from partita.execution.readiness import Readiness
from partita.execution.reuse import OutputReuse
from partita.execution.run_result import RunResultBuilder
from partita.execution.settlement import Settlement
from partita.execution.workers import NO_LOCK, SchedulerLock
from partita.planning.plan import FlowPlan
from partita.results.model import Invocation, RunResult

__all__ = ["DEFAULT_MAX_CONCURRENCY", "RunOptions", "execute_plan", "new_run_id"]

log = logging.getLogger("partita.execution")

#: Invocation limit when neither the flow nor the run sets one.
DEFAULT_MAX_CONCURRENCY = min(32, (os.cpu_count() or 1) + 4)



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
    triggering_events: TriggeringEvents = TriggeringEvents()
    #: A handle through which another thread may cancel the run (the store's journal, on request).
    cancellation: RunCancellation | None = None
    #: Where the attempts' log records (and captured output) are kept; None keeps nothing.
    logs: RunLogs | None = None
    #: The store's leases for `ResourcePolicy(shared=True)` pools (a run using one is refused without).
    pools: PoolAccess | None = None


class _Run:
    """One executing plan: its collaborators, wired once; lives on the event loop thread.

    Also the `ReuseHost` of output reuse: the settling steps it needs are the
    collaborators' own bound methods, set as attributes (no forwarding call).
    """

    def __init__(self, plan: FlowPlan, run_id: str, options: RunOptions) -> None:
        self.plan = plan
        self.run_id = run_id
        self.options = options
        self.max_concurrency = plan.options.max_concurrency or DEFAULT_MAX_CONCURRENCY
        self.tasks = tasks = build_graph(plan)
        journal = [options.journal] if options.journal is not None else []
        self.observers = ObserverFanout([*journal, *options.observers])
        self.executor = options.executor or InProcessExecutor()
        event_log: EventLog = options.event_log if options.event_log is not None else MemoryEventLog()
        receipts: list[EmissionReceipt] = []
        self.liveness = RunLiveness()
        self.gates, self.groups = bind_gates(tasks, plan.groups, options.resources)
        self.pools = SharedPools.bind(options.pools, run_id, self.gates)
        retry_history: dict[Token, list[Invocation]] = {}
        self._retry_history = retry_history
        materialized = any(task.definition.materialization is not None for task in tasks)
        self.reuse: OutputReuse | None = OutputReuse(self) if materialized else None
        self.dispatcher = Dispatcher(self.gates, self.max_concurrency, options.clock or SystemClock())
        self._wire_settling(event_log, retry_history)
        self.emitters = RunEmitters(
            run_id, event_log, plan.registry, receipts, options.store_url, self.liveness
        )
        self._wire_invoking(retry_history)
        self.results = RunResultBuilder(
            plan,
            tasks,
            run_id,
            gates=self.gates,
            event_log=event_log,
            receipts=receipts,
            liveness=self.liveness,
            fan_out=self.readiness.fan_out,
            observers=self.observers,
            retry_history=retry_history,
            in_flight=self.invoker.in_flight,
            logs=options.logs,
        )
        self.callbacks: CallbackRunner | None = None
        #: Held by whichever thread runs the scheduler; None when only the loop's thread does.
        self.scheduler_lock = SchedulerLock() if self._settles_on_workers() else None
        #: Entered by the loop's thread whenever it runs the scheduler (`NO_LOCK` when only it does).
        self.scheduler = self.settlement.scheduler = self.scheduler_lock or NO_LOCK
        #: Whether the run may still be cancelled through `RunOptions.cancellation` (loop thread only).
        self._cancellable = False
        self._cancelled_from_outside = False

    def _wire_settling(self, event_log: EventLog, retry_history: dict[Token, list[Invocation]]) -> None:
        tasks, dispatcher = self.tasks, self.dispatcher
        self.readiness = readiness = Readiness(
            self.plan,
            tasks,
            self.run_id,
            observers=self.observers,
            event_log=event_log,
            enqueue=dispatcher.enqueue,
            enqueue_block=dispatcher.enqueue_block,
            reuse=self.reuse,
            retry_history=retry_history,
        )
        self.settlement = settlement = Settlement(
            self.run_id,
            readiness,
            dispatcher,
            retry_history=retry_history,
            reuse=self.reuse,
            observers=self.observers,
            clock=dispatcher.clock,
            random=self.options.random,
            has_callbacks=any(
                t.definition.on_success or t.definition.on_failure or t.definition.on_retry for t in tasks
            ),
        )
        # What output reuse calls back (`ReuseHost`): the collaborators' own steps, no forwarding call.
        self.enqueue_after_preparation = dispatcher.enqueue
        self.dispatch = dispatcher.dispatch
        self.settle_executed = settlement.settle_executed
        self.settle_materialized = settlement.settle_materialized
        self.fail_attempt = settlement.fail_attempt

    def _wire_invoking(self, retry_history: dict[Token, list[Invocation]]) -> None:
        readiness, settlement = self.readiness, self.settlement
        if getattr(self.executor, "keeps_outputs", False):
            # Outputs stay where bodies ran (a cluster): release each once its readers are terminal.
            keep = bool(getattr(self.executor, "keep_unread_outputs", True))
            readiness.release = OutputRelease(self.tasks, keep_unread=keep)
        self.invoker = invoker = Invoker(
            self.run_id,
            self.executor,
            self.emitters,
            self.dispatcher,
            # The journal reads the attempts in flight itself (`running_attempts`): starts go to the others only.
            observers=ObserverFanout(self.options.observers),
            fan_out=readiness.fan_out,
            retry_history=retry_history,
            triggering_events=self.options.triggering_events,
            logs=self.options.logs,
            succeeded=settlement.succeeded,
            failed=settlement.invocation_failed,
            fault=readiness.fault,
        )
        self.dispatcher.connect(invoker.start, readiness.skip)

    def _settles_on_workers(self) -> bool:
        """Whether worker threads may settle successes themselves (`ThreadWorkers.settle_on_workers`).

        Only in runs whose every step after a success is plain Python: sync
        bodies on this process's threads, and no resource gates or pools
        (their clocks and leases live on the loop), no output reuse, no
        runtime discovery and no asset callbacks.
        """
        return (
            type(self.executor) is InProcessExecutor
            and not self.gates
            and self.reuse is None
            and self.readiness.fan_out is None
            and not self.settlement.has_callbacks
            and not any(task.definition.is_async for task in self.tasks)
        )

    @property
    def finished(self) -> bool:
        return self.invoker.finished

    def running_attempts(self) -> list[RunningAttempt]:
        """The attempts whose body runs now and that have no result yet; callable from any thread.

        The flight table is copied at once (one C call under the interpreter's
        lock); a result, once set, stays set, so an attempt left out stays out.
        """
        in_flight = dict(self.invoker.in_flight)
        return [
            RunningAttempt(task.name, index, task.partitioned, task.keys[index], started)
            for (task, index), started in in_flight.items()
            if task.results[index] is None  # a body the cancellation cut short stays in flight; its attempt ended
        ]

    async def execute(self) -> RunResult:
        loop = asyncio.get_running_loop()
        started_at = dt.datetime.now(dt.UTC)
        readiness, invoker = self.readiness, self.invoker
        readiness.done = loop.create_future()
        invoker.drained = asyncio.Event()
        self.callbacks = callbacks = CallbackRunner(loop)
        self.settlement.asset_callback = AssetCallbacks(self.run_id, callbacks, self.emitters.for_attempt).call
        self._start_executor_and_journal(loop, started_at)
        logs = self.options.logs
        if logs is not None:
            logs.annotate = log_capture.install(logs.capture)
        if self.observers.active:
            self.observers.emit(RunStarted(self.run_id, self.plan))
        self._accept_cancellation(loop)
        if self.pools is not None:
            self.pools.start(loop, self.dispatcher.dispatch, self._pool_refused)
        fault: Exception | None = None
        try:
            await self._settle_every_attempt()
            await callbacks.drain()
            result = await self._finish_with_flow_callbacks(started_at)
        except asyncio.CancelledError:
            self._cancellable = False  # a request during the grace period must not cut it short
            result = await self._cancel(started_at)
            self._record_end(result)
            if not self._only_cancelled_from_outside():
                raise
            return result  # asked through RunOptions.cancellation: the caller gets the cancelled result
        except Exception as error:  # a scheduler fault: recorded once the run is cleaned up, then raised
            fault, result = error, self._faulted_result(started_at, error)  # type: ignore[assignment]
        finally:
            if fault is None:
                self._clean_up(callbacks)
            else:  # a cleanup that fails too must not replace the fault
                self._after_fault(lambda: self._clean_up(callbacks), "its cleanup")
        if result is not None:
            self._record_end(result, fault)
        if fault is not None:
            try:
                raise fault
            finally:
                del fault  # no cycle through this frame's traceback
        return result

    def _clean_up(self, callbacks: CallbackRunner) -> None:
        """Whatever ended the run: nothing more settles or starts, and every resource of the run is let go."""
        with self.scheduler:
            self._stop_settling()
        self._cancellable = False
        if self.options.cancellation is not None:
            self.options.cancellation.unbind()
        logs = self.options.logs
        if logs is not None:
            log_capture.uninstall(logs.capture)
        self.liveness.ended = True
        self.dispatcher.cancel_timers()
        if self.pools is not None:
            self.pools.close()  # every lease of the run, whatever ended it
        self.executor.shutdown(wait=0)
        callbacks.shutdown()
        if self.reuse is not None:
            self.reuse.shutdown()

    def _record_end(self, result: RunResult, fault: Exception | None = None) -> None:
        """Tell the observers and the journal that the run ended.

        A journal that fails raises (a `PartitaError` carries the result),
        unless the run ended on a scheduler fault: the fault is what the
        caller must see, and the failure is logged.
        """
        self.observers.emit(RunFinished(result))
        journal = self.options.journal
        if journal is None:
            return
        try:
            # Synchronously: the run is over, and a thread hop costs more than the final flush.
            journal.end(result)
        except Exception as error:
            if fault is None:
                if isinstance(error, PartitaError):
                    error.result = result  # type: ignore[attr-defined]
                raise
            log.error("run %s: its end after a scheduler fault was not recorded: %s", self.run_id, error, exc_info=True)

    def _stop_settling(self) -> None:
        """With the scheduler held: workers settle nothing more of the run, and nothing more starts."""
        self.dispatcher.cancelling = True
        self.invoker.finished = True

    async def _settle_every_attempt(self) -> None:
        """Release the attempts that wait on nothing and wait until the last attempt has settled."""
        scheduler, readiness = self.scheduler, self.readiness
        with scheduler:
            readiness.release_roots()
            self.dispatcher.dispatch()
        if readiness.remaining:
            await readiness.done
        with scheduler:
            pass  # the worker that settled the last attempt has left the scheduler

    def _start_executor_and_journal(self, loop: asyncio.AbstractEventLoop, started_at: dt.datetime) -> None:
        """Start the executor, then record the run: an executor that cannot start (no cluster) records nothing."""
        self.executor.start(loop, self.invoker.completed, self.max_concurrency)
        if self.scheduler_lock is not None:
            self.readiness.on_loop = self.invoker.on_loop = _caller_on(loop)
            self.executor.settle_on_workers(self.scheduler_lock)  # type: ignore[attr-defined]
        journal = self.options.journal
        if journal is None:
            return
        try:
            # A refusal stops the run before any body.
            journal.begin(self.run_id, self.plan, started_at, running=self.running_attempts)
        except BaseException:
            self.executor.shutdown(wait=0)
            raise

    def _pool_refused(self, task: TaskState, key_index: int, error: BaseException) -> None:
        """The store failed to lease a slot: the attempt fails as on a commit's store error; no body ran."""
        earlier = self._retry_history.pop((task, key_index), [])
        self.settlement.fail_attempt(task, key_index, error, tuple(earlier))

    def _accept_cancellation(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let `RunOptions.cancellation` cancel this run: it cancels the task running it, as Ctrl-C does."""
        cancellation = self.options.cancellation
        task = asyncio.current_task()
        if cancellation is None or task is None:
            return

        def cancel_on_loop() -> None:
            if self._cancellable:  # not once the run is cancelling or over
                self._cancellable = False
                self._cancelled_from_outside = True
                task.cancel()

        def deliver() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the run is over, nothing to cancel
                loop.call_soon_threadsafe(cancel_on_loop)

        self._cancellable = True
        cancellation.bind(deliver)

    def _only_cancelled_from_outside(self) -> bool:
        """Whether the cancellation being handled came from `RunOptions.cancellation` alone.

        Its own `Task.cancel` is withdrawn; any other (Ctrl-C, the caller's
        cancel) still propagates as `asyncio.CancelledError`.
        """
        if not self._cancelled_from_outside:
            return False
        task = asyncio.current_task()
        return task is not None and task.uncancel() == 0

    def _faulted_result(self, started_at: dt.datetime, fault: Exception) -> RunResult | None:
        """The result a scheduler fault leaves: ``failed``, each attempt without an outcome failed by the fault.

        Without it the store showed the run ``running`` for as long as its
        process lived (its heartbeat went on), and the trigger requests it
        served stayed claimed. It is built from a state the fault may have
        broken: a step that fails is logged and the next still runs. With no
        result at all the journal is abandoned (the run shows ``interrupted``
        once its process exits).
        """
        with self.scheduler:
            self._stop_settling()
            self._after_fault(self.invoker.cancel_async_bodies, "cancelling its async bodies")
            self._after_fault(self.settlement.cancel_retries, "cancelling its retries")
            self._after_fault(lambda: self.results.fail_unfinished(fault), "failing its unfinished attempts")
            try:
                return self._result(started_at, failed=True)
            except Exception:
                log.exception("run %s: no result could be built after its scheduler fault", self.run_id)
        journal = self.options.journal
        if journal is not None:
            self._after_fault(lambda: journal.abandon(), "abandoning its journal")  # a journal of any kind
        return None

    def _after_fault(self, step: Callable[[], None], what: str) -> None:
        """One best-effort step of ending a faulted run; its failure is logged (the fault is what is raised)."""
        try:
            step()
        except Exception:
            log.exception("run %s: after its scheduler fault, %s failed", self.run_id, what)

    def _result(self, started_at: dt.datetime, *, failed: bool = False) -> RunResult:
        errors = () if self.callbacks is None else self.callbacks.errors
        return self.results.build(started_at, errors, failed=failed)

    async def _finish_with_flow_callbacks(self, started_at: dt.datetime) -> RunResult:
        assert self.callbacks is not None
        options = self.options
        return await run_flow_callbacks(
            self.callbacks,
            self.run_id,
            self._result(started_at),
            on_success=options.on_success,
            on_failure=options.on_failure,
            on_complete=options.on_complete,
            emitter=self.emitters.for_flow,
            rebuild=lambda: self._result(started_at),
        )

    async def _cancel(self, started_at: dt.datetime) -> RunResult:
        """Stop admitting, cancel async bodies, give sync bodies a grace period."""
        invoker, scheduler = self.invoker, self.scheduler
        with scheduler:
            self.dispatcher.cancelling = True
            invoker.cancel_async_bodies()
            self.settlement.cancel_retries()
            running = invoker.in_executor  # none starts from now on: the last to complete sets `drained`
        if running and invoker.drained is not None:
            try:
                await asyncio.wait_for(invoker.drained.wait(), self.options.cancel_grace_seconds)
            except (TimeoutError, asyncio.CancelledError):
                pass
        with scheduler:
            self.results.cancel_unfinished()
            invoker.finished = True
            return self._result(started_at)


def _caller_on(loop: asyncio.AbstractEventLoop) -> Callable[..., None]:
    """Runs a call on ``loop``'s thread from any thread; nothing once the loop has closed."""

    def call(fn: Callable[..., Any], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(fn, *args)

    return call


def new_run_id() -> str:
    return uuid.uuid4().hex


async def execute_plan(plan: FlowPlan, options: RunOptions | None = None, *, run_id: str | None = None) -> RunResult:
    """Run every planned attempt to a terminal status and return the result."""
    run = _Run(plan, run_id or new_run_id(), options or RunOptions())
    return await run.execute()
