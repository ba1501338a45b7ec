"""Partial batches: when a batched flow's due keys wait for its last partial batch.

A partial batch (fewer keys than `max_keys_per_run`) holds back the flow's
next partial batch while it runs, for at most `PARTIAL_BATCH_WAIT` after it
began, and, once it has ended, until `PARTIAL_BATCH_GAP` after it began. The
keys that become due meanwhile then start together: a producer emitting one
key at a time gets a few large runs instead of a run per handful of keys.
Full batches never wait.
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

__all__ = ["PARTIAL_BATCH_GAP", "PARTIAL_BATCH_WAIT", "PartialBatches"]

#: Keys due while a batched flow's partial batch runs wait for it at most this long after it began.
PARTIAL_BATCH_WAIT = 1.0
#: A serving daemon starts a flow's partial batch at most this often, even when the last one ended sooner.
PARTIAL_BATCH_GAP = 0.02


class PartialBatches:
    """Each batched flow's last partial batch (its run and when it began), for one daemon's passes."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[concurrent.futures.Future[Any], float]] = {}
        #: When the earliest gap that held keys back ends: the daemon passes again then.
        self.gap_ends: float | None = None

    def started(self, flow: str, run: concurrent.futures.Future[Any]) -> None:
        self._last[flow] = (run, time.monotonic())

    def running(self, flow: str) -> bool:
        """Whether the flow's last partial batch still runs, and began less than `PARTIAL_BATCH_WAIT` ago.

        Past that, keys stop waiting for it: a batch stuck in a slow body
        must not hold back the flow's later keys.
        """
        last = self._last.get(flow)
        return last is not None and not last[0].done() and time.monotonic() - last[1] < PARTIAL_BATCH_WAIT

    def holds_back(self, flow: str, *, serving: bool) -> bool:
        """Whether the flow's next partial batch waits now: its last one runs, or (serving) began just now.

        A single `run_once` has no later pass to start what a gap held back,
        so only a serving daemon keeps the gap; it notes when the gap ends.
        """
        if self.running(flow):
            return True
        last = self._last.get(flow)
        if last is None or not serving:
            return False
        ends = last[1] + PARTIAL_BATCH_GAP
        if time.monotonic() >= ends:
            return False
        self.gap_ends = ends if self.gap_ends is None else min(self.gap_ends, ends)
        return True

    def gap_over(self) -> bool:
        """Whether a gap that held keys back has ended since the last call (a pass should start them)."""
        if self.gap_ends is None or time.monotonic() < self.gap_ends:
            return False
        self.gap_ends = None
        return True
