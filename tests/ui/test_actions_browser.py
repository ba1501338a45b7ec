"""Plan-first actions in a real browser (Debian's chromium): log in, plan and confirm, cancel, pause, refusals."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from .actions_support import seed, wait_for
from .browser import browser_errors, doc_screenshot
from .support import TOKEN, auth

WAIT_SECONDS = 15


def _request(url: str, method: str = "GET", body: dict[str, Any] | None = None, **headers: str) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        text = error.read()
        return error.code, json.loads(text) if text.startswith(b"{") else text.decode()


def _log_in(browser: WebDriver, base: str, then: str) -> None:
    browser_errors(browser)  # drain what earlier tests' pages logged
    browser.get(f"{base}/login?next={urllib.parse.quote(then, safe='/')}")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    doc_screenshot(browser, "login")
    browser.find_element(By.CSS_SELECTOR, "main form button").click()
    WebDriverWait(browser, WAIT_SECONDS).until(expected_conditions.url_to_be(f"{base}{then}"))


def _wait_for_text(browser: WebDriver, css: str, text: str) -> None:
    """Wait until the element shows ``text``; the page reloads meanwhile, so a stale element is looked up again.

    An htmx swap can also replace the node between finding it and reading
    its text, which chromium reports as a node that no longer belongs to
    the document: that too is looked up again.
    """

    def shows_text(driver: WebDriver) -> bool:
        try:
            return bool(driver.find_element(By.CSS_SELECTOR, css).text == text)
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return False
            raise

    wait = WebDriverWait(
        browser, WAIT_SECONDS, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
    )
    wait.until(shows_text)


def _run_status(base: str, run_id: str) -> str:
    return str(_request(f"{base}/api/v1/runs/{run_id}")[1]["run"]["status"])


def test_a_backfill_of_missing_keys_is_planned_confirmed_and_opens_its_run(
    live_server, browser, store_url: str
) -> None:
    seed(store_url, {"partition_range": ["2026-08-01", "2026-08-04"]})
    server = live_server()
    _log_in(browser, server.url, "/assets/daily_total?start=2026-08-01&end=2026-08-10")
    browser.find_element(By.ID, "backfill-missing").click()  # the asset page's link, for its window
    WebDriverWait(browser, WAIT_SECONDS).until(lambda driver: "/plans/new" in driver.current_url)
    browser_errors(browser)  # the asset page is another area's: only this area's pages are checked below
    assert browser.find_element(By.NAME, "start").get_attribute("value") == "2026-08-01"
    browser.find_element(By.CSS_SELECTOR, "form.plan-form button[type=submit]").click()
    WebDriverWait(browser, WAIT_SECONDS).until(expected_conditions.presence_of_element_located((By.ID, "plan-text")))
    text = browser.find_element(By.ID, "plan-text").text
    assert "backfill of missing keys: 6 of 10 selected keys lack a success of daily_total" in text
    assert not browser_errors(browser)
    doc_screenshot(browser, "plan")
    browser.find_element(By.ID, "confirm").click()
    WebDriverWait(browser, WAIT_SECONDS).until(lambda driver: "/runs/" in driver.current_url)
    run_id = browser.current_url.rsplit("/", 1)[1]
    wait_for(lambda: _run_status(server.url, run_id) == "success", "the backfill run succeeding")
    status, shown = _request(f"{server.url}/api/v1/runs/{run_id}")
    assert shown["launched_by"] == "backfill" and shown["tags"]["partita.launched_from"] == "ui"
    assert shown["run"]["selection"]["key_count"] == 6


def test_a_running_run_is_cancelled_from_its_page(
    live_server, browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    monkeypatch.setenv("PARTITA_TEST_HOLD", str(hold))
    server = live_server()
    status, planned = _request(f"{server.url}/api/v1/plans", "POST", {"partition_keys": ["2026-08-01"]}, **auth())
    assert status == 201
    status, started = _request(f"{server.url}/api/v1/plans/{planned['plan_id']}/run", "POST", {}, **auth())
    run_id = started["run"]["run_id"]
    _log_in(browser, server.url, "/login")
    browser.get(f"{server.url}/runs/{run_id}")
    browser.find_element(By.ID, "cancel-run").click()
    wait_for(lambda: _run_status(server.url, run_id) == "cancelled", "the run recording cancelled")
    assert browser.current_url == f"{server.url}/runs/{run_id}"
    # The page drawn after the click (the body still held) trades Cancel for a rerun once the run ends, unreloaded.
    wait_for(lambda: browser.find_elements(By.ID, "rerun-failed"), "the rerun link replacing the cancel button")
    assert not browser.find_elements(By.ID, "cancel-run")


def test_a_flow_is_paused_and_resumed_on_the_triggers_page(live_server, browser, store_url: str) -> None:
    seed(store_url, {"partition_range": ["2026-08-01", "2026-08-03"]})
    server = live_server()
    _log_in(browser, server.url, "/triggers")
    doc_screenshot(browser, "triggers")
    button = browser.find_element(By.CSS_SELECTOR, ".trigger-flow form button")
    assert button.text == "Pause"
    button.click()
    _wait_for_text(browser, ".trigger-flow form button", "Resume")
    assert browser.find_element(By.CSS_SELECTOR, ".trigger-flow .state").text == "paused"
    assert _request(f"{server.url}/api/v1/pending")[1]["flows"][0]["paused"] is True
    browser.find_element(By.CSS_SELECTOR, ".trigger-flow form button").click()
    _wait_for_text(browser, ".trigger-flow .state", "active")
    assert not browser_errors(browser)


def test_without_the_token_nothing_changes(live_server, browser) -> None:
    server = live_server()
    browser_errors(browser)
    browser.get(f"{server.url}/plans/new")
    assert not browser.find_elements(By.CSS_SELECTOR, "main button[type=submit]")
    assert "Log in to change things" in browser.find_element(By.CSS_SELECTOR, ".action-hint").text
    status, error = _request(f"{server.url}/api/v1/plans", "POST", {"partition_keys": ["2026-08-01"]})
    assert status == 401 and error["schema"] == "partita.error"
    # A logged-in browser's cookie without the page's CSRF token (a forged form on another site) is refused.
    _log_in(browser, server.url, "/triggers")
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in browser.get_cookies())
    for path in ("/triggers/archiving/pause", "/api/v1/flows/archiving/pause"):
        status, _ = _request(f"{server.url}{path}", "POST", {}, Cookie=cookie)
        assert status == 403, path
    assert _request(f"{server.url}/api/v1/pending")[1]["flows"][0]["paused"] is False


def test_a_read_only_server_hides_the_buttons_and_refuses_changes(live_server, browser) -> None:
    server = live_server(read_only=True)
    browser_errors(browser)
    for path in ("/triggers", "/plans/new", "/events/publish"):
        browser.get(f"{server.url}{path}")
        assert not browser.find_elements(By.CSS_SELECTOR, "main button"), path
        assert not browser.find_elements(By.CSS_SELECTOR, ".action-hint"), path
        assert not browser_errors(browser)
    status, error = _request(f"{server.url}/api/v1/flows/archiving/pause", "POST", {}, **auth())
    assert status == 403 and "--read-only" in error["error"]["message"]
