"""Jinja2 templates with autoescaping on everywhere: keys, ``extra``, errors and logs are user data."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.templating import Jinja2Templates
from starlette.responses import HTMLResponse

from partita.ui.security import CSRF_FIELD, access_of, csrf_token

__all__ = ["render", "templates"]

_TEMPLATES = Path(__file__).parent / "templates"

_environment = jinja2.Environment(
    loader=jinja2.FileSystemLoader(_TEMPLATES),
    autoescape=True,  # every template, whatever its name: nothing user-supplied is ever rendered raw
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
templates = Jinja2Templates(env=_environment)


def _when(value: dt.datetime | float | None) -> str:
    """A time as ``2026-08-08 10:00:00`` UTC (a POSIX timestamp or an aware datetime)."""
    if value is None:
        return "-"
    if isinstance(value, int | float):
        value = dt.datetime.fromtimestamp(value, dt.UTC)
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


_environment.filters["when"] = _when
_environment.filters["seconds"] = _seconds


def render(request: Request, name: str, context: dict[str, Any], *, status_code: int = 200) -> HTMLResponse:
    """``name`` rendered with what every page needs: whether mutations are shown, and the session's CSRF token."""
    settings = request.app.state.settings
    access = access_of(request)
    page = {
        "read_only": settings.read_only,
        "logged_in": access.authenticated,
        "can_change": access.authenticated and not settings.read_only,
        "csrf_field": CSRF_FIELD,
        "csrf": csrf_token(settings.token, access.session) if access.session else "",
        "path": request.url.path,
        **context,
    }
    return templates.TemplateResponse(request, name, page, status_code=status_code)
