"""The dispatcher: which queued attempt starts next, and when.

Kept apart from readiness and settlement because it is the one place that
knows the run's concurrency limit, the ready queues (free work and each
resource gate's) and the clock waits that reopen a gate.

Of the ready attempts, those of later assets in the plan start first, then
the earliest ready: when a key finishes an asset, its next asset starts
before another key starts the first one. A chain over many keys thus
completes key by key and holds only its in-flight outputs (in memory, or on
a cluster), instead of every first-asset output until the last one ran.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from partita.execution.admission import ResourceGate
from partita.execution.clock import Clock
from partita.execution.graph import TaskState
from partita.results.model import SkipReason

__all__ = ["Dispatcher"]

_INFINITY = float("inf")

Start = Callable[[TaskState, int], None]
#: A ready attempt in a queue: ((minus its task's plan position, arrival number), task, key position),
#: or, in the free queue only, a task's consecutive ready keys as one entry (a `KeyBlock` for the position).
Queued = tuple[tuple[int, int], TaskState, "int | KeyBlock"]
SkipBlocked = Callable[[TaskState, int, SkipReason, tuple[Any, ...]], None]


class KeyBlock(list[int]):
    """``[next, stop]``: a task's ready key positions ``next`` to ``stop - 1``, queued as one entry.

    A run's roots arrive together, so their arrival numbers would be
    consecutive: one entry stands for all of them and keeps their order
    against every other entry (nothing arrives between them). It spares the
    queue an entry per root, which on 100,000 keys was both a share of the
    run's time and work for the garbage collector's full passes.
    """

    __slots__ = ()


def _unbound(*args: Any) -> None:
    raise RuntimeError("Dispatcher.connect() was not called")


class Dispatcher:
    """Ready attempts, later assets first, started while a global slot and their gate allow.

    ``running`` counts started invocations not yet completed; whoever receives
    completions decrements it. ``cancelling`` stops every start for good.
    """

    __slots__ = (
        "_free",
        "_next_sequence",
        "_gates",
        "clock",
        "_start",
        "_skip",
        "running",
        "limit",
        "cancelling",
        "timers",
        "dispatch",
    )

    def __init__(self, gates: Mapping[str, ResourceGate], limit: int, clock: Clock) -> None:
        self._free: list[Queued] = []  # a heap
        self._next_sequence = itertools.count().__next__
        self._gates = gates
        self.clock = clock
        self._start: Start = _unbound
        self._skip: SkipBlocked = _unbound
        self.running = 0
        self.limit = limit
        self.cancelling = False
        self.timers: set[asyncio.Task[None]] = set()
        #: Start what may start now; the gated variant only when the run has resource gates.
        self.dispatch: Callable[[], None] = self._dispatch_free if not gates else self._dispatch_gated

    def connect(self, start: Start, skip: SkipBlocked) -> None:
        """Give the dispatcher the step that starts a body and the one that skips an attempt."""
        self._start = start
        self._skip = skip

    def enqueue(self, task: TaskState, key_index: int) -> None:
        """Queue a ready attempt (skipped at once when its resource's circuit is open)."""
        gate = task.gate
        entry = ((-task.index, self._next_sequence()), task, key_index)
        if gate is None:
            heapq.heappush(self._free, entry)
        elif gate.circuit_open:
            self._skip(task, key_index, SkipReason.RESOURCE_CIRCUIT_OPEN, ())
        else:
            heapq.heappush(gate.queue, entry)

    def enqueue_block(self, task: TaskState, start: int, stop: int) -> None:
        """Queue key positions ``start`` to ``stop - 1`` of an ungated task, ready together, as one entry."""
        if start < stop:
            heapq.heappush(self._free, ((-task.index, self._next_sequence()), task, KeyBlock((start, stop))))

    def _dispatch_free(self) -> None:
        # A cancellation is set between loop turns, never during a dispatch: checked once.
        if self.cancelling:
            return
        free, limit, start, take = self._free, self.limit, self._start, self._take_free
        while free and self.running < limit:
            task, key_index = take()
            self.running += 1
            start(task, key_index)

    def _take_free(self) -> tuple[TaskState, int]:
        """Take the free queue's first attempt (a block's next key: its entry's place holds for the rest)."""
        _, task, key_index = self._free[0]
        if key_index.__class__ is int:
            heapq.heappop(self._free)
            return task, key_index
        block, key_index = key_index, key_index[0]
        block[0] = key_index + 1
        if key_index + 1 == block[1]:
            heapq.heappop(self._free)
        return task, key_index

    def _dispatch_gated(self) -> None:
        if self.cancelling:
            return
        limit, free, clock = self.limit, self._free, self.clock
        while self.running < limit:
            now = clock.monotonic()
            best: Queued | None = free[0] if free else None
            source: ResourceGate | None = None
            for gate in self._gates.values():
                if not gate.queue:
                    continue
                head = gate.queue[0]
                if best is not None and head[0] > best[0]:
                    continue
                opens = gate.earliest_start(now)
                if opens is not None:
                    # Ready work denied by this policy while a global slot is free.
                    gate.note_denied((head[1], head[2]), now)
                    if opens != _INFINITY:
                        self._wake_gate_at(gate, opens)
                    continue
                pool = gate.pool
                if pool is not None and not pool.admits(gate, (head[1], head[2])):
                    # Waiting for the store to grant a slot of the shared pool: others go on.
                    gate.note_denied((head[1], head[2]), now)
                    continue
                best, source = head, gate
            if best is None:
                return
            if source is None:
                task, key_index = self._take_free()
            else:
                heapq.heappop(source.queue)
                task, key_index = best[1], best[2]
                source.note_started((task, key_index), now)
                if source.pool is not None:
                    source.pool.started((task, key_index))
            self.running += 1
            self._start(task, key_index)

    def timer(self, waiting: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Start a clock wait; tracked so a finished run leaves none pending."""
        timer = asyncio.get_running_loop().create_task(waiting)
        self.timers.add(timer)
        timer.add_done_callback(self.timers.discard)
        return timer

    def cancel_timers(self) -> None:
        for timer in list(self.timers):
            timer.cancel()

    def _wake_gate_at(self, gate: ResourceGate, when: float) -> None:
        if gate.wake_scheduled_for is not None and gate.wake_scheduled_for <= when:
            return
        gate.wake_scheduled_for = when
        self.timer(self._wake_gate(gate, when))

    async def _wake_gate(self, gate: ResourceGate, when: float) -> None:
        await self.clock.sleep(max(0.0, when - self.clock.monotonic()))
        if gate.wake_scheduled_for == when:
            gate.wake_scheduled_for = None
        self.dispatch()
