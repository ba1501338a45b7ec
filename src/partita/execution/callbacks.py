"""Runs lifecycle callbacks off the scheduler and records their failures.

Sync callbacks run on a small pool of daemon threads (a callback may do I/O);
async callbacks run on the loop. A callback that raises becomes a
`CallbackError` in the result; the outcome it reports on never changes.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any

from partita.events.emission import activate
from partita.execution.context import CallbackContext
from partita.execution.workers import Completion, ThreadWorkers
from partita.results.model import CallbackError, FailureInfo

__all__ = ["CallbackRunner"]

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
