"""Plan-first actions through the pages: forms with CSRF, redirects, hidden buttons, escaping.

The pages' HTML is checked through the ASGI client; one browser test per
flow lives in ``test_actions_browser.py``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from partita.ui.templating import templates

from .actions_support import seed, wait_until_finished
from .support import TOKEN


def log_in(client: TestClient) -> str:
    """Log the client in; the session's CSRF token, read from a page as a browser would."""
    response = client.post("/login", data={"token": TOKEN, "next": "/plans/new"})
    assert response.status_code == 200
    found = re.search(r'name="csrf" value="([^"]+)"', response.text)
    assert found is not None
    return found.group(1)


def plan_from_form(client: TestClient, csrf: str, **fields: str) -> str:
    """Submit the plan form; the plan page's path it redirects to."""
    response = client.post("/plans/new", data={"csrf": csrf, **fields}, follow_redirects=False)
    assert response.status_code == 303, response.text
    location = response.headers["location"]
    assert location.startswith("/plans/")
    return location


def test_the_plan_form_is_prefilled_from_the_asset_pages_link(client: TestClient) -> None:
    page = client.get("/plans/new?target=exports&start=2026-08-01&end=2026-08-05&mode=missing").text
    assert 'value="exports" checked' in page and 'value="daily_total" checked' not in page
    assert 'name="start" value="2026-08-01"' in page and 'name="end" value="2026-08-05"' in page
    assert 'value="missing" checked' in page


def test_the_asset_pages_backfill_link_opens_the_form_for_its_window(client: TestClient) -> None:
    log_in(client)
    page = client.get("/assets/exports?start=2026-08-01&end=2026-08-05").text
    link = re.search(r'id="backfill-missing" href="([^"]+)"', page)
    assert link is not None
    form = client.get(html.unescape(link.group(1))).text
    assert 'value="exports" checked' in form and 'name="start" value="2026-08-01"' in form
    assert 'name="end" value="2026-08-05"' in form and 'value="missing" checked' in form


def test_the_plan_form_is_prefilled_from_the_run_pages_link(client: TestClient) -> None:
    page = client.get("/plans/new?failed_from=0123456789abcdef").text
    assert 'value="failed_from" checked' in page and 'value="0123456789abcdef"' in page


def test_a_bad_query_on_the_plan_form_is_a_4xx_page(client: TestClient) -> None:
    response = client.get("/plans/new?start=" + "x" * 2000, headers={"accept": "text/html"})
    assert response.status_code == 422 and "<h1>422" in response.text


def test_planning_and_confirming_through_the_forms_opens_the_run(client: TestClient) -> None:
    csrf = log_in(client)
    location = plan_from_form(client, csrf, mode="selection", start="2026-08-01", end="2026-08-03")
    page = client.get(location).text
    assert "selection: range in domain date, 3 keys" in page and 'id="confirm"' in page
    confirm = re.search(r'action="(/plans/[^"]+/run)"', page)
    assert confirm is not None
    response = client.post(confirm.group(1), data={"csrf": csrf}, follow_redirects=False)
    assert response.status_code == 303
    run_id = response.headers["location"].removeprefix("/runs/")
    assert wait_until_finished(client, run_id) == "success"
    launched = client.get(f"/api/v1/runs/{run_id}").json()
    assert launched["launched_by"] == "ui"


def test_a_forged_form_post_without_the_csrf_token_is_refused(client: TestClient) -> None:
    csrf = log_in(client)
    location = plan_from_form(client, csrf, mode="selection", start="2026-08-01", end="2026-08-01")
    for path, data in (
        (f"{location}/run", {}),
        (f"{location}/run", {"csrf": "forged"}),
        ("/plans/new", {"mode": "selection", "start": "2026-08-01", "end": "2026-08-01"}),
        ("/triggers/archiving/pause", {}),
        ("/events/publish", {"asset": "exports"}),
        ("/runs/abcdef/cancel", {}),
    ):
        response = client.post(path, data=data, headers={"accept": "text/html"}, follow_redirects=False)
        assert response.status_code == 403, path
        assert "CSRF" in response.text
    assert client.get("/api/v1/runs").json()["runs"] == []


def test_a_bad_plan_form_shows_the_problem_and_keeps_what_was_typed(client: TestClient) -> None:
    csrf = log_in(client)
    response = client.post(
        "/plans/new", data={"csrf": csrf, "mode": "selection", "start": "2026-08-09", "end": "2026-08-01"}
    )
    assert response.status_code == 422
    assert "start is later than end" in response.text and 'name="start" value="2026-08-09"' in response.text
    response = client.post("/plans/new", data={"csrf": csrf, "mode": "missing"})
    assert response.status_code == 400 and "bounded selection" in response.text
    response = client.post(
        "/plans/new",
        data={"csrf": csrf, "mode": "selection", "start": "2026-08-01", "end": "2026-08-01", "max_concurrency": "zero"},
    )
    assert response.status_code == 422 and "max_concurrency" in response.text


def test_the_plan_page_of_an_empty_backfill_offers_no_run_button(client: TestClient, store_url: str) -> None:
    seed(store_url, {"partition_range": ["2026-08-01", "2026-08-02"]})
    csrf = log_in(client)
    page = client.get(plan_from_form(client, csrf, mode="missing", start="2026-08-01", end="2026-08-02")).text
    assert "Nothing to backfill" in page and 'id="confirm"' not in page


def test_without_a_login_pages_show_a_hint_instead_of_buttons(client: TestClient, store_url: str) -> None:
    seed(store_url, {"partition_keys": ["2026-08-01"]})
    for path in ("/plans/new", "/triggers", "/events/publish"):
        page = client.get(path).text
        assert "to change things" in page, path
        assert '<button type="submit"' not in page.split("</header>", 1)[1], path


def test_a_read_only_server_shows_no_buttons_and_no_hint(ui_client: Callable[..., TestClient]) -> None:
    client = ui_client(read_only=True)
    client.post("/login", data={"token": TOKEN})
    for path in ("/plans/new", "/triggers", "/events/publish"):
        page = client.get(path).text
        body = page.split("</header>", 1)[1]
        assert '<button type="submit"' not in body and "to change things" not in body, path


def test_the_triggers_page_pauses_and_resumes_a_flow(client: TestClient, store_url: str) -> None:
    seed(store_url, {"partition_keys": ["2026-08-01"]})
    csrf = log_in(client)
    page = client.get("/triggers").text
    assert "archiving" in page and "state-active" in page and ">Pause</button>" in page and "2026-08-01" in page
    response = client.post("/triggers/archiving/pause", data={"csrf": csrf}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/triggers"
    page = client.get("/triggers").text
    assert "state-paused" in page and ">Resume</button>" in page
    client.post("/triggers/archiving/resume", data={"csrf": csrf})
    assert client.get("/api/v1/pending").json()["flows"][0]["paused"] is False
    assert client.post("/triggers/nope/pause", data={"csrf": csrf}).status_code == 404


def test_the_events_page_links_to_the_publish_form_once_logged_in(client: TestClient) -> None:
    assert 'href="/events/publish"' not in client.get("/events").text
    log_in(client)
    assert 'href="/events/publish"' in client.get("/events").text


def test_publishing_from_the_form_shows_the_receipt_and_deduplicates(client: TestClient) -> None:
    csrf = log_in(client)
    fields = {
        "csrf": csrf,
        "asset": "exports",
        "partition_key": "2026-08-03",
        "extra": '{"rows": 3}',
        "dedupe_key": "d-1",
    }
    first = client.post("/events/publish", data=fields)
    assert first.status_code == 200 and "published at" in first.text
    second = client.post("/events/publish", data=fields)
    assert "duplicate" in second.text
    receipts = [re.search(r"Event (\d+) ", page.text) for page in (first, second)]
    assert receipts[0] is not None and receipts[1] is not None
    assert receipts[0].group(1) == receipts[1].group(1)  # the same event, stored once


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"asset": "no_such_asset"}, "no_such_asset"),
        ({"asset": "exports", "partition_key": "not-a-day"}, "partition_key"),
        ({"asset": "exports", "partition_key": "2026-08-01", "extra": "[1, 2"}, "extra must be a JSON object"),
        ({"asset": "exports", "partition_key": "2026-08-01", "extra": "[" * 40 + "]" * 40}, "deeper than"),
        ({"asset": "exports", "partition_key": "2026-08-01", "partition_date": "2026-08-01"}, "UTC offset"),
        ({"asset": "exports", "partition_key": "2026-08-01", "partition_date": "yesterday"}, "ISO 8601"),
    ],
)
def test_a_rejected_event_shows_the_rule_and_publishes_nothing(
    client: TestClient, fields: dict[str, str], words: str
) -> None:
    csrf = log_in(client)
    response = client.post("/events/publish", data={"csrf": csrf, **fields})
    assert 400 <= response.status_code < 500
    problem = re.search(r'role="alert">([^<]*)<', response.text)
    assert problem is not None and words in html.unescape(problem.group(1))
    assert "not-a-day" not in problem.group(1)


def test_what_a_person_typed_is_escaped_when_the_form_comes_back(client: TestClient) -> None:
    csrf = log_in(client)
    hostile = '<script>alert(1)</script>"onmouseover="x'
    response = client.post(
        "/events/publish",
        data={"csrf": csrf, "asset": "exports", "partition_key": hostile, "extra": f'{{"x": "{hostile}"}}'},
    )
    assert "<script>alert(1)" not in response.text and '"onmouseover="' not in response.text
    assert "&lt;script&gt;alert(1)" in response.text


def test_cancel_from_the_run_page_redirects_back_to_the_run(
    client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    monkeypatch.setenv("PARTITA_TEST_HOLD", str(hold))
    csrf = log_in(client)
    location = plan_from_form(client, csrf, mode="selection", start="2026-08-01", end="2026-08-01")
    run_id = (
        client.post(f"{location}/run", data={"csrf": csrf}, follow_redirects=False).headers["location"].split("/")[-1]
    )
    response = client.post(f"/runs/{run_id}/cancel", data={"csrf": csrf}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == f"/runs/{run_id}"
    assert wait_until_finished(client, run_id) == "cancelled"
    refused = client.post(f"/runs/{run_id}/cancel", data={"csrf": csrf}, headers={"accept": "text/html"})
    assert refused.status_code == 409 and "already finished" in refused.text
    # A page drawn while the run was running swaps its actions once the status changed, not before.
    actions = f"/runs/{run_id}/actions"
    assert client.get(actions, params={"shown": "cancelled"}).status_code == 204
    redrawn = client.get(actions, params={"shown": "running"})
    assert redrawn.status_code == 200 and 'id="cancel-run"' not in redrawn.text
    assert 'id="rerun-failed"' in redrawn.text and "shown=cancelled" in redrawn.text


def _partial(name: str, **context: object) -> str:
    base = {"can_change": True, "read_only": False, "csrf_field": "csrf", "csrf": "t0k", "path": "/x"}
    return templates.env.get_template(f"partials/{name}").render({**base, **context})


def test_the_run_actions_offer_cancel_for_a_running_run_and_a_rerun_for_a_failed_one() -> None:
    running = _partial("run_actions.html", run={"run_id": "r1", "status": "running"})
    assert 'action="/runs/r1/cancel"' in running and 'value="t0k"' in running and "failed_from" not in running
    failed = _partial("run_actions.html", run={"run_id": "r1", "status": "failed"})
    assert 'href="/plans/new?failed_from=r1"' in failed and "cancel" not in failed
    assert "<form" not in _partial("run_actions.html", run={"run_id": "r1", "status": "success"})
    hidden = _partial("run_actions.html", run={"run_id": "r1", "status": "running"}, can_change=False)
    assert "<form" not in hidden and "Log in" in hidden
    read_only = _partial(
        "run_actions.html", run={"run_id": "r1", "status": "running"}, can_change=False, read_only=True
    )
    assert read_only.strip() == ""


def test_the_asset_actions_link_to_backfills_of_the_window() -> None:
    links = _partial("asset_actions.html", asset="exports", start="2026-08-01", end="2026-08-31")
    assert 'href="/plans/new?target=exports&amp;start=2026-08-01&amp;end=2026-08-31&amp;mode=missing"' in links
    assert "mode=failed" in links
    unbounded = _partial("asset_actions.html", asset="a b", start=None, end=None)
    assert 'href="/plans/new?target=a%20b&amp;mode=missing"' in unbounded
    assert "href" not in _partial(
        "asset_actions.html", asset="x", start=None, end=None, can_change=False, read_only=True
    )
