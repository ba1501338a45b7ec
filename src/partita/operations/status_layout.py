"""How a partition status is laid out for people: calendars of time keys, and ranges of equal state.

Pure functions of keys (canonical text, in key order) and their states,
shared by the command line's grid (``cli/status_grid.py``) and the web UI's
(``ui/status_grid.py``), so both place the same key in the same cell, show
the same symbol for a state, and cut the same ranges.
"""

from __future__ import annotations

import datetime as dt
import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from partita.operations.status import KeyState
from partita.partitions.base import PartitionDef
from partita.partitions.cron import CronPartitionDef
from partita.partitions.time import DatePartitionDef, HourlyPartitionDef, MonthlyPartitionDef, WeeklyPartitionDef

__all__ = [
    "CALENDARS", "GRAVITY", "SYMBOLS", "CalendarKind", "CalendarRow", "calendar_kind", "calendar_row_count",
    "calendar_rows", "is_time", "state_ranges",
]  # fmt: skip

#: One symbol per state: a grid reads the same without colour.
SYMBOLS = {KeyState.MATERIALIZED: "#", KeyState.FAILED: "x", KeyState.RUNNING: ">", KeyState.MISSING: "."}
#: A repeated hour (clocks falling back) shares its cell: the cell shows the graver state.
GRAVITY = {KeyState.MATERIALIZED: 0, KeyState.MISSING: 1, KeyState.RUNNING: 2, KeyState.FAILED: 3}


@dataclass(frozen=True, slots=True)
class CalendarKind:
    """How one time definition's keys lay out: a row per ``label_length`` leading characters of a key."""

    definition: type[PartitionDef]
    #: What a row is ("month": a row per month of days).
    title: str
    label_length: int
    column: Callable[[str], int]
    width: int


def _week_of_year(key: str) -> int:
    """Weeks start seven days apart: the day of the year of a week's first day, in sevens, is its column."""
    return (dt.date.fromisoformat(key).timetuple().tm_yday - 1) // 7


CALENDARS = (
    CalendarKind(DatePartitionDef, "month", 7, lambda key: int(key[8:10]) - 1, 31),
    CalendarKind(WeeklyPartitionDef, "year", 4, _week_of_year, 53),
    CalendarKind(HourlyPartitionDef, "day", 10, lambda key: int(key[11:13]), 24),
    CalendarKind(MonthlyPartitionDef, "year", 4, lambda key: int(key[5:7]) - 1, 12),
)


@dataclass(frozen=True, slots=True)
class CalendarRow:
    """One row of a calendar: its label, and per column the state shown and the first key placed there."""

    label: str
    states: tuple[KeyState | None, ...]
    keys: tuple[str | None, ...]


#: The built-in time definitions: many keys read better as time ranges than as a strip.
_TIME = (DatePartitionDef, WeeklyPartitionDef, HourlyPartitionDef, MonthlyPartitionDef, CronPartitionDef)


def is_time(definition: PartitionDef) -> bool:
    return isinstance(definition, _TIME)


def calendar_kind(definition: PartitionDef) -> CalendarKind | None:
    """The calendar of a built-in time definition; None for any other definition."""
    return next((kind for kind in CALENDARS if isinstance(definition, kind.definition)), None)


def calendar_row_count(keys: Sequence[str | None], kind: CalendarKind) -> int:
    """How many rows ``keys`` fill, counted before any is placed: 100,000 days are 3,000 months."""
    return len(set(map(operator.itemgetter(slice(0, kind.label_length)), keys)))  # type: ignore[arg-type]


def calendar_rows(keys: Sequence[str | None], states: Sequence[KeyState], kind: CalendarKind) -> list[CalendarRow]:
    """The rows ``keys`` fill, in key order; a cell no key falls in holds None."""
    length, width, column_of = kind.label_length, kind.width, kind.column
    cells: dict[str, tuple[list[KeyState | None], list[str | None]]] = {}
    for key, state in zip(keys, states, strict=True):
        assert key is not None  # time keys always have text
        label, column = key[:length], column_of(key)
        row_states, row_keys = cells.setdefault(label, ([None] * width, [None] * width))
        current = row_states[column]
        if current is None or GRAVITY[state] > GRAVITY[current]:
            row_states[column] = state
        if row_keys[column] is None:
            row_keys[column] = key
    return [CalendarRow(label, tuple(row_states), tuple(row_keys)) for label, (row_states, row_keys) in cells.items()]


def state_ranges(states: Sequence[KeyState]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive keys in one state: (first index, count), in key order.

    The boundaries (where a key's state differs from the previous key's) are
    found in C: 100,000 keys in a handful of runs cost no Python step per key.
    """
    count = len(states)
    changes = itertools.compress(range(1, count), map(operator.is_not, states[1:], states[:-1]))
    bounds = [0, *changes, count] if count else []
    return [(start, end - start) for start, end in itertools.pairwise(bounds)]
