"""The events page: the store's events newest first, filtered by asset and key, with new ones appearing live.

Its live part is the fragment ``/events/feed`` (same filters), re-read when
the stream says a new event was stored (``events``; only the chosen asset's
when one is chosen). Older events are pages of their own (``before``, an
event id), which do not update.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from partita.events.model import AssetEvent
from partita.store.change_markers import newest_event_id, newest_events
from partita.ui.context import UiContext, ui_context
from partita.ui.security import require_reader
from partita.ui.templating import render

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_reader)])

#: The most events one page shows.
MAX_EVENTS = 500
_KEY_NEEDS_ASSET = "partition_key filters the events of one asset: choose an asset too"


@dataclass(frozen=True, slots=True)
class EventRow:
    event: AssetEvent
    #: ``extra`` as JSON text (escaped where it is rendered, like every other value).
    extra: str


@dataclass(frozen=True, slots=True)
class EventsQuery:
    asset: str | None
    partition_key: str | None
    limit: int
    before: int | None

    def params(self, **changed: Any) -> str:
        values = {"asset": self.asset, "partition_key": self.partition_key, "limit": self.limit, "before": self.before}
        values.update(changed)
        return urlencode({name: value for name, value in values.items() if value not in (None, "")})

    @property
    def problem(self) -> str | None:
        return _KEY_NEEDS_ASSET if self.partition_key is not None and self.asset is None else None


def events_query(
    asset: Annotated[str | None, Query(max_length=200)] = None,
    partition_key: Annotated[str | None, Query(max_length=1000)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_EVENTS)] = 50,
    before: Annotated[int | None, Query(ge=1, description="Only events with a smaller id (older).")] = None,
) -> EventsQuery:
    return EventsQuery(asset or None, partition_key or None, limit, before)


def _feed(context: UiContext, query: EventsQuery) -> dict[str, Any]:
    found: list[AssetEvent] = []
    if query.problem is None:
        found = newest_events(
            context.store,
            asset=query.asset,
            partition_key=query.partition_key,
            before=query.before,
            limit=query.limit + 1,
        )
    shown = found[: query.limit]
    older = "/events?" + query.params(before=shown[-1].id) if len(found) > query.limit else None
    rows = [EventRow(event, json.dumps(event.extra, sort_keys=True, ensure_ascii=False)) for event in shown]
    return {"rows": rows, "older": older, "filtered": query.asset is not None or query.partition_key is not None}


def _asset_names(context: UiContext) -> list[str]:
    names = {definition.name for definition in context.flow.registry.definitions()}
    for flow in context.trigger_flows:
        names.update(definition.name for definition in flow.registry.definitions())
    return sorted(names)


@router.get("/events")
def events_page(
    request: Request,
    context: Annotated[UiContext, Depends(ui_context)],
    query: Annotated[EventsQuery, Depends(events_query)],
) -> Response:
    # The newest event id, read before the feed: the stream's first message says only whether a newer one came.
    newest = newest_event_id(context.store, query.asset)
    fields = {"asset": query.asset} if query.asset else {}
    stream = "/api/v1/stream?" + urlencode({**fields, "initial": "events", "shown_events": newest})
    page = {
        **_feed(context, query),
        "assets": _asset_names(context),
        "asset": query.asset,
        "partition_key": query.partition_key,
        "limit": query.limit,
        "before": query.before,
        "problem": query.problem,
        "live": query.before is None and query.problem is None,
        "stream_url": stream,
        "feed_url": "/events/feed?" + query.params(),
        "newest_url": "/events?" + query.params(before=None),
    }
    return render(request, "events.html", page, status_code=400 if query.problem else 200)


@router.get("/events/feed")
def events_feed(
    request: Request,
    context: Annotated[UiContext, Depends(ui_context)],
    query: Annotated[EventsQuery, Depends(events_query)],
) -> Response:
    return render(request, "events_feed.html", _feed(context, query), status_code=400 if query.problem else 200)
