"""Executors run asset bodies; the engine keeps planning, admission and results.

An executor receives ``(token, fn, kwargs)`` jobs and reports completions as
``(token, succeeded, value_or_exception, started_at, finished_at)`` batches on
the event loop. The in-process executor runs sync bodies on worker threads
and leaves async bodies to the loop; the process executor runs every body in
a worker process (for CPU-bound work). Scale-out executors follow the same
protocol.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import pickle
import sys
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol, runtime_checkable

from partita.errors import ConfigurationError, ExecutionError
from partita.events.emission import activate, deactivate
from partita.execution.workers import Completion, ThreadWorkers

__all__ = ["Executor", "InProcessExecutor", "ProcessExecutor", "resolve_executor"]

Deliver = Callable[[list[Completion]], None]


@runtime_checkable
class Executor(Protocol):
    """Runs bodies for one run at a time (start → submit… → shutdown)."""

    #: True when the executor also runs async bodies; False leaves them to the loop.
    runs_async_bodies: bool

    def start(self, loop: asyncio.AbstractEventLoop, deliver: Deliver, max_workers: int) -> None: ...

    def submit(
        self, token: Any, fn: Callable[..., Any], kwargs: dict[str, Any], asset_name: str, emitter: Any = None
    ) -> None:
        """Run ``fn(**kwargs)``; ``emitter`` is `partita.emit`'s producer while it runs."""
        ...

    def shutdown(self, wait: float | None = None) -> bool: ...


class InProcessExecutor:
    """Sync bodies on worker threads of this process; async bodies on the loop."""

    runs_async_bodies = False

    def __init__(self) -> None:
        self._workers: ThreadWorkers | None = None

    def start(self, loop: asyncio.AbstractEventLoop, deliver: Deliver, max_workers: int) -> None:
        self._workers = ThreadWorkers(loop, deliver, max_workers)

    def submit(
        self, token: Any, fn: Callable[..., Any], kwargs: dict[str, Any], asset_name: str, emitter: Any = None
    ) -> None:
        if self._workers is None:
            raise ExecutionError("InProcessExecutor.submit called before start()")
        self._workers.submit(token, fn, kwargs, emitter)

    def shutdown(self, wait: float | None = None) -> bool:
        return True if self._workers is None else self._workers.shutdown(wait)


def _invoke_in_worker(
    fn: Callable[..., Any], kwargs: dict[str, Any], asset_name: str, emitter: Any = None
) -> tuple[bool, Any, float, float]:
    """Runs in the worker process: call the body and make its outcome portable."""
    active = activate(emitter)
    started = time.time()
    try:
        value = fn(**kwargs)
        if asyncio.iscoroutine(value):
            value = asyncio.run(value)
        succeeded = True
    except BaseException as exc:  # noqa: BLE001 - returned as the attempt's failure
        value, succeeded = exc, False
    finished = time.time()
    deactivate(active)
    try:
        pickle.dumps(value)
    except Exception as exc:  # noqa: BLE001 - unpicklable outputs and exceptions are reported by name
        what = "output" if succeeded else f"exception ({type(value).__name__}: {value})"
        value = ExecutionError(
            f"asset {asset_name!r}: its {what} cannot be sent back from the worker process: {exc}"
        )
        succeeded = False
    return succeeded, value, started, finished


class ProcessExecutor:
    """Every body runs in a pool of worker processes.

    Bodies, inputs and outputs cross the process boundary by pickling: define
    assets at module level and return picklable values. On Linux workers
    are forked, so entry files loaded by the CLI are importable in them.
    """

    runs_async_bodies = True

    def __init__(self, max_workers: int | None = None) -> None:
        if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1):
            raise ConfigurationError("ProcessExecutor max_workers must be a positive integer")
        self._max_workers = max_workers
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._workers = 1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deliver: Deliver | None = None

    def start(self, loop: asyncio.AbstractEventLoop, deliver: Deliver, max_workers: int) -> None:
        self._workers = self._max_workers or min(max_workers, multiprocessing.cpu_count())
        self._pool = self._new_pool()
        self._loop, self._deliver = loop, deliver

    def _new_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        method = "fork" if sys.platform.startswith("linux") else "spawn"
        return concurrent.futures.ProcessPoolExecutor(
            max_workers=self._workers, mp_context=multiprocessing.get_context(method)
        )

    def submit(
        self, token: Any, fn: Callable[..., Any], kwargs: dict[str, Any], asset_name: str, emitter: Any = None
    ) -> None:
        assert self._pool is not None and self._loop is not None and self._deliver is not None
        loop, deliver = self._loop, self._deliver
        submitted = time.time()
        try:
            try:
                future = self._pool.submit(_invoke_in_worker, fn, kwargs, asset_name, emitter)
            except BrokenProcessPool:
                # A worker died earlier: the attempts it took down have failed;
                # later work gets a fresh pool.
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
                future = self._pool.submit(_invoke_in_worker, fn, kwargs, asset_name, emitter)
        except (BrokenProcessPool, RuntimeError) as exc:
            error = ExecutionError(f"asset {asset_name!r}: the process pool cannot take work: {exc}")
            loop.call_soon(deliver, [(token, False, error, submitted, time.time())])
            return

        def done(finished: concurrent.futures.Future[tuple[bool, Any, float, float]]) -> None:
            completion: Completion
            if finished.cancelled():
                return
            exc = finished.exception()
            if exc is None:
                succeeded, value, started, ended = finished.result()
                completion = (token, succeeded, value, started, ended)
            else:
                if isinstance(exc, BrokenProcessPool):
                    reason = "a worker process died"
                else:
                    reason = "its body or inputs cannot be sent to a worker process"
                error = ExecutionError(f"asset {asset_name!r}: {reason}: {type(exc).__name__}: {exc}")
                error.__cause__ = exc
                completion = (token, False, error, submitted, time.time())
            try:
                loop.call_soon_threadsafe(deliver, [completion])
            except RuntimeError:
                pass  # the loop closed: the run was abandoned

        future.add_done_callback(done)

    def shutdown(self, wait: float | None = None) -> bool:
        if self._pool is None:
            return True
        pool, self._pool = self._pool, None
        pool.shutdown(wait=bool(wait), cancel_futures=True)
        return True


def resolve_executor(spec: Any) -> Executor:
    """A fresh executor for one run from a Flow's ``executor`` option."""
    if spec is None or spec in ("thread", "in-process"):
        return InProcessExecutor()
    if spec == "process":
        return ProcessExecutor()
    if isinstance(spec, type) and issubclass(spec, (InProcessExecutor, ProcessExecutor)):
        return spec()
    if isinstance(spec, Executor):
        return spec
    raise ConfigurationError("executor must be None, 'process', or an Executor instance")
