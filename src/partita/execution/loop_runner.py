"""Event loops kept by threads that start many runs (a trigger daemon's consumer threads).

`asyncio.run` makes an event loop (a selector and a socket pair) and closes
it on every call: about 80 µs, a large part of a one-key triggered run. A
pool whose threads start runs one after another keeps one loop per thread
(`ThreadLoops`), and `run` uses it; every other thread gets `asyncio.run`.
A run on a kept loop ends as under `asyncio.run`: the tasks it left behind
are cancelled and awaited before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["ThreadLoops", "run"]

T = TypeVar("T")

_local = threading.local()


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion on this thread's kept loop, or with `asyncio.run`."""
    runner: asyncio.Runner | None = getattr(_local, "runner", None)
    if runner is None or getattr(_local, "pid", None) != os.getpid():  # none kept, or a forked child
        return asyncio.run(coroutine)
    try:
        return runner.run(coroutine)
    finally:
        _cancel_left_behind(runner.get_loop())


def _cancel_left_behind(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel and await what the run left on the loop, as `asyncio.run` does before it closes one."""
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


class ThreadLoops:
    """The loops the threads of one pool keep: `keep` is the pool's initializer, `close` follows its shutdown."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runners: list[asyncio.Runner] = []

    def keep(self) -> None:
        """From now on, runs started on the calling thread share one loop."""
        runner = asyncio.Runner()
        _local.runner, _local.pid = runner, os.getpid()
        with self._lock:
            self._runners.append(runner)

    def close(self) -> None:
        """Close every kept loop; call once the pool's threads have ended."""
        with self._lock:
            runners, self._runners = self._runners, []
        for runner in runners:
            with contextlib.suppress(Exception):  # a loop that cannot shut down cleanly is closed anyway
                runner.close()
