"""The runs, run and events pages in a real browser: live updates arrive without a reload, hostile text stays text."""

from __future__ import annotations

import threading
import time

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from partita.events.external import publish_event
from partita.store import open_store

from .browser import browser_errors, doc_screenshot
from .runs_seed import entry_flow, run_days, wait_until
from .ui_entry import HOSTILE_KEYS


def _wait(browser, condition, timeout: float = 10.0):  # noqa: ANN001, ANN202
    # A live swap may replace an element between finding it and reading it: look again.
    waiting = WebDriverWait(browser, timeout, poll_frequency=0.02, ignored_exceptions=(StaleElementReferenceException,))
    return waiting.until(lambda driver: condition())


def _streaming(server, count: int = 1) -> None:  # noqa: ANN001
    """Until the page's event stream is subscribed on the server (what it publishes next reaches the page)."""
    wait_until(lambda: server.app.state.changes.subscriber_count >= count, what="the page's stream connected")


def _hover(browser, number: int) -> bool:  # noqa: ANN001
    ActionChains(browser).move_to_element(browser.find_elements(By.CSS_SELECTOR, "table.events td")[number]).perform()
    return True


def test_a_new_event_appears_on_the_events_page_within_a_second_without_reload(store_url, live_server, browser) -> None:
    run_days(store_url, "2026-08-01", "2026-08-03")
    server = live_server()
    browser.get(f"{server.url}/events")
    _streaming(server)
    marker = browser.find_element(By.TAG_NAME, "h1")  # a reload would replace it
    store = open_store(store_url)
    try:
        published = time.monotonic()
        receipt = publish_event(store, entry_flow(), "exports", partition_key="2026-08-09", extra={"rows": 12})
        first_id = lambda: browser.find_element(By.CSS_SELECTOR, "table.events tbody tr td").text  # noqa: E731
        _wait(browser, lambda: first_id() == str(receipt.id))
        assert time.monotonic() - published < 1.0
    finally:
        store.close()
    assert marker.is_displayed()  # the same document: updated in place
    assert '{"rows": 12}' in browser.find_element(By.CSS_SELECTOR, "table.events tbody tr").text
    doc_screenshot(browser, "events")
    assert not browser_errors(browser)


def test_hostile_event_keys_and_extra_render_as_text_and_run_nothing(store_url, live_server, browser) -> None:
    store = open_store(store_url)
    try:
        for key in HOSTILE_KEYS:
            publish_event(
                store, entry_flow(), "tenant_report", partition_key=key, extra={"note": key, "html": "<b>x</b>"}
            )
    finally:
        store.close()
    server = live_server()
    browser.get(f"{server.url}/events?asset=tenant_report")
    title = browser.title
    _streaming(server)
    keys = lambda: sorted(cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "table.events td.key"))  # noqa: E731
    _wait(browser, lambda: keys() == sorted(HOSTILE_KEYS))  # each key shown as the text it is
    for number in range(len(browser.find_elements(By.CSS_SELECTOR, "table.events td"))):
        _wait(browser, lambda number=number: _hover(browser, number))  # what an injected onmouseover= waits for
    assert browser.title == title == "Events · partita"
    assert browser.execute_script("return window.partitaOwned === undefined")
    assert not browser.find_elements(By.CSS_SELECTOR, "main script, main img, main b")
    _wait(browser, lambda: '"<b>x</b>"' in browser.find_element(By.CSS_SELECTOR, "table.events code.extra").text)
    assert not browser_errors(browser)


def test_a_run_page_follows_its_run_live_status_failures_and_log_lines(
    store_url, live_server, browser, failing_days, tmp_path, monkeypatch
) -> None:
    run_days(store_url, "2026-08-01", "2026-08-02", tags={"team": "data"})
    hold = tmp_path / "hold"
    hold.touch()
    monkeypatch.setenv("PARTITA_TEST_HOLD", str(hold))
    failing_days("2026-08-05")
    flow = entry_flow().with_store(store_url, record_partition_keys=True).with_tags({"team": "data"})
    config = {"partition_range": ("2026-08-03", "2026-08-06"), "max_concurrency": 1}
    worker = threading.Thread(target=lambda: flow.run(flow.plan_from_text(config)))
    worker.start()
    store = open_store(store_url)
    try:
        run = wait_until(lambda: store.list_runs(limit=1, status="running"), what="the held run")[0]
        wait_until(lambda: store.attempt_logs(run.run_id), what="the held attempt's first line")
        server = live_server()
        browser.get(f"{server.url}/runs")
        _streaming(server)
        status_of_run = f"//a[@href='/runs/{run.run_id}']/ancestor::tr//span[contains(@class, 'status')]"
        _wait(browser, lambda: browser.find_element(By.XPATH, status_of_run).text == "running")
        browser.get(f"{server.url}/runs/{run.run_id}")
        _streaming(server)
        marker = browser.find_element(By.ID, "logs-heading")
        lines = lambda: len(browser.find_elements(By.CSS_SELECTOR, "#log-lines .line"))  # noqa: E731
        before = lines()
        released = time.monotonic()
        hold.unlink()
        _wait(browser, lambda: lines() > before)
        assert time.monotonic() - released < 1.0 + 0.5  # the body's next line, flushed, polled and appended
        worker.join(timeout=20)
        finished = time.monotonic()
        _wait(browser, lambda: browser.find_element(By.CSS_SELECTOR, "#run-live h1 .status").text == "failed")
        assert time.monotonic() - finished < 1.0
        assert lines() == len(store.attempt_logs(run.run_id))  # every line once, none repeated
        ids = [line.get_attribute("data-id") for line in browser.find_elements(By.CSS_SELECTOR, "#log-lines .line")]
        assert len(ids) == len(set(ids))  # the log lines are outside the re-rendered part: never stale
        failure = lambda: browser.find_element(By.CSS_SELECTOR, "details.failure").text  # noqa: E731
        _wait(browser, lambda: "the export for this day has not arrived" in failure())
        assert browser.find_elements(By.CSS_SELECTOR, "figure.timeline rect.tl-failed")
        assert marker.is_displayed()
        doc_screenshot(browser, "run")
        browser.get(f"{server.url}/runs")
        _wait(browser, lambda: browser.find_element(By.XPATH, status_of_run).text == "failed")
        doc_screenshot(browser, "runs")
        assert not browser_errors(browser)
    finally:
        hold.unlink(missing_ok=True)
        worker.join(timeout=30)
        store.close()
