"""The overview page: recent runs, the trigger daemons and their heartbeats, the entry's flows.

Every list is short and bounded, and the flows' pending counts are counts
of the store's trigger requests and waiting keys (an index each), not a
trigger evaluation: the triggers page previews what a pass would start.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from partita.automation.daemon import HEARTBEAT_SECONDS
from partita.documents.overview import daemon_state
from partita.documents.runs import run_summary
from partita.flow import Flow
from partita.store.triggers import DaemonRecord, TriggerStore
from partita.ui.asset_window import entry_flows
from partita.ui.context import UiContext, ui_context
from partita.ui.security import require_reader
from partita.ui.templating import render

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_reader)])

RECENT_RUNS = 15
RECENT_DAEMONS = 10


def _daemon(record: DaemonRecord, now: float) -> dict[str, Any]:
    age = max(now - record.heartbeat_at, 0.0)
    state = daemon_state(record, now)
    return {
        "daemon_id": record.daemon_id,
        "host": record.host,
        "pid": record.pid,
        "started_at": record.started_at,
        "heartbeat_at": record.heartbeat_at,
        "heartbeat_age": age,
        "stopped_at": record.stopped_at,
        "state": state,
    }


def _flow(flow: Flow, triggers: TriggerStore) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": flow.name, "targets": list(flow.targets), "trigger": None}
    if flow.trigger is None:
        return entry
    counts = triggers.request_counts(flow.name)
    entry.update(
        trigger=flow.trigger.describe()["kind"],
        paused=triggers.is_paused(flow.name),
        pending=counts.get("pending", 0),
        claimed=counts.get("claimed", 0),
        waiting=triggers.waiting_count(flow.name),
    )
    return entry


@router.get("/")
def overview_page(request: Request, context: Annotated[UiContext, Depends(ui_context)]) -> Response:
    store = context.store
    triggers = TriggerStore(store)
    now = time.time()
    return render(
        request,
        "overview.html",
        {
            "runs": [run_summary(run) for run in store.list_runs(limit=RECENT_RUNS)],
            "daemons": [_daemon(record, now) for record in triggers.daemons(RECENT_DAEMONS)],
            "flows": [_flow(flow, triggers) for flow in entry_flows(context)],
            "heartbeat_seconds": HEARTBEAT_SECONDS,
        },
    )
