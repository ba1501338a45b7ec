"""A partition status drawn as text: calendars for time keys, a strip for others, ranges when large.

Every line fits 80 columns whatever the key count (only a range line holding
two long keys can be wider, and it is never cut). Each state has a symbol,
so the grid reads the same without colour (in a pipe): colour only adds to it.
"""

from __future__ import annotations

import datetime as dt
import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text

from partita.operations.status import KeyState, PartitionStates
from partita.partitions.base import PartitionDef
from partita.partitions.time import DatePartitionDef, HourlyPartitionDef, MonthlyPartitionDef

__all__ = ["LEGEND", "SYMBOLS", "grid_lines"]

SYMBOLS = {KeyState.MATERIALIZED: "#", KeyState.FAILED: "x", KeyState.RUNNING: ">", KeyState.MISSING: "."}
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
#: A repeated hour (clocks falling back) shares its column: the cell shows the graver state.
_GRAVITY = {KeyState.MATERIALIZED: 0, KeyState.MISSING: 1, KeyState.RUNNING: 2, KeyState.FAILED: 3}


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


def _rows_by(
    keys: Sequence[str], states: Sequence[KeyState], place: Callable[[str], tuple[str, int]], width: int
) -> list[tuple[str, list[KeyState | None]]]:
    """Cells grouped into rows: ``place`` maps key text to (row label, column)."""
    rows: dict[str, list[KeyState | None]] = {}
    for key, state in zip(keys, states, strict=True):
        label, column = place(key)
        cells = rows.setdefault(label, [None] * width)
        current = cells[column]
        if current is None or _GRAVITY[state] > _GRAVITY[current]:
            cells[column] = state
    return list(rows.items())


@dataclass(frozen=True, slots=True)
class _Calendar:
    """How one time definition's keys lay out: a row per ``label_length`` leading characters of a key."""

    kind: type[PartitionDef]
    label_length: int
    column: Callable[[str], int]
    width: int
    header: str
    gaps: int  # a space after every so many cells (0: none)
    max_rows: int
    title: str


_CALENDARS = (
    _Calendar(DatePartitionDef, 7, lambda key: int(key[8:10]) - 1, 31, "".join(str(day % 10) for day in range(1, 32)),
              0, _MAX_MONTH_ROWS, "month"),
    _Calendar(HourlyPartitionDef, 10, lambda key: int(key[11:13]), 24, "00     06     12     18", 6, _MAX_DAY_ROWS,
              "day       "),
    _Calendar(MonthlyPartitionDef, 4, lambda key: int(key[5:7]) - 1, 12, "JFMAMJJASOND", 0, _MAX_YEAR_ROWS, "year"),
)  # fmt: skip


def _calendar(keys: Sequence[str], states: Sequence[KeyState], definition: PartitionDef) -> list[Text] | None:
    """Daily keys: a row per month, a column per day; hourly: a row per day; monthly: a row per year."""
    layout = next((layout for layout in _CALENDARS if isinstance(definition, layout.kind)), None)
    if layout is None:
        return None
    length = layout.label_length
    # Count the rows before placing any key: 100,000 days are 3,000 months, far past a calendar.
    if len(set(map(operator.itemgetter(slice(0, length)), keys))) > layout.max_rows:
        return None
    rows = _rows_by(keys, states, lambda key: (key[:length], layout.column(key)), layout.width)
    title = layout.title.ljust(len(rows[0][0]) if rows else len(layout.title))
    lines = [Text(f"{title}  {layout.header}", style="bold")]
    lines.extend(_row(name, cells, layout.gaps) for name, cells in rows)
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


def _runs(states: Sequence[KeyState]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive keys in one state: (first index, count).

    The boundaries (where a key's state differs from the previous key's) are
    found in C: 100,000 keys in a handful of runs cost no Python step per key.
    """
    count = len(states)
    changes = itertools.compress(range(1, count), map(operator.is_not, states[1:], states[:-1]))
    bounds = [0, *changes, count] if count else []
    return [(start, end - start) for start, end in itertools.pairwise(bounds)]


def _ranges(keys: Sequence[str | None], states: Sequence[KeyState]) -> list[Text]:
    """Many keys: ranges of equal state in key order (at most 20 lines), then how many more."""
    lines: list[Text] = []
    runs = _runs(states)
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
    if len(keys) <= _MAX_STRIP_KEYS and not _is_time(definition):
        return _strip(column)
    return _ranges(keys, column)


def _is_time(definition: PartitionDef) -> bool:
    return isinstance(definition, (DatePartitionDef, HourlyPartitionDef, MonthlyPartitionDef))


def when(moment: dt.datetime) -> str:
    """A time as the status prints it: to the second, in UTC."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
