"""A partition status drawn as text: calendars for time keys, a strip for others, ranges when large.

Every line fits 80 columns whatever the key count (only a range line holding
two long keys can be wider, and it is never cut). Each state has a symbol,
so the grid reads the same without colour (in a pipe): colour only adds to it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from rich.text import Text

from partita.operations.status import KeyState, PartitionStates
from partita.operations.status_layout import (
    SYMBOLS,
    calendar_kind,
    calendar_row_count,
    calendar_rows,
    is_time,
    state_ranges,
)
from partita.partitions.base import PartitionDef
from partita.partitions.time import DatePartitionDef, HourlyPartitionDef, MonthlyPartitionDef, WeeklyPartitionDef

__all__ = ["LEGEND", "SYMBOLS", "grid_lines"]

_STYLES = {KeyState.MATERIALIZED: "green", KeyState.FAILED: "bold red", KeyState.RUNNING: "cyan", KeyState.MISSING: "dim"}
LEGEND = "   ".join(f"{SYMBOLS[state]} {state.value}" for state in KeyState)

#: Grids beyond these many rows become ranges of equal state.
_MAX_MONTH_ROWS = 36  # daily keys: one row per month
_MAX_DAY_ROWS = 31  # hourly keys: one row per day
_MAX_YEAR_ROWS = 40  # monthly keys: one row per year
_MAX_NAMED_KEYS = 60  # static, multi and runtime keys listed with their names
_MAX_STRIP_KEYS = 64 * 32  # ... or as a strip of symbols, 64 a row
_STRIP_WIDTH = 64
_MAX_RANGES = 20
_WIDTH = 80
#: Per calendar: its header line, a space after every so many cells (0: none), and its most rows.
_CALENDAR_TEXT: dict[type[PartitionDef], tuple[str, int, int]] = {
    DatePartitionDef: ("".join(str(day % 10) for day in range(1, 32)), 0, _MAX_MONTH_ROWS),
    HourlyPartitionDef: ("00     06     12     18", 6, _MAX_DAY_ROWS),
    MonthlyPartitionDef: ("JFMAMJJASOND", 0, _MAX_YEAR_ROWS),
    WeeklyPartitionDef: ("".join(str(week % 10) for week in range(1, 54)), 0, _MAX_YEAR_ROWS),
}


def _cell(state: KeyState | None) -> Text:
    if state is None:
        return Text(" ")
    return Text(SYMBOLS[state], style=_STYLES[state])


def _row(label: str, cells: Sequence[KeyState | None], gaps: int = 0) -> Text:
    """``label``, two spaces, then the cells (a space after every ``gaps`` cells when given)."""
    line = Text(f"{label}  ")
    for index, state in enumerate(cells):
        if gaps and index and index % gaps == 0:
            line.append(" ")
        line.append_text(_cell(state))
    line.rstrip()
    return line


def _calendar(keys: Sequence[str], states: Sequence[KeyState], definition: PartitionDef) -> list[Text] | None:
    """Daily keys: a row per month, a column per day; hourly: a row per day; weekly and monthly: a row per year."""
    kind = calendar_kind(definition)
    if kind is None:
        return None
    header, gaps, limit = _CALENDAR_TEXT[kind.definition]
    if calendar_row_count(keys, kind) > limit:
        return None
    rows = calendar_rows(keys, states, kind)
    title = kind.title.ljust(len(rows[0].label) if rows else len(kind.title))
    lines = [Text(f"{title}  {header}", style="bold")]
    lines.extend(_row(row.label, row.states, gaps) for row in rows)
    return lines


def _named(keys: Sequence[str | None], states: Sequence[KeyState]) -> list[Text]:
    """Few keys: ``symbol key`` entries packed into lines of at most 80 columns."""
    lines: list[Text] = []
    line = Text("")
    for key, state in zip(keys, states, strict=True):
        entry = Text.assemble(_cell(state), f" {key}")
        if line.cell_len and line.cell_len + 3 + entry.cell_len > _WIDTH:
            lines.append(line)
            line = Text("")
        if line.cell_len:
            line.append("   ")
        line.append_text(entry)
    if line.cell_len:
        lines.append(line)
    return lines


def _strip(states: Sequence[KeyState]) -> list[Text]:
    """More keys: their symbols in key order, 64 a row, each row labelled by the number of its first key."""
    digits = len(str(len(states)))
    return [
        _row(str(start + 1).rjust(digits), states[start : start + _STRIP_WIDTH], 8)
        for start in range(0, len(states), _STRIP_WIDTH)
    ]


def _ranges(keys: Sequence[str | None], states: Sequence[KeyState]) -> list[Text]:
    """Many keys: ranges of equal state in key order (at most 20 lines), then how many more."""
    lines: list[Text] = []
    runs = state_ranges(states)
    for first, count in runs[:_MAX_RANGES]:
        state = states[first]
        span = str(keys[first]) if count == 1 else f"{keys[first]} .. {keys[first + count - 1]}"
        lines.append(Text.assemble(_cell(state), f" {span}  {state.value}, {count:,} key{'s' if count > 1 else ''}"))
    if len(runs) > _MAX_RANGES:
        lines.append(Text(f"... and {len(runs) - _MAX_RANGES:,} more ranges; --json lists every key", style="dim"))
    return lines


def grid_lines(states: PartitionStates) -> list[Text]:
    """The states of an asset's keys drawn to fit 80 columns: a calendar, a list or strip of symbols, or ranges."""
    keys, column, definition = states.scope.keys, states.states, states.definition
    if not keys or definition is None:
        return []
    calendar = _calendar(keys, column, definition)  # type: ignore[arg-type]
    if calendar is not None:
        return calendar
    if len(keys) <= _MAX_NAMED_KEYS:
        return _named(keys, column)
    if len(keys) <= _MAX_STRIP_KEYS and not is_time(definition):
        return _strip(column)
    return _ranges(keys, column)


def when(moment: dt.datetime) -> str:
    """A time as the status prints it: to the second, in UTC."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
