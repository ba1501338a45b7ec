"""Which producer `partita.emit` uses in this thread or task.

A context variable, apart from `emission` so that reading it imports
nothing else: the log handler asks it for the running attempt on every
line, and the CLI loads that handler without the engine.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

__all__ = ["activate", "active_emitter", "deactivate"]

_active: contextvars.ContextVar[Any] = contextvars.ContextVar("partita_active_emitter")


#: ``activate(emitter)`` makes ``emitter`` (an `Emitter`, or what stands for one) the one `partita.emit`
#: uses in this thread or task, and returns the token ``deactivate`` takes to undo it. The context
#: variable's own methods: every attempt calls both, and a function around each added a call.
activate: Callable[[Any], contextvars.Token[Any]] = _active.set
deactivate: Callable[[contextvars.Token[Any]], None] = _active.reset


def active_emitter() -> Any:
    """What `activate` made the producer of this thread or task; None if nothing."""
    return _active.get(None)
