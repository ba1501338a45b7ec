"""Clocks the engine waits on: retry delays, rate windows and cooldowns.

Injecting a clock lets tests (and simulations) exercise backoff and rate
limits without real sleeps. Body timestamps in results stay wall-clock.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "FastForwardClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Real time: ``time.monotonic`` and ``asyncio.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FastForwardClock:
    """Virtual time that jumps to the end of every sleep at once.

    ``sleeps`` records each requested wait, so a test can assert a backoff
    schedule exactly. Concurrent sleepers each move time forward to their own
    deadline; time never goes back.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self._now = max(self._now, self._now + max(0.0, seconds))
        await asyncio.sleep(0)
