"""`RunJournal`: where a run is recorded while it progresses (a store, usually).

Unlike an observer, a journal may refuse: ``begin`` failing aborts the run
before any body starts, and ``end`` failing is reported after the run (the
result rides along on the error).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from partita.execution.events import ExecutionEvent
    from partita.planning.plan import FlowPlan
    from partita.results.model import RunResult

__all__ = ["RunJournal"]


@runtime_checkable
class RunJournal(Protocol):
    def begin(self, run_id: str, plan: FlowPlan, started_at: dt.datetime) -> None: ...

    def on_event(self, event: ExecutionEvent) -> None: ...

    def end(self, result: RunResult) -> None: ...
