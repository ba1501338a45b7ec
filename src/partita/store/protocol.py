"""The `Store` protocol: run history in verbs, not SQL (SPEC §6).

The engine's journal writes through these verbs as a run progresses; the CLI
reads through them. One protocol per concern (`RunHistory`, `EventStore`,
`PartitionRegistry`); `Store` is their union. `SqlStore` implements them on
SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from partita.definitions.launch import RunLaunch, Tags
from partita.errors import StoreError
from partita.events.model import AssetEvent, EmissionReceipt, EventDraft, SourceKind
from partita.execution.attempt_logs import LogBatch
from partita.results.logs import LogLine
from partita.results.record import AttemptRecord, RunHeader, TaskRecord

__all__ = [
    "AttemptMark",
    "AttemptQuery",
    "CancelOutcome",
    "CancelRequest",
    "EventStore",
    "KeyAttempts",
    "LastSuccess",
    "LogQuery",
    "PartitionRecord",
    "PartitionRegistry",
    "ProgressBatch",
    "RequestClaim",
    "RequestClaimLost",
    "RunEnd",
    "RunFilter",
    "RunHistory",
    "RunStart",
    "Store",
    "StoredLogLine",
    "StoredRun",
]


@dataclass(frozen=True, slots=True)
class RequestClaim:
    """A pending trigger request that a consumer run claims in the transaction recording its start.

    A run and its claim commit together: a daemon that dies before the
    start leaves the request pending, not claimed by a run that never began.
    The claim holds only while the request is pending with the events the
    run was given.
    """

    flow: str
    request_id: int
    #: Which try of the request the run is (its ``tries`` before the claim, plus one).
    attempt: int
    claimed_at: float
    #: The request's ``event_ids`` as read (`schema.event_ids_text`): events that joined it since
    #: then would go unseen by the run, so the claim then matches nothing.
    event_ids: str


class RequestClaimLost(StoreError):
    """The request is no longer as read (another daemon claimed it, or events joined it): nothing was written."""


@dataclass(frozen=True, slots=True)
class RunStart:
    """What is known when a run begins: its plan and who runs it."""

    run_id: str
    started_at: dt.datetime
    plan: dict[str, Any]
    record_partition_keys: bool
    owner_host: str
    owner_pid: int
    owner_token: str
    launch: RunLaunch = RunLaunch()
    #: A one-key consumer run's request, claimed as the run starts (`RequestClaim`).
    claim: RequestClaim | None = None


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs `RunHistory.list_runs` returns besides its status: all given conditions hold.

    ``tags`` must all be on the run; ``since`` is a POSIX time the run started at or after;
    ``before`` one it started strictly before (the cursor of a page of older runs).
    """

    flow_name: str | None = None
    #: A `LaunchKind` value: only runs launched that way.
    launched_by: str | None = None
    #: A run id (or unique prefix): only the runs listed after it, newest first, ties of start time
    #: included, so a page continues from the last run of the previous one (keyset pagination).
    before_run_id: str | None = None
    tags: Tags = ()
    since: float | None = None
    before: float | None = None


@dataclass(frozen=True, slots=True)
class ProgressBatch:
    """Attempts to write (as `Store.record_progress` takes them) and the outlet events of their successes."""

    attempts: Sequence[AttemptRecord]
    new: bool = False
    outlets: Sequence[EventDraft] = ()
    #: An earlier write of this batch failed with an unknown outcome: write it idempotently.
    replay: bool = False
    #: Attempt log lines (and cuts) written in the same transaction.
    logs: LogBatch | None = None
    #: A journal's plain successes, each with its outlet event (`journal_rows.success_row`).
    attempt_rows: Sequence[tuple[Any, ...]] = ()
    #: Other outlet events rows built already, in `journal_rows.OUTLET_COLUMNS`.
    outlet_rows: Sequence[tuple[Any, ...]] = ()


@dataclass(frozen=True, slots=True)
class LogQuery:
    """Which of a run's log lines `RunHistory.attempt_logs` returns: all given conditions hold.

    ``after_id`` returns only lines written after that one (following a
    run); ``partition_key`` needs keys recorded with the run; ``min_level``
    keeps records at or above a `logging` level, and every output line and
    cut marker.
    """

    asset: str | None = None
    partition_key: str | None = None
    min_level: int | None = None
    after_id: int = 0
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class AttemptQuery:
    """Which of a run's attempts `RunHistory.list_attempts` returns, in (asset, index) order.

    ``status`` is an attempt status as history shows it (``interrupted`` for
    an attempt left running by a run whose owner is gone); ``after`` is the
    (asset, index) of the last attempt of the previous page.
    """

    asset: str | None = None
    status: str | None = None
    after: tuple[str, int] | None = None
    limit: int = 100


@dataclass(frozen=True, slots=True)
class StoredLogLine:
    """A log line read back: its write-order ``id`` and its attempt's key text when keys were recorded."""

    id: int
    line: LogLine
    partition_key: str | None = None


@dataclass(frozen=True, slots=True)
class RunEnd:
    run_id: str
    status: str
    finished_at: dt.datetime
    summary: dict[str, Any] = field(default_factory=dict)
    #: A triggered run: the flow whose trigger requests claimed under this run id it serves.
    #: They finish in the transaction that records the end, so a run never ends with its requests open.
    serves_trigger_flow: str | None = None


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run read back from the store; ``status`` may be ``interrupted``."""

    header: RunHeader
    attempt_count: int
    plan: dict[str, Any]
    record_partition_keys: bool
    counts: dict[str, int]
    #: `LaunchKind` value; None for a run recorded before launches were.
    launched_by: str | None = None
    flow_name: str | None = None
    tags: Tags = ()
    #: When another process asked the run to cancel (POSIX seconds); None when nobody did.
    cancel_requested_at: float | None = None

    @property
    def run_id(self) -> str:
        return self.header.run_id

    @property
    def status(self) -> str:
        return self.header.status

    @property
    def duration(self) -> float | None:
        finished = self.header.finished_at
        return None if finished is None else (finished - self.header.started_at).total_seconds()


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """One key of a runtime domain as the registry knows it."""

    domain: str
    key: str
    first_seen: dt.datetime
    last_seen: dt.datetime
    retired: bool
    retired_at: dt.datetime | None = None
    reactivated_at: dt.datetime | None = None
    last_run_id: str | None = None

    @property
    def state(self) -> str:
        return "retired" if self.retired else "active"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "state": self.state,
            "first_seen": self.first_seen.isoformat(),
            "last_seen": self.last_seen.isoformat(),
            "retired_at": None if self.retired_at is None else self.retired_at.isoformat(),
            "reactivated_at": None if self.reactivated_at is None else self.reactivated_at.isoformat(),
            "last_run_id": self.last_run_id,
        }


@dataclass(frozen=True, slots=True)
class AttemptMark:
    """One attempt of a key, by run and time (POSIX seconds): where partition status points."""

    run_id: str
    timestamp: float

    @property
    def at(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.timestamp, dt.UTC)


class KeyAttempts(NamedTuple):
    """What the attempts recorded for one key of an asset say about it (``partita status``).

    The newest attempt that ran to an outcome (success or failure, by finish
    time) is the one that counts: skipped and cancelled attempts did no work
    for the key and are left out. ``running`` names a run the store considers
    alive (its owner lives) whose attempt of the key is running; an attempt
    left running by a dead owner is not. ``partition_key`` is None for an
    unpartitioned asset's attempts. A named tuple, as `AttemptRecord` is: a
    status builds one per key, 100,000 at a time.
    """

    partition_key: str | None
    #: The run and finish time (POSIX seconds) of the newest attempt that ran to an outcome.
    outcome_run_id: str | None = None
    outcome_at: float | None = None
    #: Whether that outcome was a failure.
    failed: bool = False
    running: AttemptMark | None = None

    @property
    def last_outcome(self) -> AttemptMark | None:
        if self.outcome_run_id is None:
            return None
        return AttemptMark(self.outcome_run_id, 0.0 if self.outcome_at is None else self.outcome_at)


class CancelOutcome(enum.Enum):
    """What asking a run to cancel did."""

    #: The request is recorded now; the run's owner notices it and cancels the run.
    REQUESTED = "requested"
    #: An earlier request is recorded (asking twice changes nothing).
    ALREADY_REQUESTED = "already_requested"
    #: Refused: the run finished (``status`` says how).
    FINISHED = "finished"
    #: Refused: the run's owner is gone, so nothing runs it any more (history reads it ``interrupted``).
    NOT_RUNNING = "not_running"

    @property
    def recorded(self) -> bool:
        """Whether a request for the run is recorded (this one or an earlier one)."""
        return self in (CancelOutcome.REQUESTED, CancelOutcome.ALREADY_REQUESTED)


@dataclass(frozen=True, slots=True)
class CancelRequest:
    """The outcome of `RunHistory.request_cancel`, and of `partita.cancel_run`.

    ``run_id`` is the full id (the caller may have given a prefix);
    ``status`` is the run's status as history shows it when the request was
    decided (``running``, ``interrupted``, or how it finished) or, after
    waiting, when the wait ended; ``requested_at`` is when the recorded
    request was made (POSIX seconds), None when it was refused.
    """

    run_id: str
    outcome: CancelOutcome
    status: str
    requested_at: float | None = None

    @property
    def finished(self) -> bool:
        """Whether the run no longer runs (it finished, or its owner is gone)."""
        return self.status != "running"


@runtime_checkable
class RunHistory(Protocol):
    """Runs, their attempts and heartbeats: written while a run progresses, read by the CLI."""

    def record_run_started(self, run: RunStart) -> None: ...

    def record_progress(
        self,
        attempts: Sequence[AttemptRecord],
        run_id: str,
        *,
        new: bool = False,
        outlets: Sequence[EventDraft] = (),
        replay: bool = False,
        logs: LogBatch | None = None,
    ) -> None:
        """Write attempts (running or terminal), their invocations, outlet events and log lines, in one transaction.

        ``new=True`` promises none of the attempts was written before, which
        lets the store use its fastest bulk insert; otherwise rows are upserted.
        ``replay=True`` says an earlier write of the same rows may have
        committed: nothing already stored is written twice. Transient
        failures are retried the same way.
        """
        ...

    def record_batch(self, run_id: str, batch: ProgressBatch) -> None:
        """`record_progress` for a batch as a journal builds it: records and rows built already."""
        ...

    def record_heartbeat(self, run_id: str, at: float) -> None: ...

    def record_run_finished(self, end: RunEnd, progress: Sequence[ProgressBatch] = ()) -> None:
        """Record the outcome; ``progress`` (the run's last attempts) commits in the same transaction.

        Transient failures are retried; StoreError when the outcome could not be written.
        """
        ...

    def list_runs(
        self, *, limit: int = 20, status: str | None = None, where: RunFilter | None = None
    ) -> list[StoredRun]: ...

    def get_run(self, run_id: str) -> StoredRun:
        """The run with this id (or unique id prefix); `UnknownRunError` otherwise."""
        ...

    def get_tasks(self, run_id: str) -> list[TaskRecord]: ...

    def key_attempts(self, asset: str) -> dict[str, KeyAttempts]:
        """Each key of ``asset`` with recorded attempts (``record_partition_keys``): its newest outcome and live run."""
        ...

    def request_cancel(self, run_id: str) -> CancelRequest:
        """Ask the process running ``run_id`` (an id or unique prefix) to cancel it.

        Recorded only while the run is ``running`` (a conditional update, so
        a run that finishes meanwhile is refused, and of two processes asking
        at once one records the request and the other finds it recorded).
        `UnknownRunError` when no run matches.
        """
        ...

    def cancel_requests(self, run_ids: Sequence[str]) -> frozenset[str]:
        """Which of these runs another process asked to cancel: the one query an owner polls."""
        ...

    def attempt_logs(self, run_id: str, query: LogQuery | None = None) -> list[StoredLogLine]:
        """The run's kept log lines matching ``query``, in write order; `UnknownRunError` for an unknown run."""
        ...

    def failed_or_running_keys(self, asset: str) -> dict[str, KeyAttempts]:
        """The keys of `key_attempts` whose newest outcome failed or that a live run is running, with the same entries.

        The only keys whose attempts change their status: a status reads these
        instead of an entry for every recorded key.
        """
        ...

    def list_attempts(self, run_id: str, query: AttemptQuery) -> list[AttemptRecord]:
        """A page of the run's attempts matching ``query``, with their invocations; `UnknownRunError` if unknown."""
        ...

    def unkeyed_attempts(self, asset: str) -> KeyAttempts:
        """The same for an unpartitioned asset, read from its newest runs."""
        ...


class LastSuccess(NamedTuple):
    """A key's newest outlet event: the last time an attempt materialized it.

    The time stays POSIX seconds (``timestamp``) because a status over
    100,000 keys should not build 100,000 datetimes; ``at`` converts one. A
    named tuple: it is built once per key straight from a database row.
    """

    #: None for an unpartitioned asset's success (`EventStore.last_unkeyed_success`).
    partition_key: str | None
    event_id: int
    run_id: str | None
    timestamp: float

    @property
    def at(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.timestamp, dt.UTC)


@runtime_checkable
class EventStore(Protocol):
    """The asset event log: durable, deduplicated emission and reading back in id order."""

    def record_event(self, draft: EventDraft) -> EmissionReceipt:
        """Store one event durably, or return the receipt of its dedupe identity's first event."""
        ...

    def list_events(
        self,
        *,
        asset: str | None = None,
        partition_key: str | None = None,
        since: int | None = None,
        limit: int | None = None,
        run_id: str | None = None,
        kinds: Sequence[SourceKind] | None = None,
    ) -> list[AssetEvent]: ...

    def last_successes(self, asset: str, keys: Collection[str] | None = None) -> dict[str, LastSuccess]:
        """Each key of ``asset`` that a successful attempt materialized, with its newest outlet event.

        ``keys`` limits the answer to those keys (a status asks for the keys it covers, and the store
        reads only their index entries).
        """
        ...

    def succeeded_keys(self, asset: str, keys: Collection[str] | None = None) -> frozenset[str]:
        """The keys of `last_successes` (among ``keys``, when given), without their events: cheaper when only keys matter."""
        ...

    def last_unkeyed_success(self, asset: str) -> LastSuccess | None:
        """The newest outlet event of ``asset`` without a key (an unpartitioned asset's last success)."""
        ...


@runtime_checkable
class PartitionRegistry(Protocol):
    """The keys of runtime partition domains, as their producers discovered them."""

    def record_discovery(self, domain: str, run_id: str, drafts: Sequence[EventDraft]) -> None:
        """Discovery events plus the partition registry update, in one transaction."""
        ...

    def list_partitions(self, domain: str, *, limit: int | None = None, offset: int = 0) -> list[PartitionRecord]: ...

    def retire_partition(self, domain: str, key: str) -> PartitionRecord: ...


@runtime_checkable
class Store(RunHistory, EventStore, PartitionRegistry, Protocol):
    """Durable run history shared by every process that opens the same URL.

    The union of the three concerns, plus the store's location and its closing.
    """

    @property
    def url(self) -> str:
        """The store's location with any password masked."""
        ...

    def close(self) -> None: ...
