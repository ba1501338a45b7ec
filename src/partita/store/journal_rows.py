"""The rows a run's journal writes, built straight from the engine's attempts.

A plain success (one invocation, no failure) is most of what a run records,
and building an `AttemptRecord` and an `EventDraft` for each one cost more
than the database takes to store them. Here such an attempt becomes its
attempts row, and every success its outlet events row, as plain tuples of
the columns that vary (`SUCCESS_COLUMNS`, `OUTLET_COLUMNS`); the run id and
the columns every such row shares are bound once per batch (their
`RowShape`). `run_rows._attempt_row` and `rows.event_row` build the same
rows whole from records and drafts. Attempts with retries, failures or
blockers keep the record path: they carry invocation rows too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from partita.events.model import SourceKind
from partita.results.model import AttemptResult, AttemptStatus
from partita.results.record import RESOLUTION_TEXT
from partita.store.bulk_writes import RowShape

__all__ = [
    "OUTLET_COLUMNS", "SUCCESS_COLUMNS", "is_plain_success", "key_text_of", "outlet_row", "outlet_shape", "success_row",
    "success_shape",
]  # fmt: skip

_SUCCESS = AttemptStatus.SUCCESS
_OUTLET = SourceKind.OUTLET.value
_TIGHT = (",", ":")


def is_plain_success(attempt: AttemptResult) -> bool:
    """One successful invocation and nothing else to record about it."""
    return attempt.status is _SUCCESS and len(attempt.invocations) == 1 and attempt.invocations[0].failure is None


#: What a plain success's attempts row carries; the run id and the constant columns are bound once per batch.
SUCCESS_COLUMNS = (
    "asset", "idx", "partition_key_present", "partition_key", "started_at", "finished_at", "duration",
    "resolution", "materialization_id",
)  # fmt: skip


def success_shape(run_id: str) -> RowShape:
    """The `RowShape` of `success_row` rows of run ``run_id``."""
    return RowShape(SUCCESS_COLUMNS, (("run_id", run_id), ("status", "success"), ("invocations", 1)))


def success_row(attempt: AttemptResult, key_text: str | None) -> tuple[Any, ...]:
    """The attempts row of a plain success, in `SUCCESS_COLUMNS` (``key_text`` only when the run records keys)."""
    only = attempt.invocations[0]
    started, finished = only.started_at, only.finished_at
    return (
        attempt.asset_name, attempt.index, attempt.partition_key_present, key_text, started, finished,
        finished - started, RESOLUTION_TEXT[attempt.resolution], attempt.materialization_id,
    )  # fmt: skip


def key_text_of(attempt: AttemptResult, format_key: Callable[[Any], str] | None) -> str | None:
    """The attempt's key as canonical text (None: unpartitioned), formatted once for both of its rows."""
    return format_key(attempt.partition_key) if attempt.partition_key_present and format_key is not None else None


#: What an outlet events row carries; the source kind and run are bound once per batch.
OUTLET_COLUMNS = ("asset", "partition_key", "extra", "timestamp", "source_asset", "source_key_present", "source_invocation")


def outlet_shape(run_id: str) -> RowShape:
    """The `RowShape` of `outlet_row` rows of run ``run_id``."""
    return RowShape(OUTLET_COLUMNS, (("source_kind", _OUTLET), ("source_run_id", run_id)))


def outlet_row(attempt: AttemptResult, key_text: str | None, now: float) -> tuple[Any, ...]:
    """The events row announcing a successful attempt's asset and key, in `OUTLET_COLUMNS` (``key_text``: `key_text_of`).

    Written exactly once, with the success it announces: it needs no dedupe
    identity. ``now`` stands in for an attempt without invocations (reused).
    """
    materialization_id = attempt.materialization_id
    extra = "{}" if materialization_id is None else json.dumps({"materialization_id": materialization_id}, separators=_TIGHT)
    invocations = attempt.invocations
    timestamp = invocations[-1].finished_at if invocations else now
    asset = attempt.asset_name
    return (asset, key_text, extra, timestamp, asset, attempt.partition_key_present, len(invocations) or None)
