"""``/api/v1/overview``: recent runs, the trigger daemons and the entry's flows (``partita.overview``)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from starlette.responses import JSONResponse

from partita.documents.overview import overview_body
from partita.ui.api import PREFIX
from partita.ui.api.responses import document_response
from partita.ui.context import UiContext, ui_context
from partita.ui.security import require_reader

router = APIRouter(prefix=PREFIX, tags=["overview"], dependencies=[Depends(require_reader)])


@router.get(
    "/overview",
    summary="Recent runs, daemons with their last heartbeat, flows with trigger, pause state and open requests",
)
def overview(
    context: Annotated[UiContext, Depends(ui_context)],
    runs: Annotated[int, Query(ge=1, le=100, description="How many recent runs to list.")] = 10,
) -> JSONResponse:
    flows = [context.flow, *context.trigger_flows]
    return document_response("overview", overview_body(context.store, flows, run_limit=runs, now=time.time()))
