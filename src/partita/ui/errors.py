"""Every failure as a clear 4xx or 5xx: a JSON error under ``/api``, an error page elsewhere, never a traceback.

The JSON shape is the CLI's error document (``partita.error``), with the
HTTP status in place of the exit code.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, RedirectResponse, Response

from partita.documents import document
from partita.errors import (
    ConfigurationError,
    DefinitionError,
    EmissionError,
    EntryLoadError,
    PartitaError,
    PlanningError,
    SelectionError,
    StoreError,
    UnknownPartitionError,
    UnknownRunError,
)

__all__ = ["install_error_handlers", "status_of"]

_log = logging.getLogger("partita.ui")

#: The HTTP status of each error the library raises; anything else a PartitaError is a bad request.
_STATUS: tuple[tuple[type[PartitaError], int], ...] = (
    (UnknownRunError, 404),
    (UnknownPartitionError, 404),
    (StoreError, 503),
    (EntryLoadError, 500),
    (EmissionError, 422),
    (SelectionError, 422),
    (PlanningError, 422),
    (ConfigurationError, 400),
    (DefinitionError, 400),
)


def status_of(error: PartitaError) -> int:
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 400


def _error_body(kind: str, message: str, status: int, detail: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "message": message, "status": status}
    if detail is not None:
        error["detail"] = detail
    return document("error", {"error": error})


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or "text/html" not in request.headers.get("accept", "")


def _respond(request: Request, kind: str, message: str, status: int, detail: Any = None) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if _wants_json(request):
        return JSONResponse(_error_body(kind, message, status, detail), status_code=status, headers=headers)
    if status == 401 and request.method == "GET":
        # A browser that must log in first goes to the login form, and comes back after.
        return RedirectResponse(f"/login?{urlencode({'next': request.url.path})}", status_code=303)
    from partita.ui.templating import render  # the templates need the app's state: import at first use

    page = render(request, "error.html", {"status": status, "kind": kind, "message": message}, status_code=status)
    if headers:
        page.headers.update(headers)
    return page


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(PartitaError)
    async def library_error(request: Request, error: PartitaError) -> Response:
        return _respond(request, type(error).__name__, str(error), status_of(error))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> Response:
        problems = [
            {"field": ".".join(str(part) for part in problem.get("loc", ())), "rule": problem.get("msg", "")}
            for problem in error.errors()
        ]
        fields = "; ".join(f"{p['field']}: {p['rule']}" for p in problems)
        return _respond(request, "RequestValidationError", f"invalid request: {fields}", 422, problems)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: HTTPException) -> Response:
        return _respond(request, "HTTPError", str(error.detail), error.status_code)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> Response:
        _log.exception("unexpected error serving %s", request.url.path)
        return _respond(request, "InternalError", f"unexpected {type(error).__name__}; the server log has details", 500)
