"""A new SQLite store gets the schema the migrations build, in one step and without Alembic."""

from __future__ import annotations

import importlib.util
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import Engine, create_engine

from partita.store import open_store, sqlite_head
from partita.store.new_sqlite import schema_statements
from partita.store.schema import SCHEMA_HEAD, VERSION_TABLE

REGENERATE = Path(__file__).resolve().parents[2] / "scripts" / "regenerate_sqlite_head.py"


def _regenerate_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("regenerate_sqlite_head", REGENERATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def migrated() -> list[str]:
    """What SQLite keeps of the schema after every migration ran on an empty file."""
    return _regenerate_script().migrated_statements()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    created = create_engine(f"sqlite:///{tmp_path}/partita.db")
    try:
        yield created
    finally:
        created.dispose()


def _schema_and_revision(engine: Engine) -> tuple[list[str], str]:
    with engine.connect() as connection:
        revision = connection.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").scalar_one()
        return schema_statements(connection), revision


def test_the_shipped_statements_are_what_the_migrations_build(migrated):
    # Fails after a new migration until scripts/regenerate_sqlite_head.py is run.
    assert sqlite_head.REVISION == SCHEMA_HEAD
    assert list(sqlite_head.STATEMENTS) == migrated


def _contents(path: Path) -> tuple[list[str], int, int]:
    """Everything a SQLite file holds, as SQL text, with the two numbers SQLite keeps outside its tables."""
    connection = sqlite3.connect(path)
    try:
        pragmas = [connection.execute(f"PRAGMA {name}").fetchone()[0] for name in ("user_version", "application_id")]
        return list(connection.iterdump()), *pragmas
    finally:
        connection.close()


def test_a_new_store_holds_exactly_what_a_migrated_one_holds(tmp_path):
    # Rows a migration seeds, or numbers it sets, would be missed by comparing the schema alone.
    with _regenerate_script().migrated_store(tmp_path / "migrated.db"):
        pass  # created, then closed
    open_store(f"sqlite:///{tmp_path}/new.db").close()

    assert _contents(tmp_path / "new.db") == _contents(tmp_path / "migrated.db")


def test_a_new_store_has_exactly_the_schema_the_migrations_build(migrated, engine, tmp_path):
    open_store(f"sqlite:///{tmp_path}/partita.db").close()

    assert _schema_and_revision(engine) == (migrated, SCHEMA_HEAD)


def test_shipped_statements_of_another_revision_leave_a_new_store_to_the_migrations(
    migrated, engine, tmp_path, monkeypatch
):
    monkeypatch.setattr(sqlite_head, "REVISION", "0001")
    monkeypatch.setattr(sqlite_head, "STATEMENTS", ("CREATE TABLE partita_wrong (x INTEGER)",))

    open_store(f"sqlite:///{tmp_path}/partita.db").close()

    assert _schema_and_revision(engine) == (migrated, SCHEMA_HEAD)


def test_a_new_store_is_created_without_importing_alembic(tmp_path):
    program = (
        "import sys; from partita import open_store; "
        f"open_store('sqlite:///{tmp_path}/partita.db').close(); "
        "print('alembic' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)

    assert result.stdout.strip() == "False"


def test_a_new_store_records_a_run_and_reopens_without_change(engine, tmp_path):
    import partita

    url = f"sqlite:///{tmp_path}/partita.db"
    registry = partita.AssetRegistry()
    partita.asset(name="one", registry=registry)(lambda: 1)
    result = partita.Flow(["one"], registry=registry, store=url).run()
    before = _schema_and_revision(engine)

    store = open_store(url)
    try:
        assert [run.run_id for run in store.list_runs()] == [result.run_id]
    finally:
        store.close()
    assert _schema_and_revision(engine) == before
