"""SIGTERM during `partita run` takes the Ctrl-C path (SPEC §5, §13).

A service manager or ``kill`` stops a run with SIGTERM, whose default
action ends the process at once: no result, and a run the store can only
call interrupted. While a run executes, the CLI routes SIGTERM to whatever
handles SIGINT — `asyncio.run` cancels the run then, so it stops admitting
work, records ``cancelled`` and reports its result — and remembers that it
was a termination, which exits 143 instead of 130.

Only the CLI installs this, and only around the run: library code never
changes a process's signal handlers.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["Termination", "sigterm_as_interrupt"]


class Termination:
    """Whether SIGTERM arrived while the run executed."""

    def __init__(self) -> None:
        self.received = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)  # asyncio's handler cancels the run; the default raises KeyboardInterrupt
        else:
            raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[Termination]:
    """Within the block, SIGTERM interrupts like SIGINT; the previous handler returns afterwards."""
    termination = Termination()
    if threading.current_thread() is not threading.main_thread():
        yield termination  # signal handlers belong to the main thread
        return
    previous = signal.signal(signal.SIGTERM, termination._handle)
    try:
        yield termination
    finally:
        signal.signal(signal.SIGTERM, previous)
