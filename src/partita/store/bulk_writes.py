"""Bulk inserts and upserts of plain tuples: the SQL for each backend, and the fastest way to send rows.

PostgreSQL takes a batch in one statement: ``COPY`` for new rows, one array
per column for upserts. ``COPY`` goes in the binary format, with each
column's type read once from the database's catalog: the driver encodes a row
in a quarter of the time the text format takes, on the thread that also runs
bodies. A table with a column type outside the plain ones, or a batch with an
integer its column cannot hold (binary ``int4`` would wrap it silently),
goes as text, where the server checks every value. SQLite takes a batch as one JSON text parameter,
unpacked by ``json_each`` inside one statement: the driver's ``executemany``
binds each row while holding the interpreter lock and releases and takes it
back around every row's step, so a journal writing thousands of attempts
competed with the run it records once per row; one statement holds the lock
only while ``json.dumps`` builds its text. A batch JSON cannot carry exactly
(bytes, non-finite floats, text with a NUL character) and a batch of a few
rows take ``executemany``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import Boolean, Connection, Float, Integer

__all__ = [
    "RowShape", "Upsert", "insert_rows", "sqlite_json_batch", "sqlite_json_pays", "upsert_rows", "upsert_statements",
]  # fmt: skip

_PG_ARRAY_TYPES = {Float: "float8[]", Integer: "int8[]", Boolean: "bool[]"}
#: ``->>`` (a JSON value as its SQL value) arrived in SQLite 3.38.
_SQLITE_JSON = sqlite3.sqlite_version_info >= (3, 38, 0)
#: Below this many rows a batch costs less through ``executemany`` than as JSON text.
_JSON_MIN_ROWS = 8


class Upsert(NamedTuple):
    """Prepared upsert SQL of one table: per row (``?`` or ``%s`` arrays) and per batch as JSON (SQLite)."""

    rows_sql: str
    json_sql: str | None


def _json_rows(count: int) -> str:
    """A SELECT of ``count`` columns from the rows of the one JSON parameter."""
    return f"SELECT {', '.join(f'value->>{i}' for i in range(count))} FROM json_each(?)"


def upsert_statements(table: Any, keys: tuple[str, ...], only: set[str] | None, *, dialect: str) -> Upsert:
    """Driver SQL upserting rows of ``table``; ``only`` limits the columns a conflict updates."""
    names = [column.name for column in table.columns]
    updates = ", ".join(
        f"{name} = excluded.{name}" for name in names if name not in keys and (only is None or name in only)
    )
    conflict = f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"
    into = f"INSERT INTO {table.name} ({', '.join(names)})"
    if dialect == "postgresql":
        arrays = ", ".join(f"%s::{_PG_ARRAY_TYPES.get(type(column.type), 'text[]')}" for column in table.columns)
        return Upsert(f"{into} SELECT * FROM unnest({arrays}) {conflict}", None)
    # "WHERE true" tells SQLite's parser the ON CONFLICT belongs to the upsert, not to a join.
    json_sql = f"{into} {_json_rows(len(names))} WHERE true {conflict}" if _SQLITE_JSON else None
    return Upsert(f"{into} VALUES ({', '.join('?' * len(names))}) {conflict}", json_sql)


def sqlite_json_batch(rows: Sequence[tuple[Any, ...]]) -> str | None:
    """The rows as one JSON text for SQLite's ``json_each``; None where ``executemany`` is the way.

    That is: a SQLite without ``->>``, fewer than `_JSON_MIN_ROWS` rows, or
    a value JSON would not carry exactly.
    """
    return _as_json(rows) if sqlite_json_pays(len(rows)) else None


def sqlite_json_pays(count: int) -> bool:
    """Whether ``count`` rows cost SQLite less as JSON text than through ``executemany`` (and it can read them)."""
    return _SQLITE_JSON and count >= _JSON_MIN_ROWS


def sqlite_json_text(rows: Sequence[tuple[Any, ...]]) -> str | None:
    """The rows as one JSON text for ``json_each`` whatever their number; None where SQLite or the values refuse."""
    return _as_json(rows) if _SQLITE_JSON else None


def _as_json(rows: Sequence[tuple[Any, ...]]) -> str | None:
    """The rows as one JSON array, or None when JSON would not carry every value exactly."""
    try:
        text = json.dumps(rows, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):  # bytes, or a non-finite float
        return None
    # SQLite's ->> ends a text at a NUL character; a bound parameter keeps it.
    return None if "\\u0000" in text else text


class RowShape(NamedTuple):
    """Rows that carry only some of a table's columns: ``columns`` per row, ``constants`` once per statement.

    The table's other columns take their defaults (NULL). A batch of plain
    successes repeats its run id and status in every row; as constants they
    are bound once, and SQLite unpacks a third of the values from the JSON.
    """

    columns: tuple[str, ...]
    constants: tuple[tuple[str, Any], ...] = ()

    def names(self) -> list[str]:
        return [*self.columns, *(name for name, _ in self.constants)]

    def completed(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The rows with the constants appended, in `names` order."""
        if not self.constants:
            return rows
        values = tuple(value for _, value in self.constants)
        return [row + values for row in rows]

    def in_table_order(self, table: Any, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The rows as whole rows of ``table`` (its column order; NULL where the shape has nothing)."""
        at = {name: index for index, name in enumerate(self.names())}
        picks = [at.get(column.name) for column in table.columns]
        return [tuple(None if pick is None else row[pick] for pick in picks) for row in self.completed(rows)]


def insert_rows(
    connection: Connection,
    dialect: str,
    table: Any,
    rows: list[tuple[Any, ...]],
    skip: int,
    copy_types: dict[str, dict[str, str | None]] | None = None,
    shape: RowShape | None = None,
) -> None:
    """Insert rows that were never written; ``skip`` leaves out leading columns the database fills (an id).

    Rows are whole rows in table order, or carry the columns of ``shape``.
    ``copy_types`` (PostgreSQL) keeps each table's binary ``COPY`` types
    between calls: the store passes one per database.
    """
    if shape is None:
        shape = RowShape(tuple(column.name for column in list(table.columns)[skip:]))
    names = shape.names()
    listed = ", ".join(names)
    if dialect == "postgresql":
        driver = connection.connection.driver_connection
        assert driver is not None
        rows = shape.completed(rows)
        with driver.cursor() as cursor:
            known = {} if copy_types is None else copy_types
            if table.name not in known:
                known[table.name] = _binary_copy_types(cursor, table.name)
            types = _for_columns(known[table.name], names)
            binary = types is not None and _integers_fit(rows, types)
            statement = f"COPY {table.name} ({listed}) FROM STDIN" + (" (FORMAT BINARY)" if binary else "")
            with cursor.copy(statement) as copy:
                if binary:
                    copy.set_types(types)
                for row in rows:
                    copy.write_row(row)
        return
    batch = sqlite_json_batch(rows)
    if batch is not None:
        carried = [f"value->>{index}" for index in range(len(shape.columns))]
        select = ", ".join(carried + ["?"] * len(shape.constants))
        parameters = (*(value for _, value in shape.constants), batch)
        connection.exec_driver_sql(f"INSERT INTO {table.name} ({listed}) SELECT {select} FROM json_each(?)", parameters)
    else:
        marks = ", ".join("?" * len(names))
        connection.exec_driver_sql(f"INSERT INTO {table.name} ({listed}) VALUES ({marks})", shape.completed(rows))


#: Catalog type names a binary ``COPY`` sends as these driver types; any other keeps a table on text.
_BINARY_TYPES = {
    "smallint": "int2", "integer": "int4", "bigint": "int8", "double precision": "float8", "real": "float4",
    "boolean": "bool", "text": "text", "character varying": "text",
}  # fmt: skip
#: Binary integers the driver would wrap instead of refusing: (type, bound of the absolute value).
_NARROW_INTEGERS = {"int2": 2**15, "int4": 2**31}


def _binary_copy_types(cursor: Any, table: str) -> dict[str, str | None]:
    """Each column of ``table`` with its binary ``COPY`` type (None: not a plain type, sent as text)."""
    cursor.execute(
        "SELECT attname, format_type(atttypid, NULL) FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
        (table,),
    )
    return {name: _BINARY_TYPES.get(kind) for name, kind in cursor.fetchall()}


def _for_columns(known: dict[str, str | None], names: list[str]) -> list[str] | None:
    """The binary types of ``names`` in order; None when one of them has none (the batch goes as text)."""
    types = [known.get(name) for name in names]
    return None if None in types else types  # type: ignore[return-value]


def _integers_fit(rows: list[tuple[Any, ...]], types: list[str]) -> bool:
    """Whether every value of a narrow integer column is in its range (anything else goes as text)."""
    for index, kind in enumerate(types):
        bound = _NARROW_INTEGERS.get(kind)
        if bound is None:
            continue
        values = [row[index] for row in rows if row[index] is not None]
        try:
            if values and (min(values) < -bound or max(values) >= bound):
                return False
        except TypeError:  # not all numbers: the text format lets the server say which value is wrong
            return False
    return True


def upsert_rows(connection: Connection, dialect: str, upsert: Upsert, rows: list[tuple[Any, ...]]) -> None:
    """Run a prepared upsert over plain tuples."""
    if dialect == "postgresql":
        # One statement per batch: each column travels as one array.
        connection.exec_driver_sql(upsert.rows_sql, tuple(list(column) for column in zip(*rows, strict=True)))
        return
    batch = _as_json(rows) if upsert.json_sql is not None and len(rows) >= _JSON_MIN_ROWS else None
    if batch is not None:
        connection.exec_driver_sql(upsert.json_sql, (batch,))  # type: ignore[arg-type]
    else:
        connection.exec_driver_sql(upsert.rows_sql, rows)
