"""An asset's partition status as the asset page draws it: a status bar, then a calendar, a strip or ranges.

The cells, symbols and ranges are those of ``partita status``
(`partita.operations.status_layout`); the web page can afford more rows than
80 columns can. Each state has a symbol as well as a colour and a pattern, so
the grid reads the same without colour. Beyond a calendar's or a strip's
size, keys are aggregated into ranges of equal state (100,000 keys in a few
hundred lines at most), each linking to its first key and to the grid over
just that range.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from partita.operations.status import KeyState
from partita.operations.status_layout import (
    SYMBOLS,
    CalendarRow,
    calendar_kind,
    calendar_row_count,
    calendar_rows,
    is_time,
    state_ranges,
)  # fmt: skip
from partita.partitions.base import PartitionDef
from partita.partitions.time import DatePartitionDef, HourlyPartitionDef, MonthlyPartitionDef, WeeklyPartitionDef

__all__ = ["SYMBOLS", "BarSegment", "GridKind", "GridView", "StateRange", "StripRow", "grid_view"]

#: The most calendar rows drawn per definition, before the keys become ranges.
_CALENDAR_ROWS: dict[type[PartitionDef], int] = {
    DatePartitionDef: 60,  # five years of days, a row per month
    HourlyPartitionDef: 62,  # two months of hours, a row per day
    MonthlyPartitionDef: 100,  # a century of months, a row per year
    WeeklyPartitionDef: 100,  # a century of weeks, a row per year
}
_COLUMN_LABELS: dict[type[PartitionDef], tuple[str, ...]] = {
    DatePartitionDef: tuple(str(day) for day in range(1, 32)),
    HourlyPartitionDef: tuple(f"{hour:02d}" for hour in range(24)),
    MonthlyPartitionDef: ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"),
    WeeklyPartitionDef: tuple(str(week) for week in range(1, 54)),  # the week's place in the year of its first day
}
#: Keys other than time keys: listed by name up to this many, else drawn as a strip up to the next.
MAX_NAMED_KEYS = 60
MAX_STRIP_KEYS = 64 * 64
STRIP_WIDTH = 64
#: The most ranges listed; the rest are counted (narrowing the window shows them).
MAX_RANGES = 200
#: The status bar's length in SVG units (its segments are proportional to the counts).
BAR_WIDTH = 1000


class GridKind(enum.Enum):
    EMPTY = "empty"  # no key in the window
    SINGLE = "single"  # an unpartitioned asset's one outcome
    CALENDAR = "calendar"
    NAMED = "named"  # few keys, each with its name
    STRIP = "strip"  # more keys, symbols in key order
    RANGES = "ranges"  # many keys, as ranges of equal state


@dataclass(frozen=True, slots=True)
class BarSegment:
    state: KeyState
    count: int
    x: int
    width: int
    #: The share of the window's keys, as text ("12.5%").
    share: str


@dataclass(frozen=True, slots=True)
class StripRow:
    #: The number (from 1) of the row's first key.
    first: int
    cells: tuple[tuple[str | None, KeyState], ...]


@dataclass(frozen=True, slots=True)
class StateRange:
    first: str | None
    last: str | None
    state: KeyState
    count: int


@dataclass(frozen=True, slots=True)
class GridView:
    kind: GridKind
    total: int
    counts: tuple[tuple[KeyState, int], ...]
    bar: tuple[BarSegment, ...]
    #: What a calendar row is ("month") and its columns' labels.
    row_title: str = ""
    column_labels: tuple[str, ...] = ()
    calendar: tuple[CalendarRow, ...] = ()
    named: tuple[tuple[str | None, KeyState], ...] = ()
    strip: tuple[StripRow, ...] = ()
    ranges: tuple[StateRange, ...] = ()
    #: Ranges not listed (beyond `MAX_RANGES`).
    more_ranges: int = 0
    #: Whether a range can become the grid's window (the definition takes ranges).
    zoomable: bool = False


def _bar(counts: dict[KeyState, int], total: int) -> tuple[BarSegment, ...]:
    segments = []
    x = 0
    for state in KeyState:
        count = counts[state]
        if not count:
            continue
        width = round(BAR_WIDTH * count / total)
        segments.append(BarSegment(state, count, x, max(width, 1), f"{100 * count / total:.1f}%"))
        x += width
    return tuple(segments)


def _ranges(keys: Sequence[str | None], states: Sequence[KeyState]) -> tuple[tuple[StateRange, ...], int]:
    runs = state_ranges(states)
    shown = tuple(
        StateRange(keys[start], keys[start + count - 1], states[start], count) for start, count in runs[:MAX_RANGES]
    )
    return shown, max(len(runs) - MAX_RANGES, 0)


def _calendar(
    keys: Sequence[str | None], states: Sequence[KeyState], definition: PartitionDef, base: GridView
) -> GridView | None:
    kind = calendar_kind(definition)
    if kind is None or calendar_row_count(keys, kind) > _CALENDAR_ROWS[kind.definition]:
        return None
    return GridView(
        GridKind.CALENDAR, base.total, base.counts, base.bar, kind.title, _COLUMN_LABELS[kind.definition],
        tuple(calendar_rows(keys, states, kind)),
    )  # fmt: skip


def grid_view(definition: PartitionDef | None, keys: Sequence[str | None], states: Sequence[KeyState]) -> GridView:
    """The drawing of these keys' states (``keys`` in key order, canonical text; None for an unpartitioned asset)."""
    # Counted in C by identity: hashing 100,000 enum members (a Python-level __hash__) costs far more.
    counts = {state: states.count(state) for state in KeyState}
    total = len(keys)
    base = GridView(GridKind.EMPTY, total, tuple(counts.items()), _bar(counts, total) if total else ())
    if not total:
        return base
    if definition is None:
        return GridView(GridKind.SINGLE, total, base.counts, base.bar, named=((None, states[0]),))
    calendar = _calendar(keys, states, definition, base)
    if calendar is not None:
        return calendar
    if total <= MAX_NAMED_KEYS:
        return GridView(GridKind.NAMED, total, base.counts, base.bar, named=tuple(zip(keys, states, strict=True)))
    if total <= MAX_STRIP_KEYS and not is_time(definition):
        pairs = tuple(zip(keys, states, strict=True))
        rows = tuple(StripRow(start + 1, pairs[start : start + STRIP_WIDTH]) for start in range(0, total, STRIP_WIDTH))
        return GridView(GridKind.STRIP, total, base.counts, base.bar, strip=rows)
    ranges, more = _ranges(keys, states)
    return GridView(
        GridKind.RANGES, total, base.counts, base.bar, ranges=ranges, more_ranges=more, zoomable=definition.supports_range
    )
