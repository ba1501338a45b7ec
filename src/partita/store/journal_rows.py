"""The rows a run's journal writes, built straight from the engine's attempts.

A plain success (one invocation, no failure: `plain_success_times`) is most of what a run records,
and building an `AttemptRecord` and an `EventDraft` for each one cost more
than the database takes to store them. Here such an attempt becomes one
plain tuple (`success_row`) that carries both its attempts row and its
outlet event. On SQLite one JSON text of a batch of them feeds both inserts,
which work out the duration and the outlet's columns themselves: the journal
encodes each success once, and no float it can derive (a float's text is the
dearest part of the encoding). Elsewhere `success_attempt_rows` and
`success_outlet_rows` expand them into the columns that vary
(`SUCCESS_COLUMNS`, `OUTLET_COLUMNS`); the run id and the columns every such
row shares are bound once per batch (their `RowShape`).
`run_rows._attempt_row` and `rows.event_row` build the same rows whole from
records and drafts. Attempts with retries, failures or blockers keep the
record path: they carry invocation rows too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from partita.events.model import SourceKind
from partita.results.model import AttemptResult
from partita.results.record import RESOLUTION_TEXT
from partita.store.bulk_writes import RowShape, sqlite_json_text
from partita.store.schema import attempts, events

__all__ = [
    "OUTLET_COLUMNS", "SUCCESS_COLUMNS", "announced_assets",
    "key_text_of", "outlet_row", "outlet_shape", "sqlite_success_attempts", "sqlite_success_groups",
    "sqlite_success_outlets", "success_attempt_rows", "success_outlet_rows", "success_row", "success_shape",
]  # fmt: skip

_OUTLET = SourceKind.OUTLET.value
_TIGHT = (",", ":")


#: What a plain success's attempts row carries; the run id and the constant columns are bound once per batch.
SUCCESS_COLUMNS = (
    "asset", "idx", "partition_key_present", "partition_key", "started_at", "finished_at", "duration",
    "resolution", "materialization_id",
)  # fmt: skip


def success_shape(run_id: str) -> RowShape:
    """The `RowShape` of `success_attempt_rows` rows of run ``run_id``."""
    return RowShape(SUCCESS_COLUMNS, (("run_id", run_id), ("status", "success"), ("invocations", 1)))


def success_row(
    attempt: AttemptResult, times: tuple[float, float], key_text: str | None, record_key: bool, announced: bool
) -> tuple[Any, ...]:
    """A plain success as one tuple: its attempts row and its outlet event (when ``announced``).

    ``times`` are its one invocation's start and end (`plain_success_times`).

    In order: asset, index, key present, the key text its attempts row
    records (``key_text`` when ``record_key``), start, end, resolution,
    materialization id, the key text of its outlet event, whether it has one.
    The duration and the outlet's other columns follow from these.
    """
    started, finished = times
    return (
        attempt.asset_name, attempt.index, attempt.partition_key_present, key_text if record_key else None,
        started, finished, RESOLUTION_TEXT[attempt.resolution], attempt.materialization_id, key_text, announced,
    )  # fmt: skip


def success_attempt_rows(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """`success_row` rows as attempts rows, in `SUCCESS_COLUMNS`."""
    return [
        (asset, index, present, key, started, finished, finished - started, resolution, materialization)
        for asset, index, present, key, started, finished, resolution, materialization, _, _ in rows
    ]


def success_outlet_rows(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The outlet events rows of the announced `success_row` rows, in `OUTLET_COLUMNS`."""
    return [
        (asset, outlet_key, _outlet_extra(materialization), finished, asset, present, 1)
        for asset, _, present, _, _, finished, _, materialization, outlet_key, announced in rows
        if announced
    ]


def announced_assets(rows: Sequence[tuple[Any, ...]]) -> set[str]:
    """The assets that announced `success_row` rows publish outlet events of."""
    return {row[0] for row in rows if row[9]}


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
    extra = _outlet_extra(attempt.materialization_id)
    invocations = attempt.invocations
    timestamp = invocations[-1].finished_at if invocations else now
    asset = attempt.asset_name
    return (asset, key_text, extra, timestamp, asset, attempt.partition_key_present, len(invocations) or None)


def _outlet_extra(materialization_id: str | None) -> str:
    """An outlet event's ``extra``: the materialization it announces, if any."""
    if materialization_id is None:
        return "{}"
    return json.dumps({"materialization_id": materialization_id}, separators=_TIGHT)


#: The inserts' heads: the SELECTs below give the rows.
_ATTEMPTS_INTO = f"INSERT INTO {attempts.name} ({', '.join(SUCCESS_COLUMNS)}, run_id, status, invocations) "
_OUTLETS_INTO = f"INSERT INTO {events.name} ({', '.join(OUTLET_COLUMNS)}, source_kind, source_run_id) "


def sqlite_success_attempts(run_id: str, rows: str) -> str:
    """SQLite's insert of the attempts rows of `success_row` rows given as one JSON text (``value->>N``: a row's Nth).

    ``run_id`` and ``rows`` are SQL expressions: ``?`` to bind, or a trigger's ``NEW`` columns (`sqlite_verbs`).
    """
    return _ATTEMPTS_INTO + _whole_attempts(run_id, rows)


def _whole_attempts(run_id: str, rows: str) -> str:
    """The attempts rows of whole `success_row` rows (`sqlite_success_attempts`' SELECT)."""
    return (
        "SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>5 - value->>4, value->>6, "
        f"value->>7, {run_id}, 'success', 1 FROM json_each({rows})"
    )


def sqlite_success_outlets(run_id: str, rows: str) -> str:
    """SQLite's insert of the outlet events of the announced rows, as `sqlite_success_attempts` takes them.

    ``extra`` is built as `_outlet_extra` builds it.
    """
    return _OUTLETS_INTO + _whole_outlets(run_id, rows)


def _whole_outlets(run_id: str, rows: str) -> str:
    """The outlet events of the announced whole rows (`sqlite_success_outlets`' SELECT)."""
    return (
        "SELECT value->>0, value->>8, CASE WHEN value->>7 IS NULL THEN '{}' "
        "ELSE json_object('materialization_id', value->>7) END, value->>5, value->>0, value->>2, 1, "
        f"'{_OUTLET}', {run_id} FROM json_each({rows}) WHERE value->>9"
    )


#: Assets one statement reads at most (SQLite allows 500 terms in a compound SELECT).
_ASSETS_PER_STATEMENT = 100


def sqlite_success_groups(run_id: str, rows: Sequence[tuple[Any, ...]]) -> list[tuple[str, tuple[Any, ...]]] | None:
    """SQLite's statements for a bulk of `success_row` rows: inserts of attempts, then of outlet events.

    SQLite before 3.45 parses a JSON row's text again for every ``->>`` that
    reads it, and a whole row is read 17 or 18 times per success: that
    parsing was half of the store's work per attempt. The rows of an asset
    that share their key presence, resolution, announcement and whether they
    record their key, and carry no materialization (nearly always all of
    them), go as compact rows instead: index, start, end and key text, read
    seven times (eight with the key recorded), with the shared values as
    parameters. Any other asset's rows go whole. Each insert reads up to
    `_ASSETS_PER_STATEMENT` assets' rows (``UNION ALL``): every statement is
    a call that gives up the interpreter's lock, and taking it back from a
    busy run can take a switch interval (5 ms). None when a value JSON would
    not carry exactly.
    """
    by_asset: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_asset.setdefault(row[0], []).append(row)
    attempt_selects: list[tuple[str, tuple[Any, ...]]] = []
    outlet_selects: list[tuple[str, tuple[Any, ...]]] = []
    for asset, asset_rows in by_asset.items():
        _, _, present, recorded, _, _, resolution, _, _, announced = asset_rows[0]
        record = recorded is not None
        shared = (present, record, resolution, None, announced)
        # A recorded key is the key text (`success_row`): the compact row carries it once.
        if all(
            (row[2], row[3] is not None, row[6], row[7], row[9]) == shared and (row[3] is None or row[3] == row[8])
            for row in asset_rows
        ):
            text = sqlite_json_text([(row[1], row[4], row[5], row[8]) for row in asset_rows])
            if text is None:
                return None
            compact = _COMPACT_RECORDED_ATTEMPTS if record else _COMPACT_ATTEMPTS
            attempt_selects.append((compact, (asset, present, resolution, run_id, text)))
            if announced:
                outlet_selects.append((_COMPACT_OUTLETS, (asset, asset, present, run_id, text)))
        else:
            text = sqlite_json_text(asset_rows)
            if text is None:
                return None
            attempt_selects.append((_WHOLE_ATTEMPTS, (run_id, text)))
            if any(row[9] for row in asset_rows):  # no announced row: no outlet to read them for
                outlet_selects.append((_WHOLE_OUTLETS, (run_id, text)))
    return [*_compound(_ATTEMPTS_INTO, attempt_selects), *_compound(_OUTLETS_INTO, outlet_selects)]


def _compound(into: str, selects: list[tuple[str, tuple[Any, ...]]]) -> list[tuple[str, tuple[Any, ...]]]:
    """``into`` followed by the SELECTs joined by ``UNION ALL``, with their parameters in order."""
    statements = []
    for first in range(0, len(selects), _ASSETS_PER_STATEMENT):
        chunk = selects[first : first + _ASSETS_PER_STATEMENT]
        select = " UNION ALL ".join(sql for sql, _ in chunk)
        statements.append((into + select, tuple(value for _, values in chunk for value in values)))
    return statements


def _compact_attempts(key: str) -> str:
    """The attempts rows of an asset's compact rows (parameters: asset, present, resolution, run, rows)."""
    return (
        f"SELECT ?, value->>0, ?, {key}, value->>1, value->>2, value->>2 - value->>1, ?, NULL, "
        "?, 'success', 1 FROM json_each(?)"
    )


_COMPACT_ATTEMPTS = _compact_attempts("NULL")
_COMPACT_RECORDED_ATTEMPTS = _compact_attempts("value->>3")
#: The outlet events of an asset's compact rows (parameters: asset twice, present, run, rows).
_COMPACT_OUTLETS = f"SELECT ?, value->>3, '{{}}', value->>2, ?, ?, 1, '{_OUTLET}', ? FROM json_each(?)"
#: The SELECTs over whole rows, as the run's end reads them (parameters: run, rows).
_WHOLE_ATTEMPTS = _whole_attempts("?", "?")
_WHOLE_OUTLETS = _whole_outlets("?", "?")
