"""Browser fixtures: the app served by a real uvicorn on a free port, and Debian's chromium driven by selenium.

Selenium is pointed at the system driver and binary, so it never tries to
download one. When a browser test fails, a screenshot of the page is saved
under ``test-screenshots/`` (or ``$PARTITA_SCREENSHOTS``) and its path shown.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from partita.ui import create_app
from partita.ui.serving import UiServer

from .support import make_settings

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = Path(os.environ.get("PARTITA_SCREENSHOTS", Path(__file__).resolve().parents[2] / "test-screenshots"))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LiveServer:
    """One app served on loopback in a thread; ``url`` is its base address."""

    def __init__(self, store_url: str, **settings: object) -> None:
        port = _free_port()
        self.app = create_app(make_settings(store_url, port=port, **settings))
        config = uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
        self.server = UiServer(config)  # ends open event streams when it stops
        self.url = f"http://127.0.0.1:{port}"
        self.thread = threading.Thread(target=self.server.run, name="ui-server", daemon=True)

    def start(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the UI server did not start within 15 s")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def live_server(store_url: str) -> Iterator[Callable[..., LiveServer]]:
    """Starts a server over ``store_url``; keyword arguments override settings."""
    started: list[LiveServer] = []

    def start(**settings: object) -> LiveServer:
        server = LiveServer(store_url, **settings).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def _chromium() -> WebDriver:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("Debian's chromium and chromium-driver are needed (scripts/test.sh installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.fixture(scope="session")
def _browser_session() -> Iterator[WebDriver]:
    driver = _chromium()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(_browser_session: WebDriver, request: pytest.FixtureRequest) -> Iterator[WebDriver]:
    """One chromium for the session, with cookies and console cleared per test; a screenshot is saved if the test fails.

    After the test the page is left (closing its live streams while its server
    still runs), so nothing the last page logs leaks into the next test.
    """
    driver = _browser_session
    driver.delete_all_cookies()
    driver.get_log("browser")  # drain what earlier pages logged
    yield driver
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in request.node.nodeid.split("::", 1)[-1])
        path = SCREENSHOTS / f"{name}.png"
        driver.save_screenshot(str(path))
        print(f"screenshot of the failing page: {path}")
    if driver.current_url.startswith("http"):
        driver.delete_all_cookies()
    driver.get("about:blank")
    driver.get_log("browser")


def browser_errors(driver: WebDriver) -> list[str]:
    """Console errors the page logged (a CSP violation shows up here)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]






DOC_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images" / "ui"


def doc_screenshot(driver: WebDriver, name: str) -> None:
    """Save the page as ``docs/images/ui/NAME.png`` when ``PARTITA_DOC_SCREENSHOTS=1`` (how docs/ui.md's images are made)."""
    if os.environ.get("PARTITA_DOC_SCREENSHOTS") == "1":
        DOC_IMAGES.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(DOC_IMAGES / f"{name}.png"))
