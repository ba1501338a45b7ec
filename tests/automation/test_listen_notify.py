"""How `partita serve` learns about new events (SPEC §8, §12): LISTEN/NOTIFY on PostgreSQL, polling on SQLite.

Every committed insert into the event log notifies the channel
``partita_events`` on PostgreSQL, however it was written (``INSERT`` of an
emission, ``COPY`` of outlet and discovery events). A daemon with a long
poll interval starts the consumer run of a new event at once, listens again
after its connection is terminated, and stops promptly. On SQLite it polls.
All against a real PostgreSQL server; nothing is mocked.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine

import partita as p
from partita.automation.daemon import TriggerDaemon
from partita.store.local_wakeup import local_wakeup_supported
from partita.store.notifications import CHANNEL, LISTENER_APPLICATION_NAME, EventListener, listen_for_events
from partita.store.schema import KNOWN_REVISIONS, SCHEMA_HEAD
from partita.store.sql import MIGRATIONS, SqlStore

from .conftest import publish, wait_for

DAYS = p.DatePartitionDef()
LONG_POLL = 30.0
#: A woken daemon starts the consumer run well within this; polling alone would take LONG_POLL.
PROMPTLY = 5.0


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[SqlStore]:
    store = SqlStore(postgres_url)
    try:
        yield store
    finally:
        store.close()


class Pipeline:
    """``raw`` events start ``consumer`` runs; ``producer`` emits ``raw`` events from its body."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.registry = p.AssetRegistry()
        self.started: dict[str, float] = {}
        self._changed = threading.Condition()

        @p.asset(partition_def=DAYS, registry=self.registry)
        def raw() -> int:
            return 1

        @p.asset(partition_def=DAYS, registry=self.registry)
        def producer(context: p.AssetContext) -> int:
            context.emit("raw", partition_key=context.partition_key)
            return 1

        @p.asset(partition_def=DAYS, registry=self.registry)
        def consumer(context: p.AssetContext) -> int:
            with self._changed:
                self.started[str(context.partition_key)] = time.monotonic()
                self._changed.notify_all()
            return 1

        self.flow = p.Flow(["consumer"], registry=self.registry, name="consumer_flow", trigger=p.OnAssetEvents(["raw"]))

    def publish(self, key: str) -> None:
        p.publish_event(self.store, self.registry, "raw", partition_key=key)

    def emit(self, key: str) -> None:
        """``context.emit`` from a producer's body: one INSERT committed while the producer runs."""
        assert (
            p.Flow(["producer"], registry=self.registry, store=self.store).run({"partition_keys": [key]}).status
            is p.RunStatus.SUCCESS
        )

    def outlet(self, key: str) -> None:
        """A successful ``raw`` attempt: its outlet event is written with COPY, with the attempt."""
        assert (
            p.Flow(["raw"], registry=self.registry, store=self.store).run({"partition_keys": [key]}).status
            is p.RunStatus.SUCCESS
        )

    def consumer_started(self, key: str, timeout: float) -> float:
        """When the consumer run of ``key`` started (monotonic); fails after ``timeout``."""
        with self._changed:
            if not self._changed.wait_for(lambda: key in self.started, timeout):
                raise AssertionError(f"the consumer run of {key} did not start within {timeout} s")
            return self.started[key]


@contextlib.contextmanager
def serving(daemon: TriggerDaemon) -> Iterator[threading.Thread]:
    """``daemon.serve()`` in a thread; on exit it must stop promptly despite its long poll interval."""
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            daemon.serve()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=serve, name="trigger-daemon")
    thread.start()
    try:
        yield thread
    finally:
        asked = time.monotonic()
        daemon.stop()
        thread.join(PROMPTLY)
        assert not thread.is_alive(), "the daemon did not stop promptly"
        assert time.monotonic() - asked < PROMPTLY
    assert errors == []


def _listener_pids(url: str) -> set[int]:
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()",
            (LISTENER_APPLICATION_NAME,),
        ).fetchall()
    return {int(pid) for (pid,) in rows}


def _registered_daemons(store: SqlStore) -> int:
    """Rows in ``partita_daemons``: a serving daemon registers before its first pass."""
    with store._engine.connect() as connection:  # noqa: SLF001 - reading the daemon registry
        return int(connection.exec_driver_sql("SELECT count(*) FROM partita_daemons").scalar() or 0)


def _terminate(url: str, pids: set[int]) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        for pid in pids:
            connection.execute("SELECT pg_terminate_backend(%s)", (pid,))


# -- the notification trigger (schema revision 0005) ------------------------------------------


def _has_notify_trigger(engine: Engine) -> bool:
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            return bool(
                connection.exec_driver_sql("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'").scalar()
            )
        return bool(
            connection.exec_driver_sql(
                "SELECT count(*) FROM pg_trigger WHERE tgname = 'partita_events_notify' AND NOT tgisinternal"
            ).scalar()
        )


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    created = create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        yield created
    finally:
        created.dispose()


def test_the_notification_trigger_exists_on_postgresql_only(store_url: str, engine: Engine) -> None:
    SqlStore(store_url).close()

    assert "0005" in KNOWN_REVISIONS and SCHEMA_HEAD == KNOWN_REVISIONS[-1]
    assert _has_notify_trigger(engine) is (engine.dialect.name == "postgresql")


def test_a_store_at_0004_gains_the_trigger_when_opened_and_a_downgrade_removes_it(
    store_url: str, engine: Engine
) -> None:
    SqlStore(store_url).close()
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0004")
    assert not _has_notify_trigger(engine)

    store = SqlStore(store_url)
    try:
        assert _has_notify_trigger(engine) is (store.dialect == "postgresql")
        if store.dialect == "postgresql":
            with listen_for_events(store) as listener:  # type: ignore[union-attr]
                Pipeline(store).publish("2024-01-01")
                assert listener.wait(PROMPTLY) is True
    finally:
        store.close()


def test_committed_events_notify_the_documented_channel_with_the_assets_as_payload(
    pg_store: SqlStore, postgres_url: str
) -> None:
    pipeline = Pipeline(pg_store)
    with psycopg.connect(postgres_url, autocommit=True) as listening:
        listening.execute(f"LISTEN {CHANNEL}")
        pipeline.publish("2024-01-01")
        pipeline.outlet("2024-01-02")
        notices = [notify.payload for notify in listening.notifies(timeout=PROMPTLY, stop_after=2)]

    assert CHANNEL == "partita_events"
    assert [json.loads(payload) for payload in notices] == [["raw"], ["raw"]]


@pytest.mark.parametrize("writer", ["publish", "emit", "outlet"])
def test_every_way_of_writing_an_event_notifies_a_listener(pg_store: SqlStore, writer: str) -> None:
    pipeline = Pipeline(pg_store)
    with listen_for_events(pg_store, assets={"raw"}) as listener:  # type: ignore[union-attr]
        assert listener.listening
        assert listener.wait(0.2) is False

        began = time.monotonic()
        getattr(pipeline, writer)("2024-01-01")
        assert listener.wait(PROMPTLY) is True
        assert time.monotonic() - began < PROMPTLY


def test_discovery_events_written_with_copy_notify_a_listener(pg_store: SqlStore) -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.PartitionAtRuntime("tenants", max_keys=10), registry=registry)
    def tenants(context: p.AssetContext) -> None:
        context.partition_keys = ["acme", "globex", "initech"]

    with listen_for_events(pg_store, assets={"tenants"}) as listener:  # type: ignore[union-attr]
        result = p.Flow(["tenants"], registry=registry, store=pg_store).run()
        assert result.status is p.RunStatus.SUCCESS
        assert listener.wait(PROMPTLY) is True


def test_a_listener_ignores_events_of_other_assets(pg_store: SqlStore) -> None:
    pipeline = Pipeline(pg_store)
    with listen_for_events(pg_store, assets={"somewhere_else"}) as listener:  # type: ignore[union-attr]
        pipeline.publish("2024-01-01")
        pipeline.outlet("2024-01-02")
        assert listener.wait(0.5) is False


def test_nothing_is_announced_before_commit_after_rollback_or_for_a_duplicate(
    pg_store: SqlStore, postgres_url: str
) -> None:
    pipeline = Pipeline(pg_store)
    insert = (
        "INSERT INTO partita_events (asset, partition_key, extra, timestamp, source_kind) "
        "VALUES ('raw', '2024-01-01', '{}', 0, 'external')"
    )
    with listen_for_events(pg_store, assets={"raw"}) as listener:  # type: ignore[union-attr]
        with psycopg.connect(postgres_url) as writer:
            writer.execute(insert)
            assert listener.wait(0.3) is False  # inserted, not committed
            writer.rollback()
            assert listener.wait(0.3) is False
            writer.execute(insert)
            writer.commit()
            assert listener.wait(PROMPTLY) is True

        p.publish_event(pg_store, pipeline.registry, "raw", partition_key="2024-01-02", dedupe_key="once")
        assert listener.wait(PROMPTLY) is True
        receipt = p.publish_event(pg_store, pipeline.registry, "raw", partition_key="2024-01-02", dedupe_key="once")
        assert receipt.duplicate
        assert listener.wait(0.3) is False


def test_a_listener_polls_while_it_cannot_connect_and_listens_again_afterwards(
    pg_store: SqlStore, postgres_url: str, postgres_server_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    pipeline = Pipeline(pg_store)
    database = postgres_url.rsplit("/", 1)[1]
    caplog.set_level(logging.INFO, logger="partita.store.notifications")
    listener = listen_for_events(pg_store, assets={"raw"})
    assert listener is not None and listener.listening
    try:
        with psycopg.connect(postgres_server_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
            try:
                admin.execute("SELECT pg_terminate_backend(%s)", (listener.backend_pid,))
                # The lost connection is noticed; meanwhile every wait times out (its caller polls).
                began = time.monotonic()
                for _ in range(3):
                    assert listener.wait(0.3) is False
                assert time.monotonic() - began < 3 * 0.3 + 2.5  # a failed attempt costs little
                assert not listener.listening
                assert any("lost the connection" in record.getMessage() for record in caplog.records)
            finally:
                admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')

        # Reconnected: events may have been missed meanwhile, so the caller is told to look.
        wait_for(lambda: listener.wait(0.2), timeout=2 * 30.0)
        assert listener.listening
        assert any("listening for event notifications again" in record.getMessage() for record in caplog.records)
        pipeline.publish("2024-01-01")
        assert listener.wait(PROMPTLY) is True
    finally:
        listener.close()
    listener.close()  # idempotent
    assert not listener.listening


def test_a_wait_is_interrupted_by_its_file_descriptor(pg_store: SqlStore) -> None:
    import socket

    reader, writer = socket.socketpair()
    with reader, writer, listen_for_events(pg_store) as listener:  # type: ignore[union-attr]
        threading.Timer(0.2, writer.send, args=(b"x",)).start()
        began = time.monotonic()
        assert listener.wait(LONG_POLL, interrupt=reader.fileno()) is False
        assert time.monotonic() - began < PROMPTLY


def test_sqlite_has_no_listener(tmp_path: Any) -> None:
    store = SqlStore(f"sqlite:///{tmp_path}/partita.db")
    try:
        assert listen_for_events(store) is None
    finally:
        store.close()


def test_a_listener_that_cannot_connect_at_all_keeps_timing_out(caplog: pytest.LogCaptureFixture) -> None:
    with EventListener("postgresql://partita@127.0.0.1:1/nowhere") as listener:
        assert not listener.listening
        began = time.monotonic()
        assert listener.wait(0.3) is False
        assert time.monotonic() - began < 0.3 + 2.5
    assert any("cannot listen for event notifications" in record.getMessage() for record in caplog.records)


# -- the daemon ------------------------------------------------------------------------------------


@pytest.mark.parametrize("writer", ["publish", "emit", "outlet"])
def test_a_new_event_wakes_a_daemon_whose_poll_interval_is_long(pg_store: SqlStore, writer: str) -> None:
    pipeline = Pipeline(pg_store)
    daemon = TriggerDaemon([pipeline.flow], pg_store, poll_interval=LONG_POLL)
    pipeline.publish("2024-01-01")
    with serving(daemon):
        pipeline.consumer_started("2024-01-01", PROMPTLY)  # the first pass; the daemon now sleeps
        assert daemon.listening

        getattr(pipeline, writer)("2024-01-02")
        written = time.monotonic()

        assert pipeline.consumer_started("2024-01-02", PROMPTLY) - written < PROMPTLY
    assert daemon.started_runs == 2


def _recorded_evaluations(daemon: TriggerDaemon) -> tuple[threading.Condition, list[Any]]:
    """The reports of the daemon's (one flow's) evaluations, appended as they are made, and a condition notified then."""
    (evaluator,) = daemon.evaluators
    evaluated = threading.Condition()
    reports: list[Any] = []
    original = evaluator.evaluate

    def evaluate(**options: Any) -> Any:
        report = original(**options)
        with evaluated:
            reports.append(report)
            evaluated.notify_all()
        return report

    evaluator.evaluate = evaluate  # type: ignore[method-assign]
    return evaluated, reports


def test_an_announced_event_held_back_by_an_older_transaction_starts_its_run_once_that_transaction_ends(
    pg_store: SqlStore, postgres_url: str
) -> None:
    """The announcement arrives while an older transaction is open, so the pass cannot read the event yet.

    That transaction's end is announced to nobody (it may write no event, or
    only events of other assets): the daemon must look again by itself, not
    wait for its poll interval. A consumer run finishing its write while a
    producer emits made this happen at random.
    """
    pipeline = Pipeline(pg_store)
    daemon = TriggerDaemon([pipeline.flow], pg_store, poll_interval=LONG_POLL)
    evaluated, reports = _recorded_evaluations(daemon)
    pipeline.publish("2024-01-01")
    with serving(daemon):
        pipeline.consumer_started("2024-01-01", PROMPTLY)
        with psycopg.connect(postgres_url) as older:
            older.execute("SELECT pg_current_xact_id()")  # a writer's transaction, older than the event's
            pipeline.emit("2024-01-02")
            with evaluated:  # the first pass (2024-01-01), then the one the announcement started
                assert evaluated.wait_for(lambda: len(reports) >= 2, PROMPTLY)
                assert reports[1].new_events == 0  # held back: the older transaction is still open
            older.commit()
        ended = time.monotonic()

        assert pipeline.consumer_started("2024-01-02", PROMPTLY) - ended < PROMPTLY
    assert daemon.started_runs == 2


def test_a_daemon_looks_again_for_an_event_a_long_transaction_holds_back_less_and_less_often(
    pg_store: SqlStore, postgres_url: str
) -> None:
    pipeline = Pipeline(pg_store)
    daemon = TriggerDaemon([pipeline.flow], pg_store, poll_interval=LONG_POLL)
    evaluated, reports = _recorded_evaluations(daemon)
    with serving(daemon):
        with evaluated:
            assert evaluated.wait_for(lambda: len(reports) >= 1, PROMPTLY)  # the first pass: nothing yet
        with psycopg.connect(postgres_url) as older:
            older.execute("SELECT pg_current_xact_id()")  # a writer's transaction, older than the event's
            pipeline.publish("2024-01-01")
            time.sleep(2.0)
            with evaluated:
                during = len(reports)
                assert all(report.new_events == 0 for report in reports)
            older.commit()
        pipeline.consumer_started("2024-01-01", PROMPTLY)
    # The first pass, the announced one, then re-checks 0.01, 0.02, 0.04 ... s later, at most 1 s apart:
    # about 9 passes in 2 s, where a fixed short delay would make hundreds.
    assert 3 <= during <= 12


def test_the_daemon_listens_again_after_its_connection_is_terminated(
    pg_store: SqlStore, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    pipeline = Pipeline(pg_store)
    daemon = TriggerDaemon([pipeline.flow], pg_store, poll_interval=LONG_POLL)
    pipeline.publish("2024-01-01")
    with serving(daemon):
        pipeline.consumer_started("2024-01-01", PROMPTLY)
        (first,) = wait_for(lambda: _listener_pids(postgres_url), timeout=PROMPTLY)

        _terminate(postgres_url, {first})

        (second,) = wait_for(lambda: _listener_pids(postgres_url) - {first}, timeout=PROMPTLY)
        assert second != first
        pipeline.publish("2024-01-02")
        written = time.monotonic()
        assert pipeline.consumer_started("2024-01-02", PROMPTLY) - written < PROMPTLY
    assert any("lost the connection" in record.getMessage() for record in caplog.records)
    assert _listener_pids(postgres_url) == set()  # closed with the daemon


def test_a_stopped_daemon_closes_its_listener(pg_store: SqlStore, postgres_url: str) -> None:
    pipeline = Pipeline(pg_store)
    daemon = TriggerDaemon([pipeline.flow], pg_store, poll_interval=LONG_POLL)
    with serving(daemon):
        wait_for(lambda: _listener_pids(postgres_url), timeout=PROMPTLY)
    assert not daemon.listening
    wait_for(lambda: not _listener_pids(postgres_url), timeout=PROMPTLY)


def test_a_daemon_told_not_to_listen_polls_on_postgresql(pg_store: SqlStore, postgres_url: str) -> None:
    pipeline = Pipeline(pg_store)
    daemon = TriggerDaemon([pipeline.flow], pg_store, poll_interval=0.05, listen=False)
    pipeline.publish("2024-01-01")
    with serving(daemon):
        pipeline.consumer_started("2024-01-01", PROMPTLY)
        assert not daemon.listening
        assert _listener_pids(postgres_url) == set()
        pipeline.publish("2024-01-02")
        pipeline.consumer_started("2024-01-02", PROMPTLY)


def test_a_cron_only_daemon_does_not_listen(pg_store: SqlStore, postgres_url: str) -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    def nightly() -> int:
        return 1

    trigger = p.CronPartitions("0 0 * * *", start="2099-01-01T00:00")
    flow = p.Flow(["nightly"], registry=registry, name="nightly", trigger=trigger)
    daemon = TriggerDaemon([flow], pg_store, poll_interval=LONG_POLL)
    assert daemon.watched_assets == frozenset()
    with serving(daemon):
        wait_for(lambda: _registered_daemons(pg_store) >= 1, timeout=PROMPTLY)
        assert not daemon.listening
        assert _listener_pids(postgres_url) == set()


def test_a_sqlite_daemon_is_woken_locally_and_stops_promptly(tmp_path: Any) -> None:
    store = SqlStore(f"sqlite:///{tmp_path}/partita.db")
    try:
        pipeline = Pipeline(store)
        daemon = TriggerDaemon([pipeline.flow], store, poll_interval=0.05)
        pipeline.publish("2024-01-01")
        with serving(daemon):
            pipeline.consumer_started("2024-01-01", PROMPTLY)
            assert daemon.listening == local_wakeup_supported()  # no LISTEN; the local socket, where it exists
            pipeline.publish("2024-01-02")
            pipeline.consumer_started("2024-01-02", PROMPTLY)
        # A daemon asleep for a long poll interval still stops at once.
        pipeline.publish("2024-01-03")
        with serving(TriggerDaemon([pipeline.flow], store, poll_interval=LONG_POLL)):
            pipeline.consumer_started("2024-01-03", PROMPTLY)
    finally:
        store.close()


# -- `partita serve` -------------------------------------------------------------------------------


def _consumer_runs(url: str) -> int:
    store = SqlStore(url)
    try:
        return len(store.list_runs(limit=100))
    finally:
        store.close()


def _serve(entry: str, url: str, *options: str) -> subprocess.Popen[str]:
    """`partita serve ENTRY --store URL OPTIONS...` as a user starts it; its JSON logs go to stderr."""
    return subprocess.Popen(
        [sys.executable, "-m", "partita", "serve", entry, "--store", url, "--log-format", "json", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def _logged(err: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in err.splitlines() if line.strip()]


def test_serve_on_postgresql_starts_runs_on_notification_and_stops_on_sigterm(postgres_url: str, entry: str) -> None:
    with contextlib.closing(SqlStore(postgres_url)) as store:
        publish(store, "2024-01-01")
    process = _serve(entry, postgres_url, "--poll-interval", str(LONG_POLL))
    try:
        wait_for(lambda: _consumer_runs(postgres_url) >= 1, timeout=30)
        with contextlib.closing(SqlStore(postgres_url)) as store:
            publish(store, "2024-01-02")
        written = time.monotonic()
        wait_for(lambda: _consumer_runs(postgres_url) >= 2, timeout=PROMPTLY)
        assert time.monotonic() - written < PROMPTLY
    finally:
        asked = time.monotonic()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert time.monotonic() - asked < PROMPTLY + 5  # interpreter exit included
    documents = _logged(err)
    (started,) = [document for document in documents if document["message"] == "daemon started"]
    assert started["wakeup"] == "notifications"
    assert "daemon stopped" in [document["message"] for document in documents]


def test_serve_no_listen_on_postgresql_polls_without_a_listener_connection(postgres_url: str, entry: str) -> None:
    with contextlib.closing(SqlStore(postgres_url)) as store:
        publish(store, "2024-01-01")
    process = _serve(entry, postgres_url, "--poll-interval", "0.05", "--no-listen")
    try:
        wait_for(lambda: _consumer_runs(postgres_url) >= 1, timeout=30)
        assert _listener_pids(postgres_url) == set()
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    documents = _logged(err)
    (started,) = [document for document in documents if document["message"] == "daemon started"]
    assert started["wakeup"] == "polling"
