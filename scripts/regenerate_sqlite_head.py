"""Write src/partita/store/sqlite_head.py: the statements the migrations leave in a new SQLite store.

    .venv/bin/python scripts/regenerate_sqlite_head.py

Run it after adding a migration; tests/store/test_new_sqlite.py fails until
the file matches what the migrations build.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import partita.store.sqlite_head as sqlite_head
from partita.store import open_store
from partita.store.new_sqlite import schema_statements
from partita.store.schema import SCHEMA_HEAD
from partita.store.sql import SqlStore

TARGET = Path(sqlite_head.__file__)


@contextlib.contextmanager
def migrated_store(path: Path) -> Iterator[SqlStore]:
    """A store created at ``path`` as partita creates one, but by running every migration; closed on exit.

    The shipped statements are set aside while it is created, which is how
    a tree whose statements are of another revision creates a store:
    through the store's own connection and write transaction, as any
    upgrade runs.
    """
    shipped = sqlite_head.REVISION
    sqlite_head.REVISION = "(set aside)"
    try:
        store = open_store(f"sqlite:///{path}")
    finally:
        sqlite_head.REVISION = shipped
    try:
        yield store
    finally:
        store.close()


def migrated_statements() -> list[str]:
    """Run every migration on a new SQLite file and read back what SQLite kept."""
    with tempfile.TemporaryDirectory() as folder, migrated_store(Path(folder, "head.db")) as store:
        with store.database.connect() as connection:
            return schema_statements(connection)


def _literal(text: str) -> str:
    """A Python string literal as the formatter writes it: double quotes, unless the text holds some."""
    return repr(text) if '"' in text else json.dumps(text)  # JSON's escapes are Python's too


def render(statements: list[str]) -> str:
    """The module's text."""
    body = "".join(f"    {_literal(statement)},\n" for statement in statements)
    return (
        '"""The schema a new SQLite store gets: written by scripts/regenerate_sqlite_head.py, not by hand."""\n\n'
        f"REVISION = {_literal(SCHEMA_HEAD)}\n\n"
        "#: What SQLite kept of the tables, indexes and triggers the migrations create, in creation order.\n"
        f"STATEMENTS = (\n{body})\n"
    )


if __name__ == "__main__":
    TARGET.write_text(render(migrated_statements()))
    print(f"wrote {TARGET}", file=sys.stderr)
