"""Fixtures of the store contract suites: one object per store protocol, on SQLite and PostgreSQL.

Each suite drives the verbs of one protocol (run history, event store,
partition registry, trigger state) on the object its fixture returns, and
nothing else: a new backend is proven by making these fixtures return its
objects and passing the suites. Proofs that need the tables themselves
(privacy, nothing written twice) read them through a separate engine
(`tables`), never through the object under test.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import partita
from partita.events.emission import payload_hash
from partita.events.model import EventDraft, EventSource, SourceKind
from partita.store import RunEnd, RunStart
from partita.store.event_store import SqlEventStore
from partita.store.liveness import current_owner_token
from partita.store.partition_registry import SqlPartitionRegistry
from partita.store.run_history import SqlRunHistory
from partita.store.sql import SqlStore
from partita.store.triggers import TriggerStore

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    monkeypatch.chdir(tmp_path)


# -- the object of each protocol -------------------------------------------------------------


@pytest.fixture
def run_history(store: SqlStore) -> SqlRunHistory:
    """Runs, attempts and liveness: record_run_started/progress/heartbeat/run_finished, list_runs, get_run, get_tasks."""
    return store.run_history


@pytest.fixture
def event_store(store: SqlStore) -> SqlEventStore:
    """The event log: record_event, list_events, list_events_by_ids."""
    return store.event_store


@pytest.fixture
def partition_registry(store: SqlStore) -> SqlPartitionRegistry:
    """Keys of runtime domains: record_discovery, list_partitions, retire_partition, partition_history."""
    return store.partition_registry


@pytest.fixture
def trigger_state(store: SqlStore) -> TriggerStore:
    """Cursors, pauses, daemons, waiting keys, requests, claims, follow-ups, releases and launches."""
    return TriggerStore(store)


@pytest.fixture
def other_trigger_state(store: SqlStore) -> Iterator[TriggerStore]:
    """Trigger state of a second store opened on the same URL: another daemon's view of the database."""
    with closing(SqlStore(store.connect_url)) as other:
        yield TriggerStore(other)


@pytest.fixture
def tables(store: SqlStore) -> Iterator[sa.Engine]:
    """An engine of its own on the store's database, for proofs that read the tables."""
    url = store.connect_url.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = sa.create_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()


def count_rows(engine: sa.Engine, table: str, **where: Any) -> int:
    """Rows of ``table`` whose columns equal ``where``."""
    condition = " AND ".join(f"{name} = :{name}" for name in where) or "1 = 1"
    with engine.connect() as connection:
        return int(connection.execute(sa.text(f"SELECT count(*) FROM {table} WHERE {condition}"), where).scalar_one())


# -- runs --------------------------------------------------------------------------------------


def plan_document() -> dict[str, Any]:
    """The plan of a flow of one unpartitioned asset, ``one``."""
    registry = partita.AssetRegistry()

    @partita.asset(registry=registry)
    def one() -> int:
        return 1

    return partita.Flow(["one"], registry=registry).plan().to_dict()


def keyed_plan_document(keys: list[str]) -> dict[str, Any]:
    """The plan of ``load`` (keyed by ``keys``) feeding ``publish``."""
    registry = partita.AssetRegistry()
    tenants = partita.StaticPartitionDef("tenants", keys)

    @partita.asset(partition_def=tenants, registry=registry)
    def load() -> int:
        return 1

    @partita.asset(partition_def=tenants, registry=registry)
    def publish(load: int) -> int:
        return load + 1

    return partita.Flow(["publish"], registry=registry).plan({"partition_keys": keys}).to_dict()


def start_run(
    history: Any,
    run_id: str,
    started_at: dt.datetime,
    *,
    host: str | None = None,
    pid: int | None = None,
    token: str | None = None,
    plan: dict[str, Any] | None = None,
    record_partition_keys: bool = False,
    claim: Any = None,
) -> None:
    """Record a run's start, owned by this process unless told otherwise (claiming a request with ``claim``)."""
    history.record_run_started(
        RunStart(
            run_id=run_id,
            started_at=started_at,
            plan=plan_document() if plan is None else plan,
            record_partition_keys=record_partition_keys,
            owner_host=socket.gethostname() if host is None else host,
            owner_pid=os.getpid() if pid is None else pid,
            owner_token=current_owner_token() if token is None else token,
            claim=claim,
        )
    )


def finish_run(history: Any, run_id: str, status: str, finished_at: dt.datetime) -> None:
    history.record_run_finished(RunEnd(run_id=run_id, status=status, finished_at=finished_at))


def statuses(history: Any, run_id: str) -> dict[str, list[str]]:
    """Attempt statuses per asset of the run, as get_tasks reads them."""
    return {task.asset: [attempt.status for attempt in task.attempts] for task in history.get_tasks(run_id)}


def dead_pid() -> int:
    """The pid of a process that has exited."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


# -- events ------------------------------------------------------------------------------------


def draft(
    asset: str = "plain",
    *,
    key: str | None = None,
    date: dt.datetime | None = None,
    extra: dict[str, Any] | None = None,
    source: EventSource | None = None,
    dedupe_key: str | None = None,
    timestamp: dt.datetime | float | None = None,
) -> EventDraft:
    """An event as emission prepares it (source ``external`` unless told); ``dedupe_key`` None: no identity."""
    body = {} if extra is None else extra
    return EventDraft(
        asset=asset,
        partition_key=key,
        partition_date=date,
        extra=body,
        source=EventSource(SourceKind.EXTERNAL) if source is None else source,
        dedupe_key=dedupe_key,
        payload_hash=payload_hash(asset, key, date, body),
        timestamp=dt.datetime.now(dt.UTC) if timestamp is None else timestamp,
    )


def outlet(asset: str, key: str | None, run_id: str) -> EventDraft:
    """The outlet event of a successful attempt of ``asset`` for ``key``."""
    return draft(asset, key=key, source=EventSource(SourceKind.OUTLET, run_id, asset, key is not None, 1))


def discovery(key: str, run_id: str, *, asset: str = "tenants", extra: dict[str, Any] | None = None) -> EventDraft:
    """The discovery event of ``key`` by the producer ``asset`` in run ``run_id``."""
    return draft(asset, key=key, extra=extra, source=EventSource(SourceKind.DISCOVERY, run_id, asset, True, 1))
