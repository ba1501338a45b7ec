"""Which producer `partita.emit` uses in this thread or task.

A context variable, apart from `emission` so that reading it imports
nothing else: the log handler asks it for the running attempt on every
line, and the CLI loads that handler without the engine.
"""

from __future__ import annotations

import contextvars
from typing import Any

__all__ = ["activate", "active_emitter", "deactivate"]

_active: contextvars.ContextVar[Any] = contextvars.ContextVar("partita_active_emitter")


def activate(emitter: Any) -> contextvars.Token[Any]:
    """Make ``emitter`` (an `Emitter`, or what stands for one) the one `partita.emit` uses in this thread or task."""
    return _active.set(emitter)


def deactivate(token: contextvars.Token[Any]) -> None:
    _active.reset(token)


def active_emitter() -> Any:
    """What `activate` made the producer of this thread or task; None if nothing."""
    return _active.get(None)
