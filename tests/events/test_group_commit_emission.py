"""Group commit of emissions: threads of one process emitting at once into a SQLite store share transactions.

Every receipt is durable when it returns (a second connection reads the
event at once), duplicates racing inside one transaction resolve as they do
one by one (first writer wins, equal receipts), a row the database refuses
fails only its own emission, a store failure fails every waiter with the
same `StoreError` and writes nothing, and a thread emitting alone commits
in its own thread without waiting for anybody.

To put several emissions into one transaction for certain, the table is
locked from another connection while a first emission (the leader) waits on
it; the others queue behind it, and once the lock is released the first
queued thread commits everything queued in one transaction.

PostgreSQL commits each emission on its thread's own connection (the server
overlaps them): the same concurrent bodies are durable on return there, and
dropped connections fail or retry each emission on its own.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import partita as p
from partita.errors import EmissionError, StoreError
from partita.events.model import EventDraft, EventSource, SourceKind
from partita.store import database as database_module
from partita.store.sql import SqlStore

DEADLINE = 30.0
THREADS = 8
WORKERS = p.StaticPartitionDef("workers", [f"w{n}" for n in range(THREADS)])
BATCHES = p.StaticPartitionDef("batches", [f"b{n}" for n in range(1000)])


def _registry() -> p.AssetRegistry:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def plain() -> int:
        return 1

    @p.asset(partition_def=BATCHES, registry=registry)
    def batch() -> int:
        return 1

    return registry


REGISTRY = _registry()


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


class Reader:
    """A connection of its own to the store's database: what another process would see."""

    def __init__(self, url: str) -> None:
        if url.startswith("sqlite:///"):
            self._connection: Any = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
            self._sql = "SELECT asset, partition_key, extra FROM partita_events WHERE id = ?"
        else:
            import psycopg

            self._connection = psycopg.connect(url, autocommit=True)
            self._sql = "SELECT asset, partition_key, extra FROM partita_events WHERE id = %s"

    def event(self, event_id: int) -> tuple[Any, ...] | None:
        row = self._connection.execute(self._sql, (event_id,)).fetchone()
        return None if row is None else tuple(row)

    def count(self) -> int:
        return int(self._connection.execute("SELECT count(*) FROM partita_events").fetchone()[0])

    def close(self) -> None:
        self._connection.close()


@contextlib.contextmanager
def _writes_locked(url: str) -> Iterator[Callable[[], None]]:
    """Block every insert into the event table from another connection; yields a function that releases it."""
    if url.startswith("sqlite:///"):
        connection: Any = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")  # SQLite's write lock: BEGIN IMMEDIATE elsewhere waits
        release = lambda: connection.execute("ROLLBACK")  # noqa: E731
    else:
        import psycopg

        connection = psycopg.connect(url)
        connection.execute("LOCK TABLE partita_events IN SHARE ROW EXCLUSIVE MODE")  # inserts wait
        release = connection.rollback
    released = False

    def release_once() -> None:
        nonlocal released
        if not released:
            released = True
            release()

    try:
        yield release_once
    finally:
        release_once()
        connection.close()


class Recorded:
    """Wraps the store's real group commit function: which thread committed how many events."""

    def __init__(self, store: SqlStore) -> None:
        self.group = store.event_store._group  # noqa: SLF001 - the transactions are what is tested
        self._commit = self.group._commit  # noqa: SLF001
        self.calls: list[tuple[int, int]] = []
        self.group._commit = self  # noqa: SLF001

    def __call__(self, items: list[Any]) -> list[Any]:
        self.calls.append((len(items), threading.get_ident()))
        return self._commit(items)

    @property
    def sizes(self) -> list[int]:
        return [size for size, _ in self.calls]


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        return exc


def _queue_behind_a_blocked_leader(store: SqlStore, threads: list[threading.Thread]) -> None:
    """Start ``threads[0]`` and wait until its transaction has begun (the table is locked); then queue the rest."""
    group = store.event_store._group  # noqa: SLF001 - the transactions are what is tested
    inner = group._commit  # noqa: SLF001
    began = threading.Event()

    def beginning(items: list[Any]) -> list[Any]:
        began.set()
        return inner(items)

    group._commit = beginning  # noqa: SLF001
    try:
        threads[0].start()
        assert began.wait(DEADLINE)  # it carries whatever queued before: from now on, followers wait
    finally:
        group._commit = inner  # noqa: SLF001
    for index, thread in enumerate(threads[1:], start=1):
        thread.start()
        _wait_until(lambda index=index: group.waiting == index)


def _one_group(store: SqlStore, url: str, leader: Callable[[], Any], calls: list[Callable[[], Any]]) -> list[Any]:
    """``leader`` waits on the locked table, ``calls`` queue behind it in order; then the lock goes.

    Returns the leader's outcome and then each call's (a receipt, or the exception raised).
    """
    outcomes: list[Any] = [None] * (len(calls) + 1)

    def run(index: int, call: Callable[[], Any]) -> None:
        outcomes[index] = _outcome(call)

    threads = [threading.Thread(target=run, args=(index, call)) for index, call in enumerate([leader, *calls])]
    with _writes_locked(url) as release:
        _queue_behind_a_blocked_leader(store, threads)
        release()
        for thread in threads:
            thread.join(DEADLINE)
    return outcomes


def _publish(store: SqlStore, asset: str = "plain", **options: Any) -> Callable[[], p.EmissionReceipt]:
    return lambda: p.publish_event(store, REGISTRY, asset, **options)


@pytest.fixture
def sqlite_url(tmp_path: Any) -> str:
    return f"sqlite:///{tmp_path}/partita.db"


@pytest.fixture
def opened(sqlite_url: str) -> Iterator[SqlStore]:
    store = p.open_store(sqlite_url)
    try:
        yield store  # type: ignore[misc]
    finally:
        store.close()


# -- sharing transactions, durably ------------------------------------------------------------


def test_eight_bodies_emitting_at_once_share_commits_and_each_receipt_is_durable_on_return(store_url):
    events_each = 40
    start = threading.Barrier(THREADS, timeout=DEADLINE)
    registry = _registry()

    @p.asset(partition_def=WORKERS, registry=registry)
    def producer(context: p.AssetContext) -> list[Any]:
        reader = Reader(store_url)
        problems = []
        try:
            start.wait()
            for n in range(events_each):
                key = f"b{int(context.partition_key[1:]) * events_each + n}"
                receipt = context.emit("batch", partition_key=key, extra={"n": n})
                stored = reader.event(receipt.id)  # read at once, by another connection
                if stored is None or stored[:2] != ("batch", key) or receipt.duplicate:
                    problems.append((key, receipt, stored))
        finally:
            reader.close()
        return problems

    store = p.open_store(store_url)
    try:
        recorded = Recorded(store) if store.event_store._group is not None else None  # noqa: SLF001 - SQLite
        flow = p.Flow(["producer"], registry=registry, store=store, max_concurrency=THREADS)
        result = flow.run({"partition_keys": WORKERS.keys})
        events = store.list_events(asset="batch")
    finally:
        store.close()

    assert result.succeeded, result
    assert [result.tasks["producer"].attempts[n].output for n in range(THREADS)] == [[]] * THREADS
    assert len(events) == len({event.id for event in events}) == THREADS * events_each
    assert sorted(receipt.id for receipt in result.receipts) == sorted(event.id for event in events)
    assert (recorded is None) == store_url.startswith("postgresql")
    if recorded is not None:
        assert sum(recorded.sizes) == THREADS * events_each
        assert max(recorded.sizes) > 1, recorded.sizes  # threads shared transactions
        assert len({thread for _, thread in recorded.calls}) > 1  # whoever arrived first led


def test_one_transaction_carries_every_queued_emission_and_each_gets_its_own_receipt(opened, sqlite_url):
    recorded = Recorded(opened)
    calls = [_publish(opened, "batch", partition_key=f"b{n}", extra={"n": n}, dedupe_key=f"d{n}") for n in range(7)]

    leader, *receipts = _one_group(opened, sqlite_url, _publish(opened, extra={"first": True}), calls)

    assert recorded.sizes == [1, 7]
    assert isinstance(leader, p.EmissionReceipt) and not leader.duplicate
    stored = {event.id: event for event in opened.list_events(asset="batch")}
    assert [stored[receipt.id].partition_key for receipt in receipts] == [f"b{n}" for n in range(7)]
    assert [stored[receipt.id].timestamp for receipt in receipts] == [receipt.timestamp for receipt in receipts]
    assert not any(receipt.duplicate for receipt in receipts)


def test_a_thread_emitting_alone_commits_in_its_own_thread_without_waiting(opened, sqlite_url):
    recorded = Recorded(opened)
    reader = Reader(sqlite_url)
    try:
        started = time.monotonic()
        receipts = [_publish(opened, extra={"n": n})() for n in range(50)]
        elapsed = time.monotonic() - started
        assert all(reader.event(receipt.id) is not None for receipt in receipts)
    finally:
        reader.close()

    assert recorded.sizes == [1] * 50
    assert {thread for _, thread in recorded.calls} == {threading.get_ident()}
    assert opened.event_store._group.waiting == 0  # noqa: SLF001
    assert elapsed < 50 * 0.5  # no pause to gather company (each one commits at once)


# -- duplicates within one transaction and against the table -----------------------------------


def test_duplicates_racing_in_one_transaction_resolve_to_the_first_writers_event(opened, sqlite_url):
    recorded = Recorded(opened)
    same = _publish(opened, extra={"rows": 5}, dedupe_key="batch-5")
    other_payload = _publish(opened, extra={"rows": 6}, dedupe_key="batch-5")
    calls = [same, same, other_payload, same, _publish(opened, extra={"x": 1}), same]

    _, first, second, conflict, third, unrelated, fourth = _one_group(opened, sqlite_url, _publish(opened), calls)

    assert recorded.sizes == [1, 6]
    assert (first.duplicate, second.duplicate, third.duplicate, fourth.duplicate) == (False, True, True, True)
    assert {(r.id, r.timestamp) for r in (first, second, third, fourth)} == {(first.id, first.timestamp)}
    assert isinstance(conflict, EmissionError) and "already used for a different event" in str(conflict)
    assert not unrelated.duplicate
    stored = [event for event in opened.list_events() if event.extra.get("rows") is not None]
    assert [(event.id, event.extra) for event in stored] == [(first.id, {"rows": 5})]


def test_a_dedupe_key_already_in_the_table_is_a_duplicate_for_every_emission_of_the_group(opened, sqlite_url):
    earlier = _publish(opened, extra={"rows": 1}, dedupe_key="batch-1")()
    same = _publish(opened, extra={"rows": 1}, dedupe_key="batch-1")

    _, *receipts = _one_group(opened, sqlite_url, _publish(opened), [same] * 5)

    assert all(receipt.duplicate for receipt in receipts)
    assert {(receipt.id, receipt.timestamp) for receipt in receipts} == {(earlier.id, earlier.timestamp)}
    assert len(opened.list_events()) == 2  # the first event and the leader's


# -- failures --------------------------------------------------------------------------------


def _refused_draft() -> EventDraft:
    """A draft the database refuses (an event needs an asset): nothing validates a draft handed to the store."""
    return EventDraft(None, None, None, {}, EventSource(SourceKind.EXTERNAL), "key:refused", "0" * 64, time.time())  # type: ignore[arg-type]


def test_a_row_the_database_refuses_fails_alone_and_the_rest_of_its_transaction_is_written(opened, sqlite_url):
    recorded = Recorded(opened)
    calls = [_publish(opened, extra={"n": n}, dedupe_key=f"good-{n}") for n in range(3)]
    calls.insert(1, lambda: opened.record_event(_refused_draft()))
    calls.append(_publish(opened, extra={"n": 0}, dedupe_key="good-0"))  # a duplicate of the first

    _, first, refused, second, third, repeated = _one_group(opened, sqlite_url, _publish(opened), calls)

    assert isinstance(refused, StoreError)
    assert "cannot record the event" in str(refused) and "null" in str(refused).lower()
    assert [receipt.duplicate for receipt in (first, second, third)] == [False, False, False]
    assert repeated.duplicate and repeated.id == first.id
    assert recorded.sizes == [1, 5]  # the four others were written again in the same call, without it
    reader = Reader(sqlite_url)
    try:
        assert all(reader.event(receipt.id) is not None for receipt in (first, second, third))
        assert reader.count() == 4  # the leader's and three good events; nothing of the refused one
    finally:
        reader.close()


def test_the_write_lock_never_coming_free_fails_every_waiter_alike_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(database_module, "_BUSY_TIMEOUT_MS", 1500)  # SQLite's busy timeout, shortened
    url = f"sqlite:///{tmp_path}/partita.db"
    store = p.open_store(url)
    try:
        recorded = Recorded(store)
        outcomes: list[Any] = [None] * THREADS
        threads = [
            threading.Thread(target=lambda n=n: outcomes.__setitem__(n, _outcome(_publish(store, extra={"n": n}))))
            for n in range(THREADS)
        ]
        with _writes_locked(url):
            _queue_behind_a_blocked_leader(store, threads)
            for thread in threads:
                thread.join(DEADLINE)
        after = _publish(store, extra={"after": True})()  # the store works again: connections were renewed
        events = store.list_events()
    finally:
        store.close()

    assert recorded.sizes[:2] == [1, THREADS - 1]
    assert all(isinstance(outcome, StoreError) for outcome in outcomes), outcomes
    assert {str(outcome) for outcome in outcomes} == {f"store {url}: cannot record the event: database is locked"}
    assert [event.id for event in events] == [after.id]


def _blocked_inserts(admin: Any, terminate: bool = False) -> int:
    """Connections waiting on the lock to insert an event; ``terminate`` ends them (as a server restart would)."""
    action = "pg_terminate_backend(pid)" if terminate else "pid"
    rows = admin.execute(
        f"SELECT {action} FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO partita_events%%'"
    ).fetchall()
    return len(rows)


def _emitting_at_once(store: SqlStore, calls: list[Callable[[], Any]], outcomes: list[Any]) -> list[threading.Thread]:
    threads = [threading.Thread(target=lambda n=n: outcomes.__setitem__(n, _outcome(calls[n]))) for n in range(len(calls))]
    for thread in threads:
        thread.start()
    return threads


def test_on_postgresql_a_connection_lost_under_concurrent_emitters_is_retried_and_each_event_written_once(
    postgres_url,
):
    import psycopg

    store = p.open_store(postgres_url)
    admin = psycopg.connect(postgres_url, autocommit=True)
    try:
        assert store.event_store._group is None  # noqa: SLF001 - each thread commits on its own connection
        calls = [_publish(store, extra={"n": n}, dedupe_key=f"d{n}") for n in range(THREADS)]
        outcomes: list[Any] = [None] * THREADS
        with _writes_locked(postgres_url) as release:
            threads = _emitting_at_once(store, calls, outcomes)
            _wait_until(lambda: _blocked_inserts(admin) == THREADS)
            assert _blocked_inserts(admin, terminate=True) == THREADS  # every connection drops once
            _wait_until(lambda: _blocked_inserts(admin) == THREADS)  # each retried on a new one
            release()
            for thread in threads:
                thread.join(DEADLINE)
        events = store.list_events()
    finally:
        admin.close()
        store.close()

    assert all(isinstance(outcome, p.EmissionReceipt) for outcome in outcomes), outcomes
    assert not any(outcome.duplicate for outcome in outcomes)  # nothing had been committed before the loss
    assert sorted(event.id for event in events) == sorted(outcome.id for outcome in outcomes)


def test_on_postgresql_a_connection_lost_at_every_try_fails_each_emitter_alike_and_writes_nothing(postgres_url):
    import psycopg

    store = p.open_store(postgres_url)
    admin = psycopg.connect(postgres_url, autocommit=True)
    try:
        calls = [_publish(store, extra={"n": n}) for n in range(THREADS)]
        outcomes: list[Any] = [None] * THREADS
        with _writes_locked(postgres_url):
            threads = _emitting_at_once(store, calls, outcomes)
            while any(thread.is_alive() for thread in threads):  # every try meets a dropped connection
                _blocked_inserts(admin, terminate=True)
                time.sleep(0.01)
        after = _publish(store, extra={"after": True})()
        events = store.list_events()
    finally:
        admin.close()
        store.close()

    assert all(isinstance(outcome, StoreError) for outcome in outcomes), outcomes
    assert all(str(outcome).startswith("store postgresql://") for outcome in outcomes)
    assert all("cannot record the event" in str(outcome) for outcome in outcomes)
    assert [event.id for event in events] == [after.id]


def test_the_wake_up_is_sent_once_per_transaction(tmp_path):
    from partita.store.local_wakeup import WakeupReceiver, local_wakeup_supported

    if not local_wakeup_supported():
        pytest.skip("abstract sockets are Linux's")
    url = f"sqlite:///{tmp_path}/partita.db"
    store = p.open_store(url)
    receiver = WakeupReceiver(f"{tmp_path}/partita.db")
    try:
        calls = [_publish(store, "batch", partition_key=f"b{n}") for n in range(5)] + [_publish(store)]
        _one_group(store, url, _publish(store, "batch", partition_key="b999"), calls)
        messages = []
        with contextlib.suppress(OSError):
            while True:
                messages.append(receiver._socket.recv(4096))  # noqa: SLF001 - each datagram is one wake-up
    finally:
        receiver.close()
        store.close()

    assert messages == [b"batch", b"batch,plain"]  # the leader's own transaction, then the group's
