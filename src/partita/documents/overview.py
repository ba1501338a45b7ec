"""The ``partita.overview`` document: recent runs, the trigger daemons, and the entry's flows.

Cheap by design (the overview page asks often): a page of runs, the
daemons' registrations, and per flow one pause flag and its open request
counts as the store holds them. No trigger is evaluated: `partita.pending`
is the preview that does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from partita.automation.daemon import HEARTBEAT_SECONDS
from partita.documents.runs import run_summary
from partita.flow import Flow
from partita.store import SqlStore
from partita.store.triggers import DaemonRecord, TriggerStore

__all__ = ["DAEMON_STALE_SECONDS", "daemon_state", "overview_body"]

#: A daemon whose last heartbeat is older than this (three missed beats) reads ``silent``: it may be gone.
#: The words are the overview page's.
DAEMON_STALE_SECONDS = 3 * HEARTBEAT_SECONDS
#: The daemons listed (latest heartbeat first): a store shared for months keeps every registration.
MAX_DAEMONS = 20


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else dt.datetime.fromtimestamp(timestamp, dt.UTC).isoformat()


def daemon_state(record: DaemonRecord, now: float) -> str:
    """``stopped``, ``silent`` (no heartbeat for three beats) or ``serving``: the words the overview page shows too."""
    if record.stopped_at is not None:
        return "stopped"
    return "silent" if now - record.heartbeat_at > DAEMON_STALE_SECONDS else "serving"


def _daemon(record: DaemonRecord, now: float) -> dict[str, Any]:
    state = daemon_state(record, now)
    return {
        "daemon_id": record.daemon_id,
        "host": record.host,
        "pid": record.pid,
        "state": state,
        "started_at": _iso(record.started_at),
        "heartbeat_at": _iso(record.heartbeat_at),
        "stopped_at": _iso(record.stopped_at),
    }


def _flow(flow: Flow, paused: bool, counts: dict[str, int]) -> dict[str, Any]:
    trigger = None if flow.trigger is None else flow.trigger.describe()
    return {
        "name": flow.name,
        "targets": list(flow.targets),
        "trigger_kind": None if trigger is None else trigger["kind"],
        "trigger": trigger,
        "paused": paused,
        "requests": {status: counts.get(status, 0) for status in ("pending", "claimed", "abandoned", "waiting")},
    }


def _open_requests(triggers: TriggerStore, flow: str) -> dict[str, int]:
    """The flow's requests per status and its waiting keys, counted over indexes (nothing is evaluated)."""
    return {**triggers.request_counts(flow), "waiting": triggers.waiting_count(flow)}


def overview_body(store: SqlStore, flows: Sequence[Flow], *, run_limit: int, now: float) -> dict[str, Any]:
    """The body for ``flows`` (each name once, the first flow of a name kept) over ``store``."""
    by_name: dict[str, Flow] = {}
    for flow in flows:
        by_name.setdefault(flow.name, flow)
    unique = list(by_name.values())
    triggers = TriggerStore(store)
    counts = {flow.name: _open_requests(triggers, flow.name) for flow in unique if flow.trigger is not None}
    return {
        "store": store.url,
        "runs": [run_summary(run) for run in store.list_runs(limit=run_limit)],
        "daemons": [_daemon(record, now) for record in triggers.daemons(MAX_DAEMONS)],
        "flows": [_flow(flow, triggers.is_paused(flow.name), counts.get(flow.name, {})) for flow in unique],
    }
