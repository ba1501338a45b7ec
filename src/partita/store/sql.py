"""`SqlStore`: the `Store` on SQLAlchemy Core, for SQLite and PostgreSQL.

It opens the `Database`, upgrades its schema, and composes one store per
concern over it: `SqlRunHistory`, `SqlEventStore`, `SqlPartitionRegistry`.
Every verb is theirs; this class only delegates, so a caller that needs one
concern can hold that store alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import Engine

from partita.events.model import AssetEvent, EmissionReceipt, EventDraft, SourceKind
from partita.execution.attempt_logs import LogBatch
from partita.results.record import AttemptRecord, TaskRecord
from partita.store.database import Database
from partita.store.event_store import SqlEventStore
from partita.store.partition_registry import SqlPartitionRegistry
from partita.store.pools import SqlPoolLeases
from partita.store.protocol import (
    AttemptQuery,
    CancelRequest,
    KeyAttempts,
    LastSuccess,
    LogQuery,
    PartitionRecord,
    ProgressBatch,
    RunEnd,
    RunFilter,
    RunStart,
    StoredLogLine,
    StoredRun,
)
from partita.store.run_history import SqlRunHistory
from partita.store.upgrade import MIGRATIONS, upgrade_schema

# MIGRATIONS is re-exported: tools and tests name the scripts through this module.
__all__ = ["MIGRATIONS", "SqlStore"]


class SqlStore:
    """Run history in a SQL database named by a URL.

    ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``,
    ``sqlite://`` (in memory, this process only) or
    ``postgresql://user:password@host:port/database``.
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        database = Database(url, create=create)
        try:
            upgrade_schema(database)
        except BaseException:
            database.dispose()
            raise
        self.database = database
        self.run_history = SqlRunHistory(database)
        self.event_store = SqlEventStore(database)
        self.partition_registry = SqlPartitionRegistry(database)
        #: Shared pools' leases: stateless past their statements, so one serves every run of every flow.
        self.pool_leases = SqlPoolLeases(database)

    @property
    def created(self) -> bool:
        """Whether opening the store created its SQLite file."""
        return self.database.created

    @property
    def _engine(self) -> Engine:
        """The database's engine: raw access for tests and reports, never for the verbs."""
        return self.database.engine

    @property
    def url(self) -> str:
        """The store's location with any password masked."""
        return self.database.url

    @property
    def connect_url(self) -> str:
        """The URL as given, credentials included: for worker processes, never for display."""
        return self.database.connect_url

    @property
    def dialect(self) -> str:
        return self.database.dialect

    def driver_sql(self, statement: str) -> str:
        """``statement`` (written with ``?`` placeholders) in this backend's placeholder style."""
        return self.database.driver_sql(statement)

    # -- run history ---------------------------------------------------------------

    def record_run_started(self, run: RunStart) -> None:
        """Insert the run's row; a transient failure is retried, and a retry never inserts it twice."""
        self.run_history.record_run_started(run)

    def record_progress(
        self,
        records: Sequence[AttemptRecord],
        run_id: str,
        *,
        new: bool = False,
        outlets: Sequence[EventDraft] = (),
        replay: bool = False,
        logs: LogBatch | None = None,
    ) -> None:
        """Write attempts, their invocations, outlet events and log lines, in one transaction."""
        self.run_history.record_progress(records, run_id, new=new, outlets=outlets, replay=replay, logs=logs)

    def record_batch(self, run_id: str, batch: ProgressBatch) -> None:
        """Write one `ProgressBatch` as a journal builds it, in one transaction."""
        self.run_history.record_batch(run_id, batch)

    def record_heartbeat(self, run_id: str, at: float) -> None:
        """Tell other hosts the run's owner is alive at ``at``."""
        self.run_history.record_heartbeat(run_id, at)

    def record_run_finished(self, end: RunEnd, progress: Sequence[ProgressBatch] = ()) -> None:
        """The last attempts and the outcome: one transaction, one fsync; retried when transient."""
        self.run_history.record_run_finished(end, progress)

    def list_runs(
        self, *, limit: int = 20, status: str | None = None, where: RunFilter | None = None
    ) -> list[StoredRun]:
        """The latest runs first, at most ``limit``, of one status and matching ``where`` if given."""
        return self.run_history.list_runs(limit=limit, status=status, where=where)

    def get_run(self, run_id: str) -> StoredRun:
        """The run with this id (or unique id prefix); `UnknownRunError` otherwise."""
        return self.run_history.get_run(run_id)

    def get_tasks(self, run_id: str) -> list[TaskRecord]:
        """The run's tasks in plan order, each with its attempts and their invocations."""
        return self.run_history.get_tasks(run_id)

    def key_attempts(self, asset: str) -> dict[str, KeyAttempts]:
        """Each key of ``asset`` with recorded attempts: its newest failure, success, and a live run of it."""
        return self.run_history.key_attempts(asset)

    def failed_or_running_keys(self, asset: str) -> dict[str, KeyAttempts]:
        """The keys of `key_attempts` whose newest outcome failed or that a live run is running."""
        return self.run_history.failed_or_running_keys(asset)

    def unkeyed_attempts(self, asset: str) -> KeyAttempts:
        """An unpartitioned asset's newest failure and success and a live run of it."""
        return self.run_history.unkeyed_attempts(asset)

    def request_cancel(self, run_id: str) -> CancelRequest:
        """Ask the process running ``run_id`` (an id or unique prefix) to cancel it; what was done."""
        return self.run_history.request_cancel(run_id)

    def cancel_requests(self, run_ids: Sequence[str]) -> frozenset[str]:
        """Which of these runs another process asked to cancel."""
        return self.run_history.cancel_requests(run_ids)

    def attempt_logs(self, run_id: str, query: LogQuery | None = None) -> list[StoredLogLine]:
        """The run's kept log lines matching ``query``, in write order; `UnknownRunError` for an unknown run."""
        return self.run_history.attempt_logs(run_id, query)

    def list_attempts(self, run_id: str, query: AttemptQuery) -> list[AttemptRecord]:
        """A page of the run's attempts in (asset, index) order; `UnknownRunError` for an unknown run."""
        return self.run_history.list_attempts(run_id, query)

    # -- events --------------------------------------------------------------------

    def record_event(self, draft: EventDraft) -> EmissionReceipt:
        """Insert the event unless its dedupe identity exists; durable when this returns."""
        return self.event_store.record_event(draft)

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
        return self.event_store.list_events(
            asset=asset, partition_key=partition_key, since=since, limit=limit, run_id=run_id, kinds=kinds
        )

    def last_successes(self, asset: str, keys: Collection[str] | None = None) -> dict[str, LastSuccess]:
        """Each key of ``asset`` (of ``keys``, when given) that an attempt materialized, with its newest outlet event."""
        return self.event_store.last_successes(asset, keys)

    def succeeded_keys(self, asset: str, keys: Collection[str] | None = None) -> frozenset[str]:
        """The keys of ``asset`` (among ``keys``, when given) that an attempt materialized (those of `last_successes`)."""
        return self.event_store.succeeded_keys(asset, keys)

    def last_unkeyed_success(self, asset: str) -> LastSuccess | None:
        """The newest outlet event of ``asset`` without a key (an unpartitioned asset's last success)."""
        return self.event_store.last_unkeyed_success(asset)

    def list_events_by_ids(self, ids: Sequence[int]) -> list[AssetEvent]:
        """These events, in id order (unknown ids are skipped)."""
        return self.event_store.list_events_by_ids(ids)

    def event_rows_by_ids(self, ids: Sequence[int]) -> list[tuple[Any, ...]]:
        """These events' rows, undecoded (`rows.event_of` decodes one), in id order (unknown ids are skipped)."""
        return self.event_store.event_rows_by_ids(ids)

    # -- the partition registry of runtime domains ------------------------------------

    def record_discovery(self, domain: str, run_id: str, drafts: Sequence[EventDraft]) -> None:
        """Discovery events and the registry update in one transaction."""
        self.partition_registry.record_discovery(domain, run_id, drafts)

    def list_partitions(self, domain: str, *, limit: int | None = None, offset: int = 0) -> list[PartitionRecord]:
        """Every key the domain's producers ever discovered, in first-seen order; a page of them with ``limit``."""
        return self.partition_registry.list_partitions(domain, limit=limit, offset=offset)

    def retire_partition(self, domain: str, key: str) -> PartitionRecord:
        """Mark a known key retired (recorded in its history); retiring it again changes nothing."""
        return self.partition_registry.retire_partition(domain, key)

    def partition_history(self, domain: str, key: str) -> list[tuple[str, dt.datetime, str | None]]:
        """(action, time, run id) transitions of one key, oldest first."""
        return self.partition_registry.partition_history(domain, key)

    def close(self) -> None:
        """Close the emission connections and the pool."""
        self.event_store.close()
        self.database.dispose()

    def __repr__(self) -> str:
        return f"SqlStore({self.url!r})"
