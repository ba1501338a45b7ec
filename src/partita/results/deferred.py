"""`DeferredOutput`: an output that lives elsewhere (on a cluster) until someone asks for its value.

An executor that keeps outputs where they were computed hands the engine a
small stand-in instead of the value. The engine passes it downstream as it
is, resolves it only where the driver itself needs the value (a discovering
producer's declarations, a materialization commit, `RunResult.output`), and
releases it once no attempt of the run needs it any more.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DeferredOutput", "resolved"]


class DeferredOutput:
    """Base of executor-specific output handles (subclasses implement both methods)."""

    __slots__ = ()

    def resolve(self) -> Any:
        """The value, fetched to this process once (later calls return the same value)."""
        raise NotImplementedError

    def release(self) -> None:
        """Let the place that holds the value drop it; a later `resolve` fails unless it was fetched."""
        raise NotImplementedError


def resolved(value: Any) -> Any:
    """``value`` itself, or the value a `DeferredOutput` stands for."""
    return value.resolve() if isinstance(value, DeferredOutput) else value
