"""The CLI's consoles; its tables are printed by `partita.documents.tables` (shared with the UI's plan text)."""

from __future__ import annotations

from rich.console import Console

from partita.documents.tables import print_table

__all__ = ["cli_console", "print_table"]


def cli_console(*, stderr: bool = False) -> Console:
    """A console whose printed lines are never wrapped by rich (the terminal wraps them, a pipe keeps them whole)."""
    return Console(stderr=stderr, soft_wrap=True)
