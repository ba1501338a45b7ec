"""The ASGI app: routers for the JSON API and the pages, static files, error handlers, middleware.

`create_app` loads the entry and opens the store before it returns, so a bad
entry or store fails ``partita ui`` at start, not at the first request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from partita.config import load_project_config
from partita.ui.changes import ChangeFeed
from partita.ui.context import UiContext
from partita.ui.errors import install_error_handlers
from partita.ui.launcher import SHUTDOWN_SECONDS, Launcher, PlanBook
from partita.ui.middleware import BodyLimit, SecurityHeaders
from partita.ui.routes import ROUTERS
from partita.ui.settings import UiSettings
from partita.version import __version__

__all__ = ["create_app"]

_STATIC = Path(__file__).parent / "static"


def create_app(settings: UiSettings, *, context: UiContext | None = None) -> FastAPI:
    """The UI server for ``settings`` (``context`` is built from them unless given)."""
    shared = context if context is not None else UiContext.load(settings)
    launcher = Launcher(shared.store, record_partition_keys=load_project_config().record_partition_keys)
    changes = ChangeFeed(shared.store)  # one poller of the store for every live page

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            changes.close()  # end the event streams first: nothing waits for open pages
            # Runs launched here are cancelled as Ctrl-C would, and recorded so, before the store closes.
            await asyncio.to_thread(launcher.shutdown, SHUTDOWN_SECONDS)
            shared.close()

    app = FastAPI(
        title="partita",
        version=__version__,
        summary="Partitioned data assets: runs, partition status, events, triggers and plan-first launches.",
        openapi_url="/api/v1/openapi.json",
        docs_url=None,  # the interactive docs page loads scripts from a CDN, which our CSP refuses
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.context = shared
    app.state.plans = PlanBook()
    app.state.launcher = launcher
    app.state.changes = changes
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=_STATIC), name="static")
    app.add_middleware(BodyLimit)
    app.add_middleware(SecurityHeaders)
    return app
