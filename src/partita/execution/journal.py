"""`RunJournal`: where a run is recorded while it progresses (a store, usually).

Unlike an observer, a journal may refuse: ``begin`` failing aborts the run
before any body starts, and ``end`` failing is reported after the run (the
result rides along on the error). It receives every execution event but
`AttemptStarted`: the attempts running now are what it asks ``running`` for
when it writes, so a run whose attempts start and finish between two writes
builds no start event per attempt.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from partita.execution.events import ExecutionEvent
    from partita.planning.plan import FlowPlan
    from partita.results.model import RunResult

__all__ = ["RunJournal", "RunningAttempt"]


class RunningAttempt(NamedTuple):
    """An attempt whose body runs now (its current invocation started at ``started_at``)."""

    asset_name: str
    index: int
    partition_key_present: bool
    partition_key: Any
    started_at: float


@runtime_checkable
class RunJournal(Protocol):
    def begin(
        self,
        run_id: str,
        plan: FlowPlan,
        started_at: dt.datetime,
        *,
        running: Callable[[], list[RunningAttempt]] | None = None,
    ) -> None: ...

    def on_event(self, event: ExecutionEvent) -> None: ...

    def end(self, result: RunResult) -> None: ...

    def abandon(self) -> None:
        """Stop recording without an end (no result could be built): the run shows interrupted once its process exits."""
