"""``GET /api/v1/stream``: server-sent events telling pages what changed in the store.

Messages (the SSE ``event`` field) and their data:

- ``runs``: a run started, changed status or finished (a change counter of this server);
- ``run``: the run ``run_id`` or its attempts changed (the run's status);
- ``events``: a new event was stored, of ``asset`` when given (the newest event id);
- ``logs``: the run ``run_id`` has new log lines (the newest line id);
- ``attempts`` (with ``asset``): an attempt of a running run started or
  ended, or a run changed status: the asset's keys may have changed state
  (a change counter of this server; the run is not matched to the asset).

A client names in ``initial`` the messages it wants at once with their
current value, to catch up on what changed between its page's rendering and
its connection; one that reconnects (sending ``Last-Event-ID``, the number
of the last read it heard of) gets every message's current value. Others
hear only of changes. ``shown_events`` names the newest event id the
client's page was drawn with: the initial ``events`` message is then sent
only when a newer event exists (a page catches up without a second read). A comment line every
`HEARTBEAT_SECONDS` keeps proxies from closing an idle stream. A client
that goes away is unsubscribed at once; a server that shuts down ends every
stream first (`partita.ui.serving`), so it never waits for open pages.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from starlette.responses import StreamingResponse

from partita.ui.api import PREFIX
from partita.ui.changes import ChangeFeed, MessageKind, Subscription, subscribed
from partita.ui.context import UiContext, ui_context
from partita.ui.security import require_reader

__all__ = ["HEARTBEAT_SECONDS", "router", "sse_messages"]

router = APIRouter(prefix=PREFIX, tags=["stream"], dependencies=[Depends(require_reader)])

#: Seconds between keep-alive comments on a stream with nothing to say.
HEARTBEAT_SECONDS = 15.0
#: How long a disconnected browser waits before reconnecting (the SSE ``retry`` field), in milliseconds.
RECONNECT_MILLISECONDS = 2000
_NAMES = "|".join(kind.value for kind in MessageKind)
_INITIAL = f"^({_NAMES})(,({_NAMES}))*$"


def change_feed(request: Request) -> ChangeFeed:
    feed: ChangeFeed = request.app.state.changes
    return feed


async def sse_messages(subscription: Subscription, heartbeat: float = HEARTBEAT_SECONDS) -> AsyncIterator[str]:
    """The subscription's messages as SSE text, a comment when idle for ``heartbeat`` seconds; ends when it is closed."""
    yield f"retry: {RECONNECT_MILLISECONDS}\n\n"
    while not subscription.closed:
        try:
            await asyncio.wait_for(subscription.ready.wait(), heartbeat)
        except TimeoutError:
            yield ": keep-alive\n\n"
            continue
        subscription.ready.clear()
        batch, sequence = subscription.take()
        if batch:
            # The batch's last message carries the read's number: a reconnecting browser sends it back.
            *first, (kind, data) = batch
            yield (
                "".join(f"event: {k}\ndata: {d}\n\n" for k, d in first)
                + f"event: {kind}\nid: {sequence}\ndata: {data}\n\n"
            )


@router.get(
    "/stream",
    summary="Server-sent events: runs, run, events and logs messages when the store changes",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "A stream of server-sent events."}},
)
async def stream(
    context: Annotated[UiContext, Depends(ui_context)],
    feed: Annotated[ChangeFeed, Depends(change_feed)],
    run_id: Annotated[
        str | None, Query(min_length=1, max_length=64, description="Also send run and logs messages of this run.")
    ] = None,
    asset: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="Send events messages for this asset's events only."),
    ] = None,
    initial: Annotated[
        str | None,
        Query(
            max_length=40,
            pattern=_INITIAL,
            description="Messages to send at once with their current value (comma-separated names).",
        ),
    ] = None,
    shown_events: Annotated[
        int | None,
        Query(
            ge=0,
            le=2**63 - 1,
            description="The newest event id the client already shows: an initial events message equal to it is left out.",
        ),
    ] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=64)] = None,
) -> StreamingResponse:
    # A browser that reconnects missed what changed while it was away: it gets every message's current value.
    wanted = (
        frozenset(MessageKind)
        if last_event_id
        else frozenset(MessageKind(name) for name in (initial or "").split(",") if name)
    )
    if run_id is not None:
        # An unknown run is a 404 now, not a stream that never speaks; a unique prefix names its run.
        run_id = (await asyncio.to_thread(context.store.get_run, run_id)).run_id

    async def body() -> AsyncIterator[str]:
        with subscribed(feed, run_id=run_id, asset=asset, initial=wanted, shown_events=shown_events) as subscription:
            async for text in sse_messages(subscription):
                yield text

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(body(), media_type="text/event-stream", headers=headers)
