"""Clocks the engine waits on: retry delays, rate windows and cooldowns.

Injecting a clock lets tests (and simulations) exercise backoff and rate
limits without real sleeps. Body timestamps in results stay wall-clock.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
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
    """Virtual time for tests: waits end at once, in deadline order.

    Each ``sleep`` registers its deadline (now + seconds); the clock then
    jumps to the earliest pending deadline and wakes that sleeper, one at a
    time, after the loop has run the work that was already ready. Concurrent
    sleepers therefore wake at their own deadlines and time never goes back.
    ``sleeps`` records every requested wait, so a test can assert a backoff
    schedule exactly.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self.sleeps: list[float] = []
        self._waiters: list[tuple[float, int, asyncio.Future[None]]] = []
        self._sequence = itertools.count()
        self._advance_scheduled = False

    def monotonic(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._waiters, (self._now + max(0.0, seconds), next(self._sequence), waiter))
        if not self._advance_scheduled:
            self._advance_scheduled = True
            loop.call_soon(self._advance)
        await waiter

    def _advance(self) -> None:
        self._advance_scheduled = False
        while self._waiters:
            deadline, _, waiter = heapq.heappop(self._waiters)
            if waiter.done():  # cancelled while waiting
                continue
            self._now = max(self._now, deadline)
            waiter.set_result(None)
            break
        if self._waiters:
            self._advance_scheduled = True
            asyncio.get_running_loop().call_soon(self._advance)
