"""The runs page (filters, a page of older runs) and a run's page (header, tasks, failures, timeline, live logs).

Each page's live part is also a fragment route, re-read when the stream
(``/api/v1/stream``) says the store changed: ``/runs/table`` on ``runs``,
``/runs/{id}/summary`` and ``/runs/{id}/actions`` (only once the status
changed) on ``run``, ``/runs/{id}/logs?after=ID`` on ``logs`` (only the
lines after the newest one shown, so none repeats).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from partita.definitions.launch import LaunchKind
from partita.documents.runs import run_summary
from partita.store.protocol import RunFilter
from partita.ui.api.runs import MAX_RUNS, RunStatus, run_filter
from partita.ui.context import UiContext, ui_context
from partita.ui.run_view import LOG_BATCH, RunPage, RunPages, log_lines_after, log_tail
from partita.ui.security import require_reader
from partita.ui.templating import render

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_reader)])

_STATUSES = ("running", "interrupted", "success", "failed", "cancelled")


@dataclasses.dataclass(frozen=True, slots=True)
class _RunsQuery:
    """The runs page's filters, as the page and its live table read them."""

    where: RunFilter
    status: RunStatus | None
    launched_by: LaunchKind | None
    limit: int
    #: The last run of the previous page (a run id): this page lists the runs after it.
    before: str | None
    tags: tuple[str, ...]

    def params(self, **changed: Any) -> str:
        """The query string of these filters (``changed`` replacing some), for links and the live table."""
        values: dict[str, Any] = {
            "flow": self.where.flow_name,
            "status": self.status,
            "launched_by": None if self.launched_by is None else self.launched_by.value,
            "tag": list(self.tags),
            "limit": self.limit,
            "before": self.before,
            **changed,
        }
        return urlencode({name: value for name, value in values.items() if value not in (None, [])}, doseq=True)


def runs_query(
    where: Annotated[RunFilter, Depends(run_filter)],
    status: RunStatus | None = None,
    launched_by: Annotated[LaunchKind | None, Query(description="How the runs were launched.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_RUNS)] = 50,
    before: Annotated[
        str | None, Query(min_length=1, max_length=64, description="The last run of the previous page (a run id).")
    ] = None,
    tag: Annotated[list[str] | None, Query()] = None,
) -> _RunsQuery:
    where = dataclasses.replace(
        where, launched_by=None if launched_by is None else launched_by.value, before_run_id=before
    )
    return _RunsQuery(where, status, launched_by, limit, before, tuple(text for text in tag or () if text))


def _runs_context(context: UiContext, query: _RunsQuery) -> dict[str, Any]:
    found = context.store.list_runs(limit=query.limit + 1, status=query.status, where=query.where)
    shown = found[: query.limit]
    older = None
    if len(found) > query.limit:
        older = "/runs?" + query.params(before=shown[-1].run_id)
    return {
        "runs": [run_summary(run) for run in shown],
        "query": query,
        "older": older,
        "table_url": "/runs/table?" + query.params(),
    }


@router.get("/runs")
def runs_page(
    request: Request,
    context: Annotated[UiContext, Depends(ui_context)],
    query: Annotated[_RunsQuery, Depends(runs_query)],
) -> Response:
    flows = sorted({context.flow.name, *(flow.name for flow in context.trigger_flows)} - {None})  # type: ignore[arg-type]
    page = {
        **_runs_context(context, query),
        "flows": flows,
        "statuses": _STATUSES,
        "launch_kinds": [kind.value for kind in LaunchKind],
        "live": query.before is None,
    }
    return render(request, "runs.html", page)


@router.get("/runs/table")
def runs_table(
    request: Request,
    context: Annotated[UiContext, Depends(ui_context)],
    query: Annotated[_RunsQuery, Depends(runs_query)],
) -> Response:
    return render(request, "runs_table.html", _runs_context(context, query))


def _run_page(request: Request, context: UiContext, run_id: str) -> RunPage:
    """The run's page, kept per server while it cannot have changed (`RunPages`)."""
    state = request.app.state
    pages = getattr(state, "run_pages", None)
    if pages is None:
        pages = state.run_pages = RunPages()
    return pages.read(context.store, run_id)


@router.get("/runs/{run_id}")
def run_page(request: Request, run_id: str, context: Annotated[UiContext, Depends(ui_context)]) -> Response:
    page = _run_page(request, context, run_id)
    lines = log_tail(context.store, page.run.run_id)
    return render(request, "run.html", {"page": page, "run": page.summary, "lines": lines, **_cursor(lines, 0)})


@router.get("/runs/{run_id}/summary")
def run_summary_fragment(request: Request, run_id: str, context: Annotated[UiContext, Depends(ui_context)]) -> Response:
    page = _run_page(request, context, run_id)
    return render(request, "run_summary.html", {"page": page, "run": page.summary})


@router.get("/runs/{run_id}/actions")
def run_actions_fragment(
    request: Request,
    run_id: str,
    context: Annotated[UiContext, Depends(ui_context)],
    shown: Annotated[str, Query(max_length=20, description="The run status the page's actions were drawn for.")] = "",
) -> Response:
    """The run's actions when its status is no longer ``shown``; 204 (nothing to redraw) while it is."""
    page = _run_page(request, context, run_id)
    if page.run.status == shown:
        return Response(status_code=204)
    return render(request, "run_actions_live.html", {"page": page, "run": page.summary})


@router.get("/runs/{run_id}/logs")
def run_logs_fragment(
    request: Request,
    run_id: str,
    context: Annotated[UiContext, Depends(ui_context)],
    after: Annotated[int, Query(ge=0, description="Only lines written after the line with this id.")] = 0,
) -> Response:
    lines = log_lines_after(context.store, run_id, after, LOG_BATCH)
    response = render(request, "run_log_lines.html", {"lines": lines, "oob": True, **_cursor(lines, after)})
    if len(lines) == LOG_BATCH:
        # More lines wait than one batch holds: the page asks again at once, with the cursor this moved.
        response.headers["HX-Trigger-After-Settle"] = "partita-more-logs"
    return response


def _cursor(lines: list[Any], after: int) -> dict[str, int]:
    return {"after": lines[-1].id if lines else after}
