"""The triggers page: each triggered flow's pending preview, with Pause and Resume buttons."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import RedirectResponse, Response

from partita.ui.api.triggers import FlowName, pending, set_paused
from partita.ui.context import UiContext, ui_context
from partita.ui.security import require_reader, require_writer
from partita.ui.templating import render

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_reader)])


@router.get("/triggers")
def triggers_page(request: Request, context: Annotated[UiContext, Depends(ui_context)]) -> Response:
    return render(request, "triggers.html", {"pending": pending(context)})


@router.post("/triggers/{name}/pause", dependencies=[Depends(require_writer)])
def pause_from_page(name: FlowName, context: Annotated[UiContext, Depends(ui_context)]) -> Response:
    set_paused(context, name, True)
    return RedirectResponse("/triggers", status_code=303)


@router.post("/triggers/{name}/resume", dependencies=[Depends(require_writer)])
def resume_from_page(name: FlowName, context: Annotated[UiContext, Depends(ui_context)]) -> Response:
    set_paused(context, name, False)
    return RedirectResponse("/triggers", status_code=303)
