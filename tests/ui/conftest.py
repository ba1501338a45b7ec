"""UI fixtures: an app over a store of each backend, an HTTP client, the token, and a seeded history.

The browser fixtures live in ``browser.py`` (a real uvicorn server and Debian's chromium).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from partita.ui import create_app

from .browser import _browser_session, browser, live_server  # noqa: F401 - fixtures for every UI test
from .support import make_settings


@pytest.fixture
def ui_client(store_url: str) -> Iterator[Callable[..., TestClient]]:
    """Makes a client over an app on ``store_url`` (one per backend); keyword arguments override settings."""
    opened: list[TestClient] = []

    def make(**overrides: object) -> TestClient:
        client = TestClient(create_app(make_settings(store_url, **overrides)), raise_server_exceptions=False)
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.__exit__(None, None, None)


@pytest.fixture
def client(ui_client: Callable[..., TestClient]) -> TestClient:
    """A client of a loopback app with default settings."""
    return ui_client()


@pytest.fixture
def failing_days(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Make ``exports`` of the test entry fail on the given comma-separated days."""

    def set_days(days: str) -> None:
        monkeypatch.setenv("PARTITA_TEST_FAIL_DAYS", days)

    return set_days


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Keep each phase's report on the test, so the browser fixture knows to save a screenshot."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(autouse=True)
def _no_inherited_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PARTITA_TEST_FAIL_DAYS", "PARTITA_TEST_HOLD", "PARTITA_UI_TOKEN"):
        if name in os.environ:
            monkeypatch.delenv(name)
