"""`RunCancellation`: asking a run to cancel from outside its event loop (another thread, another process).

Ctrl-C and SIGTERM cancel the task that awaits the run. A request that
arrives some other way — the store's journal noticing that another process
ran ``partita runs cancel`` — goes through this handle instead: it may be
called from any thread, it cancels the run exactly as Ctrl-C does (no new
work is admitted, async bodies are cancelled, running sync bodies get the
grace period), and the run then *returns* its cancelled `RunResult` rather
than raising, so a daemon running many consumer runs loses only that one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["DEFAULT_CANCEL_GRACE_SECONDS", "RunCancellation"]

#: How long a cancelled run waits for sync bodies that are already running (here, not in the
#: engine, so that defining a Flow does not import the engine).
DEFAULT_CANCEL_GRACE_SECONDS = 10.0


class RunCancellation:
    """One run's cancel request: made at most once, delivered to the engine once it runs the run.

    The engine binds a delivery callback while the run executes and unbinds
    it before the run returns; a request made before binding is delivered
    at binding, one made after the run ended is kept but changes nothing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._deliver: Callable[[], None] | None = None

    @property
    def requested(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        """Who asked, in words (for the run's report), or None."""
        return self._reason

    def request(self, reason: str) -> None:
        """Ask the run to cancel; safe from any thread, and asking again changes nothing."""
        with self._lock:
            if self._reason is not None:
                return
            self._reason = reason
            # Under the lock: `unbind` cannot run between the check and the delivery.
            if self._deliver is not None:
                self._deliver()

    def bind(self, deliver: Callable[[], None]) -> None:
        """The engine's side: ``deliver`` must be thread-safe and must not block."""
        with self._lock:
            self._deliver = deliver
            if self._reason is not None:
                deliver()

    def unbind(self) -> None:
        with self._lock:
            self._deliver = None
