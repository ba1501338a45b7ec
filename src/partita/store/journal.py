"""`StoreJournal`: writes a run to the store while it progresses.

The engine hands it finished and retried attempts on the scheduler thread;
it only appends them to a buffer. One flusher thread per process turns every
running journal's buffer into attempt rows every `FLUSH_SECONDS`, one
transaction per flush, and records the attempts in flight then (the run's
``running``) as running, so the store's cost per attempt stays small and an
attempt that starts and finishes between two flushes costs one row write
and no start event.
What is left at the end commits with the run's outcome, so a short run (a
triggered consumer run, say) costs two writes and no thread of its own. A
heartbeat tells other hosts the run is alive.

The same thread notices cancel requests (``partita runs cancel`` in another
process): every `CANCEL_POLL_SECONDS` it asks each store, in one query, which
of its running runs were asked, and cancels those through the run's
`RunCancellation`.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from partita.definitions.launch import LaunchKind, RunLaunch
from partita.execution.attempt_logs import RunLogs
from partita.execution.cancellation import RunCancellation
from partita.execution.events import AttemptRetrying, ExecutionEvent, ResultObserver
from partita.execution.journal import RunningAttempt
from partita.planning.plan import FlowPlan
from partita.results.model import AttemptResult, AttemptStatus, RunResult
from partita.results.plain_success import plain_success_times
from partita.results.record import AttemptRecord, InvocationRecord, attempt_record_of, run_header_of
from partita.store.journal_rows import key_text_of, outlet_row, success_row
from partita.store.liveness import current_host, current_owner_token
from partita.store.protocol import ProgressBatch, RequestClaim, RunEnd, RunStart, Store

__all__ = ["StoreJournal"]

log = logging.getLogger("partita.store.journal")


FLUSH_SECONDS = 0.05
HEARTBEAT_SECONDS = 5.0
#: How often the owner looks for cancel requests: a request is acted on within about this long.
CANCEL_POLL_SECONDS = 0.5
#: What a run cancelled on request says caused it.
CANCEL_REQUESTED = "a cancel request recorded in the store (partita runs cancel)"
#: Runs the trigger daemon launches: their end finishes the requests they serve.
_TRIGGERED = (LaunchKind.TRIGGER, LaunchKind.SCHEDULE)
_IDLE_TICKS = 20  # the flusher thread ends after this many ticks without a running journal


class _Flusher:
    """The process's one writer thread: flushes every running journal periodically.

    A thread per run would cost more than a short run's own work; a shared
    one makes a journal's periodic writes free when the run ends before the
    first tick.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._journals: set[StoreJournal] = set()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def add(self, journal: StoreJournal) -> None:
        with self._lock:
            self._journals.add(journal)
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._pid = os.getpid()  # a forked child starts its own thread
                self._thread = threading.Thread(target=self._loop, name="partita-store-journal", daemon=True)
                self._thread.start()

    def remove(self, journal: StoreJournal) -> None:
        with self._lock:
            self._journals.discard(journal)

    def _loop(self) -> None:
        idle = 0
        polled = 0.0
        while True:
            time.sleep(FLUSH_SECONDS)
            with self._lock:
                journals = list(self._journals)
                idle = 0 if journals else idle + 1
                if idle >= _IDLE_TICKS:  # nothing ran for a while: end; the next run starts a new thread
                    self._thread = None
                    return
            for journal in journals:
                journal._tick()
            if time.monotonic() - polled >= CANCEL_POLL_SECONDS:
                polled = time.monotonic()
                _poll_cancel_requests(journals)


def _poll_cancel_requests(journals: list[StoreJournal]) -> None:
    """Cancel the runs another process asked to cancel: one query per store for all its running runs."""
    by_store: dict[int, list[StoreJournal]] = {}
    for journal in journals:
        cancellation = journal._cancellation
        if cancellation is not None and not cancellation.requested and journal._run_id:
            by_store.setdefault(id(journal._store), []).append(journal)
    for group in by_store.values():
        try:
            requested = group[0]._store.cancel_requests([journal._run_id for journal in group])
        except Exception:  # noqa: BLE001 - asked again at the next poll; flushing must go on meanwhile
            continue
        for journal in group:
            if journal._run_id in requested:
                assert journal._cancellation is not None
                journal._cancellation.request(CANCEL_REQUESTED)


_flusher = _Flusher()


class _Rows:
    """One transaction's part of a flush: attempt records, attempt rows built already, outlet rows."""

    __slots__ = ("records", "attempts", "outlets")

    def __init__(self) -> None:
        self.records: list[AttemptRecord] = []
        self.attempts: list[tuple[Any, ...]] = []
        self.outlets: list[tuple[Any, ...]] = []

    def __bool__(self) -> bool:
        return bool(self.records or self.attempts)


class StoreJournal(ResultObserver):
    """Records one run in a `Store`; create one per run.

    With a ``cancellation`` (the run's `RunOptions.cancellation`), a cancel
    request recorded in the store for this run cancels it.
    """

    def __init__(
        self,
        store: Store,
        *,
        record_partition_keys: bool = False,
        launch: RunLaunch | None = None,
        cancellation: RunCancellation | None = None,
        logs: RunLogs | None = None,
        claim: RequestClaim | None = None,
    ) -> None:
        self._store = store
        #: A one-key consumer run's request, claimed in the transaction that records the start.
        self._claim = claim
        self._cancellation = cancellation
        #: The run's attempt logs: their lines ride along with each flush.
        self._logs = logs
        if logs is not None:
            logs.keep_for_store()
        self._record_keys = record_partition_keys
        self._launch = launch if launch is not None else RunLaunch()
        # Appended on the scheduler thread, drained by the flusher: deque
        # operations are atomic, so no event is lost between the two.
        self._buffer: collections.deque[Any] = collections.deque()  # finished attempts' results and retries
        # Held while writing: a flush in progress finishes before end() writes.
        self._writing = threading.Lock()
        self._stopping = False
        self._error: BaseException | None = None
        #: Batches a periodic flush failed to write; the end writes them first.
        self._unwritten: list[ProgressBatch] = []
        self._run_id = ""
        self._retries: dict[tuple[str, int], list[InvocationRecord]] = {}
        #: The attempts in flight now (`RunJournal.begin`'s ``running``).
        self._running_now: Callable[[], list[RunningAttempt]] | None = None
        # Attempts written as running, with the start of the invocation written (None: waiting for a
        # retry): their next row is an update.
        self._written: dict[tuple[str, int], float | None] = {}
        self._last_heartbeat = 0.0

    def _key_text_of(self, asset_name: str) -> Any:
        """How the run records this asset's keys as text (None: keys are not recorded)."""
        return self._formats.get(asset_name) if self._record_keys else None

    def begin(
        self,
        run_id: str,
        plan: FlowPlan,
        started_at: dt.datetime,
        *,
        running: Callable[[], list[RunningAttempt]] | None = None,
    ) -> None:
        """Record the run's start; raises StoreError before any body runs.

        ``running`` lists the attempts whose body runs now: a flush writes
        them as running, instead of every attempt's start event.
        """
        self._run_id = run_id
        self._running_now = running
        # Discovery events announce a producer's keys; it gets no unkeyed outlet event.
        self._producers = {task.name for task in plan.tasks if task.discovers}
        self._formats = {
            task.name: task.definition.partition_def.format_key
            for task in plan.tasks
            if task.definition.partition_def is not None
        }
        self._store.record_run_started(
            RunStart(
                run_id=run_id,
                started_at=started_at,
                plan=plan.to_dict(),
                record_partition_keys=self._record_keys,
                owner_host=current_host(),
                owner_pid=os.getpid(),
                owner_token=current_owner_token(),
                launch=self._launch,
                claim=self._claim,
            )
        )
        self._last_heartbeat = time.time()
        _flusher.add(self)

    def on_event(self, event: ExecutionEvent) -> None:
        if type(event) is AttemptRetrying:
            self._buffer.append(event)

    def on_attempt_finished(self, result: AttemptResult) -> None:
        """Buffer the result until the next flush (running attempts are listed then: no event per start).

        The result, which the run keeps anyway, not an event: buffered until
        the next flush, events outlived the collector's young generations and
        made its full collections come sooner.
        """
        self._buffer.append(result)

    def _tick(self) -> None:
        """One periodic flush (and heartbeat when due), on the flusher thread."""
        with self._writing:
            if self._stopping or self._error is not None:
                return
            try:
                self._flush()
                now = time.time()
                if now - self._last_heartbeat >= HEARTBEAT_SECONDS:
                    self._store.record_heartbeat(self._run_id, now)
                    self._last_heartbeat = now
            except BaseException as exc:  # noqa: BLE001 - stops periodic flushing; the end replays _unwritten
                self._error = exc

    def _flush(self) -> None:
        """Write what is buffered; batches whose write failed stay for the end to replay."""
        batches = self._take_progress()
        for position, progress in enumerate(batches):
            try:
                self._store.record_batch(self._run_id, progress)
            except BaseException:
                # The write may or may not have committed: replayed idempotently.
                self._unwritten = [dataclasses.replace(batch, replay=True) for batch in batches[position:]]
                raise

    def _take_progress(self) -> list[ProgressBatch]:
        """The buffered events and log lines as rows to write, in as few transactions as there are batches."""
        progress = self._take_attempts()
        logs = self._logs.drain() if self._logs is not None else None
        if logs:
            # The lines join the last batch: a flush costs no extra transaction for them.
            if progress:
                progress[-1] = dataclasses.replace(progress[-1], logs=logs)
            else:
                progress.append(ProgressBatch((), logs=logs))
        return progress

    def _take_attempts(self) -> list[ProgressBatch]:
        """The buffered events as rows to write: new attempts (bulk insert) and updates.

        A plain success becomes its row directly (`journal_rows`); other
        attempts become records, which carry their invocations.
        """
        buffer = self._buffer
        batch = [buffer.popleft() for _ in range(len(buffer))]
        running = self._in_flight()
        if not batch and not running:
            return []
        # In flight when listed, finished in this batch: nothing to write as running. A run's concurrency
        # bounds the list, so the check costs a lookup in a small set per finished attempt.
        listed = {(attempt.asset_name, attempt.index) for attempt in running}
        finished: set[tuple[str, int]] = set()
        fresh, updates = _Rows(), _Rows()
        written, now = self._written, time.time()
        for item in batch:
            if type(item) is not AttemptRetrying:  # a finished attempt's result
                attempt = item
                key = (attempt.asset_name, attempt.index)
                if key in listed:
                    finished.add(key)
                rows = updates if key in written else fresh
                written.pop(key, None)
                if self._retries:
                    self._retries.pop(key, None)
                outlet = attempt.status is AttemptStatus.SUCCESS and attempt.asset_name not in self._producers
                times = plain_success_times(attempt)  # read without making its invocations
                text = key_text_of(attempt, self._formats.get(attempt.asset_name)) if outlet or times else None
                # The outlet event joins the transaction that records the success (a plain one carries it).
                if times is not None:
                    rows.attempts.append(success_row(attempt, times, text, self._record_keys, outlet))
                else:
                    rows.records.append(attempt_record_of(attempt, self._key_text_of(attempt.asset_name)))
                    if outlet:
                        rows.outlets.append(outlet_row(attempt, text, now))
            else:  # a retry: the attempt stays running, with the invocation that failed
                key = (item.asset_name, item.index)
                (updates if key in written else fresh).records.append(self._retrying(item))
                written[key] = None
        for attempt in running:
            key = (attempt.asset_name, attempt.index)
            # Written already with this start: nothing new (a retry's invocation that began is).
            if key in finished or (key in written and written[key] == attempt.started_at):
                continue
            (updates if key in written else fresh).records.append(self._record(*attempt))
            written[key] = attempt.started_at
        return [
            ProgressBatch(rows.records, new, attempt_rows=rows.attempts, outlet_rows=rows.outlets)
            for rows, new in ((fresh, True), (updates, False))
            if rows
        ]

    def _in_flight(self) -> list[RunningAttempt]:
        """The attempts in flight now, read after the buffered events were taken.

        An attempt no longer in flight then has its end in those events or
        the next ones. The list only shows progress: if reading it fails,
        this write goes on without it rather than lose the events taken.
        """
        if self._running_now is None:
            return []
        try:
            return self._running_now()
        except Exception:  # noqa: BLE001 - progress display only; the attempts' ends are still written
            log.debug("could not list the attempts in flight", exc_info=True)
            return []

    def _retrying(self, event: AttemptRetrying) -> AttemptRecord:
        key = (event.asset_name, event.index)
        earlier = self._retries.setdefault(key, [])
        earlier.append(InvocationRecord(event.invocation, None, None, False, event.failure.type, event.failure.message))
        return self._record(event.asset_name, event.index, event.partition_key_present, event.partition_key, None)

    def _record(
        self, asset: str, index: int, key_present: bool, partition_key: Any, started_at: float | None
    ) -> AttemptRecord:
        """A running attempt's row, with the invocations that failed before (retries).

        The parameters are a `RunningAttempt`'s fields, in order: one spreads into them.
        """
        formatter = self._key_text_of(asset)
        return AttemptRecord(
            asset=asset,
            index=index,
            partition_key_present=key_present,
            status="running",
            partition_key=formatter(partition_key) if formatter and key_present else None,
            invocations=tuple(self._retries.get((asset, index), ())),
            started_at=started_at,
        )

    def abandon(self) -> None:
        """Stop flushing and heartbeating without recording an end; keeps nothing of the run."""
        self._stop_flushing()
        self._running_now = None

    def _stop_flushing(self) -> None:
        """No periodic flush or heartbeat from now on; returns once a flush in progress has finished."""
        _flusher.remove(self)
        with self._writing:
            self._stopping = True

    def end(self, result: RunResult) -> None:
        """Flush everything and record the outcome; raises StoreError on failure.

        A periodic flush that failed does not stop the outcome from being
        written: its batches commit with it (idempotently). Only when that
        last write fails too is the run left unfinished in the store.
        """
        self._stop_flushing()
        # The last attempts commit with the outcome: a short run costs one write at its end.
        progress = [*self._unwritten, *self._take_progress()]
        self._running_now = None  # the run's state is not kept past its end
        header = run_header_of(result)
        self._store.record_run_finished(
            RunEnd(
                run_id=result.run_id,
                status=result.status.value,
                finished_at=result.finished_at,
                summary={
                    "resources": header.resources,
                    "callback_errors": list(header.callback_errors),
                    "discovered_key_counts": header.discovered_key_counts,
                },
                serves_trigger_flow=self._launch.flow_name if self._launch.kind in _TRIGGERED else None,
            ),
            progress,
        )
