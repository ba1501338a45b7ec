"""Bringing a store's schema to this partita's revision when it is opened.

Apart from the `Database` because it runs once per open, not per verb: it
refuses schemas newer than this partita, read-only stores it would have to
change and databases holding other tables, and serializes concurrent first
opens of one PostgreSQL database.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection, inspect

from partita.errors import StoreError
from partita.store.database import Database
from partita.store.location import SqliteAccess
from partita.store.new_sqlite import create_head_schema
from partita.store.schema import KNOWN_REVISIONS, SCHEMA_HEAD, VERSION_TABLE

__all__ = ["MIGRATIONS", "upgrade_schema"]

#: The Alembic scripts that build and upgrade the schema.
MIGRATIONS = Path(__file__).with_name("migrations")
_PG_MIGRATION_LOCK = 0x70A271  # any constant: serializes concurrent first opens


def _current_revision(connection: Connection) -> str | None:
    """The revision Alembic recorded, read directly: importing Alembic costs more than most commands."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    return connection.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").scalar()


def _run_migrations(connection: Connection) -> None:
    """Alembic's upgrade to head, on ``connection`` (imported here: only a new or older store needs it)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    config.attributes["version_table"] = VERSION_TABLE
    command.upgrade(config, "head")


def upgrade_schema(database: Database) -> None:
    """Upgrade ``database`` to `SCHEMA_HEAD` unless it is there; `StoreError` when it must not be changed."""
    url = database.url
    with database.failures("open it"):
        with database.connect() as connection:
            current = _current_revision(connection)
        if current == SCHEMA_HEAD:
            return
        if current is not None and current not in KNOWN_REVISIONS:
            raise StoreError(
                f"store {url} has schema revision {current}, newer than this partita understands "
                f"(newest known: {SCHEMA_HEAD}); upgrade partita to use it"
            )
        if database.access is not SqliteAccess.READ_WRITE:
            raise StoreError(
                f"store {url} is opened read-only and its schema is not this partita's "
                f"({current or 'none'}, needs {SCHEMA_HEAD}); open it once writable so it can be upgraded"
            )
        with database.write() as connection:
            if database.dialect == "postgresql":
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
            current = _current_revision(connection)
            if current == SCHEMA_HEAD:
                return
            if current is None:
                tables = inspect(connection).get_table_names()
                foreign = [name for name in tables if not name.startswith("partita_")]
                if foreign:
                    raise StoreError(
                        f"store {url} is a database with other tables and no partita schema; "
                        "point the store at a new file or an empty database"
                    )
                # Only a file with no table at all: leftover partita tables (a full downgrade leaves the
                # version table) need the migrations, and PostgreSQL's schema has functions and triggers.
                if not tables and database.dialect == "sqlite" and create_head_schema(connection):
                    return
            _run_migrations(connection)
