"""The publish page: a form for one external event, posted to the code ``POST /api/v1/events`` runs, and its receipt."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Query, Request
from pydantic import ValidationError
from starlette.responses import Response

from partita.errors import PartitaError
from partita.events.extra import MAX_EXTRA_BYTES
from partita.ui.context import UiContext, ui_context
from partita.ui.errors import status_of
from partita.ui.publishing import EventForm, publish_form
from partita.ui.security import require_reader, require_writer
from partita.ui.templating import render

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_reader)])


def _page(
    request: Request, context: UiContext, values: dict[str, Any], *, problem: str | None = None,
    receipt: dict[str, Any] | None = None, status: int = 200,
) -> Response:  # fmt: skip
    assets = [definition.name for definition in context.flow.registry.definitions()]
    context_values = {"values": values, "assets": assets, "problem": problem, "receipt": receipt}
    return render(request, "publish.html", context_values, status_code=status)


@router.get("/events/publish")
def publish_page(
    request: Request,
    context: Annotated[UiContext, Depends(ui_context)],
    asset: Annotated[str | None, Query(max_length=1000)] = None,
) -> Response:
    values = dict.fromkeys(("asset", "partition_key", "partition_date", "extra", "dedupe_key"), "")
    return _page(request, context, {**values, "asset": asset or ""})


@router.post("/events/publish", dependencies=[Depends(require_writer)])
def publish_from_page(
    request: Request,
    context: Annotated[UiContext, Depends(ui_context)],
    asset: Annotated[str, Form(max_length=1000)] = "",
    partition_key: Annotated[str, Form(max_length=1000)] = "",
    partition_date: Annotated[str, Form(max_length=1000)] = "",
    extra: Annotated[str, Form(max_length=MAX_EXTRA_BYTES)] = "",
    dedupe_key: Annotated[str, Form(max_length=1000)] = "",
) -> Response:
    values = {
        "asset": asset, "partition_key": partition_key, "partition_date": partition_date, "extra": extra,
        "dedupe_key": dedupe_key,
    }  # fmt: skip
    try:
        receipt = publish_form(context, EventForm.of_form(values))
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, p['loc'])) or 'form'}: {p['msg']}" for p in error.errors())
        return _page(request, context, values, problem=f"invalid form: {problems}", status=422)
    except PartitaError as error:
        return _page(request, context, values, problem=str(error), status=status_of(error))
    return _page(request, context, values, receipt=receipt)
