"""One key's history for its page: its state, its recorded attempts across runs, its events, its attempts' logs.

Every list is bounded: attempts and events come a page at a time (with a
cursor to the next page), and log lines are read for the newest few runs
only, a bounded number each. Attempts name their key only in runs that
recorded keys (``record_partition_keys``): the page says so when none did.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from partita.definitions.config import RunConfig
from partita.events.model import AssetEvent
from partita.operations.status import KeyStatus, asset_status
from partita.store.key_history import KeyAttemptRow, KeyHistory
from partita.store.protocol import LogQuery, StoredLogLine
from partita.ui.asset_window import AssetRef
from partita.ui.context import UiContext

__all__ = ["LOG_LINES", "LOG_RUNS", "KeyHistoryView", "RunLogs", "attempt_fields", "event_extra", "read_key_history"]

#: Log lines are read for the attempts of this many newest runs, at most this many lines each.
LOG_RUNS = 3
LOG_LINES = 200


@dataclass(frozen=True, slots=True)
class RunLogs:
    run_id: str
    lines: tuple[StoredLogLine, ...]
    #: More lines are kept than shown (the run page shows them all).
    more: bool


@dataclass(frozen=True, slots=True)
class KeyHistoryView:
    status: KeyStatus
    attempts: tuple[KeyAttemptRow, ...]
    #: The ``before`` cursor of the next page of attempts, when there is one.
    attempts_next: float | None
    events: tuple[AssetEvent, ...]
    #: The ``since`` cursor of the next page of events, when there is one.
    events_next: int | None
    logs: tuple[RunLogs, ...]


def event_extra(event: AssetEvent) -> str:
    """An event's ``extra`` as compact JSON text (rendered escaped, like every other user value)."""
    return json.dumps(event.extra, sort_keys=True, ensure_ascii=False)


def _logs(context: UiContext, asset: str, key: str, attempts: tuple[KeyAttemptRow, ...]) -> tuple[RunLogs, ...]:
    runs = list(dict.fromkeys(attempt.run_id for attempt in attempts))[:LOG_RUNS]
    found = []
    for run_id in runs:
        lines = context.store.attempt_logs(run_id, LogQuery(asset=asset, partition_key=key, limit=LOG_LINES + 1))
        found.append(RunLogs(run_id, tuple(lines[:LOG_LINES]), len(lines) > LOG_LINES))
    return tuple(found)


def read_key_history(
    context: UiContext, asset: AssetRef, key: str, *, limit: int, before: float | None, since: int | None
) -> KeyHistoryView:
    """``key`` of ``asset`` (canonical text): at most ``limit`` attempts (finished before ``before``) and events (after ``since``)."""
    closure = {definition.name: definition for definition in asset.flow.closure()}
    config = RunConfig(partition_keys=(key,))
    status = asset_status(asset.definition, closure, config, context.store, dt.datetime.now(dt.UTC)).keys[0]
    rows = KeyHistory(context.store).attempts(asset.name, key, limit=limit + 1, before=before)
    attempts = tuple(rows[:limit])
    attempts_next = attempts[-1].finished_at if len(rows) > limit and attempts else None
    events = context.store.list_events(asset=asset.name, partition_key=key, since=since, limit=limit + 1)
    shown = tuple(events[:limit])
    events_next = shown[-1].id if len(events) > limit else None
    return KeyHistoryView(status, attempts, attempts_next, shown, events_next, _logs(context, asset.name, key, attempts))


def attempt_fields(attempt: KeyAttemptRow) -> dict[str, Any]:
    """What the attempts table shows of one attempt."""
    return {
        "run_id": attempt.run_id,
        "status": attempt.status,
        "reason": attempt.reason,
        "launched_by": attempt.launched_by,
        "started_at": attempt.started_at,
        "finished_at": attempt.finished_at,
        "duration": attempt.duration,
        "invocations": attempt.invocations,
        "failure": None if attempt.failure_type is None else f"{attempt.failure_type}: {attempt.failure_message or ''}",
    }
