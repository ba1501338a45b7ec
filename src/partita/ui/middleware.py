"""Pure ASGI middleware: security headers on every response, and a cap on request bodies.

The cap counts bytes as they arrive, so a body without a Content-Length (or
one that lies) is cut off too, before any handler has parsed it.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException

from partita.documents import document
from partita.ui.security import content_security_policy

__all__ = ["BodyLimit", "SecurityHeaders", "MAX_BODY_BYTES"]

#: The largest request body accepted (an event's ``extra`` is far smaller).
MAX_BODY_BYTES = 256 * 1024

Scope = dict[str, Any]


class SecurityHeaders:
    def __init__(self, app: Any) -> None:
        self.app = app
        self.headers = [
            (b"content-security-policy", content_security_policy().encode()),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
            (b"x-frame-options", b"DENY"),
        ]

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *self.headers]
            await send(message)

        await self.app(scope, receive, with_headers)


class BodyLimit:
    def __init__(self, app: Any, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", ())).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        received = 0

        async def counted() -> dict[str, Any]:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # Raised inside the handler reading the body: the error handlers answer 413.
                    raise HTTPException(status_code=413, detail=self._message())
            return message

        await self.app(scope, counted, send)

    def _message(self) -> str:
        return f"the request body is larger than {self.limit} bytes"

    async def _refuse(self, send: Any) -> None:
        message = self._message()
        body = json.dumps(document("error", {"error": {"type": "PayloadTooLarge", "message": message, "status": 413}}))
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body.encode()})
