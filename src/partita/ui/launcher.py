"""Plans shown and waiting for confirmation, and the runs the UI launched from them.

A plan is kept under a random id for a bounded time (`PLAN_TTL_SECONDS`,
at most `MAX_PLANS` at once, the oldest dropped first) so that the confirm
button runs exactly the plan the page showed, and only once. Each launched
run executes on its own thread with its own event loop, in this server
process: a request never waits for a run, and several runs may go at once
(at most `MAX_RUNNING`). Stopping the server cancels the runs still going as
Ctrl-C does, and waits for them to record ``cancelled``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import HTTPException

from partita.definitions.launch import LaunchKind
from partita.errors import PartitaError
from partita.execution.events import ExecutionEvent, RunStarted
from partita.flow import Flow
from partita.planning.plan import FlowPlan
from partita.store import Store

__all__ = [
    "LAUNCH_TAG",
    "Launcher",
    "MAX_PLANS",
    "MAX_RUNNING",
    "PLAN_TTL_SECONDS",
    "PlanBook",
    "PlannedPlan",
    "SHUTDOWN_SECONDS",
]

_log = logging.getLogger("partita.ui")

#: How long a shown plan can be confirmed: long enough to read it, short enough that the store has not moved far.
PLAN_TTL_SECONDS = 30 * 60
#: Plans kept at once (each holds its selected keys in memory).
MAX_PLANS = 64
#: Runs launched by this server that may be running at once.
MAX_RUNNING = 16
#: How long a launch waits for the run to be recorded before answering.
START_TIMEOUT_SECONDS = 30.0
#: How long stopping the server waits for cancelled runs to end (above the default grace of sync bodies).
SHUTDOWN_SECONDS = 30.0
#: A tag every run launched from the UI carries (a backfill is recorded as ``backfill``, so its launcher shows here).
LAUNCH_TAG = ("partita.launched_from", "ui")
_STARTING = ""


@dataclass(frozen=True, slots=True)
class PlannedPlan:
    """One plan as the page showed it: the Flow that made it (which runs it), its text, and its lifetime."""

    plan_id: str
    flow: Flow
    plan: FlowPlan
    text: str
    planned_at: float
    expires_at: float

    @property
    def empty(self) -> bool:
        """A backfill that found nothing to do: there is nothing to confirm."""
        return self.plan.backfill is not None and self.plan.backfill.empty


class PlanBook:
    """The plans waiting for confirmation, and which run each confirmed one became."""

    def __init__(
        self, *, capacity: int = MAX_PLANS, ttl: float = PLAN_TTL_SECONDS, clock: Callable[[], float] = time.time
    ):
        self._capacity, self._ttl, self._clock = capacity, ttl, clock
        self._plans: OrderedDict[str, PlannedPlan] = OrderedDict()
        self._launched: OrderedDict[str, str] = OrderedDict()  # plan id -> run id, as long as plans are kept
        self._lock = threading.Lock()

    def keep(self, flow: Flow, plan: FlowPlan, text: str) -> PlannedPlan:
        now = self._clock()
        planned = PlannedPlan(secrets.token_urlsafe(16), flow, plan, text, now, now + self._ttl)
        with self._lock:
            self._expire(now)
            self._plans[planned.plan_id] = planned
            while len(self._plans) > self._capacity:
                self._plans.popitem(last=False)
        return planned

    def get(self, plan_id: str) -> PlannedPlan:
        """The plan, or 409 when it was already launched, or 404 when unknown or expired."""
        with self._lock:
            self._expire(self._clock())
            planned = self._plans.get(plan_id)
            if planned is None:
                raise self._refusal(plan_id)
        return planned

    def take(self, plan_id: str, launch: Callable[[PlannedPlan], str]) -> str:
        """Launch the plan once: a second confirmation (a double click, a retry) gets 409 naming the first run."""
        with self._lock:
            self._expire(self._clock())
            planned = self._plans.pop(plan_id, None)
            if planned is None:
                raise self._refusal(plan_id)
            self._launched[plan_id] = _STARTING
        try:
            run_id = launch(planned)
        except StartUnconfirmed:
            raise  # the run may still start: the plan stays taken, so it cannot start twice
        except BaseException:
            with self._lock:  # not launched: it may be confirmed again
                self._launched.pop(plan_id, None)
                self._plans[plan_id] = planned
            raise
        with self._lock:
            self._launched[plan_id] = run_id
            while len(self._launched) > self._capacity:
                self._launched.popitem(last=False)
        return run_id

    def _refusal(self, plan_id: str) -> HTTPException:
        run_id = self._launched.get(plan_id)
        if run_id == _STARTING:
            return HTTPException(409, "this plan is being launched already")
        if run_id is not None:
            return HTTPException(409, f"this plan was already launched as run {run_id}; plan again to run it again")
        return HTTPException(
            404,
            f"no plan with this id: a plan is kept for {self._ttl / 60:g} minutes, until it is launched, "
            "and not across restarts; plan again",
        )

    def _expire(self, now: float) -> None:
        for plan_id in [plan_id for plan_id, planned in self._plans.items() if planned.expires_at <= now]:
            del self._plans[plan_id]


class StartUnconfirmed(HTTPException):
    """The run was not recorded in time; it may still start, so its plan is not offered again."""


class _LaunchedRun:
    """One run on its own thread and event loop; cancelling it is what Ctrl-C does to ``partita run``."""

    def __init__(self, flow: Flow, plan: FlowPlan) -> None:
        self.flow, self.plan = flow, plan
        self.run_id: str | None = None
        self.error: BaseException | None = None
        self.started = threading.Event()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[object] | None = None
        self._cancelled = False
        self.thread = threading.Thread(target=self._main, name="partita-ui-run", daemon=True)

    def on_event(self, event: ExecutionEvent) -> None:
        if isinstance(event, RunStarted):  # sent once the journal recorded the run
            self.run_id = event.run_id
            self.started.set()

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except asyncio.CancelledError:
            pass  # cancelled at shutdown: the journal recorded the run cancelled
        except BaseException as error:  # noqa: BLE001 - reported to the launch request, else logged
            self.error = error
            if self.run_id is not None:
                _log.error("run %s launched from the UI ended with %s", self.run_id, type(error).__name__)
        finally:
            self.started.set()

    async def _run(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
        await self.flow.run_async(self.plan, observers=[self], launched_by=LaunchKind.UI)

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._loop is not None and self._task is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._task.cancel)


class Launcher:
    """Runs confirmed plans in this process, into the server's store."""

    def __init__(self, store: Store, *, record_partition_keys: bool | None) -> None:
        self._store = store
        self._record_keys = record_partition_keys
        self._runs: list[_LaunchedRun] = []
        self._lock = threading.Lock()
        self._closed = False
        #: Runs still going when the server stopped, cancelled by `shutdown`.
        self.cancelled_at_shutdown = 0

    def launch(self, planned: PlannedPlan) -> str:
        """Start ``planned`` on its own thread and return its run id once the run is recorded."""
        if planned.empty:
            raise HTTPException(409, "nothing to backfill: the plan selects no keys, so there is nothing to run")
        record_keys = planned.flow.record_partition_keys if self._record_keys is None else self._record_keys
        flow = planned.flow.with_store(self._store, record_partition_keys=record_keys).with_tags(dict([LAUNCH_TAG]))
        run = _LaunchedRun(flow, planned.plan)
        with self._lock:
            if self._closed:
                raise HTTPException(503, "the server is stopping; nothing new is launched")
            self._runs = [other for other in self._runs if other.thread.is_alive()]
            if len(self._runs) >= MAX_RUNNING:
                raise HTTPException(
                    429, f"{MAX_RUNNING} runs launched from this server are still running; wait for one to finish"
                )
            self._runs.append(run)
            run.thread.start()
        if not run.started.wait(START_TIMEOUT_SECONDS):
            raise StartUnconfirmed(
                503,
                f"the run was not recorded within {START_TIMEOUT_SECONDS:g} seconds; it may still start: "
                "see the runs page before planning it again",
            )
        if run.run_id is not None:
            return run.run_id
        error = run.error
        if isinstance(error, PartitaError):
            raise error  # the plan no longer matches, the store refused: its own status
        raise HTTPException(500, f"the run could not start ({type(error).__name__}); the server log has details")

    def running(self) -> int:
        with self._lock:
            return sum(1 for run in self._runs if run.thread.is_alive())

    def shutdown(self, timeout: float) -> None:
        """Cancel every run still going (as Ctrl-C would) and wait up to ``timeout`` seconds for them to end."""
        with self._lock:
            self._closed = True
            runs = [run for run in self._runs if run.thread.is_alive()]
            self.cancelled_at_shutdown = len(runs)
        for run in runs:
            run.cancel()
        deadline = time.monotonic() + timeout
        for run in runs:
            run.thread.join(max(0.0, deadline - time.monotonic()))
