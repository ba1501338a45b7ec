"""Tables and lines that survive narrow terminals and pipes (the CLI's tables, and the text the UI shows of them).

A rich table squeezed into 80 columns truncates run ids and times
(``75c466…``, ``2026-1…``) and wraps long lines mid-word; in a pipe rich
assumes 80 columns as well, so ``grep`` and ``awk`` receive broken lines.
Here a table is printed as a table only when it fits the terminal; a wider
one becomes one block of ``column: value`` lines per row, and anything not
written to a terminal is plain text: aligned, never wrapped or truncated.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["print_table"]

_GAP = "  "
_UNBOUNDED = 1_000_000


def _text(cell: RenderableType) -> Text:
    """A cell as styled text: cells are markup strings or Text."""
    if isinstance(cell, Text):
        return cell
    return Text.from_markup(cell) if isinstance(cell, str) else Text(str(cell))


def _plain(cell: RenderableType) -> str:
    return _text(cell).plain


def _columns(table: Table) -> tuple[list[str], list[list[RenderableType]]]:
    headers = [_plain(column.header) for column in table.columns]
    cells = [list(column.cells) for column in table.columns]
    rows = [[cells[index][row] for index in range(len(cells))] for row in range(table.row_count)]
    return headers, rows


def _line(console: Console, text: str | Text) -> None:
    console.print(text if isinstance(text, Text) else Text(text), soft_wrap=True, highlight=False)


def _print_plain(console: Console, headers: Sequence[str], rows: Sequence[Sequence[RenderableType]]) -> None:
    texts = [[_plain(cell) for cell in row] for row in rows]
    widths = [max([len(header), *(len(row[index]) for row in texts)]) for index, header in enumerate(headers)]
    for row in (list(headers), *texts):
        _line(console, _GAP.join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _print_records(console: Console, headers: Sequence[str], rows: Sequence[Sequence[RenderableType]]) -> None:
    """One block per row: the first column as its heading, the others as indented ``column: value`` lines."""
    for number, row in enumerate(rows):
        if number:
            _line(console, "")
        for index, (header, cell) in enumerate(zip(headers, row, strict=True)):
            _line(console, Text.assemble(f"{'  ' if index else ''}{header}: ", _text(cell)))


def _natural_width(console: Console, table: Table) -> int:
    """The width ``table`` takes with no cell wrapped (measuring against the console would cap it)."""
    return Measurement.get(console, console.options.update_width(_UNBOUNDED), table).maximum


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` so that no cell is cut: a table if it fits, else records; plain text off a terminal."""
    title = table.title
    table.title = None
    if title is not None:
        _line(console, _text(title))
    headers, rows = _columns(table)
    if not console.is_terminal:
        _print_plain(console, headers, rows)
    elif _natural_width(console, table) <= console.width:
        console.print(table)
    else:
        _print_records(console, headers, rows)
