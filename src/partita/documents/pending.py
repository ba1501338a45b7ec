"""The ``partita.pending`` document: what each triggered flow would start now, and what it waits for.

Built by previewing the triggers (`TriggerEvaluator` with ``record=False``):
reading it starts nothing and records nothing, so ``plan --pending`` and the
UI's triggers page may ask as often as they like.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from partita.automation.daemon import FlowFailure
from partita.automation.evaluation import TriggerEvaluator, UpstreamProgress
from partita.errors import StoreError
from partita.flow import Flow
from partita.operations.status import cycles_uncollected
from partita.store import SqlStore
from partita.store.trigger_requests import TriggerRequest
from partita.store.triggers import TriggerStore

__all__ = ["pending_body"]


def pending_body(flows: Sequence[Flow], store: SqlStore, now: float) -> dict[str, Any]:
    """The ``partita.pending`` body for ``flows``; a flow whose preview fails carries its error, the others go on.

    A preview after a burst covers up to 10,000 new events per flow: it builds
    tens of thousands of short-lived objects without cycles, so the cyclic
    collector is paused meanwhile, as for a status.
    """
    triggers = TriggerStore(store)
    with cycles_uncollected():
        return {"flows": [_flow_document(flow, store, triggers, now) for flow in flows]}


def _flow_document(flow: Flow, store: SqlStore, triggers: TriggerStore, now: float) -> dict[str, Any]:
    evaluator = TriggerEvaluator(flow, store)
    due = evaluator.due_requests(now, record=False)
    recorded = {request.partition_key: request for request in due}
    unready = triggers.requests(flow.name, ("pending", "abandoned"))  # one read for both lists below
    document: dict[str, Any] = {
        "flow": flow.name,
        "trigger": flow.trigger.describe(),  # type: ignore[union-attr]
        "paused": triggers.is_paused(flow.name),
        "would_start": sorted(recorded),
        "waiting": [],
        "waiting_progress": [],
        "rejected_events": [],
        "error": None,
        "follow_ups": [
            {"partition_key": r.partition_key, "interrupted_run": r.run_id, "try": r.tries + 1}
            for r in due
            if r.interrupted
        ],
        "retrying": _retrying(unready, now),
        "abandoned": [
            {"partition_key": r.partition_key, "error": r.last_error} for r in unready if r.status == "abandoned"
        ],
    }
    try:
        report = evaluator.evaluate(record=False)
    except StoreError:
        raise  # the store is unusable for every flow
    except Exception as exc:  # noqa: BLE001 - one failing flow is shown, the others still previewed
        document["error"] = FlowFailure.of(exc).reason
        return document
    document["would_start"] = sorted(set(recorded) | set(report.ready) | set(report.scheduled))
    document["waiting"] = sorted(key for key in report.waiting if key not in recorded)
    document["waiting_progress"] = [
        {"partition_key": key, **_progress_fields(report.progress[key])}
        for key in document["waiting"]
        if key in report.progress
    ]
    document["rejected_events"] = [event_id for event_id, _ in report.rejected]
    return document


def _retrying(unready: Sequence[TriggerRequest], now: float) -> list[dict[str, Any]]:
    """Requests whose start failed and that wait out their backoff."""
    return [
        {
            "partition_key": r.partition_key,
            "start_failures": r.start_failures,
            "retry_at": dt.datetime.fromtimestamp(r.not_before or now, dt.UTC).isoformat(),
            "error": r.last_error,
        }
        for r in unready
        if r.status == "pending" and (r.not_before or 0) > now
    ]


def _progress_fields(progress: UpstreamProgress) -> dict[str, int]:
    return {
        "present": progress.present,
        "required": progress.required,
        "upstream_keys": progress.upstream_keys,
    }
