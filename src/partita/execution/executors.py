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
import multiprocessing
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from partita.errors import ConfigurationError, ExecutionError
from partita.execution.process_pool import WorkerPool
from partita.execution.run_constants import RunConstants, shared_objects_of
from partita.execution.workers import Completion, SchedulerLock, ThreadWorkers

__all__ = ["EXECUTOR_FORMS", "Executor", "InProcessExecutor", "ProcessExecutor", "resolve_executor"]

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
    #: A sync body's emitter may be an `AttemptScope`: the worker ends its log after the body. Another
    #: executor gets each sync body wrapped in a log scope of its own instead.
    runs_attempt_scopes = True

    def __init__(self) -> None:
        self._workers: ThreadWorkers | None = None

    def start(self, loop: asyncio.AbstractEventLoop, deliver: Deliver, max_workers: int) -> None:
        self._workers = ThreadWorkers(loop, deliver, max_workers)

    def settle_on_workers(self, scheduler_lock: SchedulerLock) -> None:
        """Worker threads settle successes themselves, under ``scheduler_lock`` (`ThreadWorkers`)."""
        if self._workers is None:
            raise ExecutionError("InProcessExecutor.settle_on_workers called before start()")
        self._workers.settle_on_workers(scheduler_lock)

    def submit(
        self, token: Any, fn: Callable[..., Any], kwargs: dict[str, Any], asset_name: str, emitter: Any = None
    ) -> None:
        if self._workers is None:
            raise ExecutionError("InProcessExecutor.submit called before start()")
        self._workers.submit(token, fn, kwargs, emitter)

    def shutdown(self, wait: float | None = None) -> bool:
        return True if self._workers is None else self._workers.shutdown(wait)


class ProcessExecutor:
    """Every body runs in a worker process (see `partita.execution.process_pool`).

    Bodies, inputs and outputs cross the process boundary by pickling: define
    assets at module level and return picklable values. On Linux workers
    are forked, so entry files loaded by the CLI are importable in them. A
    worker that dies fails only the attempt it was running; workers end
    with the driver, even when it is killed.
    """

    runs_async_bodies = True
    #: Linux workers get SIGKILL when the driver dies; off, only the liveness pipe ends them (tests use it).
    _parent_death_signal = True

    def __init__(self, max_workers: int | None = None) -> None:
        if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1):
            raise ConfigurationError("ProcessExecutor max_workers must be a positive integer")
        self._max_workers = max_workers
        self._pool: WorkerPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deliver: Deliver | None = None
        self._constants: RunConstants | None = None

    def start(self, loop: asyncio.AbstractEventLoop, deliver: Deliver, max_workers: int) -> None:
        size = self._max_workers or min(max_workers, multiprocessing.cpu_count())
        self._pool = WorkerPool(loop, deliver, size, parent_death_signal=self._parent_death_signal)
        self._constants = None  # a new pool's workers get the run's shared objects anew
        self._pool.fill()
        self._loop, self._deliver = loop, deliver

    def submit(
        self, token: Any, fn: Callable[..., Any], kwargs: dict[str, Any], asset_name: str, emitter: Any = None
    ) -> None:
        if self._pool is None or self._loop is None or self._deliver is None:
            raise ExecutionError("ProcessExecutor.submit called before start()")
        try:
            if self._constants is None:  # the run's catalog and definitions go to each worker once
                self._constants = RunConstants(shared_objects_of(emitter))
                self._pool.share(self._constants.table)
            payload = self._constants.dumps((fn, kwargs, emitter))
        except Exception as exc:  # noqa: BLE001 - what cannot be pickled fails its own attempt
            error = ExecutionError(
                f"asset {asset_name!r}: its body or inputs cannot be sent to a worker process: "
                f"{type(exc).__name__}: {exc}"
            )
            now = time.time()
            self._loop.call_soon(self._deliver, [(token, False, error, now, now)])
            return
        self._pool.submit(token, asset_name, payload)

    def cancel_async_bodies(self) -> None:
        """The run is cancelled: its running async bodies get ``CancelledError`` in their worker processes."""
        if self._pool is not None:
            self._pool.cancel_async_bodies()

    def shutdown(self, wait: float | None = None) -> bool:
        pool, self._pool = self._pool, None
        return True if pool is None else pool.shutdown(wait)


#: What a Flow's ``executor`` option (and the CLI's ``--executor``, and the project configuration) accepts.
EXECUTOR_FORMS = "'thread', 'process', 'dask', 'dask://HOST:PORT', or an Executor instance"


def resolve_executor(spec: Any) -> Executor:
    """A fresh executor for one run from a Flow's ``executor`` option.

    An executor that keeps per-run state outside its ``start`` (the Dask
    executor's futures) offers ``for_run``: each run gets its own copy, so
    concurrent runs of one flow never share it.
    """
    if spec is None or spec in ("thread", "in-process"):
        return InProcessExecutor()
    if spec == "process":
        return ProcessExecutor()
    if isinstance(spec, str) and (spec == "dask" or spec.startswith("dask://")):
        from partita.execution.dask_executor import DaskExecutor

        return DaskExecutor(None if spec == "dask" else spec)
    if isinstance(spec, type) and issubclass(spec, (InProcessExecutor, ProcessExecutor)):
        return spec()
    if isinstance(spec, Executor):
        for_run = getattr(spec, "for_run", None)
        return for_run() if callable(for_run) else spec
    raise ConfigurationError(f"executor must be {EXECUTOR_FORMS}")
