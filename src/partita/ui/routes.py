"""Every router of the app, in the order they are matched: the API first, then the pages."""

from __future__ import annotations

from fastapi import APIRouter

from partita.ui.api import assets as assets_api
from partita.ui.api import events as events_api
from partita.ui.api import overview as overview_api
from partita.ui.api import plans as plans_api
from partita.ui.api import runs as runs_api
from partita.ui.api import stream as stream_api
from partita.ui.api import triggers as triggers_api
from partita.ui.pages import assets, events, overview, plans, publish, runs, session, triggers

__all__ = ["ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = tuple(
    module.router
    for module in (
        overview_api, assets_api, runs_api, events_api, triggers_api, plans_api, stream_api,
        session, overview, assets, runs, publish, events, triggers, plans,
    )
)
