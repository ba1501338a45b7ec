"""`TriggerDaemon`: processes triggers continuously (``partita serve``) or once (``partita trigger --once``).

Each pass evaluates every flow's trigger, then claims due requests and runs
them, a bounded number at once, as tasks of one event loop on a thread of its
own (`ConsumerLoop`). SIGTERM/SIGINT stop claiming new
work; runs in flight finish. Several daemons may serve the same store: the
store decides who runs what. A flow whose trigger raises is logged, listed in
`TriggerDaemon.failing` and tried again on the next pass; it never stops the
daemon serving the other flows.

Between passes the daemon sleeps until the poll interval has passed, a run
finishes (its slot is refilled), it is told to stop, or, on PostgreSQL, the
store announces new events of an asset a trigger listens to
(`partita.store.notifications`): then it evaluates at once. An event that
pass cannot read yet, because a transaction older than its own is still in
progress, is looked for again after a short delay that grows while the same
events stay held back: that transaction's end is announced to nobody. The poll
interval stays the safety net for cron ticks, resumed flows and
announcements missed while the listening connection was down. On a SQLite
file, writers on the same machine wake the daemon the same way through a
local socket (`partita.store.local_wakeup`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
import os
import select
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from partita.automation.consumer_loop import ConsumerLoop
from partita.automation.consumer_runs import run_claimed, run_fields
from partita.automation.evaluation import STALE_CLAIM_SECONDS, TriggerEvaluator
from partita.automation.logs import json_log_handler
from partita.automation.partial_batches import PartialBatches
from partita.automation.triggers import OnAssetEvents
from partita.errors import PartitaError
from partita.flow import Flow
from partita.results.model import RunResult
from partita.store.checkpointer import wal_reset_caution
from partita.store.liveness import current_host
from partita.store.local_wakeup import WakeupReceiver, local_wakeup_supported
from partita.store.notifications import EventListener, listen_for_events
from partita.store.protocol import RequestClaimLost
from partita.store.sql import SqlStore
from partita.store.triggers import EventPosition, TriggerRequest, TriggerStore

__all__ = ["FlowFailure", "TriggerDaemon", "json_log_handler"]

log = logging.getLogger("partita.daemon")

HEARTBEAT_SECONDS = 5.0
#: Events announced sooner than this after the last evaluation began are evaluated this long
#: after it: a producer committing events one by one would otherwise cost a whole pass per event.
ANNOUNCED_EVALUATION_GAP = 0.005
#: A pass that finds a committed event held back by an older transaction still in progress
#: (PostgreSQL) evaluates again this long after it began, then twice as long each time the same
#: events are still held back, up to HELD_BACK_RECHECK_MAX (never beyond the poll interval): that
#: transaction's end is announced to nobody, and the event's own announcement is spent.
HELD_BACK_RECHECK = 0.01
HELD_BACK_RECHECK_MAX = 1.0
#: How many times a pass reads a flow's due requests again after another daemon won some of
#: them: a pass reads only what its free slots take, so a lost claim leaves a slot to refill.
CLAIM_ROUNDS = 4


class _Wakeup:
    """A self-pipe: `set` from any thread, or from a signal handler, ends a `select` on `fileno`.

    Unlike a `threading.Event`, setting it takes no lock, so a signal handler
    running on the thread that waits cannot deadlock.
    """

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)

    def fileno(self) -> int:
        return self._reader.fileno()

    def set(self) -> None:
        # A full buffer already wakes the reader; a closed one means nobody waits.
        with contextlib.suppress(OSError):
            self._writer.send(b"\0")

    def clear(self) -> None:
        # One read: bytes beyond it keep the socket readable, so the next wait ends at once and reads them.
        with contextlib.suppress(OSError):
            self._reader.recv(4096)

    def close(self) -> None:
        self._reader.close()
        self._writer.close()


class TriggerDaemon:
    """Starts the consumer runs that ``flows``' triggers make due in ``store``.

    ``max_in_flight`` bounds the runs at once; ``poll_interval`` is the longest
    time between two evaluations. On PostgreSQL the daemon also listens for
    new events and evaluates at once; ``listen=False`` makes it poll only
    (for a connection pooler that does not pass ``LISTEN`` on).
    """

    def __init__(
        self,
        flows: Sequence[Flow],
        store: SqlStore,
        *,
        max_in_flight: int = 4,
        poll_interval: float = 0.1,
        listen: bool = True,
    ) -> None:
        self.evaluators = [TriggerEvaluator(flow, store) for flow in flows]
        self.store = store
        self.max_in_flight = max_in_flight
        self.poll_interval = poll_interval
        self.daemon_id = uuid.uuid4().hex
        self._stop = threading.Event()
        self._in_flight: set[concurrent.futures.Future[Any]] = set()
        #: Pending requests handed to the consumer loop, whose run's start claims them (one-key runs).
        self._starting: set[int] = set()
        # The consumer runs in flight are tasks of one event loop on a thread of its own.
        self._runs = ConsumerLoop()
        #: Consumer runs started, and claimed runs whose start the store refused (their requests stay pending)
        #: or that raised an unexpected error (a bug; such a run that had started is recorded failed).
        self.started_runs = 0
        self.unstarted_runs = 0
        #: Started consumer runs by outcome: succeeded, or failed (an asset failed, or the run was cancelled).
        self.succeeded_runs = 0
        self.failed_runs = 0
        #: (flow, live result) of the failed runs, kept by `run_once` only (its caller lists their failed keys).
        self.failed_results: list[tuple[str, RunResult]] = []
        self._keep_failed = False
        self._claims = 0  # requests this daemon claimed (a pass that claims none ends run_once)
        self._counts = threading.Lock()
        # Set while serving when a run finishes (its slot is refilled at once) or on stop.
        self._wakeup: _Wakeup | None = None
        #: Set when a run ended since the last pass: its slot takes the next due request.
        self._freed = False
        self._paused: dict[str, bool] = {}
        #: Per batched flow, its run in flight that started with fewer keys than a full batch.
        self._partial = PartialBatches()
        #: Batched flows whose announced events wait for their partial batch's end to be read.
        self._deferred: set[str] = set()
        #: Flows whose last pass failed, with the reason; they are retried on every pass.
        self.failing: dict[str, FlowFailure] = {}
        #: Per flow, the first event its last evaluation found held back by an older transaction.
        self._held_back: dict[str, EventPosition] = {}
        self._held_back_seen: dict[str, EventPosition] = {}  # as the last re-check delay was chosen
        #: Upstream assets of the event triggers: announcements of other assets are ignored.
        self.watched_assets = frozenset(
            asset
            for evaluator in self.evaluators
            if isinstance(evaluator.flow.trigger, OnAssetEvents)
            for asset in evaluator.flow.trigger.assets
        )
        self._listen = listen
        self._listener: EventListener | None = None
        self._local: WakeupReceiver | None = None

    def stop(self) -> None:
        """Stop claiming work; runs in flight finish. Safe to call from a signal handler."""
        self._stop.set()
        wakeup = self._wakeup
        if wakeup is not None:
            wakeup.set()

    @property
    def listening(self) -> bool:
        """Whether the daemon is woken by event notifications now (PostgreSQL, or SQLite writers on this machine)."""
        listener = self._listener
        return self._local is not None or (listener is not None and listener.listening)

    def _listen_locally(self) -> None:
        """On a SQLite file, a socket that writers on this machine wake; polling only when it cannot be made."""
        path = self.store.database.sqlite_path
        if path is None or not local_wakeup_supported():
            return
        try:
            self._local = WakeupReceiver(path, self.watched_assets)
        except OSError as exc:
            log.warning("no local wake-up beside %s, polling only: %s", path, exc, extra={"daemon": self.daemon_id})

    def _slot_freed(
        self, evaluator: TriggerEvaluator, starting: list[int], future: concurrent.futures.Future[Any]
    ) -> None:
        flow = evaluator.flow.name
        error = None if future.cancelled() else future.exception()
        if starting and isinstance(error, RequestClaimLost):  # the request changed since it was read:
            evaluator.claim_lost(starting)  # another daemon runs it, or this one claims it first next time
        elif starting and error is not None:
            # Unclaimed after an unexpected error: not handed out again at once, as a stale claim would not be.
            evaluator.hold(starting, STALE_CLAIM_SECONDS)
        self._starting.difference_update(starting)  # claimed by now, or left pending (start failed, or lost)
        started = not future.cancelled() and error is None and future.result() is not None
        with self._counts:
            if isinstance(error, RequestClaimLost):
                pass  # neither a start nor a failed one
            elif started:
                self.started_runs += 1
                result: RunResult = future.result()
                if result.succeeded:
                    self.succeeded_runs += 1
                else:
                    self.failed_runs += 1
                    if self._keep_failed:
                        self.failed_results.append((flow, result))
            else:
                self.unstarted_runs += 1
        self._freed = True
        wakeup = self._wakeup
        if wakeup is not None:
            wakeup.set()

    def run_once(self) -> int:
        """Process what is pending now: pass until a pass claims nothing, waiting for runs between passes.

        Returns the consumer runs its passes started; `unstarted_runs` counts
        the claims whose start the store refused (their requests wait for a
        later pass) or whose plan was refused.
        """
        concurrent.futures.wait(list(self._in_flight))  # runs claimed before this call are not its own
        before = self.started_runs
        self._keep_failed = True
        while True:
            concurrent.futures.wait(list(self._in_flight))  # a pass facing full slots would start nothing
            if self._pass() == 0:
                break
        concurrent.futures.wait(list(self._in_flight))
        self._runs.shutdown()
        return self.started_runs - before

    def _log_start(self) -> None:
        """The start's log line: how the daemon is woken; and a warning on a SQLite with the WAL-reset bug."""
        wakes_by = "local socket" if self._local is not None else "notifications" if self.listening else "polling"
        log.info("daemon started", extra={"daemon": self.daemon_id, "wakeup": wakes_by})
        caution = wal_reset_caution(self.store.dialect)
        if caution is not None:
            log.warning(caution, extra={"daemon": self.daemon_id})

    def serve(self) -> None:
        """Pass over the triggers until `stop`; runs in flight finish before this returns."""
        triggers = TriggerStore(self.store)
        triggers.daemon_started(self.daemon_id, current_host(), os.getpid(), time.time())
        wakeup = self._wakeup = _Wakeup()
        if self._stop.is_set():
            wakeup.set()
        last_heartbeat = time.monotonic()
        last_evaluation = float("-inf")
        announced = False  # events were announced since the last evaluation began
        recheck = 0.0  # evaluate again this long after the last evaluation began, for held-back events (0: none)
        try:
            # Listen before the first pass: every event committed after that pass is announced.
            if self._listen and self.watched_assets:
                self._listener = listen_for_events(self.store, assets=self.watched_assets)
                self._listen_locally()
            self._log_start()
            while not self._stop.is_set():
                try:
                    # Triggers are evaluated when events were announced (a burst a few at a
                    # time) or the poll interval has passed; a freed slot only takes the next due
                    # request, and an announcement still waiting for its evaluation does nothing yet.
                    # Events held back by an older transaction are evaluated again soon, as that
                    # transaction's end wakes nobody.
                    since = time.monotonic() - last_evaluation
                    evaluate = since >= self._evaluation_interval(announced, recheck)
                    if self._partial.gap_over():
                        self._freed = True  # the keys a partial batch's gap held back start now
                    freed, self._freed = self._freed, False
                    if evaluate:
                        last_evaluation, announced = time.monotonic(), False
                    if evaluate or freed:
                        self._pass(evaluate, polled=since >= self.poll_interval, freed=freed)
                        recheck = self._recheck_delay(recheck, evaluate)
                    if time.monotonic() - last_heartbeat >= HEARTBEAT_SECONDS:
                        triggers.daemon_heartbeat(self.daemon_id, time.time())
                        last_heartbeat = time.monotonic()
                except PartitaError as exc:
                    log.error("trigger pass failed: %s", exc, extra={"daemon": self.daemon_id})
                interval = self._evaluation_interval(announced, recheck)
                next_due = min(last_evaluation + interval, last_heartbeat + HEARTBEAT_SECONDS)
                if self._partial.gap_ends is not None:
                    next_due = min(next_due, self._partial.gap_ends)
                announced = self._sleep(max(0.0, next_due - time.monotonic()), announced=announced) or announced
        finally:
            log.info("daemon stopping: waiting for runs in flight", extra={"daemon": self.daemon_id})
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            if self._local is not None:
                self._local.close()
                self._local = None
            concurrent.futures.wait(list(self._in_flight))
            self._runs.shutdown()
            self._wakeup = None
            wakeup.close()
            triggers.daemon_heartbeat(self.daemon_id, time.time(), stopped=True)
            log.info("daemon stopped", extra={"daemon": self.daemon_id})

    def _evaluation_interval(self, announced: bool, recheck: float) -> float:
        """How long after the last evaluation began the next one is due."""
        interval = self.poll_interval
        if announced:
            interval = min(interval, ANNOUNCED_EVALUATION_GAP)
        if recheck:
            interval = min(interval, recheck)
        return interval

    def _recheck_delay(self, delay: float, evaluated: bool) -> float:
        """The next re-check delay for held-back events after a pass (0: none are held back).

        The same events still held back after an evaluation double the delay;
        others start it again at `HELD_BACK_RECHECK`.
        """
        held = self._held_back
        if not held:
            delay = 0.0
        elif held != self._held_back_seen or not delay:
            delay = HELD_BACK_RECHECK
        elif evaluated:
            delay = min(2 * delay, HELD_BACK_RECHECK_MAX)
        self._held_back_seen = dict(held)
        return delay

    def _sleep(self, timeout: float, *, announced: bool = False) -> bool:
        """Wait for a freed slot, a stop, announced events or the timeout; True when events were announced.

        When events were ``announced`` already, more of them would not bring the
        evaluation forward: the daemon leaves announcements unread until then
        (they wait in the socket or the listening connection), instead of
        waking for every commit of a busy producer.
        """
        assert self._wakeup is not None
        wakeup = self._wakeup.fileno()
        ready: list[int] = [wakeup]  # the listener does not say what woke it: read the wake-up anyway
        if announced:
            ready = select.select([wakeup], [], [], timeout)[0]
            announced = False
        elif self._listener is not None:
            announced = self._listener.wait(timeout, interrupt=wakeup)
        else:
            local = self._local
            ready = select.select([wakeup] if local is None else [wakeup, local.fileno()], [], [], timeout)[0]
            # Only a socket with something to read is read: every read of an empty one raises inside.
            announced = local is not None and local.fileno() in ready and local.drain(self.watched_assets)
        if wakeup in ready:
            self._wakeup.clear()
        return announced

    def _pass(self, evaluate: bool = True, *, polled: bool = True, freed: bool = True) -> int:
        """Evaluate triggers (when due) and fill free slots with due requests; the number claimed.

        Every flow is evaluated even when the slots are full: its requests
        are then recorded and wait for a slot, instead of waiting unseen
        behind another flow's backlog. A flow whose trigger fails is logged,
        kept in `failing` and tried again on the next pass; the other flows
        are served meanwhile. Announced events (not ``polled``) of a batched
        flow whose partial batch runs are read when that run ends, or at the
        next poll: the keys they make due mostly join the next batch, and a
        pass per burst of events would cost more than their wait. Such a
        flow's due requests are not read either, unless a run ended
        (``freed``): nothing new can have become due for it.
        """
        before = self._claims
        full = False
        for evaluator in self.evaluators:
            name = evaluator.flow.name
            failed = False
            batch_running = self._partial.running(name)
            if evaluate and not polled and batch_running:
                self._deferred.add(name)
                if not freed:
                    continue
                evaluate_flow = False
            else:
                evaluate_flow = evaluate or (name in self._deferred and not batch_running)
            if evaluate_flow:
                self._deferred.discard(name)
                try:
                    self._evaluate(evaluator)
                except Exception as exc:  # noqa: BLE001 - one flow's failure must not stop the others
                    self._held_back.pop(name, None)  # unknown now; the next pass tries the flow again
                    self._flow_failed(name, exc)
                    failed = True
            # Requests recorded before a failure still start: they were decided while the flow was sound.
            if not full and not self._paused.get(name):
                try:
                    full = self._start_due(evaluator)
                except Exception as exc:  # noqa: BLE001 - as above
                    self._flow_failed(name, exc)
                    failed = True
            if evaluate_flow and not failed and self.failing.pop(name, None) is not None:
                log.info("flow recovered", extra={"flow": name, "daemon": self.daemon_id})
            if self._stop.is_set():
                break
        return self._claims - before

    def _evaluate(self, evaluator: TriggerEvaluator) -> None:
        report = evaluator.evaluate()
        self._paused[evaluator.flow.name] = report.paused
        if report.held_back is None:
            self._held_back.pop(evaluator.flow.name, None)
        else:
            self._held_back[evaluator.flow.name] = report.held_back
        for event_id, reason in report.rejected:
            log.warning("event ignored: %s", reason, extra={"flow": evaluator.flow.name, "request": event_id})

    def _flow_failed(self, name: str, exc: Exception) -> None:
        """Remember and log a flow's failure; the same failure again is logged once, at debug level."""
        failure = FlowFailure.of(exc)
        repeated = self.failing.get(name) == failure
        self.failing[name] = failure
        log.log(
            logging.DEBUG if repeated else logging.ERROR,
            "flow failing, retried on the next pass: %s",
            failure.reason,
            extra={"flow": name, "daemon": self.daemon_id},
            exc_info=not repeated and not isinstance(exc, PartitaError),
        )

    def _start_due(self, evaluator: TriggerEvaluator) -> bool:
        """Claim and start ``evaluator``'s due requests while slots are free; True when the slots are full.

        A pass reads as many runs' requests as there are free slots: in a
        one-run-per-key flow, a run's end frees one slot and reads one
        request, not a backlog. Only when another daemon won some of them is
        the backlog read again, a few times at most.
        """
        name = evaluator.flow.name
        size = evaluator.flow.trigger.max_keys_per_run  # type: ignore[union-attr]
        for _ in range(CLAIM_ROUNDS):
            free = self._free_slots()
            if free <= 0:
                return True  # no slot: reading the due requests (a batch's thousands) would be wasted
            batches = evaluator.due_runs(free, self._starting.copy())  # copied: the consumer loop's thread changes it
            lost = False
            for batch in batches:
                if self._stop.is_set():
                    return False
                if self._free_slots() <= 0:
                    return True
                # A partial batch waits while the flow's last one runs: the keys due meanwhile then
                # start together, so a steady stream of events makes few full runs, not many small ones.
                partial = len(batch) < size and batch[0].status == "pending"
                if partial and self._partial.holds_back(name, serving=self._wakeup is not None):
                    continue
                if size == 1 and batch[0].status == "pending" and not evaluator.claims_first(batch[0]):
                    claimed = evaluator.unclaimed_run(batch[0])  # one run per key: its start claims it
                else:
                    claimed = evaluator.claim_run(batch)
                if claimed is None:
                    lost = True  # another daemon took it: its slot is still free
                    continue
                self._start(evaluator, claimed, partial)
            if not lost or len(batches) < free:
                return False
        return False

    def _free_slots(self) -> int:
        self._in_flight = {future for future in self._in_flight if not future.done()}
        return self.max_in_flight - len(self._in_flight)

    def _start(self, evaluator: TriggerEvaluator, claimed: list[TriggerRequest], partial: bool) -> None:
        """Start the consumer run of ``claimed`` requests on a free slot."""
        self._claims += 1
        flow = evaluator.flow.name
        log.info("starting consumer run", extra=run_fields(flow, claimed))
        starting = [request.id for request in claimed if request.status == "pending"]
        self._starting.update(starting)
        future = self._runs.submit(run_claimed, evaluator, claimed)
        future.add_done_callback(functools.partial(self._slot_freed, evaluator, starting))
        self._in_flight.add(future)
        if partial:
            self._partial.started(flow, future)


@dataclass(frozen=True, slots=True)
class FlowFailure:
    """Why a flow's last pass failed: one line, and the exit code its error class has (SPEC §13)."""

    reason: str
    exit_code: int

    @classmethod
    def of(cls, exc: BaseException) -> FlowFailure:
        """Partita's own message; for a bug in user code, the exception's type and text (configuration, 2)."""
        if isinstance(exc, PartitaError):
            return cls(str(exc), exc.exit_code)
        return cls(f"{type(exc).__name__}: {exc}", PartitaError.exit_code)
