"""Starting a claimed consumer run: one request's key, or a batch of keys as attempts of one run.

The run id was fixed when the requests were claimed: if another daemon
already started that run, the store refuses the second start. A one-key
run's pending request is claimed by the transaction that records the run's
start (`RequestClaim`): when another daemon claimed it first, or events
joined it since it was read, nothing is written and `RequestClaimLost`
tells the daemon. A batch plans
its keys together; a key the plan refuses is abandoned alone, so one bad key
never holds back the others. Each attempt sees the events that triggered its
own key (`AssetContext.triggering_events`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from partita.automation.triggers import CronPartitions
from partita.definitions.launch import LaunchKind
from partita.errors import PartitaError, StoreError
from partita.results.model import AttemptStatus, RunResult
from partita.store.protocol import RequestClaim, RequestClaimLost
from partita.store.schema import event_ids_text
from partita.store.triggers import TriggerRequest

if TYPE_CHECKING:
    from partita.automation.events_ahead import EventsAhead
    from partita.flow import Flow
    from partita.planning.plan import FlowPlan
    from partita.store.sql import SqlStore

__all__ = ["run_claimed", "run_fields", "run_request", "run_request_async"]

log = logging.getLogger("partita.triggers")
#: The daemon's log: one line per consumer run's end (`run_claimed`).
daemon_log = logging.getLogger("partita.daemon")


class TriggerEvaluator(Protocol):
    """What starting a run needs of `partita.automation.evaluation.TriggerEvaluator` (which imports this module)."""

    flow: Flow
    #: ``flow`` recording into ``store``: what the consumer runs execute.
    run_flow: Flow
    store: SqlStore
    events_ahead: EventsAhead

    @property
    def consumer_def(self) -> Any: ...

    def abandon(self, request: TriggerRequest, error: str, *, alone: bool = False) -> None: ...

    def start_failed(self, request: TriggerRequest, error: Exception) -> None: ...


def run_fields(flow: str, claimed: Sequence[TriggerRequest]) -> dict[str, Any]:
    """The fields of the daemon's log lines about a consumer run: its flow, lead request, run id and keys."""
    lead = claimed[0]
    return {"flow": flow, "request": lead.id, "run_id": lead.run_id, "keys": len(claimed)}


async def run_claimed(evaluator: TriggerEvaluator, claimed: list[TriggerRequest]) -> RunResult | None:
    """Run claimed requests' consumer run (`run_request_async`) and log its outcome: one line per run's end.

    What a daemon's consumer loop runs, as one of its tasks.
    """
    fields = run_fields(evaluator.flow.name, claimed)
    try:
        result = await run_request_async(evaluator, claimed)
    except RequestClaimLost:
        daemon_log.debug("consumer run not started: its request changed since it was read", extra=fields)
        raise
    except BaseException:
        daemon_log.exception("consumer run raised an unexpected error", extra=fields)  # recorded failed if started
        raise
    if result is None:  # run_request_async logged why; the request stays pending or is abandoned
        daemon_log.warning("consumer run did not start", extra=fields)
        return None
    counts = result.counts()
    failed, skipped = counts[AttemptStatus.FAILED], counts[AttemptStatus.SKIPPED]
    daemon_log.log(
        logging.INFO if result.succeeded else logging.WARNING,
        "consumer run finished: %s in %.2fs, %d failed attempt%s",
        result.status.value, result.duration, failed, "" if failed == 1 else "s",
        extra={
            **fields, "status": result.status.value, "duration": round(result.duration, 3),
            "failed_attempts": failed, "skipped_attempts": skipped,
        },
    )  # fmt: skip
    return result


def run_request(evaluator: TriggerEvaluator, claimed: TriggerRequest | Sequence[TriggerRequest]) -> RunResult | None:
    """`run_request_async` to its end on the calling thread, which runs no event loop."""
    return asyncio.run(run_request_async(evaluator, claimed))


async def run_request_async(
    evaluator: TriggerEvaluator, claimed: TriggerRequest | Sequence[TriggerRequest]
) -> RunResult | None:
    """Start the consumer run of claimed requests with their triggering events; None when it did not start.

    A start the store refuses (locked, connection lost) gives the requests
    back, to be retried; a plan that is refused abandons them. A pending
    request (`TriggerEvaluator.unclaimed_run`) is claimed as the run starts,
    or `RequestClaimLost` is raised. The requests
    finish in the transaction that records the run's end (the journal's
    `RunEnd.serves_trigger_flow`): a run never ends with its requests open.
    """
    requests = [claimed] if isinstance(claimed, TriggerRequest) else list(claimed)
    lead = requests[0]
    flow = evaluator.run_flow
    planned = _plan(evaluator, flow, requests)
    if planned is None:
        return None
    plan, requests = planned
    try:
        events = _triggering_events(evaluator, requests)
        launched_by = LaunchKind.SCHEDULE if isinstance(flow.trigger, CronPartitions) else LaunchKind.TRIGGER
        outcome = await flow._execute(plan, (), lead.run_id, events, launched_by, _claim_of(lead, requests))
    except RequestClaimLost:
        raise
    except StoreError as exc:
        evaluator.start_failed(lead, exc)
        return None
    except PartitaError as exc:
        log.error("flow %s: a consumer run could not run: %s", evaluator.flow.name, exc)
        evaluator.abandon(lead, str(exc))
        return None
    return outcome


def _claim_of(lead: TriggerRequest, requests: Sequence[TriggerRequest]) -> RequestClaim | None:
    """What the run's start claims: its one pending request (given a run id), or nothing (claimed already)."""
    if lead.status != "pending":
        return None
    if lead.run_id is None or len(requests) != 1:  # only `TriggerEvaluator.unclaimed_run` hands one out
        raise ValueError(f"request {lead.id} is pending: only a one-key run with a run id can claim it as it starts")
    return RequestClaim(
        flow=lead.flow,
        request_id=lead.id,
        attempt=lead.tries + 1,
        claimed_at=time.time(),
        event_ids=event_ids_text(lead.event_ids),
    )


def _plan(
    evaluator: TriggerEvaluator, flow: Flow, requests: list[TriggerRequest]
) -> tuple[FlowPlan, list[TriggerRequest]] | None:
    """The run's plan and the requests it serves; the requests whose key the plan refuses are abandoned."""
    try:
        return flow.plan_from_text(_config(evaluator, requests)), requests
    except PartitaError as exc:
        if len(requests) == 1:
            evaluator.abandon(requests[0], str(exc))
            return None
    # Find the keys the plan refuses, one by one, and abandon only those.
    kept = []
    for request in requests:
        try:
            flow.plan_from_text(_config(evaluator, [request]))
        except PartitaError as exc:
            evaluator.abandon(request, str(exc), alone=True)
        else:
            kept.append(request)
    if not kept:
        return None
    try:
        return flow.plan_from_text(_config(evaluator, kept)), kept
    except PartitaError as exc:  # each key plans alone but not together
        evaluator.abandon(kept[0], str(exc))
        return None


def _config(evaluator: TriggerEvaluator, requests: Sequence[TriggerRequest]) -> dict[str, Any]:
    if evaluator.consumer_def is None:
        return {}
    return {"partition_keys": [request.partition_key for request in requests]}


def _triggering_events(evaluator: TriggerEvaluator, requests: Sequence[TriggerRequest]) -> Any:
    """One request's events; for a batch, each consumer key's own events."""
    ids = [event_id for request in requests for event_id in request.event_ids]
    found = evaluator.events_ahead.events(ids) if ids else []
    if len(requests) == 1:
        return found
    by_id = {event.id: event for event in found}
    return {
        request.partition_key: tuple(by_id[event_id] for event_id in request.event_ids if event_id in by_id)
        for request in requests
    }
