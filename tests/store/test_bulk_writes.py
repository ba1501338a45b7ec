"""Bulk writes on SQLite: a batch sent as one JSON text stores exactly what ``executemany`` stores.

The JSON form only changes how rows travel to SQLite; every value must land
with the same SQL type and the same value, and what JSON cannot carry
exactly falls back to ``executemany``.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from partita.store import bulk_writes
from partita.store.bulk_writes import RowShape, insert_rows, upsert_rows, upsert_statements

pytestmark = pytest.mark.skipif(not bulk_writes._SQLITE_JSON, reason="SQLite before 3.38 has no ->>")

METADATA = sa.MetaData()
TABLE = sa.Table(
    "t",
    METADATA,
    sa.Column("k", sa.Integer, primary_key=True),
    sa.Column("text", sa.Text),
    sa.Column("number", sa.Float),
    sa.Column("count", sa.Integer),
    sa.Column("flag", sa.Boolean),
)

values = st.one_of(
    st.none(),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"])),
    st.integers(min_value=-(2**62), max_value=2**62),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)


def _engine(path: Path | None = None) -> sa.Engine:
    engine = sa.create_engine("sqlite://" if path is None else f"sqlite:///{path}")
    METADATA.create_all(engine)
    return engine


def _stored(engine: sa.Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as connection:
        return connection.exec_driver_sql(
            "SELECT k, text, typeof(text), number, typeof(number), count, typeof(count), flag, typeof(flag) FROM t ORDER BY k"
        ).fetchall()


def _rows(cells: list[tuple[Any, Any, Any, Any]]) -> list[tuple[Any, ...]]:
    return [(index, *row) for index, row in enumerate(cells)]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(values, values, values, values), min_size=1, max_size=40))
def test_a_batch_as_json_stores_every_value_as_executemany_does(cells) -> None:
    rows = _rows(cells)
    as_json, as_rows = _engine(), _engine()
    with as_json.begin() as connection:
        insert_rows(connection, "sqlite", TABLE, rows, 0)
    with as_rows.begin() as connection:
        connection.exec_driver_sql("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows)
    assert _stored(as_json) == _stored(as_rows)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(values, values, values, values), min_size=8, max_size=30),
    st.lists(st.tuples(values, values, values, values), min_size=8, max_size=30),
)
def test_an_upsert_batch_as_json_updates_as_executemany_does(first, second) -> None:
    upsert = upsert_statements(TABLE, ("k",), {"text", "flag"}, dialect="sqlite")
    assert upsert.json_sql is not None
    as_json, as_rows = _engine(), _engine()
    for batch in (_rows(first), _rows(second)):
        with as_json.begin() as connection:
            upsert_rows(connection, "sqlite", upsert, batch)
        with as_rows.begin() as connection:
            connection.exec_driver_sql(upsert.rows_sql, batch)
    assert _stored(as_json) == _stored(as_rows)


def test_an_upsert_batch_that_names_a_key_twice_keeps_the_later_row(tmp_path: Path) -> None:
    upsert = upsert_statements(TABLE, ("k",), None, dialect="sqlite")
    engine = _engine(tmp_path / "t.db")
    rows = [(index % 4, f"v{index}", float(index), index, index % 2 == 0) for index in range(12)]
    with engine.begin() as connection:
        upsert_rows(connection, "sqlite", upsert, rows)
    assert [row[1] for row in _stored(engine)] == ["v8", "v9", "v10", "v11"]


@pytest.mark.parametrize("odd", [b"bytes", math.nan, math.inf, "a\x00b"], ids=["bytes", "nan", "inf", "nul"])
def test_a_value_json_cannot_carry_exactly_sends_the_batch_row_by_row(tmp_path: Path, odd: Any) -> None:
    engine = _engine(tmp_path / "t.db")
    rows = [(index, "x", 1.5, index, True) for index in range(20)]
    rows[7] = (7, odd, 1.5, 7, True) if isinstance(odd, (bytes, str)) else (7, "x", odd, 7, True)
    with engine.begin() as connection:
        insert_rows(connection, "sqlite", TABLE, rows, 0)
    stored = _stored(engine)
    assert len(stored) == 20
    if isinstance(odd, bytes):
        assert stored[7][1:3] == (b"bytes", "blob")
    elif isinstance(odd, str):
        assert stored[7][1:3] == ("a\x00b", "text")
    elif math.isnan(odd):
        assert stored[7][3:5] == (None, "null")  # SQLite stores NaN as NULL, as executemany always did
    else:
        assert stored[7][3:5] == (math.inf, "real")


def test_a_text_with_a_lone_surrogate_is_refused_and_nothing_of_the_batch_is_written(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "t.db")
    rows = [(index, "x", 1.0, index, False) for index in range(20)]
    rows[3] = (3, "\udc80", 1.0, 3, False)
    with pytest.raises(UnicodeEncodeError), engine.begin() as connection:
        insert_rows(connection, "sqlite", TABLE, rows, 0)
    assert _stored(engine) == []


def test_a_failing_row_fails_the_whole_batch_statement(tmp_path: Path) -> None:
    """One statement: a constraint a row breaks leaves none of the batch behind."""
    engine = _engine(tmp_path / "t.db")
    rows = [(index, "x", 1.0, index, False) for index in range(20)]
    rows[15] = (2, "duplicate key", 1.0, 2, False)
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as connection:
        insert_rows(connection, "sqlite", TABLE, rows, 0)
    assert _stored(engine) == []
    assert sqlite3.sqlite_version_info >= (3, 38, 0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(values, values), min_size=1, max_size=30), values, values)
def test_rows_of_a_shape_store_what_their_whole_rows_store(cells, constant_text, constant_flag) -> None:
    """Rows carrying some columns, with others bound once, land as the whole rows would (JSON or row by row)."""
    shape = RowShape(("k", "number", "count"), (("text", constant_text), ("flag", constant_flag)))
    rows = [(index, *cell) for index, cell in enumerate(cells)]
    shaped, whole = _engine(), _engine()
    with shaped.begin() as connection:
        insert_rows(connection, "sqlite", TABLE, rows, 0, shape=shape)
    with whole.begin() as connection:
        connection.exec_driver_sql("INSERT INTO t VALUES (?, ?, ?, ?, ?)", shape.in_table_order(TABLE, rows))
    assert _stored(shaped) == _stored(whole)


def test_a_shape_leaves_the_columns_it_does_not_name_null() -> None:
    engine = _engine()
    shape = RowShape(("k", "count"), (("flag", True),))
    with engine.begin() as connection:
        insert_rows(connection, "sqlite", TABLE, [(index, index * 2) for index in range(10)], 0, shape=shape)
    assert shape.in_table_order(TABLE, [(1, 2)]) == [(1, None, None, 2, True)]
    assert _stored(engine)[3] == (3, None, "null", None, "null", 6, "integer", 1, "integer")
