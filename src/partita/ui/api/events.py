"""``/api/v1/events``: the event log a page at a time (``partita.events``), and publishing an external event.

``POST /api/v1/events`` takes the fields of ``partita events emit`` as one
JSON object and publishes through the same validation and dedupe rules,
against the entry's asset definitions. The body is parsed here, not by the
framework: its nesting is counted before it is parsed (a parser recurses
once per level), and NaN or Infinity are refused as they are on the CLI.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse

from partita.documents.emission import emission_body
from partita.documents.events import events_body
from partita.errors import ConfigurationError
from partita.events.emission import MAX_DEDUPE_KEY_LENGTH
from partita.events.external import parse_partition_date, publish_event
from partita.events.extra import MAX_EXTRA_DEPTH, json_text_depth
from partita.ui.api import PREFIX
from partita.ui.api.params import Storable
from partita.ui.api.responses import document_response
from partita.ui.context import UiContext, ui_context
from partita.ui.security import require_reader, require_writer

router = APIRouter(prefix=PREFIX, tags=["events"], dependencies=[Depends(require_reader)])

#: The most events one request returns.
MAX_EVENTS = 1_000


class EventBody(BaseModel):
    """An external event, as ``partita events emit`` takes it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    asset: str = Field(min_length=1, max_length=200, description="The asset the event is about.")
    partition_key: str | None = Field(
        default=None, max_length=1000, description="Canonical key text of the asset's definition (partitioned assets)."
    )
    partition_date: str | None = Field(
        default=None, max_length=64, description="ISO 8601 date-time with a UTC offset; needs partition_key."
    )
    extra: dict[str, Any] | None = Field(
        default=None, description="A JSON object kept with the event (64 KiB at most)."
    )
    dedupe_key: str | None = Field(
        default=None, max_length=MAX_DEDUPE_KEY_LENGTH, description="Makes repeating this publication idempotent."
    )


def _body(raw: bytes) -> EventBody:
    """The request body as an `EventBody`; every problem a 4xx naming the field and the rule."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigurationError("the request body must be UTF-8 JSON text") from None
    # The object holding extra is one level more than extra itself.
    if json_text_depth(text) > MAX_EXTRA_DEPTH + 1:
        raise ConfigurationError(f"extra nests deeper than {MAX_EXTRA_DEPTH} levels of objects and arrays")
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except ValueError:
        raise ConfigurationError("the request body must be one JSON object (NaN and Infinity are not JSON)") from None
    if not isinstance(value, dict):
        raise ConfigurationError("the request body must be a JSON object with the fields of `partita events emit`")
    try:
        return EventBody.model_validate(value)
    except ValidationError as error:
        raise RequestValidationError(
            [{**problem, "loc": ("body", *problem.get("loc", ()))} for problem in error.errors(include_url=False)]
        ) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


@router.get("/events", summary="Events of the store's log in id order, a page at a time (partita.events)")
def list_events(
    context: Annotated[UiContext, Depends(ui_context)],
    asset: Annotated[
        Storable | None, Query(min_length=1, max_length=200, description="Only this asset's events.")
    ] = None,
    partition_key: Annotated[
        Storable | None, Query(min_length=1, max_length=1000, description="Only events with this canonical key text.")
    ] = None,
    since: Annotated[
        int | None, Query(ge=0, le=2**62, description="Only events after this id (the next cursor).")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_EVENTS, description="At most this many events.")] = 100,
) -> JSONResponse:
    found = context.store.list_events(asset=asset, partition_key=partition_key, since=since, limit=limit)
    cursor = found[-1].id if len(found) == limit else None
    return document_response("events", {**events_body(context.store.url, found), "next": cursor})


@router.post(
    "/events",
    summary="Publish an external event; 201 with its receipt, 200 when the dedupe key repeats it (partita.emission)",
    dependencies=[Depends(require_writer)],
    status_code=201,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": EventBody.model_json_schema()}},
        }
    },
)
async def publish(request: Request, context: Annotated[UiContext, Depends(ui_context)]) -> JSONResponse:
    body = _body(await request.body())
    date = parse_partition_date(body.partition_date, "partition_date")
    receipt = await run_in_threadpool(  # a durable write: off the event loop
        publish_event,
        context.store,
        context.flow.registry,
        body.asset,
        partition_key=body.partition_key,
        partition_date=date,
        extra=body.extra,
        dedupe_key=body.dedupe_key,
    )
    return document_response("emission", emission_body(receipt), status_code=200 if receipt.duplicate else 201)
