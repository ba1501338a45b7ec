"""SIGTERM during `partita run` cancels the run like Ctrl-C (SPEC §5, §13).

A service manager or ``kill`` stops a run with SIGTERM, whose default
action ends the process at once: no result, and a run the store can only
call interrupted. While the run executes, the CLI handles SIGTERM on the
event loop by cancelling the task that awaits the run — what `asyncio.run`
does for SIGINT — so the run stops admitting work, records ``cancelled``
and reports its result. A second SIGTERM cuts the grace period for running
sync bodies short.

Only the CLI installs this, and only for the duration of the run: library
code never changes a process's signal handlers.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["Termination", "cancel_on_sigterm"]

T = TypeVar("T")


class Termination:
    """Whether SIGTERM arrived while the run executed."""

    def __init__(self) -> None:
        self.received = False


async def cancel_on_sigterm(work: Awaitable[T], termination: Termination) -> T:
    """Await ``work``; SIGTERM meanwhile cancels it (`asyncio.CancelledError` reaches the caller)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def terminate() -> None:
        termination.received = True
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, terminate)
    except (ValueError, RuntimeError, NotImplementedError):  # not the main thread, or no POSIX signals
        return await work
    try:
        return await work
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
