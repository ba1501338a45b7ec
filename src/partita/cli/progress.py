"""A terminal progress display driven by execution events.

Shown only on an interactive stderr and never with ``--json``. Updates are
throttled so that rendering costs nothing noticeable per attempt.
"""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from partita.execution.events import AttemptFinished, ExecutionEvent, RunFinished, RunStarted
from partita.results.model import AttemptStatus, RunResult

__all__ = ["ProgressDisplay", "ResultCapture"]

_REFRESH_SECONDS = 0.1


class ResultCapture:
    """Keeps the final result, which a cancelled run delivers only to observers."""

    def __init__(self) -> None:
        self.result: RunResult | None = None

    def on_event(self, event: ExecutionEvent) -> None:
        if isinstance(event, RunFinished):
            self.result = event.result


class ProgressDisplay:
    """finished/total, failed, skipped, cancelled, rate, elapsed and remaining time for one run.

    A cancelled attempt did not finish its work, so it is counted apart and
    never advances the bar: after Ctrl-C the display says how far the run got.
    """

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "[red]{task.fields[failed]} failed[/] [yellow]{task.fields[skipped]} skipped[/]"
                "{task.fields[cancelled]}"
            ),
            TextColumn("{task.fields[rate]}/s"),
            TextColumn("elapsed"),
            TimeElapsedColumn(),
            TextColumn("remaining"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task = self._progress.add_task("running", total=None, failed=0, skipped=0, rate="-", cancelled="")
        self._done = self._failed = self._skipped = self._cancelled = 0
        self._started = time.monotonic()
        self._last_refresh = 0.0

    def __enter__(self) -> ProgressDisplay:
        self._progress.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._refresh()
        self._progress.stop()

    def on_event(self, event: ExecutionEvent) -> None:
        if isinstance(event, AttemptFinished):
            status = event.attempt.status
            if status is AttemptStatus.CANCELLED:
                self._cancelled += 1
            else:
                self._done += 1
            if status is AttemptStatus.FAILED:
                self._failed += 1
            elif status is AttemptStatus.SKIPPED:
                self._skipped += 1
            now = time.monotonic()
            if now - self._last_refresh >= _REFRESH_SECONDS:
                self._last_refresh = now
                self._refresh()
        elif isinstance(event, RunStarted):
            self._started = time.monotonic()
            self._progress.update(self._task, total=event.plan.attempt_count, description=f"run {event.run_id[:8]}")
        elif isinstance(event, RunFinished):
            self._refresh()

    def _refresh(self) -> None:
        elapsed = max(time.monotonic() - self._started, 1e-9)
        self._progress.update(
            self._task,
            completed=self._done,
            failed=self._failed,
            skipped=self._skipped,
            cancelled=f" [magenta]{self._cancelled} cancelled[/]" if self._cancelled else "",
            rate=f"{self._done / elapsed:,.0f}",
        )
