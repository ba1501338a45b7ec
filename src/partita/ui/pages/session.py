"""Logging in with the token (a session cookie for the browser), and logging out."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Form, Request
from starlette.responses import RedirectResponse, Response

from partita.ui.security import SESSION_COOKIE, new_session
from partita.ui.templating import render

router = APIRouter(include_in_schema=False)


def _safe_next(target: str | None) -> str:
    """Only a path of this server: never an open redirect to another site."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


@router.get("/login")
def login_page(request: Request, next: str | None = None) -> Response:
    return render(request, "login.html", {"next": _safe_next(next), "problem": None})


@router.post("/login")
def login(request: Request, token: Annotated[str, Form(max_length=1000)], next: Annotated[str, Form()] = "/") -> Response:
    settings = request.app.state.settings
    if not hmac.compare_digest(token.strip().encode(), settings.token.encode()):
        problem = "That is not this server's token. It was printed when partita ui started."
        return render(request, "login.html", {"next": _safe_next(next), "problem": problem}, status_code=401)
    response = RedirectResponse(_safe_next(next), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        new_session(settings.token),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/logout")
def logout() -> Response:
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
