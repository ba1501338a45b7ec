"""``/api/v1/plans``: plan first, then run exactly that plan; and ``/api/v1/runs/{id}/cancel``.

``POST /plans`` builds a plan through the library (nothing runs, nothing is
recorded) and keeps it under a random id; ``POST /plans/{id}/run`` starts
that very plan in this server process and answers once the run is recorded.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Request
from starlette.responses import JSONResponse

from partita.documents import document
from partita.documents.cancel import cancel_body, cancel_refusal, iso_time
from partita.documents.plan_text import plan_text
from partita.documents.runs import RunView
from partita.operations.cancellation import cancel_run
from partita.ui.api import PREFIX
from partita.ui.context import UiContext, ui_context
from partita.ui.launcher import Launcher, PlanBook, PlannedPlan
from partita.ui.plan_requests import PlanRequest
from partita.ui.security import require_reader, require_writer

__all__ = ["cancel", "launch", "make_plan", "plan_book", "planned_document", "router"]

router = APIRouter(prefix=PREFIX, tags=["plans"], dependencies=[Depends(require_reader)])

PlanId = Annotated[str, Path(min_length=8, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
RunId = Annotated[str, Path(min_length=1, max_length=200)]


def plan_book(request: Request) -> PlanBook:
    book: PlanBook = request.app.state.plans
    return book


def launcher(request: Request) -> Launcher:
    running: Launcher = request.app.state.launcher
    return running


def make_plan(body: PlanRequest, context: UiContext, book: PlanBook) -> PlannedPlan:
    """Plan ``body`` for the entry's flow and keep it for confirmation (the pages call this too)."""
    flow, plan = body.plan(context.flow, context.store)
    return book.keep(flow, plan, plan_text(plan))


def planned_document(planned: PlannedPlan) -> dict[str, Any]:
    """The plan as shown: its id, the ``partita.plan`` document, the text ``partita plan`` prints, if it can run."""
    return document(
        "planned",
        {
            "plan_id": planned.plan_id,
            "expires_at": iso_time(planned.expires_at),
            "runnable": not planned.empty,
            "plan": planned.plan.to_dict(),
            "text": planned.text,
        },
    )


def launch(plan_id: str, book: PlanBook, running: Launcher) -> str:
    """Run the kept plan once; the run id (the pages call this too)."""
    return book.take(plan_id, running.launch)


def cancel(run_id: str, context: UiContext) -> dict[str, Any]:
    """Ask the run's owner to cancel it (``runs cancel``'s semantics): 409 when nothing can cancel it."""
    request = cancel_run(run_id, store=context.store)
    refusal = cancel_refusal(request)
    if refusal is not None:
        raise HTTPException(409, refusal)
    return document("run-cancel", cancel_body(context.store.url, request, False, 0.0))


@router.post(
    "/plans",
    status_code=201,
    summary="Build a plan and keep it for confirmation (nothing runs)",
    dependencies=[Depends(require_writer)],
)
def create_plan(
    body: PlanRequest,
    context: Annotated[UiContext, Depends(ui_context)],
    book: Annotated[PlanBook, Depends(plan_book)],
) -> dict[str, Any]:
    return planned_document(make_plan(body, context, book))


@router.get("/plans/{plan_id}", summary="A kept plan, as it was shown")
def show_plan(plan_id: PlanId, book: Annotated[PlanBook, Depends(plan_book)]) -> dict[str, Any]:
    return planned_document(book.get(plan_id))


@router.post(
    "/plans/{plan_id}/run",
    status_code=202,
    summary="Run exactly the kept plan, once (partita.run of the started run)",
    dependencies=[Depends(require_writer)],
)
def run_plan(
    plan_id: PlanId,
    context: Annotated[UiContext, Depends(ui_context)],
    book: Annotated[PlanBook, Depends(plan_book)],
    running: Annotated[Launcher, Depends(launcher)],
) -> JSONResponse:
    run_id = launch(plan_id, book, running)
    body = document("run", RunView.read(context.store, run_id).body())
    return JSONResponse(body, status_code=202, headers={"Location": f"{PREFIX}/runs/{run_id}"})


@router.post(
    "/runs/{run_id}/cancel",
    summary="Ask the process running a run to cancel it (partita.run-cancel)",
    dependencies=[Depends(require_writer)],
)
def cancel_one(run_id: RunId, context: Annotated[UiContext, Depends(ui_context)]) -> dict[str, Any]:
    return cancel(run_id, context)
