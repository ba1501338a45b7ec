"""Bulk inserts on PostgreSQL: binary ``COPY`` stores exactly what plain ``INSERT`` stores, or falls back to text.

Binary ``COPY`` only changes how rows travel; every value must land as a
row-by-row ``INSERT`` stores it. What binary would get wrong (an integer its
``int4`` column cannot hold wraps silently) and tables with a column type
outside the plain ones go as text, where the server checks every value.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects.postgresql import JSONB

from partita.store import bulk_writes
from partita.store.bulk_writes import RowShape, insert_rows

METADATA = sa.MetaData()
TABLE = sa.Table(
    "bulk_copy",
    METADATA,
    sa.Column("k", sa.Integer, primary_key=True),
    sa.Column("text", sa.Text),
    sa.Column("short", sa.String(64)),
    sa.Column("number", sa.Float),
    sa.Column("count", sa.Integer),
    sa.Column("big", sa.BigInteger),
    sa.Column("flag", sa.Boolean),
)
WITH_JSON = sa.Table("bulk_copy_json", METADATA, sa.Column("k", sa.Integer, primary_key=True), sa.Column("doc", JSONB))

texts = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=20)
rows_strategy = st.lists(
    st.tuples(
        st.none() | texts | st.sampled_from(["\t", "\n", "\\", "\\N", "a\tb\nc\\d", "ünïcödé ✓"]),
        st.none() | texts,
        st.none() | st.floats(width=64),
        st.none() | st.integers(min_value=-(2**31), max_value=2**31 - 1),
        st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.none() | st.booleans(),
    ),
    min_size=1,
    max_size=30,
)


@pytest.fixture
def engine(postgres_url: str) -> Iterator[sa.Engine]:
    created = sa.create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://", 1))
    METADATA.create_all(created)
    try:
        yield created
    finally:
        created.dispose()


def _stored(engine: sa.Engine, table: str = "bulk_copy") -> list[tuple[Any, ...]]:
    with engine.connect() as connection:
        return [tuple(row) for row in connection.exec_driver_sql(f"SELECT * FROM {table} ORDER BY k")]


def _clear(engine: sa.Engine) -> None:
    with engine.begin() as connection:
        connection.exec_driver_sql("DELETE FROM bulk_copy")


def _same(left: list[tuple[Any, ...]], right: list[tuple[Any, ...]]) -> bool:
    """Equal rows, NaN equal to NaN."""

    def cell(value: Any) -> Any:
        return "NaN" if isinstance(value, float) and math.isnan(value) else value

    return [tuple(map(cell, row)) for row in left] == [tuple(map(cell, row)) for row in right]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows_strategy)
def test_binary_copy_stores_every_value_as_a_plain_insert_does(engine: sa.Engine, cells: list[tuple[Any, ...]]) -> None:
    rows = [(index, *cell) for index, cell in enumerate(cells)]
    _clear(engine)
    copies: dict[str, dict[str, str | None]] = {}
    with engine.begin() as connection:
        insert_rows(connection, "postgresql", TABLE, rows, 0, copies)
    copied = _stored(engine)
    assert copies["bulk_copy"]["number"] == "float8"  # the binary path was taken
    _clear(engine)
    with engine.begin() as connection:
        connection.exec_driver_sql("INSERT INTO bulk_copy VALUES (%s, %s, %s, %s, %s, %s, %s)", rows)
    assert _same(copied, _stored(engine))


def _copy_formats(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The COPY statements insert_rows runs, recorded."""
    statements: list[str] = []
    copy = psycopg.Cursor.copy

    def recorded(self: psycopg.Cursor, statement: Any, *args: Any, **kwargs: Any) -> Any:
        statements.append(str(statement))
        return copy(self, statement, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "copy", recorded)
    return statements


def test_attempts_and_outlet_events_of_a_run_travel_as_binary(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import partita as p

    statements = _copy_formats(monkeypatch)
    registry = p.AssetRegistry()

    keys = [f"k{index}" for index in range(20)]

    @p.asset(partition_def=p.StaticPartitionDef("letters", keys), registry=registry)
    def letters() -> int:
        return 1

    store = p.open_store(postgres_url)
    try:
        result = p.Flow(["letters"], registry=registry, store=store, record_partition_keys=True).run(
            {"partition_keys": keys}
        )
        assert result.succeeded
        assert store.get_run(result.run_id).counts == {"success": 20}
        assert len(store.list_events(asset="letters")) == 20
    finally:
        store.close()
    copies = [statement for statement in statements if statement.startswith("COPY partita_")]
    assert copies and all(statement.endswith("(FORMAT BINARY)") for statement in copies)


def test_an_integer_its_column_cannot_hold_is_refused_by_the_server_and_nothing_is_written(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements = _copy_formats(monkeypatch)
    rows = [(1, "a", "b", 1.0, 5, 5, True), (2, "c", "d", 2.0, 2**31, 5, False)]  # binary int4 would wrap 2**31
    with pytest.raises(psycopg.DataError, match="out of range"), engine.begin() as connection:
        insert_rows(connection, "postgresql", TABLE, rows, 0, {})
    assert statements == ["COPY bulk_copy (k, text, short, number, count, big, flag) FROM STDIN"]
    assert _stored(engine) == []


def test_a_value_of_another_type_goes_as_text_and_the_server_reads_it(engine: sa.Engine) -> None:
    with engine.begin() as connection:
        insert_rows(connection, "postgresql", TABLE, [(1, "a", "b", 1.5, "7", 8, True)], 0, {})
    assert _stored(engine) == [(1, "a", "b", 1.5, 7, 8, True)]


def test_a_table_with_a_column_outside_the_plain_types_goes_as_text(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements = _copy_formats(monkeypatch)
    copies: dict[str, dict[str, str | None]] = {}
    with engine.begin() as connection:
        insert_rows(connection, "postgresql", WITH_JSON, [(1, '{"a": 1}')], 0, copies)
    assert copies["bulk_copy_json"] == {"k": "int4", "doc": None}
    assert statements == ["COPY bulk_copy_json (k, doc) FROM STDIN"]
    assert _stored(engine, "bulk_copy_json") == [(1, {"a": 1})]


def test_a_string_longer_than_its_varchar_is_refused_in_binary_too(engine: sa.Engine) -> None:
    with pytest.raises(psycopg.DataError, match="too long"), engine.begin() as connection:
        insert_rows(connection, "postgresql", TABLE, [(1, "a", "x" * 65, 1.0, 1, 1, True)], 0, {})
    assert _stored(engine) == []


def test_the_catalog_is_read_once_per_table(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    read = bulk_writes._binary_copy_types

    def counted(cursor: Any, table: str) -> dict[str, str | None]:
        reads.append(table)
        return read(cursor, table)

    monkeypatch.setattr(bulk_writes, "_binary_copy_types", counted)
    copies: dict[str, dict[str, str | None]] = {}
    for start in (0, 10):
        with engine.begin() as connection:
            rows = [(start + index, "t", "s", 0.5, index, index, False) for index in range(10)]
            insert_rows(connection, "postgresql", TABLE, rows, 0, copies)
    assert reads == ["bulk_copy"] and len(_stored(engine)) == 20


def test_rows_of_a_shape_travel_with_their_constants(engine: sa.Engine) -> None:
    shape = RowShape(("k", "number"), (("short", "run-1"), ("count", 1), ("flag", True)))
    rows = [(index, index / 4) for index in range(12)]
    with engine.begin() as connection:
        insert_rows(connection, "postgresql", TABLE, rows, 0, {}, shape)
    assert _stored(engine) == [(index, None, "run-1", index / 4, 1, None, True) for index in range(12)]
