"""The runs page (filters) and a run's page."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from partita.documents.runs import run_summary
from partita.store.protocol import RunFilter
from partita.ui.api.runs import MAX_RUNS, RunStatus, run_filter
from partita.ui.context import UiContext, ui_context
from partita.ui.security import require_reader
from partita.ui.templating import render

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_reader)])


@router.get("/runs")
def runs_page(
    request: Request,
    context: Annotated[UiContext, Depends(ui_context)],
    where: Annotated[RunFilter, Depends(run_filter)],
    status: RunStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_RUNS)] = 50,
) -> Response:
    found = context.store.list_runs(limit=limit, status=status, where=where)
    return render(request, "runs.html", {"runs": [run_summary(run) for run in found], "where": where, "status": status})
