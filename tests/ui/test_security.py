"""Who may read and change: loopback reading, the token for mutations, sessions, CSRF, headers, body limits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from partita.errors import ConfigurationError
from partita.ui.security import SESSION_COOKIE, csrf_token
from partita.ui.settings import TokenSource, UiSettings, resolve_token

from .support import ENTRY, TOKEN, auth


def test_reading_needs_no_token_on_loopback(client: TestClient) -> None:
    response = client.get("/api/v1/runs")
    assert response.status_code == 200
    assert response.json()["schema"] == "partita.runs"


def test_a_wrong_bearer_token_is_refused_even_for_reading(client: TestClient) -> None:
    response = client.get("/api/v1/runs", headers={"Authorization": "Bearer not-the-token-at-all"})
    assert response.status_code == 401
    assert response.json()["error"]["status"] == 401


def test_beyond_loopback_reading_needs_the_token(ui_client: Callable[..., TestClient]) -> None:
    exposed = ui_client(host="0.0.0.0")
    assert exposed.get("/api/v1/runs").status_code == 401
    assert exposed.get("/api/v1/runs", headers=auth()).status_code == 200


def test_beyond_loopback_a_browser_is_sent_to_log_in_first(ui_client: Callable[..., TestClient]) -> None:
    exposed = ui_client(host="0.0.0.0")
    response = exposed.get("/runs", headers={"accept": "text/html"}, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=%2Fruns"
    assert exposed.get("/login", headers={"accept": "text/html"}).status_code == 200


def test_a_host_beyond_loopback_is_refused_without_an_explicit_token() -> None:
    with pytest.raises(ConfigurationError, match="PARTITA_UI_TOKEN"):
        UiSettings(entry=ENTRY, store_url="sqlite://", token=TOKEN, token_source=TokenSource.GENERATED, host="0.0.0.0")


def test_a_short_token_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="at least 16"):
        UiSettings(entry=ENTRY, store_url="sqlite://", token="short")


def test_the_token_is_generated_once_with_owner_only_permissions(tmp_path: Path) -> None:
    path = tmp_path / "config" / "partita" / "ui-token"
    token, source = resolve_token({}, path)
    assert source is TokenSource.GENERATED and len(token) >= 16
    assert path.stat().st_mode & 0o777 == 0o600
    assert resolve_token({}, path) == (token, TokenSource.FILE)
    assert resolve_token({"PARTITA_UI_TOKEN": "from-the-environment-123"}, path) == (
        "from-the-environment-123",
        TokenSource.ENVIRONMENT,
    )


def test_logging_in_sets_an_http_only_strict_cookie(client: TestClient) -> None:
    response = client.post("/login", data={"token": TOKEN, "next": "/runs"}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/runs"
    cookie = response.headers["set-cookie"]
    assert SESSION_COOKIE in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie


def test_a_wrong_token_does_not_log_in(client: TestClient) -> None:
    response = client.post("/login", data={"token": "wrong-token-wrong-token"}, follow_redirects=False)
    assert response.status_code == 401
    assert SESSION_COOKIE not in response.headers.get("set-cookie", "")


def test_login_never_redirects_to_another_site(client: TestClient) -> None:
    for target in ("https://evil.example/", "//evil.example/", "/\\evil.example"):
        response = client.post("/login", data={"token": TOKEN, "next": target}, follow_redirects=False)
        assert response.headers["location"] == "/"


def test_every_response_carries_a_policy_without_inline_script(client: TestClient) -> None:
    response = client.get("/login")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "<script>" not in response.text  # every script is a file


def test_an_oversized_body_is_refused_with_413(client: TestClient) -> None:
    response = client.post("/api/v1/events", content=b"x" * (300 * 1024), headers={**auth(), "content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["status"] == 413


def test_csrf_token_is_tied_to_its_session() -> None:
    assert csrf_token(TOKEN, "a.b") != csrf_token(TOKEN, "c.d")
    assert csrf_token(TOKEN, "a.b") != csrf_token("another-token-0123456", "a.b")


def test_an_unknown_run_is_a_json_404_not_a_traceback(client: TestClient) -> None:
    response = client.get("/api/v1/runs/does-not-exist")
    assert response.status_code == 404
    body = response.json()
    assert body["schema"] == "partita.error" and "Traceback" not in body["error"]["message"]


def test_a_malformed_filter_is_a_4xx_naming_the_field(client: TestClient) -> None:
    response = client.get("/api/v1/runs", params={"limit": "0"})
    assert response.status_code == 422
    assert "limit" in response.json()["error"]["message"]
    response = client.get("/api/v1/runs", params={"tag": "no-equals-sign"})
    assert response.status_code == 400
    assert "tag" in response.json()["error"]["message"]
