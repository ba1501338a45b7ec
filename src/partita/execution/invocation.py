"""Invocation: starting an attempt's body and handing its completion back.

Apart from the dispatcher (which picks what starts) and settlement (which
ends attempts): this is where a body's inputs, emitter, `AssetContext` and
discovery collector are assembled, where it is submitted to the executor or
run on the loop, and where completions are counted back in.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from partita.events.emission import Emitter, EventLog, LazyEmitter, RunLiveness, activate, catalog_of
from partita.events.model import EmissionReceipt, SourceKind
from partita.execution.attempt_logs import RunLogs
from partita.execution.attempt_scope import AttemptScope, key_formatter
from partita.execution.context import AssetContext, TriggeringEvents
from partita.execution.discovery import DiscoveryCollector, FanOut, run_discovering_body, run_discovering_body_async
from partita.execution.dispatch import Dispatcher
from partita.execution.events import AttemptStarted, ObserverFanout
from partita.execution.executors import Executor
from partita.execution.graph import Edge, TaskState, Token
from partita.execution.inputs import PartitionedOutputs, mapped_input
from partita.execution.log_capture import RemoteOutcome, wrap_body
from partita.execution.readiness import call_now
from partita.execution.workers import Completion
from partita.results.model import Invocation

__all__ = ["Invoker", "RunEmitters", "inputs_for"]

#: ``(task, key_index, output, started, finished)`` and ``(task, key_index, exception, started, finished)``.
Outcome = Callable[[TaskState, int, Any, float, float], None]

_now = time.time


@functools.cache
def _logger_of_asset(name: str) -> logging.Logger:
    """``partita.asset.<name>``: the same object for the process's life, without the logging lock each run."""
    return logging.getLogger(f"partita.asset.{name}")


def inputs_for(task: TaskState, key_index: int) -> dict[str, Any]:
    """The body's keyword arguments: each input's output for this key position."""
    kwargs: dict[str, Any] = {}
    for param, upstream, edge in task.inputs:
        if edge is Edge.SAME_KEY:
            kwargs[param] = upstream.outputs[key_index]
        elif edge is Edge.DISCOVERY:
            kwargs[param] = upstream.discovered_outputs[key_index]  # type: ignore[index]
        elif edge is Edge.GATHER:
            assert upstream.definition.partition_def is not None
            kwargs[param] = PartitionedOutputs(upstream.definition.partition_def, upstream.keys, upstream.outputs)
        elif edge is Edge.MAPPED:
            kwargs[param] = mapped_input(task.links[upstream], upstream, key_index)  # type: ignore[index]
        else:
            kwargs[param] = upstream.outputs[0]
    return kwargs



class RunEmitters:
    """Builds the emitters of one run: an attempt's (body or callback) and the flow's callbacks'.

    The catalog of every registered asset an emitter validates against is
    built when the run's first emitter is: a run whose bodies never emit
    does not pay for the size of its registry.
    """

    __slots__ = ("_run_id", "_event_log", "_registry", "_catalog", "_receipts", "_store_url", "_liveness")

    def __init__(
        self,
        run_id: str,
        event_log: EventLog,
        registry: Any,
        receipts: list[EmissionReceipt],
        store_url: str | None,
        liveness: RunLiveness,
    ) -> None:
        self._run_id = run_id
        self._event_log = event_log
        self._registry = registry
        self._catalog: dict[str, Any] | None = None
        self._receipts = receipts
        self._store_url = store_url
        self._liveness = liveness

    def _catalog_now(self) -> dict[str, Any]:
        catalog = self._catalog
        if catalog is None:  # threads racing here build equal catalogs
            catalog = self._catalog = catalog_of(self._registry.definitions())
        return catalog

    def for_attempt(self, task: TaskState, key_index: int, invocation: int, role: str = "body") -> Emitter:
        return Emitter(
            self._event_log,
            self._catalog_now(),
            SourceKind.ATTEMPT,
            self._run_id,
            task.name,
            task.partitioned,
            invocation,
            task.keys[key_index],
            key_formatter(task.definition),
            self._receipts,
            self._store_url,
            role,
            self._liveness,
        )

    def for_flow(self, role: str) -> Emitter:
        return Emitter(
            self._event_log,
            self._catalog_now(),
            SourceKind.FLOW,
            self._run_id,
            receipts=self._receipts,
            role=role,
            liveness=self._liveness,
        )


class Invoker:
    """Starts bodies and counts their completions back in; ``in_flight`` holds start times."""

    __slots__ = (
        "in_flight",
        "in_executor",
        "drained",
        "async_bodies",
        "finished",
        "_run_id",
        "_executor",
        "_runs_async_bodies",
        "_scoped_sync_bodies",
        "_emitter",
        "_observers",
        "_fan_out",
        "_retry_history",
        "_triggering_events",
        "_logs",
        "_dispatcher",
        "_succeeded",
        "_failed",
        "_fault",
        "_run_context",
        "on_loop",
    )

    def __init__(
        self,
        run_id: str,
        executor: Executor,
        emitters: RunEmitters,
        dispatcher: Dispatcher,
        *,
        observers: ObserverFanout,
        fan_out: FanOut | None,
        retry_history: Mapping[Token, list[Invocation]],
        triggering_events: TriggeringEvents,
        logs: RunLogs | None,
        succeeded: Outcome,
        failed: Outcome,
        fault: Callable[[BaseException], None],
    ) -> None:
        self.in_flight: dict[Token, float] = {}
        #: Bodies submitted to the executor and not yet completed; once the run cancels, ``drained`` is set when none are.
        self.in_executor = 0
        self.drained: asyncio.Event | None = None
        self.async_bodies: set[asyncio.Task[None]] = set()
        #: Set when the run is over: later completions are no longer recorded.
        self.finished = False
        self._run_id = run_id
        self._executor = executor
        self._runs_async_bodies = executor.runs_async_bodies
        self._emitter = emitters.for_attempt
        self._observers = observers
        self._fan_out = fan_out
        self._retry_history = retry_history
        self._triggering_events = triggering_events
        self._logs = logs
        #: A sync body on partita's worker threads runs under its attempt scope; any other is wrapped in a log scope.
        self._scoped_sync_bodies = logs is not None and getattr(executor, "runs_attempt_scopes", False)
        self._dispatcher = dispatcher
        self._succeeded = succeeded
        self._failed = failed
        self._fault = fault
        #: The run's context, a copy of which every async body's task starts from. A body released by a
        #: completion from a worker thread is started in a callback with that thread's context otherwise,
        #: and a trigger daemon would not know it as its run's (`partita.automation.consumer_loop`).
        self._run_context = contextvars.copy_context()
        #: Runs a call on the loop's thread (see `Readiness.on_loop`).
        self.on_loop: Callable[..., Any] = call_now

    def start(self, task: TaskState, key_index: int) -> None:
        """Start the attempt's next invocation (the dispatcher has counted it running)."""
        definition = task.definition
        invocation = 1
        if self._retry_history:
            invocation += len(self._retry_history.get((task, key_index), ()))
        started = _now()
        self.in_flight[(task, key_index)] = started
        kwargs = inputs_for(task, key_index)
        emitter: Any
        scoped = self._scoped_sync_bodies and not definition.is_async
        if self._runs_async_bodies:
            emitter = self._emitter(task, key_index, invocation)  # crosses a process boundary: built now
        elif scoped:
            emitter = AttemptScope(self._emitter, self._logs, task, key_index, invocation)
        else:
            emitter = LazyEmitter(self._emitter, task, key_index, invocation)
        fn = definition.fn
        collector = None
        if task.discovers:
            assert self._fan_out is not None
            collector = self._fan_out.collector_for(task)
            runner = run_discovering_body_async if definition.is_async else run_discovering_body
            fn = functools.partial(runner, definition.fn, collector)
        if self._logs is not None and not scoped:
            fn = wrap_body(
                self._logs, task.name, key_index, task.keys[key_index], invocation, fn,
                is_async=definition.is_async, remote=self._runs_async_bodies, format_key=key_formatter(definition),
            )
        if definition.context_parameter is not None:
            kwargs[definition.context_parameter] = self._context(task, key_index, invocation, emitter, collector)
        if self._observers.starts:
            self._observers.attempt_started(
                AttemptStarted(
                    self._run_id, task.name, key_index, task.keys[key_index], task.partitioned, invocation, started
                )
            )
        if definition.is_async and not self._runs_async_bodies:
            body = asyncio.get_running_loop().create_task(
                self._run_async(task, key_index, fn, kwargs, emitter), context=self._run_context.copy()
            )
            self.async_bodies.add(body)
            body.add_done_callback(self.async_bodies.discard)
        else:
            self.in_executor += 1
            self._executor.submit((task, key_index), fn, kwargs, task.name, emitter)

    def _context(
        self,
        task: TaskState,
        key_index: int,
        invocation: int,
        emitter: Any,
        discovery: DiscoveryCollector | None = None,
    ) -> AssetContext:
        if task.logger is None:
            task.logger = _logger_of_asset(task.name)
        return AssetContext(
            asset_name=task.name,
            run_id=self._run_id,
            partition_key=task.keys[key_index],
            partition_key_present=task.partitioned,
            invocation_number=invocation,
            logger=task.logger,
            emitter=emitter,
            discovery=discovery,
            triggering_events=self._triggering_events.for_key(task.definition.partition_def, task.keys[key_index]),
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
            if self._dispatcher.cancelling:
                raise
            error = asyncio.CancelledError("the asset body cancelled itself")
            completion = ((task, key_index), False, error, started, _now())
        except BaseException as exc:  # noqa: BLE001 - recorded as the attempt's failure
            completion = ((task, key_index), False, exc, started, _now())
        self.completed([completion], from_loop=True)

    def completed(self, batch: list[Completion], from_loop: bool = False) -> None:
        """Count finished invocations back in, settle each, and start what may start now."""
        if self.finished:
            return  # a body outlived the cancellation grace period: its outcome is no longer recorded
        dispatcher = self._dispatcher
        try:
            for token, succeeded, value, started, finished in batch:
                task, key_index = token
                if type(value) is RemoteOutcome:
                    succeeded, value = self._remote(task, key_index, value)
                cancelled = not succeeded and dispatcher.cancelling and isinstance(value, asyncio.CancelledError)
                if not cancelled:  # a body the cancellation cancelled stays in flight: it is recorded cancelled
                    self.in_flight.pop(token, None)
                dispatcher.running -= 1
                if not from_loop:
                    self.in_executor -= 1
                gate = task.gate
                if gate is not None:
                    gate.note_finished(succeeded, finished - started)
                    if gate.pool is not None:
                        gate.pool.finished(token)  # a slot per invocation: a retry leases again
                if succeeded:
                    self._succeeded(task, key_index, value, started, finished)
                elif not cancelled:
                    self._failed(task, key_index, value, started, finished)
            if self.in_executor == 0 and dispatcher.cancelling and self.drained is not None:
                self.on_loop(self.drained.set)  # nothing starts once cancelling: none will run again
            dispatcher.dispatch()
        except BaseException as exc:
            # A scheduler fault must end the run loudly, never leave it waiting, nor go on without it.
            dispatcher.cancelling = True
            self.finished = True
            self._fault(exc)
            raise

    def _remote(self, task: TaskState, key_index: int, outcome: RemoteOutcome) -> tuple[bool, Any]:
        """A worker process's outcome: its lines join the attempt's log here."""
        if self._logs is not None and outcome.lines:
            log = self._logs.for_attempt(
                task.name, key_index, task.keys[key_index], outcome.lines[0][2],  # the first line's invocation
                key_formatter(task.definition),
            )
            self._logs.merge(log, outcome.lines)
        return not outcome.raised, outcome.value

    def cancel_async_bodies(self) -> None:
        """Cancel the async bodies on the loop, and ask the executor to cancel those it runs elsewhere."""
        for body in list(self.async_bodies):
            body.cancel()
        cancel_elsewhere = getattr(self._executor, "cancel_async_bodies", None)
        if cancel_elsewhere is not None:
            cancel_elsewhere()
