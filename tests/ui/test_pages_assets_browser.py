"""The overview and assets pages in a real browser: they load under the Content-Security-Policy with no console error."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator

from fastapi import FastAPI
from selenium.webdriver.common.by import By
from starlette.responses import StreamingResponse

from partita.entry import load_entry, load_trigger_flows
from partita.operations.status import KeyState, partition_status
from partita.store import open_store
from partita.store.triggers import TriggerStore

from .browser import browser_errors, doc_screenshot
from .support import ENTRY


def _with_a_stream(app: FastAPI, done: threading.Event) -> None:
    """A quiet stand-in for ``/api/v1/stream`` where the app serves none yet: open until ``done``."""
    if any(getattr(route, "path", None) == "/api/v1/stream" for route in app.routes):
        return

    async def stream() -> StreamingResponse:
        async def quiet() -> AsyncIterator[str]:
            yield ": no events\n\n"
            while not done.is_set():  # the server would wait for an endless response when it stops
                await asyncio.sleep(0.05)

        return StreamingResponse(quiet(), media_type="text/event-stream")

    app.add_api_route("/api/v1/stream", stream)


def test_overview_assets_asset_and_key_pages_load_without_console_errors(
    live_server, browser, store_url, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("PARTITA_TEST_FAIL_DAYS", "2026-08-03,2026-08-05")
    flow = load_entry(ENTRY).with_store(store_url, record_partition_keys=True)
    for first, last in (("2026-08-01", "2026-08-07"), ("2026-08-08", "2026-08-14"), ("2026-08-15", "2026-08-20")):
        flow.run({"partition_range": (first, last)})
    archiving = next(flow for flow in load_trigger_flows(ENTRY) if flow.name == "archiving")
    archiving.with_store(store_url, record_partition_keys=True).run({"partition_range": ("2026-08-01", "2026-08-02")})
    store = open_store(store_url)
    try:
        TriggerStore(store).daemon_started("3f0c9a1e2b7d", "etl-01", 4242, time.time())
    finally:
        store.close()
    hold = tmp_path / "hold"
    hold.touch()
    monkeypatch.setenv("PARTITA_TEST_HOLD", str(hold))  # 2026-08-21 stays running while the pages are seen
    held = threading.Thread(target=flow.run, args=({"partition_keys": ["2026-08-21"]},), daemon=True)
    held.start()
    server = live_server()
    done = threading.Event()
    _with_a_stream(server.app, done)
    try:
        deadline = time.monotonic() + 20
        while partition_status(flow, "exports", {"partition_keys": ["2026-08-21"]}).keys[0].state is not KeyState.RUNNING:
            assert time.monotonic() < deadline, "the held run did not start within 20 s"
            time.sleep(0.02)
        _visit(server.url, browser)
    finally:
        browser.get("about:blank")
        done.set()
        hold.unlink()
        held.join(timeout=30)


def _visit(url: str, browser) -> None:
    pages = (
        ("/", "overview", "h1"),
        ("/assets", "assets", "svg.lineage"),
        ("/assets/exports?start=2026-08-01&end=2026-09-30", "asset-grid", "table.calendar"),
        ("/assets/exports/keys/2026-08-03", "key-history", "tr.attempt"),
    )
    for path, image, marker in pages:
        browser.get(url + path)
        assert browser.find_elements(By.CSS_SELECTOR, marker), f"{path} shows no {marker}"
        errors = browser_errors(browser)
        assert not errors, f"{path}: {errors}"
        doc_screenshot(browser, image)
    # The held key reads running, and a cell of the grid opens its key's page.
    browser.get(url + "/assets/exports?start=2026-08-01&end=2026-09-30")
    assert browser.find_elements(By.CSS_SELECTOR, 'td[data-key="2026-08-21"][data-state="running"]')
    browser.find_element(By.CSS_SELECTOR, 'td[data-key="2026-08-05"] a').click()
    assert browser.current_url.endswith("/assets/exports/keys/2026-08-05")
    assert "failed" in browser.find_element(By.CSS_SELECTOR, ".key-state").text
    assert not browser_errors(browser)
