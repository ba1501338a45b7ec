"""The rows a run's journal writes, built straight from the engine's attempts.

A plain success (one invocation, no failure) is most of what a run records,
and building an `AttemptRecord` and an `EventDraft` for each one cost more
than the database takes to store them. Here such an attempt becomes its
attempts row, and every success its outlet events row, as plain tuples in
table column order (`run_rows._attempt_row` and `rows.event_row` build the
same rows from records and drafts). Attempts with retries, failures or
blockers keep the record path: they carry invocation rows too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from partita.events.model import SourceKind
from partita.results.model import AttemptResult, AttemptStatus
from partita.results.record import RESOLUTION_TEXT

__all__ = ["is_plain_success", "key_text_of", "outlet_row", "success_row"]

_SUCCESS = AttemptStatus.SUCCESS
_OUTLET = SourceKind.OUTLET.value
_TIGHT = (",", ":")


def is_plain_success(attempt: AttemptResult) -> bool:
    """One successful invocation and nothing else to record about it."""
    return attempt.status is _SUCCESS and len(attempt.invocations) == 1 and attempt.invocations[0].failure is None


def success_row(run_id: str, attempt: AttemptResult, key_text: str | None) -> tuple[Any, ...]:
    """The attempts row of a plain success (``key_text`` only when the run records keys)."""
    only = attempt.invocations[0]
    started, finished = only.started_at, only.finished_at
    return (
        run_id, attempt.asset_name, attempt.index, "success", None, attempt.partition_key_present, key_text,
        1, started, finished, finished - started, None, None, None, None,
        RESOLUTION_TEXT[attempt.resolution], attempt.materialization_id,
    )  # fmt: skip


def key_text_of(attempt: AttemptResult, format_key: Callable[[Any], str] | None) -> str | None:
    """The attempt's key as canonical text (None: unpartitioned), formatted once for both of its rows."""
    return format_key(attempt.partition_key) if attempt.partition_key_present and format_key is not None else None


def outlet_row(run_id: str, attempt: AttemptResult, key_text: str | None, now: float) -> tuple[Any, ...]:
    """The events row announcing a successful attempt's asset and key (``key_text``: `key_text_of`).

    Written exactly once, with the success it announces: it needs no dedupe
    identity. ``now`` stands in for an attempt without invocations (reused).
    """
    present = attempt.partition_key_present
    materialization_id = attempt.materialization_id
    extra = "{}" if materialization_id is None else json.dumps({"materialization_id": materialization_id}, separators=_TIGHT)
    invocations = attempt.invocations
    timestamp = invocations[-1].finished_at if invocations else now
    asset = attempt.asset_name
    count = len(invocations) or None
    return (asset, key_text, None, extra, timestamp, _OUTLET, run_id, asset, present, count, None, None)
