"""Runs lifecycle callbacks off the scheduler and records their failures.

Sync callbacks run on a small pool of daemon threads (a callback may do I/O);
async callbacks run on the loop. A callback that raises becomes a
`CallbackError` in the result; the outcome it reports on never changes.
Asset callbacks get a context of their attempt; flow callbacks the result.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any

from partita.events.emission import activate
from partita.execution.context import CallbackContext
from partita.execution.graph import TaskState
from partita.execution.workers import Completion, ThreadWorkers
from partita.results.model import CallbackError, FailureInfo, RunResult, RunStatus

__all__ = ["AssetCallbacks", "CallbackRunner", "run_flow_callbacks"]

_CALLBACK_THREADS = 4


class CallbackRunner:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._workers: ThreadWorkers | None = None
        self._pending = 0
        self._idle: asyncio.Event = asyncio.Event()
        self._idle.set()
        self.errors: list[CallbackError] = []

    def call(self, label: str, callback: Callable[[CallbackContext], Any], context: CallbackContext) -> None:
        """Schedule ``callback(context)``; failures are recorded under ``label``."""
        self._pending += 1
        self._idle.clear()
        token = (label, context)
        if inspect.iscoroutinefunction(callback):
            self._loop.create_task(self._run_async(token, callback, context))
            return
        if self._workers is None:
            self._workers = ThreadWorkers(self._loop, self._finished, _CALLBACK_THREADS, "partita-callback")
        self._workers.submit(token, functools.partial(callback, context), {}, context.emitter)

    async def _run_async(self, token: Any, callback: Callable[[CallbackContext], Any], context: CallbackContext) -> None:
        activate(context.emitter)
        try:
            await callback(context)
            completion: Completion = (token, True, None, 0.0, 0.0)
        except BaseException as exc:  # noqa: BLE001 - even CancelledError: recorded, never propagated
            completion = (token, False, exc, 0.0, 0.0)
        self._finished([completion])

    def _finished(self, batch: list[Completion]) -> None:
        for (label, context), succeeded, value, _, _ in batch:
            self._pending -= 1
            if not succeeded:
                self.errors.append(
                    CallbackError(
                        callback=label,
                        asset_name=context.asset_name,
                        partition_key_present=context.partition_key_present,
                        exception=value,
                        failure=FailureInfo.from_exception(value),
                    )
                )
        if self._pending == 0:
            self._idle.set()

    async def drain(self) -> None:
        """Wait until every scheduled callback has finished."""
        await self._idle.wait()

    def shutdown(self) -> None:
        if self._workers is not None:
            self._workers.shutdown(wait=0)


class AssetCallbacks:
    """Runs an asset's ``on_success``, ``on_failure`` and ``on_retry`` with a context of its attempt."""

    __slots__ = ("_run_id", "_runner", "_emitter")

    def __init__(self, run_id: str, runner: CallbackRunner, emitter: Callable[[TaskState, int, int, str], Any]) -> None:
        self._run_id = run_id
        self._runner = runner
        self._emitter = emitter

    def call(self, label: str, task: TaskState, key_index: int, exception: BaseException | None, invocation: int) -> None:
        callback = getattr(task.definition, label)
        context = CallbackContext(
            run_id=self._run_id,
            asset_name=task.name,
            partition_key=task.keys[key_index] if task.partitioned else None,
            partition_key_present=task.partitioned,
            exception=exception,
            invocation_number=invocation,
            emitter=self._emitter(task, key_index, invocation, label),
        )
        self._runner.call(label, callback, context)


FlowCallback = Callable[[CallbackContext], Any]


async def run_flow_callbacks(
    runner: CallbackRunner,
    run_id: str,
    result: RunResult,
    *,
    on_success: FlowCallback | None,
    on_failure: FlowCallback | None,
    on_complete: FlowCallback | None,
    emitter: Callable[[str], Any],
    rebuild: Callable[[], RunResult],
) -> RunResult:
    """Run the flow's callbacks that the result's status calls for, one after another.

    Returns ``rebuild()`` when any ran (their emissions and errors belong in
    the result), else ``result`` itself.
    """
    chosen = [("on_success", on_success)] if result.status is RunStatus.SUCCESS else []
    if result.status is RunStatus.FAILED:
        chosen.append(("on_failure", on_failure))
    chosen.append(("on_complete", on_complete))
    ran = False
    for label, callback in chosen:
        if callback is not None:
            context = CallbackContext(run_id, None, None, False, result=result, emitter=emitter(label))
            runner.call(f"flow.{label}", callback, context)
            await runner.drain()
            ran = True
    return rebuild() if ran else result
