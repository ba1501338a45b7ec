"""A new SQLite store's schema in one step, without Alembic.

A store file that holds no table yet gets the schema the migrations build,
as the statements SQLite kept for it (`partita.store.sqlite_head`, written
by ``scripts/regenerate_sqlite_head.py``), and the head revision. Importing
Alembic and running every migration added 0.15 to 0.25 s to a first command
on a new store (`benchmarks/new_store.py`). Older stores are still
upgraded by the migrations; a test checks that the statements, and whatever
else the file holds, are what the migrations build today.
"""

from __future__ import annotations

from sqlalchemy import Connection

import partita.store.sqlite_head as sqlite_head
from partita.store.schema import SCHEMA_HEAD, VERSION_TABLE

__all__ = ["create_head_schema", "schema_statements"]


def schema_statements(connection: Connection) -> list[str]:
    """The statements SQLite kept for a database's tables, indexes, triggers and views, in creation order.

    SQLite's own tables (``sqlite_sequence``, ``sqlite_stat1``) are left
    out: it creates them itself.
    """
    rows = connection.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid"
    )
    return [sql for (sql,) in rows]


def create_head_schema(connection: Connection) -> bool:
    """Create the head schema on an empty SQLite database in the caller's transaction; False if the statements are stale.

    False means the shipped statements were written for another revision
    (a development tree between a new migration and its regeneration): the
    caller runs the migrations instead.
    """
    if sqlite_head.REVISION != SCHEMA_HEAD:
        return False
    for statement in sqlite_head.STATEMENTS:
        connection.exec_driver_sql(statement)
    connection.exec_driver_sql(f"INSERT INTO {VERSION_TABLE} (version_num) VALUES (?)", (SCHEMA_HEAD,))
    return True
