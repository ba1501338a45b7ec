"""``/api/v1/runs``: recorded runs (``partita.runs``), one run (``partita.run``), its attempts and its logs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query

from partita.definitions.launch import parse_tag
from partita.documents import document
from partita.documents.runs import RunView, run_summary
from partita.store.protocol import RunFilter
from partita.ui.api import PREFIX
from partita.ui.context import UiContext, ui_context
from partita.ui.security import require_reader

router = APIRouter(prefix=PREFIX, tags=["runs"], dependencies=[Depends(require_reader)])

RunStatus = Literal["running", "interrupted", "success", "failed", "cancelled"]
#: The most runs one request returns.
MAX_RUNS = 500


def run_filter(
    flow: Annotated[str | None, Query(max_length=200, description="Only runs of this flow.")] = None,
    tag: Annotated[list[str] | None, Query(description="KEY=VALUE; repeat for runs carrying every tag.")] = None,
) -> RunFilter:
    """The filters shared by the runs API and the runs page; a malformed tag is a 400 naming the rule."""
    tags = dict(parse_tag(text, "tag") for text in tag or ())
    return RunFilter(flow_name=flow or None, tags=tuple(sorted(tags.items())))


@router.get("/runs", summary="Recent runs, newest first (partita.runs)")
def list_runs(
    context: Annotated[UiContext, Depends(ui_context)],
    where: Annotated[RunFilter, Depends(run_filter)],
    status: RunStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_RUNS)] = 50,
) -> dict[str, Any]:
    found = context.store.list_runs(limit=limit, status=status, where=where)
    return document("runs", {"store": context.store.url, "runs": [run_summary(run) for run in found]})


@router.get("/runs/{run_id}", summary="One run: every task's outcome (partita.run)")
def show_run(run_id: str, context: Annotated[UiContext, Depends(ui_context)]) -> dict[str, Any]:
    return document("run", RunView.read(context.store, run_id).body())
