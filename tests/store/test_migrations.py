"""Schema creation and migration (SPEC §6): Alembic migrations shipped inside the package.

A fresh store is created at the head revision; an older store is upgraded
when opened; a store written by a newer partita, or a database that holds
somebody else's tables, is refused with a clear `StoreError` (exit 4 on the
CLI) and left as it was. Every test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from click.testing import CliRunner
from sqlalchemy import Engine, create_engine, inspect, text

import partita
from partita.cli.main import cli
from partita.errors import StoreError
from partita.store import open_store
from partita.store.schema import KNOWN_REVISIONS, POSTGRESQL_ONLY, SCHEMA_HEAD, VERSION_TABLE, metadata
from partita.store.sql import MIGRATIONS

PARTITA_TABLES = {"partita_runs", "partita_attempts", "partita_invocations"}
FUTURE_REVISION = "9f3e_from_the_future"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def store_url(empty_store_url: str) -> str:
    """Every test here creates or upgrades a store: its database starts empty on both backends."""
    return empty_store_url


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    created = create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        yield created
    finally:
        created.dispose()


def _revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()


def _tables(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        return set(inspect(connection).get_table_names())


def _script() -> ScriptDirectory:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(config)


def _record_a_run(store_url: str) -> partita.RunResult:
    registry = partita.AssetRegistry()

    @partita.asset(registry=registry)
    def one() -> int:
        return 1

    return partita.Flow(["one"], registry=registry, store=store_url).run()


def _snapshot(engine: Engine) -> dict[str, Any]:
    """Every table's rows, to prove a refused store was left as it was."""
    with engine.connect() as connection:
        return {
            table: sorted(map(tuple, connection.execute(text(f'SELECT * FROM "{table}"'))), key=repr)
            for table in sorted(inspect(connection).get_table_names())
        }


def _cli(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


# -- the shipped migrations ----------------------------------------------------------


def test_the_migrations_have_one_head_equal_to_schema_head():
    script = _script()

    assert script.get_heads() == [SCHEMA_HEAD]
    oldest_first = [revision.revision for revision in reversed(list(script.walk_revisions()))]
    assert tuple(oldest_first) == KNOWN_REVISIONS
    assert KNOWN_REVISIONS[-1] == SCHEMA_HEAD


def test_the_migrations_ship_inside_the_package():
    package = Path(partita.__file__).resolve().parent
    versions = MIGRATIONS.resolve() / "versions"

    assert MIGRATIONS.resolve().is_relative_to(package)
    assert (MIGRATIONS / "env.py").is_file()
    assert (versions / "__init__.py").is_file()  # found by setuptools as a package
    for revision in _script().walk_revisions():
        assert Path(revision.path).resolve().is_relative_to(versions)


# -- creating and upgrading ------------------------------------------------------------


def test_a_fresh_store_is_created_at_head(store_url, engine):
    if engine.dialect.name == "postgresql":  # the module's databases start empty (`store_url` above)
        assert _tables(engine) == set()
    else:  # looking into a SQLite file would create it
        assert not Path(engine.url.database).exists()
    store = open_store(store_url)
    store.close()

    assert _revision(engine) == SCHEMA_HEAD
    assert PARTITA_TABLES <= _tables(engine)
    assert _tables(engine) == set(metadata.tables) | {"partita_alembic_version"}


def test_the_migrated_schema_matches_the_tables_the_queries_use(store_url, engine):
    open_store(store_url).close()

    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        differences = [
            difference
            for difference in compare_metadata(context, metadata)
            if not (difference[0] == "remove_table" and difference[1].name == VERSION_TABLE)
            and not _postgresql_only(difference)
        ]
    assert differences == []


def _postgresql_only(difference):
    """The documented PostgreSQL-only column and index (schema.POSTGRESQL_ONLY), which the tables leave out."""
    kind = difference[0]
    for table, column, index in POSTGRESQL_ONLY:
        if kind == "remove_index" and difference[1].name == index:
            return True
        if kind == "remove_column" and difference[2] == table and difference[3].name == column:
            return True
    return False


def test_reopening_a_store_is_idempotent(store_url, engine):
    first = _record_a_run(store_url)
    before = _snapshot(engine)

    for _ in range(3):
        store = open_store(store_url)
        assert store.created is False
        assert [run.run_id for run in store.list_runs()] == [first.run_id]
        store.close()

    assert _revision(engine) == SCHEMA_HEAD
    assert _snapshot(engine) == before
    second = _record_a_run(store_url)
    store = open_store(store_url)
    try:
        assert [run.run_id for run in store.list_runs()] == [second.run_id, first.run_id]
    finally:
        store.close()


def _migrate_to(engine: Engine, revision: str, *, down: bool) -> None:
    with engine.begin() as connection:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)


@pytest.mark.skipif(len(KNOWN_REVISIONS) < 2, reason="only one revision ships: no older store can exist yet")
def test_a_store_at_an_older_revision_is_upgraded_when_opened_and_keeps_its_runs(store_url, engine):
    older = KNOWN_REVISIONS[-2]
    recorded = _record_a_run(store_url)
    _migrate_to(engine, older, down=True)
    assert _revision(engine) == older

    store = open_store(store_url)
    try:
        assert _revision(engine) == SCHEMA_HEAD
        assert store.get_run(recorded.run_id).status == "success"
        assert [task.asset for task in store.get_tasks(recorded.run_id)] == ["one"]
    finally:
        store.close()
    assert _tables(engine) == set(metadata.tables) | {"partita_alembic_version"}
    later = _record_a_run(store_url)
    assert later.status is partita.RunStatus.SUCCESS


def test_a_store_built_by_the_first_revision_alone_is_upgraded(store_url, engine):
    _migrate_to(engine, KNOWN_REVISIONS[0], down=False)

    result = _record_a_run(store_url)

    assert _revision(engine) == SCHEMA_HEAD
    assert result.status is partita.RunStatus.SUCCESS


def test_a_store_at_the_base_revision_is_upgraded_when_opened(store_url, engine):
    # alembic's version table exists but no revision is applied (e.g. after a full downgrade).
    open_store(store_url).close()
    _migrate_to(engine, "base", down=True)
    assert _revision(engine) is None
    assert not (PARTITA_TABLES & _tables(engine))

    result = _record_a_run(store_url)

    assert _revision(engine) == SCHEMA_HEAD
    store = open_store(store_url)
    try:
        assert store.get_run(result.run_id).status == "success"
    finally:
        store.close()


def test_concurrent_first_opens_create_the_schema_once(store_url, engine):
    errors: list[BaseException] = []
    barrier = threading.Barrier(4, timeout=30)

    def open_it() -> None:
        try:
            barrier.wait()
            open_store(store_url).close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert errors == []
    assert _revision(engine) == SCHEMA_HEAD
    assert PARTITA_TABLES <= _tables(engine)


# -- refusing ---------------------------------------------------------------------------


def _stamp_future(store_url: str, engine: Engine) -> None:
    _record_a_run(store_url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE partita_alembic_version SET version_num = :v"), {"v": FUTURE_REVISION})


def test_a_store_from_a_newer_partita_is_refused_naming_its_revision(store_url, engine):
    _stamp_future(store_url, engine)
    before = _snapshot(engine)

    with pytest.raises(StoreError) as caught:
        open_store(store_url)

    message = str(caught.value)
    assert FUTURE_REVISION in message
    assert SCHEMA_HEAD in message
    assert "newer" in message and "upgrade partita" in message
    assert caught.value.exit_code == 4
    assert _snapshot(engine) == before


def test_the_python_api_refuses_a_newer_store_before_any_body_runs(store_url, engine):
    _stamp_future(store_url, engine)
    before = _snapshot(engine)
    registry = partita.AssetRegistry()
    ran: list[int] = []

    @partita.asset(registry=registry)
    def body() -> int:
        ran.append(1)
        return 1

    with pytest.raises(StoreError, match=FUTURE_REVISION):
        partita.Flow(["body"], registry=registry, store=store_url).run()
    assert ran == []
    assert _snapshot(engine) == before


def test_the_cli_refuses_a_newer_store_with_exit_4(store_url, engine, tmp_path):
    _stamp_future(store_url, engine)
    before = _snapshot(engine)
    entry = tmp_path / "entry.py"
    marker = tmp_path / "ran"
    entry.write_text(
        "import pathlib\nfrom partita import asset\n\n"
        f"@asset\ndef body():\n    pathlib.Path({str(marker)!r}).write_text('ran')\n    return 1\n"
    )

    for args in (
        ["runs", "list", "--store", store_url],
        ["runs", "show", "abcd", "--store", store_url],
        ["runs", "list", "--json", "--store", store_url],
        ["run", str(entry), "--yes", "--store", store_url],
    ):
        result = _cli(*args)
        assert result.exit_code == 4, (args, result.output)
        assert FUTURE_REVISION in result.stderr
        assert "Traceback" not in result.output
    assert not marker.exists()
    assert _snapshot(engine) == before


def test_a_database_with_foreign_tables_is_refused(store_url, engine):
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)"))
        connection.execute(text("INSERT INTO customers (id, name) VALUES (1, 'ada')"))

    with pytest.raises(StoreError, match="other tables") as caught:
        open_store(store_url)

    assert caught.value.exit_code == 4
    assert _tables(engine) == {"customers"}
    assert _revision(engine) is None
    with engine.connect() as connection:
        assert list(connection.execute(text("SELECT id, name FROM customers"))) == [(1, "ada")]
    result = _cli("runs", "list", "--store", store_url)
    assert result.exit_code == 4
    assert "other tables" in result.stderr
    assert _tables(engine) == {"customers"}


def test_runs_recorded_before_launch_metadata_upgrade_with_unknown_launch_and_no_tags(store_url, engine):
    recorded = _record_a_run(store_url)
    _migrate_to(engine, "0006", down=True)
    with engine.begin() as connection:
        # A consumer run a trigger launched under 0006: the upgrade marks it as launched by a trigger.
        connection.execute(
            text(
                "INSERT INTO partita_trigger_runs (run_id, request_id, flow, attempt, follows_run_id, created_at) "
                "VALUES (:run_id, 1, 'consumer', 1, NULL, 0)"
            ),
            {"run_id": recorded.run_id},
        )
    untouched = _record_a_run(store_url)  # opening the store upgrades it to head
    assert _revision(engine) == SCHEMA_HEAD
    store = open_store(store_url)
    try:
        upgraded = store.get_run(recorded.run_id)
        assert (upgraded.launched_by, upgraded.flow_name, upgraded.tags) == ("trigger", "consumer", ())
        assert upgraded.status == "success"
        later = store.get_run(untouched.run_id)
        assert (later.launched_by, later.flow_name) == ("python", "one")
    finally:
        store.close()


def test_a_run_recorded_before_launch_metadata_that_no_trigger_launched_reads_back_as_unknown(store_url, engine):
    recorded = _record_a_run(store_url)
    _migrate_to(engine, "0006", down=True)
    store = open_store(store_url)
    try:
        run = store.get_run(recorded.run_id)
        assert (run.launched_by, run.flow_name, run.tags) == (None, None, ())
    finally:
        store.close()
