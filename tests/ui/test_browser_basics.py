"""The pages in a real browser: they load under the Content-Security-Policy, and logging in works."""

from __future__ import annotations

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from .browser import browser_errors
from .support import TOKEN


def test_logging_in_through_the_form_shows_log_out(live_server, browser) -> None:
    server = live_server()
    browser.get(f"{server.url}/login?next=/runs")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
    WebDriverWait(browser, 10).until(expected_conditions.url_to_be(f"{server.url}/runs"))
    assert browser.find_element(By.CSS_SELECTOR, "header.top .session button").text == "Log out"
    assert not browser_errors(browser)
