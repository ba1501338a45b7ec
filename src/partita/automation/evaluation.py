"""One trigger pass: read new events or elapsed ticks, decide which consumer runs are due, start them.

A pass never starts a run twice: requests are unique in the store and are
claimed with a conditional update under the run id of their run. A
one-key run claims its request in the transaction that records its start;
a batch, a takeover and a follow-up are claimed before their run starts. A
daemon that dies between such a claim and the start leaves a claim that a
later pass (any daemon) takes over once it is stale; a started run is
never started again.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from zoneinfo import ZoneInfo

from partita.automation.consumer_runs import run_request
from partita.automation.events_ahead import EventsAhead
from partita.automation.schedules import scheduled_key
from partita.automation.triggers import CronPartitions, OnAssetEvents
from partita.errors import PartitaError, PlanningError
from partita.flow import Flow
from partita.partitions.mappers import Requirement
from partita.store.sql import SqlStore
from partita.store.triggers import EventPosition, TriggerRequest, TriggerStore

__all__ = ["PassReport", "consumer_partition_def", "TriggerEvaluator", "UpstreamProgress", "run_request"]

log = logging.getLogger("partita.triggers")

#: A claim older than this whose run never started is taken over by another pass.
STALE_CLAIM_SECONDS = 30.0
#: Pending requests a daemon reads at once for a one-key flow, whatever its free slots.
READ_AHEAD = 32
#: A start the store refused is retried after 1, 2, 4 … seconds, at most this long.
MAX_START_BACKOFF_SECONDS = 60.0


@dataclass(slots=True)
class PassReport:
    """What one pass decided (and, for `plan --pending`, what it would start)."""

    flow: str
    new_events: int = 0
    ready: dict[str, list[int]] = field(default_factory=dict)
    waiting: dict[str, list[int]] = field(default_factory=dict)
    rejected: list[tuple[int, str]] = field(default_factory=list)
    scheduled: list[str] = field(default_factory=list)
    #: Missed schedule keys this pass passes over because of the trigger's ``catchup``.
    skipped_by_catchup: list[str] = field(default_factory=list)
    paused: bool = False
    #: Per ready or waiting key whose requirement could be answered: how far its upstream is.
    progress: dict[str, UpstreamProgress] = field(default_factory=dict)
    #: The first committed event the pass could not read yet, because a transaction older than its
    #: own is still in progress (PostgreSQL): a later pass reads it. None when there is none.
    held_back: EventPosition | None = None


@dataclass(frozen=True, slots=True)
class UpstreamProgress:
    """How many of the upstream keys a consumer key needs have an event (summed over upstream assets).

    ``required`` is what the key waits for: every listed key, or the
    mapper's ``minimum``; ``upstream_keys`` is how many the window lists. An
    unpartitioned requirement (any event of the asset) counts as one key.
    """

    present: int
    required: int
    upstream_keys: int


def consumer_partition_def(flow: Flow) -> Any:
    """The partition definition a triggered flow's consumer keys belong to: its closure's first partitioned one."""
    return next((d.partition_def for d in flow.closure() if d.partition_def is not None), None)


class TriggerEvaluator:
    """Evaluates one flow's trigger against a store."""

    def __init__(self, flow: Flow, store: SqlStore) -> None:
        if flow.trigger is None:
            raise PlanningError(f"flow {flow.name!r} has no trigger")
        self.flow = flow
        self.store = store
        #: The flow as its consumer runs run it: recording into this store (one copy, not one per run).
        self.run_flow = flow.with_store(store, record_partition_keys=flow.record_partition_keys)
        self.triggers = TriggerStore(store)
        # The first partitioned definition of the closure: fixed for the flow, so found once.
        self._consumer_def = consumer_partition_def(flow)
        self._last_stale_check = float("-inf")
        self._registry = flow.registry
        #: Pending requests whose one-key run failed to start, held back here whether or not the store
        #: recorded the backoff: request id -> when this daemon hands it out again.
        self._held: dict[int, float] = {}
        self._held_lock = threading.Lock()
        #: One-key runs' pending requests read ahead of the free slots, oldest first (`due_runs`).
        self._ahead: list[TriggerRequest] = []
        self._ahead_stale = False
        #: The events of the requests read ahead, for their runs (`consumer_runs`).
        self.events_ahead = EventsAhead(store)
        #: One-key requests whose claim at their run's start was lost (`claim_lost`): claimed before
        #: their run from now on, so that a request events keep joining still runs.
        self._contended: set[int] = set()

    def _partition_def(self, asset: str) -> Any:
        definition = self._registry.get(asset)
        return None if definition is None else definition.partition_def

    @property
    def consumer_def(self) -> Any:
        return self._consumer_def

    # -- deciding ---------------------------------------------------------------

    def evaluate(self, *, record: bool = True, now: dt.datetime | None = None) -> PassReport:
        """Decide what is due; with ``record`` the decision is stored (requests, waiting keys, cursor)."""
        now = now or dt.datetime.now(dt.UTC)
        paused, cursor, last_tick = self.triggers.pass_position(self.flow.name)
        report = PassReport(self.flow.name, paused=paused)
        if report.paused:
            return report
        trigger = self.flow.trigger
        if isinstance(trigger, OnAssetEvents):
            self._evaluate_events(trigger, report, record, now, cursor)
        elif isinstance(trigger, CronPartitions):
            self._evaluate_schedule(trigger, report, record, now, last_tick)
        return report

    def _evaluate_events(
        self, trigger: OnAssetEvents, report: PassReport, record: bool, now: dt.datetime, cursor: EventPosition
    ) -> None:
        read = self.triggers.read_new_events(trigger.assets, cursor)
        new, report.held_back = read.events, read.held_back
        report.new_events = len(new)
        consumer = self.consumer_def
        affected: dict[str, list[int]] = {}
        for position, asset, key in new:
            event_id = position.event_id
            try:
                keys = trigger.mapper.downstream_keys(key or "", self._partition_def(asset), consumer)
            except Exception as exc:  # noqa: BLE001 - a broken mapper rejects this event, not the pass
                report.rejected.append((event_id, str(exc)))
                log.warning("flow %s: event %s cannot be mapped to a consumer key: %s", self.flow.name, event_id, exc)
                continue
            for downstream_key in keys:
                affected.setdefault(downstream_key, []).append(event_id)
        # A waiting key can only become complete through a new event, which maps
        # to it again: a recording pass does not re-examine the others. A preview
        # (plan --pending) shows them all.
        if not record:
            for waiting in self.triggers.waiting(self.flow.name):
                affected.setdefault(waiting.partition_key, []).extend(waiting.event_ids)
        # The keys these events name have an event already: the completeness check reads only the others.
        seen: dict[str, set[str | None]] = {}
        for _, asset, key in new:
            seen.setdefault(asset, set()).add(key)
        complete = self._complete(trigger, list(affected), consumer, report.progress, seen)
        for downstream_key, ids in affected.items():
            if downstream_key in complete:
                report.ready[downstream_key] = ids
            else:
                report.waiting[downstream_key] = ids
        if record and (new or report.ready or report.waiting):
            last = new[-1][0] if new else cursor
            recorded = self.triggers.record_pass(
                self.flow.name, report.ready, report.waiting, cursor, last, None, now.timestamp()
            )
            if not recorded:
                # Another daemon advanced the cursor meanwhile: its pass owns these events.
                report.ready, report.waiting = {}, {}

    def _complete(
        self,
        trigger: OnAssetEvents,
        downstream_keys: list[str],
        consumer: Any,
        progress: dict[str, UpstreamProgress],
        seen: dict[str, set[str | None]],
    ) -> set[str]:
        """The downstream keys whose every required upstream partition has an event; fills ``progress``.

        One read per upstream asset for all keys of the pass (a pass after a
        burst of emissions may see thousands), not one per key; none for
        keys the pass's own events name (``seen``, by asset): they have one.
        """
        requirements: dict[str, list[tuple[str, Requirement]]] = {}
        needed: dict[str, set[str]] = {asset: set() for asset in trigger.assets}
        for downstream_key in downstream_keys:
            try:
                required = [
                    (asset, trigger.mapper.requirement(downstream_key, self._partition_def(asset), consumer))
                    for asset in trigger.assets
                ]
            except Exception:  # noqa: BLE001 - an unanswerable requirement keeps the key waiting
                continue
            requirements[downstream_key] = required
            for asset, requirement in required:
                needed[asset].update(requirement.keys)
        present = {asset: self._keys_with_events(asset, keys, seen.get(asset, set())) for asset, keys in needed.items()}
        any_event = {asset: True for asset in seen}
        complete: set[str] = set()
        for key, required in requirements.items():
            # Each requirement's keys are counted once, for the key's progress and its readiness alike.
            have = listed = wanted = 0
            ready = True
            for asset, requirement in required:
                if requirement.keys:
                    count = requirement.present_count(present[asset])
                    satisfied = requirement.satisfied_with(count)
                    have, wanted, listed = have + count, wanted + requirement.needed(), listed + len(requirement.keys)
                else:  # an unpartitioned requirement: any event of the asset, counted as one key
                    if asset not in any_event:
                        any_event[asset] = self.triggers.has_event(asset)
                    satisfied = any_event[asset]
                    have, wanted, listed = have + satisfied, wanted + 1, listed + 1
                ready = ready and satisfied
            progress[key] = UpstreamProgress(present=have, required=wanted, upstream_keys=listed)
            if ready:
                complete.add(key)
        return complete

    def _keys_with_events(self, asset: str, keys: set[str], seen: set[str | None]) -> set[str]:
        """Which of ``keys`` have an event of ``asset``: those ``seen`` in the pass, and the others asked of the store."""
        known = keys & seen
        unknown = keys - known
        return known | self.triggers.keys_with_events(asset, unknown) if unknown else known

    def _evaluate_schedule(
        self, trigger: CronPartitions, report: PassReport, record: bool, now: dt.datetime, last_tick: float | None
    ) -> None:
        after = None if last_tick is None else dt.datetime.fromtimestamp(last_tick, dt.UTC)
        ticks = trigger.ticks(after, now)
        zone = ZoneInfo(trigger.timezone)
        # Each tick names the partition that ended since the tick before it (if any).
        previous, seen = trigger.counted_after(after), set()
        for tick in ticks:
            key = scheduled_key(self.consumer_def, zone, tick, previous)
            if key is not None and key not in seen:
                seen.add(key)
                report.scheduled.append(key)
            previous = tick
        limit = trigger.catchup_limit
        if limit is not None and len(report.scheduled) > limit:
            # The older missed keys are passed over for good: the cursor moves past their ticks.
            report.skipped_by_catchup = report.scheduled[:-limit]
            report.scheduled = report.scheduled[-limit:]
        if record and ticks:
            self.triggers.record_schedule(self.flow.name, report.scheduled, ticks[-1].timestamp(), now.timestamp())

    # -- starting ---------------------------------------------------------------

    def due_requests(
        self, now: float | None = None, limit: int | None = None, *, record: bool = True
    ) -> list[TriggerRequest]:
        """Pending requests (the oldest ``limit``) not backing off, plus claims that need another run.

        Those are claims that went stale before their run started and claims
        whose run was interrupted (a follow-up is due while tries remain).
        With ``record`` (a daemon's pass) claims whose run ended unrecorded are
        finished and those out of tries abandoned; a preview only reads.
        """
        now = time.time() if now is None else now
        pending = self.triggers.requests(self.flow.name, ("pending",), limit, due_at=now)
        # Stale claims are rare: look for them a few times per staleness period, not per request.
        if record and now - self._last_stale_check < STALE_CLAIM_SECONDS / 4:
            return pending
        recovered: list[TriggerRequest] = []
        for batch in _by_run(self.triggers.requests(self.flow.name, ("claimed",))):
            due = self._recover(batch[0], now, record)
            if due is not None:  # a batch is taken over or followed up whole
                recovered.extend(replace(member, interrupted=due.interrupted) for member in batch)
        if record and not recovered:  # with some found, look again next pass: full slots may leave them unclaimed
            self._last_stale_check = now
        return recovered + pending  # the oldest work first

    def due_runs(self, runs: int, starting: Collection[int] = ()) -> list[list[TriggerRequest]]:
        """Due requests as the consumer runs to start, at most ``runs``, each a batch to claim together.

        A recovered claim keeps its batch; pending requests are grouped up to
        the trigger's ``max_keys_per_run``, oldest first. Pending requests in
        ``starting`` (one-key runs handed to the consumer loop, whose start
        claims them) are left out, as are those held back here after a start
        failed. A one-key flow reads `READ_AHEAD` pending requests at once and
        hands out the rest on later calls, until it is time to look for stale
        claims again.
        """
        size = self.flow.trigger.max_keys_per_run  # type: ignore[union-attr]
        held, now = starting, time.time()
        if self._held:
            with self._held_lock:  # the consumer loop's thread adds to it
                self._held = {request_id: until for request_id, until in self._held.items() if until > now}
                held = self._held.keys() | starting
        if self._ahead_stale:
            self._ahead_stale, self._ahead = False, []
        ahead = [
            request for request in self._ahead
            if request.id not in held and (request.not_before is None or request.not_before <= now)
        ] if size == 1 else []  # fmt: skip
        if len(ahead) >= runs and now - self._last_stale_check < STALE_CLAIM_SECONDS / 4:
            self._ahead = ahead[runs:]
            return [[request] for request in ahead[:runs]]
        # One-key runs read a few more than the free slots take: their starts claim them, so one
        # another daemon started meanwhile only costs that start, and most freed slots read nothing.
        wanted = max(runs, READ_AHEAD) if size == 1 else runs * size
        due = self.due_requests(limit=wanted + len(held))
        if held:
            due = [request for request in due if request.status == "claimed" or request.id not in held]
        batches = list(_by_run([request for request in due if request.status == "claimed"]))
        pending = [request for request in due if request.status != "claimed"]
        batches.extend(pending[start : start + size] for start in range(0, len(pending), size))
        if size == 1:
            self._ahead = [request for (request,) in batches[runs:] if request.status == "pending"]
            self.events_ahead.read_ahead(request for batch in batches for request in batch)
        return batches[:runs]

    def _recover(self, claimed: TriggerRequest, now: float, record: bool) -> TriggerRequest | None:
        """What a claimed request needs: a takeover, a follow-up run, nothing, or to be closed."""
        status = None if claimed.run_id is None else self.triggers.run_status(claimed.run_id)
        if status is None:  # never started: taken over once the claim is stale
            stale = claimed.claimed_at is not None and now - claimed.claimed_at >= STALE_CLAIM_SECONDS
            return claimed if stale else None
        if status == "running":
            return None
        if status != "interrupted" or self._completed(claimed.run_id):
            if record:  # the run's work is done, but its daemon stopped before finishing the request
                self.triggers.finish_run(claimed.flow, claimed.run_id, now)
            return None
        allowed = self.flow.trigger.rerun_interrupted  # type: ignore[union-attr]
        if claimed.tries > allowed:
            if record:
                reason = f"run {claimed.run_id} was interrupted and the request's {claimed.tries} runs are used up"
                self.triggers.abandon(claimed, reason, now)
                log.error("flow %s: consumer request %s abandoned: %s", self.flow.name, claimed.id, reason)
            return None
        return replace(claimed, interrupted=True)

    def _completed(self, run_id: str | None) -> bool:
        """Whether an interrupted run recorded a success for every planned attempt (only its end was lost)."""
        run = self.store.get_run(run_id)  # type: ignore[arg-type]
        return run.attempt_count is not None and run.counts == {"success": run.attempt_count}

    def claim(self, request: TriggerRequest) -> TriggerRequest | None:
        """Take a due request for this daemon, or None when another one took it.

        A follow-up of an interrupted run gets a run id of its own; a takeover
        of a stale claim keeps the claimed run id, so that run starts once.
        A request of a claimed batch takes the whole batch with it.
        """
        claimed = self.claim_run([request])
        return None if claimed is None else claimed[0]

    def claim_lost(self, request_ids: Sequence[int]) -> None:
        """These one-key runs' starts found their requests changed: read again, and claim them first next time.

        Called from the consumer loop's thread; the copies read ahead may be as stale.
        """
        self._contended.update(request_ids)
        self._ahead_stale = True  # the daemon's thread drops them (it may be replacing the list now)

    def claims_first(self, request: TriggerRequest) -> bool:
        """Whether a pending one-key request is claimed before its run (it lost a claim at the start)."""
        return request.id in self._contended

    def unclaimed_run(self, request: TriggerRequest) -> list[TriggerRequest]:
        """A pending request as a one-key run under a new run id, whose start claims it (`RequestClaim`).

        Claiming it there saves the run a write transaction of its own; a
        daemon that dies before the start leaves the request pending, due at
        once rather than after its claim went stale.
        """
        return [replace(request, run_id=uuid.uuid4().hex)]

    def claim_run(self, requests: Sequence[TriggerRequest]) -> list[TriggerRequest] | None:
        """Claim the requests one consumer run serves: pending ones under a new run id, or a recovered claim.

        Pending requests another daemon won meanwhile are left out; None when
        none is left. A recovered claim (``requests[0]`` is claimed) is taken
        over or followed up with every request claimed under its run id.
        """
        lead = requests[0]
        self._contended.difference_update(request.id for request in requests)
        if lead.status == "pending":
            run_id, now = uuid.uuid4().hex, time.time()
            won = self.triggers.claim_pending(requests, run_id, now)
            claimed = [  # with the events each holds now: the run sees every event that joined it
                replace(
                    request, status="claimed", run_id=run_id, claimed_at=now, tries=request.tries + 1,
                    event_ids=won[request.id],
                )
                for request in requests
                if request.id in won
            ]  # fmt: skip
            return claimed or None
        fresh = lead.interrupted
        run_id = uuid.uuid4().hex if fresh else lead.run_id
        assert run_id is not None
        # The returned claim carries the claimed_at the store recorded (a takeover matches on it).
        now = time.time()
        won = self.triggers.follow_up(lead, run_id, now) if fresh else self.triggers.claim(lead, run_id, now)
        if not won:
            return None  # another daemon took it
        if fresh:
            log.warning(
                "flow %s: consumer run %s was interrupted; starting run %s (try %d)",
                self.flow.name, lead.run_id, run_id, lead.tries + 1,
            )  # fmt: skip
        members = self.triggers.claimed_under(self.flow.name, run_id)
        return [replace(member, claimed_at=now, interrupted=False) for member in members] or None

    def abandon(self, request: TriggerRequest, error: str, *, alone: bool = False) -> None:
        """The request can never run (its plan is refused): close it, visibly (alone: not its batch)."""
        log.error("flow %s: consumer request %s cannot run and is abandoned: %s", self.flow.name, request.id, error)
        # A one-key run's request is pending unless its start claimed it before the run failed.
        if request.status != "pending" or not self.triggers.abandon_pending(request, error, time.time()):
            self.triggers.abandon(request, error, time.time(), alone=alone)

    def hold(self, request_ids: Sequence[int], seconds: float) -> None:
        """Hand these pending requests out again only after ``seconds`` (their one-key run failed to start)."""
        until = time.time() + seconds
        with self._held_lock:
            self._held.update(dict.fromkeys(request_ids, until))

    def start_failed(self, request: TriggerRequest, error: Exception) -> None:
        """The store refused the run's start: give the request back, to be tried again after a backoff.

        If even that fails, a claim goes stale and a later pass takes it
        over; a pending request (a one-key run's, whose start rolled back
        with its claim) is held back by this daemon for the backoff. A run
        whose start was recorded after all is not given back: it is treated
        as a run that was cut short once its owner is gone.
        """
        delay = min(MAX_START_BACKOFF_SECONDS, 2.0 ** request.start_failures)
        if request.status == "pending":
            self.hold([request.id], delay)
        try:
            if request.run_id is not None and self.triggers.run_status(request.run_id) is not None:
                log.error("flow %s: consumer run %s failed in the store: %s", self.flow.name, request.run_id, error)
                return
            if request.status == "pending":
                released = self.triggers.defer(request, str(error), time.time() + delay)
            else:
                released = self.triggers.release(request, str(error), time.time() + delay)
        except PartitaError as exc:
            log.error(
                "flow %s: request %s could not be given back (retried later): %s", self.flow.name, request.id, exc
            )
            return
        if released:
            log.warning(
                "flow %s: consumer run for request %s could not start; retrying in %.0f s: %s",
                self.flow.name, request.id, delay, error,
            )  # fmt: skip


def _by_run(claimed: Sequence[TriggerRequest]) -> Iterator[list[TriggerRequest]]:
    """Claimed requests grouped by run id (a batch shares one), each group in creation order, oldest first."""
    groups: dict[str | None, list[TriggerRequest]] = {}
    for request in claimed:
        groups.setdefault(request.run_id, []).append(request)
    yield from groups.values()
