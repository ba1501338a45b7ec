"""Serving the app with uvicorn, ending live streams before uvicorn waits for open connections.

uvicorn shuts down by waiting until every connection has finished its
response; a page's event stream never finishes by itself, so a plain
``uvicorn.run`` would wait for the last browser tab to close. `UiServer`
closes the app's change feed first, which ends every stream at once.
"""

from __future__ import annotations

import socket

import uvicorn

__all__ = ["UiServer"]


class UiServer(uvicorn.Server):
    """A uvicorn server that ends the app's event streams when it starts shutting down."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        feed = getattr(getattr(self.config.app, "state", None), "changes", None)
        if feed is not None:
            feed.close()
        await super().shutdown(sockets)

