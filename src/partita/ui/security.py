"""Who may read and who may change things: the bearer token, browser sessions, CSRF, and response headers.

Sessions carry no server state: the cookie is ``nonce.signature`` signed with
the token (HMAC-SHA256), so a new token ends every session and several
servers sharing a token accept each other's logins. A form or an htmx request
proves it came from a page of ours with a CSRF token derived from the
session (``csrf`` form field or ``X-CSRF-Token`` header); the cookie is also
``SameSite=Strict`` and ``HttpOnly``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from fastapi import HTTPException, Request

from partita.ui.settings import UiSettings

__all__ = [
    "CSRF_FIELD",
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "Access",
    "access_of",
    "content_security_policy",
    "csrf_token",
    "new_session",
    "require_reader",
    "require_writer",
    "valid_session",
]

SESSION_COOKIE = "partita_session"
_WRONG_TOKEN = "the bearer token is not this server's token"
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"


def _sign(token: str, purpose: str, value: str) -> str:
    return hmac.new(token.encode(), f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


def new_session(token: str) -> str:
    """A fresh session cookie value for someone who just gave the token."""
    nonce = secrets.token_urlsafe(16)
    return f"{nonce}.{_sign(token, 'session', nonce)}"


def valid_session(token: str, value: str | None) -> bool:
    if not value or "." not in value:
        return False
    nonce, _, signature = value.partition(".")
    return hmac.compare_digest(signature, _sign(token, "session", nonce))


def csrf_token(token: str, session: str) -> str:
    """The CSRF token of one session: forms and htmx requests of that session send it back."""
    return _sign(token, "csrf", session)


@dataclass(frozen=True)
class Access:
    """What one request may do."""

    #: It carried a valid bearer token or session.
    authenticated: bool
    #: How: ``bearer`` (the API), ``session`` (a logged-in browser), or None.
    means: str | None
    #: The session's cookie value (for its CSRF token), when ``means`` is ``session``.
    session: str | None = None
    #: A bearer token was sent and it is not ours (refused even where reading needs nothing).
    wrong_token: bool = False


def access_of(request: Request) -> Access:
    settings: UiSettings = request.app.state.settings
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() == "bearer" and credentials:
        if hmac.compare_digest(credentials.strip().encode(), settings.token.encode()):
            return Access(True, "bearer")
        return Access(False, None, wrong_token=True)
    cookie = request.cookies.get(SESSION_COOKIE)
    if valid_session(settings.token, cookie):
        return Access(True, "session", cookie)
    return Access(False, None)


def require_reader(request: Request) -> Access:
    """Reading needs nothing on loopback; a server exposed beyond it needs the token for everything."""
    access = access_of(request)
    if access.wrong_token:
        raise HTTPException(status_code=401, detail=_WRONG_TOKEN)
    if not access.authenticated and not request.app.state.settings.loopback:
        raise HTTPException(status_code=401, detail="this server is reachable beyond loopback: log in or send the token")
    return access


async def require_writer(request: Request) -> Access:
    """A mutation: refused under --read-only, needs the token, and from a browser session a CSRF token too."""
    settings: UiSettings = request.app.state.settings
    if settings.read_only:
        raise HTTPException(status_code=403, detail="this server was started with --read-only: nothing can be changed")
    access = access_of(request)
    if access.wrong_token:
        raise HTTPException(status_code=401, detail=_WRONG_TOKEN)
    if not access.authenticated:
        raise HTTPException(
            status_code=401,
            detail="changing things needs the token: send Authorization: Bearer TOKEN, or log in at /login",
        )
    if access.means == "session":
        sent = request.headers.get(CSRF_HEADER)
        if sent is None and request.headers.get("content-type", "").startswith(
            ("application/x-www-form-urlencoded", "multipart/form-data")
        ):
            sent = (await request.form()).get(CSRF_FIELD)  # type: ignore[assignment]
        expected = csrf_token(settings.token, access.session or "")
        if not isinstance(sent, str) or not hmac.compare_digest(sent, expected):
            raise HTTPException(status_code=403, detail="the form's CSRF token is missing or stale: reload the page")
    return access


def content_security_policy() -> str:
    """No inline script or style anywhere: every script and style sheet is a file served by us."""
    return "; ".join(
        (
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )
