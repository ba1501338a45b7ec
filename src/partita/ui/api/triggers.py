"""``/api/v1/pending`` (what the triggers would start now) and pausing or resuming a triggered flow.

The preview records nothing (``plan --pending``); pause and resume change
only the flow's state in the store, and answer with the state read back
(``partita.flow-state``, as ``partita flows pause --json`` prints it).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path

from partita.documents import document
from partita.documents.pending import pending_body
from partita.flow import Flow
from partita.store.triggers import TriggerStore
from partita.ui.api import PREFIX
from partita.ui.context import UiContext, ui_context
from partita.ui.security import require_reader, require_writer

__all__ = ["pending", "router", "set_paused", "triggered_flow"]

router = APIRouter(prefix=PREFIX, tags=["triggers"], dependencies=[Depends(require_reader)])

FlowName = Annotated[str, Path(min_length=1, max_length=200)]


def triggered_flow(context: UiContext, name: str) -> Flow:
    """The entry's triggered flow ``name``; 404 for any other name (nothing is created to find out)."""
    for flow in context.trigger_flows:
        if flow.name == name:
            return flow
    known = ", ".join(flow.name for flow in context.trigger_flows) or "none"
    raise HTTPException(404, f"the entry defines no triggered flow of this name; its triggered flows: {known}")


def pending(context: UiContext) -> dict[str, Any]:
    """The ``partita.pending`` document of the entry's triggered flows."""
    return document("pending", pending_body(context.trigger_flows, context.store, time.time()))


def set_paused(context: UiContext, name: str, paused: bool) -> dict[str, Any]:
    """Pause or resume ``name``; the ``partita.flow-state`` document of the state read back."""
    flow = triggered_flow(context, name)
    triggers = TriggerStore(context.store)
    triggers.set_paused(flow.name, paused, time.time())
    return document("flow-state", {"flow": flow.name, "paused": triggers.is_paused(flow.name)})


@router.get("/pending", summary="What each triggered flow would start now, and what it waits for (partita.pending)")
def get_pending(context: Annotated[UiContext, Depends(ui_context)]) -> dict[str, Any]:
    return pending(context)


@router.post(
    "/flows/{name}/pause",
    summary="Pause a triggered flow: it starts nothing until resumed (partita.flow-state)",
    dependencies=[Depends(require_writer)],
)
def pause_flow(name: FlowName, context: Annotated[UiContext, Depends(ui_context)]) -> dict[str, Any]:
    return set_paused(context, name, True)


@router.post(
    "/flows/{name}/resume",
    summary="Resume a paused flow: the events it missed are handled (partita.flow-state)",
    dependencies=[Depends(require_writer)],
)
def resume_flow(name: FlowName, context: Annotated[UiContext, Depends(ui_context)]) -> dict[str, Any]:
    return set_paused(context, name, False)
