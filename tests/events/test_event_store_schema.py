"""The event log's table (SPEC §8; migration 0002), inspected on SQLite and PostgreSQL.

``partita_events`` holds id, asset, partition key (canonical text or null),
optional partition date, the ``extra`` JSON object, timestamp, provenance
(source kind, run id, asset, key presence, invocation) and the dedupe
identity, which a uniqueness constraint (or unique index) guards in the
database itself.
Indexes serve reading by asset in id order and by asset and key. A store
created by the first revision gets the same table when it is upgraded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url

import partita as p
from partita.store.sql import MIGRATIONS

EVENTS = "partita_events"
NULLABLE = {
    "partition_key": True,
    "partition_date": True,
    "source_run_id": True,
    "source_asset": True,
    "source_key_present": True,
    "source_invocation": True,
    "asset": False,
    "extra": False,
    "timestamp": False,
    "source_kind": False,
}


@pytest.fixture
def store_url(empty_store_url: str) -> str:
    """Every test here creates or upgrades a store: its database starts empty on both backends."""
    return empty_store_url


@pytest.fixture
def engine(store_url: str) -> Iterator[sa.Engine]:
    parsed = make_url(store_url)
    if parsed.get_backend_name() == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    created = sa.create_engine(parsed)
    try:
        yield created
    finally:
        created.dispose()


def _inspect(engine: sa.Engine) -> dict[str, object]:
    with engine.connect() as connection:
        inspector = sa.inspect(connection)
        return {
            "columns": {column["name"]: column for column in inspector.get_columns(EVENTS)},
            "primary_key": inspector.get_pk_constraint(EVENTS)["constrained_columns"],
            "unique": [tuple(u["column_names"]) for u in inspector.get_unique_constraints(EVENTS)],
            "indexes": {tuple(i["column_names"]): i for i in inspector.get_indexes(EVENTS)},
        }


def _check_event_table(engine: sa.Engine) -> None:
    found = _inspect(engine)
    columns = found["columns"]
    assert found["primary_key"] == ["id"]
    for name, nullable in NULLABLE.items():
        assert name in columns, name
        assert bool(columns[name]["nullable"]) is nullable, name
    assert "dedupe_key" in columns
    indexes = found["indexes"]
    # A unique constraint, or a unique index (possibly partial: rows without an identity are exempt).
    unique_index = indexes.get(("dedupe_key",))
    assert ("dedupe_key",) in found["unique"] or (unique_index is not None and unique_index["unique"])
    assert ("asset", "id") in indexes
    assert ("asset", "partition_key") in indexes


def test_the_event_table_has_its_columns_unique_dedupe_identity_and_indexes(store_url, engine):
    p.open_store(store_url).close()

    _check_event_table(engine)


def test_the_database_itself_refuses_a_second_row_with_the_same_dedupe_identity(store_url, engine):
    registry = p.AssetRegistry()
    p.asset(name="plain", registry=registry)(lambda: 1)
    store = p.open_store(store_url)
    try:
        receipt = p.publish_event(store, registry, "plain", extra={"rows": 1}, dedupe_key="batch-41")
    finally:
        store.close()
    with engine.connect() as connection:
        row = dict(connection.execute(sa.text(f"SELECT * FROM {EVENTS}")).mappings().one())
    assert row["id"] == receipt.id
    assert json.loads(row["extra"]) == {"rows": 1}
    copy = {name: value for name, value in row.items() if name != "id"}
    copy["extra"] = json.dumps({"rows": 2})
    names = ", ".join(copy)
    marks = ", ".join(f":{name}" for name in copy)

    with pytest.raises(sa.exc.IntegrityError), engine.begin() as connection:
        connection.execute(sa.text(f"INSERT INTO {EVENTS} ({names}) VALUES ({marks})"), copy)

    with engine.connect() as connection:
        assert connection.execute(sa.text(f"SELECT count(*) FROM {EVENTS}")).scalar() == 1


def test_ids_grow_in_publication_order(store_url):
    registry = p.AssetRegistry()
    p.asset(name="plain", registry=registry)(lambda: 1)
    store = p.open_store(store_url)
    try:
        ids = [p.publish_event(store, registry, "plain", extra={"n": n}).id for n in range(5)]
        listed = store.list_events()
    finally:
        store.close()

    assert ids == sorted(ids) and len(set(ids)) == 5
    assert [event.id for event in listed] == ids
    assert [event.extra["n"] for event in listed] == list(range(5))


def test_a_store_created_by_the_first_revision_gains_the_event_table_when_opened(store_url, engine):
    with engine.begin() as connection:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
    with engine.connect() as connection:
        assert EVENTS not in sa.inspect(connection).get_table_names()

    store = p.open_store(store_url)
    store.close()

    _check_event_table(engine)
