"""`SqlEventStore`: the asset event log, durable emission with dedupe, and reading it back.

Emission goes through `EventWriter` (SQLite: the process's shared write
connection; PostgreSQL: one DBAPI connection per thread); on SQLite, threads
emitting at once share its transactions (`GroupCommit`).
Reading goes through the engine's pool. A dedupe identity turns a retry of a lost
acknowledgement into the first event's receipt instead of a second event.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from partita.errors import EmissionError, StoreError
from partita.events.model import AssetEvent, EmissionReceipt, EventDraft, SourceKind
from partita.store.database import Database, describe_failure
from partita.store.event_writer import EventWriter
from partita.store.group_commit import GroupCommit
from partita.store.protocol import LastSuccess
from partita.store.retries import is_transient, retry_transient
from partita.store.rows import event_of, event_row, utc_datetime
from partita.store.schema import events

__all__ = ["SqlEventStore"]

_ID_CHUNK = 500
#: Every events column by name, in table order (`event_of` reads them by position).
_COLUMNS = ", ".join(column.name for column in events.columns)
#: Up to this many keys are asked for by name; more by the span from the least to the greatest.
_NAMED_KEYS = 4 * _ID_CHUNK
#: An asset's keyed outlet events: the partial index ``ix_partita_events_outlet_key`` holds exactly these.
_OUTLET_KEYS = f"asset = ? AND source_kind = '{SourceKind.OUTLET.value}' AND partition_key IS NOT NULL"
_FIRST = operator.itemgetter(0)
_LAST_SUCCESS = functools.partial(tuple.__new__, LastSuccess)


class _Refused(Exception):
    """The driver error a transaction reported for one event (raised in the emitting thread only)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


@dataclass(frozen=True, slots=True)
class _KeySelection:
    """How a read limited to given keys asks for them: by name when few, else by their span, then kept in memory.

    A status's keys are few (a 30-day window among 100,000 days: the index
    reads only their entries) or many (a range of 100,000 days: one range
    scan instead of 200 lists of names). The span is compared as code
    points, as Python orders text: SQLite's binary collation does, and on
    PostgreSQL the comparison says ``COLLATE "C"``.
    """

    #: (SQL to add to the WHERE clause, its parameters) per query; one empty condition: every key.
    conditions: tuple[tuple[str, tuple[str, ...]], ...]
    wanted: frozenset[str] | None = None

    @classmethod
    def of(cls, keys: Collection[str] | None, dialect: str) -> _KeySelection:
        if keys is None:
            return cls((("", ()),))
        wanted = frozenset(keys)
        if len(wanted) <= _NAMED_KEYS:
            names = sorted(wanted)
            chunks = (tuple(names[start : start + _ID_CHUNK]) for start in range(0, len(names), _ID_CHUNK))
            return cls(tuple((f" AND partition_key IN ({', '.join('?' * len(chunk))})", chunk) for chunk in chunks))
        column = "partition_key" if dialect == "sqlite" else 'partition_key COLLATE "C"'
        return cls(((f" AND {column} >= ? AND {column} <= ?", (min(wanted), max(wanted))),), wanted)

    def kept(self, found: Any) -> Any:
        """``found`` (a set of keys, or a dict by key) without the keys a span brought that were not asked for."""
        if self.wanted is None:
            return found
        if isinstance(found, dict):
            kept = found.keys() & self.wanted  # set operations in C, as the rows were built
            return dict(zip(kept, map(found.__getitem__, kept), strict=True))
        return found & self.wanted


class SqlEventStore:
    """The `EventStore` of a `Database`."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._url = database.url
        self._failures = database.failures
        self._writer = EventWriter(database)
        self._group: GroupCommit[Any, Any] | None = None
        if database.dialect == "sqlite":
            # SQLite takes one writer at a time: threads emitting at once share its transactions.
            self._group = GroupCommit(self._writer.commit)
            self._submit = self._group.submit
        else:
            # PostgreSQL overlaps transactions of separate connections and already shares WAL
            # flushes between them; one thread sending every row of the others was slower
            # (benchmarks/emission.py --threads 8: 0.75-0.88x one raw writer, against 0.84-0.95x
            # with a transaction per emission on each thread's own connection).
            self._submit = self._writer.commit_one
        # SQLite already waited out its busy timeout; a lost PostgreSQL
        # connection is retried, and the dedupe identity makes that safe.
        self._retried = database.dialect != "sqlite"

    def _transient(self, exc: BaseException) -> bool:
        return self._retried and isinstance(exc, _Refused) and is_transient(exc.error)

    def record_event(self, draft: EventDraft) -> EmissionReceipt:
        """Insert the event unless its dedupe identity exists; durable when this returns.

        On SQLite, threads recording at once share a transaction; each returns
        once its own event has committed. A lost acknowledgement is retried: the dedupe identity
        turns the retry into the first event's receipt instead of a second event.
        """
        item = (event_row(draft), draft.dedupe_key)
        outcome = self._submit(item)
        if type(outcome) is not tuple:
            outcome = self._retry(item, outcome)
        inserted, existing = outcome
        if inserted is not None:
            return EmissionReceipt(int(inserted), draft.timestamp)  # type: ignore[arg-type]
        existing_id, existing_timestamp, existing_hash = existing
        if existing_hash != draft.payload_hash:
            raise EmissionError(
                "emit: dedupe_key was already used for a different event (asset, key, date or extra differ); "
                "a dedupe key identifies exactly one event"
            )
        first_at = utc_datetime(existing_timestamp)
        return EmissionReceipt(int(existing_id), first_at, duplicate=True)  # type: ignore[arg-type]

    def _retry(self, item: tuple[Any, str | None], refusal: BaseException) -> tuple[Any, Any]:
        """The outcome of ``item`` after its first try was refused: retried while transient, else a `StoreError`."""

        def insert(number: int) -> tuple[Any, Any]:
            outcome = refusal if number == 0 else self._submit(item)
            if type(outcome) is tuple:
                return outcome
            raise _Refused(outcome)

        try:
            return retry_transient(insert, transient=self._transient)
        except _Refused as refused:
            failure = describe_failure(refused.error)
            raise StoreError(f"store {self._url}: cannot record the event: {failure}") from refused.error

    def list_events(
        self,
        *,
        asset: str | None = None,
        partition_key: str | None = None,
        since: int | None = None,
        limit: int | None = None,
        run_id: str | None = None,
        kinds: Sequence[SourceKind] | None = None,
    ) -> list[AssetEvent]:
        """Events in id order, filtered; ``since`` excludes ids up to and including it."""
        query = select(events).order_by(events.c.id)
        if asset is not None:
            query = query.where(events.c.asset == asset)
        if partition_key is not None:
            query = query.where(events.c.partition_key == partition_key)
        if since is not None:
            query = query.where(events.c.id > since)
        if run_id is not None:
            query = query.where(events.c.source_run_id == run_id)
        if kinds is not None:
            query = query.where(events.c.source_kind.in_([kind.value for kind in kinds]))
        if limit is not None:
            query = query.limit(limit)

        def read(_: int) -> list[AssetEvent]:
            with self._database.connect() as connection:
                return [event_of(row) for row in connection.execute(query)]

        with self._failures("list events"):
            return retry_transient(read)

    def last_successes(self, asset: str, keys: Collection[str] | None = None) -> dict[str, LastSuccess]:
        """Each key of ``asset`` (of ``keys``, when given) with its newest outlet event, from the outlet-key index alone.

        The index covers every column read, so no event row is visited. The
        literal ``source_kind = 'outlet'`` matches the partial index's
        condition, which a bound parameter would not; SQLite takes the other
        columns of a ``MAX`` aggregate from the row that holds the maximum,
        PostgreSQL says the same with ``DISTINCT ON``.
        """
        selection = _KeySelection.of(keys, self._database.dialect)

        def read(_: int) -> dict[str, LastSuccess]:
            found: dict[str, LastSuccess] = {}
            with self._database.connect() as connection:
                for condition, parameters in selection.conditions:
                    rows = self._database.rows(connection, self._last_successes_sql(condition), (asset, *parameters))
                    # Built in C (a row is already the tuple a LastSuccess is): 100,000 calls of
                    # LastSuccess._make would cost a quarter of the query.
                    found.update(zip(map(_FIRST, rows), map(_LAST_SUCCESS, rows), strict=True))
            return selection.kept(found)

        with self._failures("read the last successes"):
            return retry_transient(read)

    def succeeded_keys(self, asset: str, keys: Collection[str] | None = None) -> frozenset[str]:
        """The keys of `last_successes` (among ``keys``, when given), from the same index, without grouping by key."""
        selection = _KeySelection.of(keys, self._database.dialect)

        def read(_: int) -> frozenset[str]:
            found: set[str] = set()
            with self._database.connect() as connection:
                for condition, parameters in selection.conditions:
                    query = f"SELECT DISTINCT partition_key FROM {events.name} WHERE {_OUTLET_KEYS}{condition}"
                    found.update(map(_FIRST, self._database.rows(connection, query, (asset, *parameters))))
            return frozenset(selection.kept(found))

        with self._failures("read the last successes"):
            return retry_transient(read)

    def _last_successes_sql(self, condition: str) -> str:
        where = _OUTLET_KEYS + condition
        if self._database.dialect == "sqlite":
            return (
                f"SELECT partition_key, MAX(id), source_run_id, timestamp FROM {events.name} "
                f"WHERE {where} GROUP BY partition_key"
            )
        return (
            f"SELECT DISTINCT ON (partition_key) partition_key, id, source_run_id, timestamp "
            f"FROM {events.name} WHERE {where} ORDER BY partition_key, id DESC"
        )

    def last_unkeyed_success(self, asset: str) -> LastSuccess | None:
        """The newest outlet event of ``asset`` without a key, from the same partial index (NULL keys are in it)."""
        query = (
            f"SELECT id, source_run_id, timestamp FROM {events.name} WHERE asset = ? "
            f"AND source_kind = '{SourceKind.OUTLET.value}' AND partition_key IS NULL ORDER BY id DESC LIMIT 1"
        )

        def read(_: int) -> LastSuccess | None:
            with self._database.connect() as connection:
                row = connection.exec_driver_sql(self._database.driver_sql(query), (asset,)).first()
            return None if row is None else LastSuccess(None, int(row[0]), row[1], float(row[2]))

        with self._failures("read the last success"):
            return retry_transient(read)

    def list_events_by_ids(self, ids: Sequence[int]) -> list[AssetEvent]:
        """These events, in id order (unknown ids are skipped)."""
        return [event_of(row) for row in self.event_rows_by_ids(ids)]

    def event_rows_by_ids(self, ids: Sequence[int]) -> list[tuple[Any, ...]]:
        """These events' rows, undecoded (`rows.event_of` decodes one), in id order; unknown ids are skipped."""
        found: list[tuple[Any, ...]] = []
        wanted = sorted(set(ids))
        with self._failures("read events"):
            for start in range(0, len(wanted), _ID_CHUNK):
                chunk = wanted[start : start + _ID_CHUNK]
                marks = ", ".join("?" * len(chunk))
                query = self._database.driver_sql(f"SELECT {_COLUMNS} FROM {events.name} WHERE id IN ({marks}) ORDER BY id")
                found.extend(self._database.read(query, tuple(chunk)))
        return found

    def close(self) -> None:
        """Close the emission connections (the database's pool is its owner's to dispose)."""
        self._writer.close()
