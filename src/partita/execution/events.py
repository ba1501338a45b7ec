"""Execution events and the observer protocol.

``index`` identifies an attempt within its asset without the raw key: the
position of its key in the run's selection (0 for unpartitioned assets).

Observers receive events synchronously, in order and one at a time, on
whichever thread runs the scheduler (the loop's, or a worker settling the
success it ran); they must be quick (render, count, enqueue). An observer that raises
is logged and otherwise ignored: observing never changes a run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from partita.planning.plan import FlowPlan
    from partita.results.model import AttemptResult, FailureInfo, RunResult

__all__ = [
    "AttemptFinished",
    "AttemptRetrying",
    "AttemptStarted",
    "ExecutionEvent",
    "ExecutionObserver",
    "RunFinished",
    "RunStarted",
]

_log = logging.getLogger("partita.execution")


@dataclass(frozen=True, slots=True)
class RunStarted:
    run_id: str
    plan: FlowPlan


@dataclass(frozen=True, slots=True)
class AttemptStarted:
    run_id: str
    asset_name: str
    index: int
    partition_key: Any
    partition_key_present: bool
    invocation: int
    #: Wall-clock time (seconds since the epoch) when the invocation was handed to an executor.
    started_at: float = 0.0


@dataclass(frozen=True, slots=True)
class AttemptRetrying:
    run_id: str
    asset_name: str
    index: int
    partition_key: Any
    partition_key_present: bool
    invocation: int
    delay: float
    failure: FailureInfo


@dataclass(frozen=True, slots=True)
class AttemptFinished:
    run_id: str
    attempt: AttemptResult


@dataclass(frozen=True, slots=True)
class RunFinished:
    result: RunResult


ExecutionEvent = RunStarted | AttemptStarted | AttemptRetrying | AttemptFinished | RunFinished


@runtime_checkable
class ExecutionObserver(Protocol):
    def on_event(self, event: ExecutionEvent) -> None: ...


class ObserverFanout:
    """Delivers each event to every observer, isolating their failures."""

    __slots__ = ("_observers",)

    def __init__(self, observers: Sequence[ExecutionObserver]) -> None:
        self._observers = tuple(observers)

    def __bool__(self) -> bool:
        return bool(self._observers)

    def emit(self, event: ExecutionEvent) -> None:
        for observer in self._observers:
            try:
                observer.on_event(event)
            except Exception:  # noqa: BLE001 - an observer must not change the run
                _log.exception("execution observer %r raised; the run continues", observer)
