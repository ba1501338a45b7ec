"""Async bodies in a worker process: a loop of their own, and a signal from the driver that cancels them.

The engine cancels the async bodies it runs on its own loop at once when a
run is cancelled (SPEC §5). A worker process runs an async body with a
loop of its own in its main thread; the process executor sends it
`CANCEL_SIGNAL` when the run is cancelled, and the body gets
`asyncio.CancelledError` at its next await, as it would in the driver.
Between async bodies, and in processes that never run one, the signal is
ignored. A body on a thread that is not its process's main thread (a Dask
worker's) cannot be signalled: it runs inside `cancellable_as(token)`, and
`cancel_bodies_of(token)`, which the Dask executor runs on every worker,
cancels it through its loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Coroutine, Iterator
from typing import Any

__all__ = ["CANCEL_SIGNAL", "cancel_bodies_of", "cancellable_as", "ignore_cancel_signal", "run_coroutine"]

CANCEL_SIGNAL = signal.SIGUSR1

_scope = threading.local()  # the token of the run whose body this thread runs, if cancellable by token
_running: dict[str, set[asyncio.Task[Any]]] = {}
_running_lock = threading.Lock()


@contextlib.contextmanager
def cancellable_as(token: str) -> Iterator[None]:
    """Async bodies this thread runs meanwhile can be cancelled by `cancel_bodies_of(token)`."""
    _scope.token = token
    try:
        yield
    finally:
        _scope.token = None


def cancel_bodies_of(token: str) -> int:
    """Cancel the running async bodies registered under ``token`` (from any thread); how many there were."""
    with _running_lock:
        tasks = list(_running.get(token, ()))
    for task in tasks:
        task.get_loop().call_soon_threadsafe(task.cancel)
    return len(tasks)


def ignore_cancel_signal() -> None:
    """In a worker process: a cancel signal that arrives between async bodies does nothing."""
    signal.signal(CANCEL_SIGNAL, signal.SIG_IGN)


def run_coroutine(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run an async body to its end on a loop of its own, cancellable by its token or by `CANCEL_SIGNAL`."""
    token = getattr(_scope, "token", None)
    if token is not None:
        return asyncio.run(_registered(coroutine, token))
    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(coroutine)
    try:
        return asyncio.run(_cancellable(coroutine))
    finally:
        ignore_cancel_signal()  # closing the loop restored the default action, which ends the process


async def _cancellable(coroutine: Coroutine[Any, Any, Any]) -> Any:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(CANCEL_SIGNAL, task.cancel)
    return await coroutine


async def _registered(coroutine: Coroutine[Any, Any, Any], token: str) -> Any:
    task = asyncio.current_task()
    assert task is not None
    with _running_lock:
        _running.setdefault(token, set()).add(task)
    try:
        return await coroutine
    finally:
        with _running_lock:
            tasks = _running.get(token)
            if tasks is not None:
                tasks.discard(task)
                if not tasks:
                    del _running[token]
