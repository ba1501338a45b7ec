"""Write src/partita/store/sqlite_head.py: the statements the migrations leave in a new SQLite store.

    .venv/bin/python scripts/regenerate_sqlite_head.py

Run it after adding a migration; tests/store/test_new_sqlite.py fails until
the file matches what the migrations build.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from sqlalchemy import create_engine

from partita.store.new_sqlite import schema_statements
from partita.store.schema import SCHEMA_HEAD
from partita.store.upgrade import _run_migrations

TARGET = Path(__file__).resolve().parents[1] / "src" / "partita" / "store" / "sqlite_head.py"


def migrated_statements() -> list[str]:
    """Run every migration on an empty SQLite file and read back what SQLite kept."""
    with tempfile.TemporaryDirectory() as folder:
        engine = create_engine(f"sqlite:///{folder}/head.db")
        try:
            with engine.begin() as connection:
                _run_migrations(connection)
            with engine.connect() as connection:
                return schema_statements(connection)
        finally:
            engine.dispose()


def render(statements: list[str]) -> str:
    body = "".join(f"    {statement!r},\n" for statement in statements)
    return (
        '"""The schema a new SQLite store gets: written by scripts/regenerate_sqlite_head.py, not by hand."""\n\n'
        f"REVISION = {SCHEMA_HEAD!r}\n\n"
        "#: What SQLite kept of the tables, indexes and triggers the migrations create, in creation order.\n"
        f"STATEMENTS = (\n{body})\n"
    )


if __name__ == "__main__":
    TARGET.write_text(render(migrated_statements()))
    print(f"wrote {TARGET}", file=sys.stderr)
