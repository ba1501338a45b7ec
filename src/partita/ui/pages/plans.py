"""Plan-first pages: the plan form, the plan page with its confirm button, and cancelling a run.

Every action posts a form (with the session's CSRF token) to the same code
the API runs, then redirects: the plan form to the plan page, the confirm
button to the run's page, cancel back to the run's page.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Query, Request
from pydantic import ValidationError
from starlette.responses import RedirectResponse, Response

from partita.errors import PartitaError
from partita.ui.api.plans import PlanId, RunId, cancel, launch, launcher, make_plan, plan_book
from partita.ui.context import UiContext, ui_context
from partita.ui.errors import status_of
from partita.ui.launcher import Launcher, PlanBook
from partita.ui.plan_requests import PlanRequest
from partita.ui.security import require_reader, require_writer
from partita.ui.templating import render

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_reader)])

#: How the form selects keys: as given, only the missing ones, only the failed ones, or a run's failed keys.
MODES = ("selection", "missing", "failed", "failed_from")
_Text = Annotated[str, Form(max_length=1000)]


def _form_values(**given: Any) -> dict[str, Any]:
    values = {
        "targets": [],
        "keys": "",
        "start": "",
        "end": "",
        "mode": "selection",
        "failed_from": "",
        "max_concurrency": "",
    }
    values.update({name: value for name, value in given.items() if value is not None})
    if values["mode"] not in MODES:
        values["mode"] = "selection"
    return values


def _form_page(
    request: Request, context: UiContext, values: dict[str, Any], problem: str | None, status: int = 200
) -> Response:
    assets = [definition.name for definition in context.flow.registry.definitions()]
    return render(
        request,
        "plans_new.html",
        {"values": values, "problem": problem, "assets": assets, "flow_targets": list(context.flow.targets)},
        status_code=status,
    )


@router.get("/plans/new")
def new_plan(
    request: Request,
    context: Annotated[UiContext, Depends(ui_context)],
    target: Annotated[list[str] | None, Query(max_length=100)] = None,
    partition_key: Annotated[list[str] | None, Query(max_length=1000)] = None,
    start: Annotated[str | None, Query(max_length=1000)] = None,
    end: Annotated[str | None, Query(max_length=1000)] = None,
    mode: Annotated[str | None, Query(max_length=20)] = None,
    failed_from: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """The plan form, prefilled from the query (the asset page's and the run page's links)."""
    if failed_from and mode is None:
        mode = "failed_from"
    values = _form_values(
        targets=target or [],
        keys="\n".join(partition_key or ()),
        start=start,
        end=end,
        mode=mode,
        failed_from=failed_from,
    )
    return _form_page(request, context, values, None)


def _plan_request(values: dict[str, Any]) -> PlanRequest:
    """The form's fields as the API's body: one rule set for both."""
    mode = values["mode"]
    keys = [line.strip() for line in values["keys"].splitlines() if line.strip()]
    bounds = (values["start"].strip(), values["end"].strip())
    body: dict[str, Any] = {"targets": values["targets"], "missing": mode == "missing", "failed": mode == "failed"}
    if mode == "failed_from":
        body["failed_from"] = values["failed_from"].strip() or None
    else:
        if keys:
            body["partition_keys"] = keys
        if any(bounds):
            body["partition_range"] = bounds
    if values["max_concurrency"].strip():
        body["max_concurrency"] = values["max_concurrency"].strip()
    return PlanRequest(**body)


@router.post("/plans/new", dependencies=[Depends(require_writer)])
def submit_plan(
    request: Request,
    context: Annotated[UiContext, Depends(ui_context)],
    book: Annotated[PlanBook, Depends(plan_book)],
    targets: Annotated[list[str] | None, Form(max_length=100)] = None,
    keys: Annotated[str, Form(max_length=100_000)] = "",
    start: _Text = "",
    end: _Text = "",
    mode: Annotated[str, Form(max_length=20)] = "selection",
    failed_from: _Text = "",
    max_concurrency: Annotated[str, Form(max_length=10)] = "",
) -> Response:
    values = _form_values(
        targets=targets or [], keys=keys, start=start, end=end, mode=mode, failed_from=failed_from,
        max_concurrency=max_concurrency,
    )  # fmt: skip
    try:
        planned = make_plan(_plan_request(values), context, book)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, p['loc'])) or 'form'}: {p['msg']}" for p in error.errors())
        return _form_page(request, context, values, f"invalid form: {problems}", 422)
    except PartitaError as error:
        return _form_page(request, context, values, str(error), status_of(error))
    return RedirectResponse(f"/plans/{planned.plan_id}", status_code=303)


@router.get("/plans/{plan_id}")
def plan_page(request: Request, plan_id: PlanId, book: Annotated[PlanBook, Depends(plan_book)]) -> Response:
    planned = book.get(plan_id)
    plan = planned.plan
    summary = {
        "targets": list(plan.targets),
        "assets": len(plan.tasks),
        "attempts": plan.attempt_count if plan.attempt_count is not None else f"{plan.known_attempt_count} + fan-out",
        "keys": plan.key_count,
        "selection": plan.selection_kind.value,
        "backfill": None if plan.backfill is None else plan.backfill.describe(),
    }
    return render(request, "plan.html", {"planned": planned, "summary": summary})


@router.post("/plans/{plan_id}/run", dependencies=[Depends(require_writer)])
def confirm_plan(
    plan_id: PlanId,
    book: Annotated[PlanBook, Depends(plan_book)],
    running: Annotated[Launcher, Depends(launcher)],
) -> Response:
    run_id = launch(plan_id, book, running)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.post("/runs/{run_id}/cancel", dependencies=[Depends(require_writer)])
def cancel_from_page(run_id: RunId, context: Annotated[UiContext, Depends(ui_context)]) -> Response:
    document = cancel(run_id, context)
    return RedirectResponse(f"/runs/{document['run_id']}", status_code=303)
