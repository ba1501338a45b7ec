"""The overview and assets pages over a seeded store: a grid's counts and each key's state, windows, keys, escaping.

The history is known: ``exports`` over 2026-08-01..10 has five keys
materialized, two failed (recorded keys), one running (a run held open) and
two missing; ``daily_total`` skipped the failed days.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from partita import publish_event
from partita.automation.evaluation import TriggerEvaluator
from partita.entry import load_entry, load_trigger_flows
from partita.errors import StoreError
from partita.operations.status import KeyState, partition_status
from partita.store import SqlStore, open_store
from partita.store.triggers import TriggerStore

from .support import ENTRY

HTML = {"accept": "text/html"}
WINDOW = {"start": "2026-08-01", "end": "2026-08-10"}
EXPECTED = {
    "2026-08-01": "materialized", "2026-08-02": "materialized", "2026-08-03": "failed", "2026-08-04": "materialized",
    "2026-08-05": "failed", "2026-08-06": "materialized", "2026-08-07": "materialized", "2026-08-08": "running",
    "2026-08-09": "missing", "2026-08-10": "missing",
}  # fmt: skip


def cell_states(html: str) -> dict[str, str]:
    """Each grid cell's key and state, as the page marks them."""
    return dict(re.findall(r'data-key="([^"]*)" data-state="([a-z]+)"', html))


def counts_of(html: str) -> dict[str, int]:
    return {state: int(count) for state, count in re.findall(r'class="state-count" data-state="([a-z]+)" data-count="(\d+)"', html)}


@dataclass
class HeldRun:
    """A run of ``exports`` for 2026-08-08 kept running until ``release``."""

    hold: Path
    thread: threading.Thread

    def release(self) -> None:
        self.hold.unlink(missing_ok=True)
        self.thread.join(timeout=30)


@pytest.fixture
def seeded(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldRun]:
    """The known history above, with 2026-08-08's run still running while the test runs."""
    flow = load_entry(ENTRY).with_store(store_url, record_partition_keys=True)
    monkeypatch.setenv("PARTITA_TEST_FAIL_DAYS", "2026-08-03,2026-08-05")
    flow.run({"partition_range": ("2026-08-01", "2026-08-07")})
    hold = tmp_path / "hold"
    hold.touch()
    monkeypatch.setenv("PARTITA_TEST_HOLD", str(hold))
    thread = threading.Thread(target=flow.run, args=({"partition_keys": ["2026-08-08"]},), daemon=True)
    thread.start()
    held = HeldRun(hold, thread)
    deadline = time.monotonic() + 20
    while partition_status(flow, "exports", {"partition_keys": ["2026-08-08"]}).keys[0].state is not KeyState.RUNNING:
        assert time.monotonic() < deadline, "the held run did not start within 20 s"
        time.sleep(0.02)
    try:
        yield held
    finally:
        held.release()


def test_the_asset_grid_shows_each_keys_state_and_the_counts_of_a_known_history(seeded: HeldRun, client: TestClient) -> None:
    response = client.get("/assets/exports", params=WINDOW, headers=HTML)
    assert response.status_code == 200
    assert cell_states(response.text) == EXPECTED
    assert counts_of(response.text) == {"materialized": 5, "failed": 2, "running": 1, "missing": 2}
    # Readable without colour: each state's symbol is in its cell, and a legend names them.
    assert 'title="2026-08-03: failed">x</a>' in response.text
    assert 'title="2026-08-08: running">&gt;</a>' in response.text
    assert "Legend:" in response.text


def test_a_downstream_of_failed_keys_shows_them_missing(seeded: HeldRun, client: TestClient) -> None:
    states = cell_states(client.get("/assets/daily_total", params=WINDOW, headers=HTML).text)
    assert states["2026-08-03"] == "missing" and states["2026-08-05"] == "missing"
    assert states["2026-08-01"] == "materialized"


def test_the_grid_fragment_updates_on_the_assets_events_and_running_runs_attempts(seeded: HeldRun, client: TestClient) -> None:
    page = client.get("/assets/exports", params=WINDOW, headers=HTML).text
    connect = re.search(r'sse-connect="/api/v1/stream\?asset=exports&amp;initial=events&amp;shown_events=(\d+)"', page)
    assert connect is not None and int(connect.group(1)) > 0  # the newest exports event the page was drawn with
    assert 'hx-get="/assets/exports/grid?start=2026-08-01&amp;end=2026-08-10" hx-trigger="sse:events, sse:attempts" hx-swap="outerHTML"' in page
    fragment = client.get("/assets/exports/grid", params=WINDOW, headers=HTML)
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith("{#") is False and "<html" not in fragment.text
    assert cell_states(fragment.text) == EXPECTED
    seeded.release()
    assert cell_states(client.get("/assets/exports/grid", params=WINDOW, headers=HTML).text)["2026-08-08"] == "materialized"


def test_the_default_window_is_the_one_partita_status_covers(client: TestClient) -> None:
    response = client.get("/assets/exports", headers=HTML)
    assert response.status_code == 200
    assert "the last 30 days ending today (UTC)" in response.text
    assert len(cell_states(response.text)) == 30
    assert 'hx-get="/assets/exports/grid" ' in response.text  # the default window rolls with the days


@pytest.mark.parametrize(
    ("window", "field", "rule"),
    [
        ({"start": "2026-08-10", "end": "2026-08-01"}, "start", "later than its end"),
        ({"start": "2026-8-1", "end": "2026-08-10"}, "start", "canonical"),
        ({"start": "2026-08-01", "end": "someday"}, "end", "canonical YYYY-MM-DD"),
        ({"start": "2026-08-01"}, "end", "needs both start and end"),
        ({"start": "2026-08-01", "end": "2600-01-01"}, "start and end", "at most 100,000"),
        ({"start": "2026-07-01", "end": "2026-08-01"}, "start", "earlier than the definition"),
    ],
)
def test_a_bad_window_is_a_400_page_naming_the_field(client: TestClient, window: dict[str, str], field: str, rule: str) -> None:
    for path in ("/assets/exports", "/assets/exports/grid"):
        response = client.get(path, params=window, headers=HTML)
        assert response.status_code == 400, response.text
        problem = re.search(r'<p class="notice problem" role="alert">([^<]*)</p>', response.text)
        assert problem is not None
        assert problem.group(1).startswith(f"{field}:") and rule in problem.group(1)
        for given in window.values():
            if given.startswith("2026-08") is False:
                assert given not in problem.group(1)  # the rejected text is never repeated


def test_an_overlong_window_bound_is_a_4xx_not_a_500(client: TestClient) -> None:
    response = client.get("/assets/exports", params={"start": "x" * 500, "end": "y"}, headers=HTML)
    assert response.status_code == 422


def test_an_unknown_asset_is_a_404_page(client: TestClient) -> None:
    for path in ("/assets/nothing", "/assets/nothing/grid", "/assets/nothing/keys/2026-08-01"):
        response = client.get(path, headers=HTML)
        assert response.status_code == 404 and "<h1>404" in response.text


def test_a_key_page_shows_the_keys_attempts_events_and_logs(seeded: HeldRun, client: TestClient) -> None:
    failed = client.get("/assets/exports/keys/2026-08-03", headers=HTML)
    assert failed.status_code == 200
    assert 'class="key-state" data-state="failed"' in failed.text
    assert 'class="attempt" data-status="failed"' in failed.text
    assert "FileNotFoundError: the export for this day has not arrived" in failed.text
    assert "reading the export" in failed.text  # its attempt's log line
    done = client.get("/assets/exports/keys/2026-08-01", headers=HTML).text
    assert 'data-state="materialized"' in done and 'class="event"' in done and "outlet" in done
    running = client.get("/assets/exports/keys/2026-08-08", headers=HTML).text
    assert 'class="attempt" data-status="running"' in running


def test_a_grid_cell_links_to_its_keys_page(seeded: HeldRun, client: TestClient) -> None:
    page = client.get("/assets/exports", params=WINDOW, headers=HTML).text
    assert 'href="/assets/exports/keys/2026-08-03"' in page


def test_a_key_pages_lists_are_paginated(seeded: HeldRun, client: TestClient, store_url: str) -> None:
    seeded.release()
    flow = load_entry(ENTRY).with_store(store_url, record_partition_keys=True)
    flow.run({"partition_keys": ["2026-08-01"]})
    first = client.get("/assets/exports/keys/2026-08-01", params={"limit": 1}, headers=HTML).text
    assert first.count('class="attempt"') == 1 and first.count('class="event"') == 1
    older = re.search(r'href="(/assets/exports/keys/2026-08-01\?limit=1&amp;before=[^"]+)"', first)
    later = re.search(r'href="(/assets/exports/keys/2026-08-01\?limit=1&amp;since=\d+)"', first)
    assert older is not None and later is not None
    second = client.get(older.group(1).replace("&amp;", "&"), headers=HTML).text
    assert second.count('class="attempt"') == 1
    assert client.get(later.group(1).replace("&amp;", "&"), headers=HTML).text.count('class="event"') == 1
    assert client.get("/assets/exports/keys/2026-08-01", params={"limit": 0}, headers=HTML).status_code == 422


def test_a_key_that_is_not_canonical_is_a_400_naming_the_rule(client: TestClient) -> None:
    response = client.get("/assets/exports/keys/2026-8-3", headers=HTML)
    assert response.status_code == 400
    assert "partition key: " in response.text and "canonical YYYY-MM-DD" in response.text
    assert "2026-8-3" not in response.text.split("<main>", 1)[1]


def test_a_key_page_says_so_when_no_run_recorded_keys(store_url: str, client: TestClient) -> None:
    load_entry(ENTRY).with_store(store_url, record_partition_keys=False).run({"partition_keys": ["2026-08-02"]})
    page = client.get("/assets/exports/keys/2026-08-02", headers=HTML).text
    assert "No attempt of this key is recorded" in page and "record_partition_keys" in page
    assert 'data-state="materialized"' in page  # its success is an event, recorded whatever the run recorded


HOSTILE = "<script>alert(1)</script>\"onmouseover=alert(2)"

HOSTILE_ENTRY = '''
from partita import Flow, HourlyPartitionDef, MonthlyPartitionDef, StaticPartitionDef, asset

hours = HourlyPartitionDef(start="2026-08-01T00")
regions = StaticPartitionDef("regions", [f"region-{number:03d}" for number in range(100)])
zones = StaticPartitionDef("zones", ["eu/west", "us east?", HOSTILE])
months = MonthlyPartitionDef(start="2025-01")


@asset(partition_def=hours)
def loads(context) -> None:
    if context.partition_key.hour == 2:
        raise ValueError(HOSTILE)


@asset(partition_def=regions)
def reports() -> None:
    pass


@asset(partition_def=zones)
def zone_totals() -> None:
    pass


@asset(partition_def=months)
def invoices() -> None:
    pass


flow = Flow(["loads", "reports", "zone_totals", "invoices"], name="extras", record_partition_keys=True)
'''


@pytest.fixture
def extras(tmp_path: Path, store_url: str, ui_client: Callable[..., TestClient]) -> TestClient:
    """A client over an entry with hourly and static assets, whose errors and extras hold markup."""
    entry = tmp_path / "extras.py"
    entry.write_text(f"HOSTILE = {HOSTILE!r}\n" + HOSTILE_ENTRY, encoding="utf-8")
    flow = load_entry(str(entry)).with_store(store_url, record_partition_keys=True)
    flow.with_targets(["loads"]).run({"partition_range": ("2026-08-01T00", "2026-08-01T03")})
    flow.with_targets(["reports"]).run({"partition_keys": ["region-001", "region-050"]})
    flow.with_targets(["zone_totals"]).run({"partition_keys": ["eu/west", HOSTILE]})
    flow.with_targets(["invoices"]).run({"partition_range": ("2025-11", "2026-02")})
    store = open_store(store_url)
    try:
        publish_event(store, flow, "loads", partition_key="2026-08-01T01", extra={"note": HOSTILE})
    finally:
        store.close()
    return ui_client(entry=str(entry))


def test_extra_and_error_messages_holding_markup_are_shown_escaped(extras: TestClient) -> None:
    for key in ("2026-08-01T01", "2026-08-01T02"):
        page = extras.get(f"/assets/loads/keys/{key}", headers=HTML)
        assert page.status_code == 200
        assert "<script>alert" not in page.text and '"onmouseover=' not in page.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text


def test_hourly_keys_are_a_calendar_by_day_and_static_keys_a_strip(extras: TestClient) -> None:
    hourly = extras.get("/assets/loads", params={"start": "2026-08-01T00", "end": "2026-08-02T23"}, headers=HTML).text
    assert 'class="grid calendar"' in hourly and "<th>day</th>" in hourly
    states = cell_states(hourly)
    assert len(states) == 48
    assert states["2026-08-01T00"] == "materialized" and states["2026-08-01T02"] == "failed"
    static = extras.get("/assets/reports", headers=HTML).text
    assert 'class="grid strip"' in static
    states = cell_states(static)
    assert len(states) == 100 and states["region-050"] == "materialized" and states["region-002"] == "missing"
    assert "start" not in re.findall(r'name="(start|end)"', static)  # a static definition takes no window
    monthly = extras.get("/assets/invoices", params={"start": "2025-01", "end": "2026-12"}, headers=HTML).text
    assert "<th>year</th>" in monthly and "<th class=\"column\">Jan</th>" in monthly
    states = cell_states(monthly)
    assert len(states) == 24 and states["2025-12"] == "materialized" and states["2025-10"] == "missing"


def test_keys_holding_slashes_spaces_and_markup_link_to_their_pages_escaped(extras: TestClient) -> None:
    page = extras.get("/assets/zone_totals", headers=HTML).text
    assert "<script>alert" not in page
    assert 'href="/assets/zone_totals/keys/eu/west"' in page and 'href="/assets/zone_totals/keys/us%20east%3F"' in page
    for key, state in (("eu/west", "materialized"), ("us east?", "missing"), (HOSTILE, "materialized")):
        response = extras.get("/assets/zone_totals/keys/" + quote(key, safe="/"), headers=HTML)
        assert response.status_code == 200, key
        assert f'class="key-state" data-state="{state}"' in response.text
        assert "<script>alert" not in response.text


def test_a_window_of_100000_keys_is_aggregated_into_ranges(seeded: HeldRun, client: TestClient) -> None:
    response = client.get("/assets/exports", params={"start": "2026-08-01", "end": "2300-05-16"}, headers=HTML)
    assert response.status_code == 200
    ranges = re.findall(r'class="range" data-state="([a-z]+)" data-count="(\d+)"', response.text)
    states = [state for state, _ in ranges]
    assert states == ["materialized", "failed", "materialized", "failed", "materialized", "running", "missing"]
    assert sum(int(count) for _, count in ranges) == 100_000
    assert 'href="/assets/exports?start=2026-08-09&amp;end=2300-05-16">grid of this range</a>' in response.text


def test_the_overview_shows_recent_runs_flows_and_daemons(seeded: HeldRun, client: TestClient, store_url: str) -> None:
    archiving = next(flow for flow in load_trigger_flows(ENTRY) if flow.name == "archiving")
    store = open_store(store_url)
    try:
        report = TriggerEvaluator(archiving, store).evaluate(record=True)  # daily_total's successes: requests recorded
        triggers = TriggerStore(store)
        triggers.daemon_started("daemon-0123456789", "build-host", 4242, time.time())
        triggers.daemon_started("daemon-stopped-01", "old-host", 17, time.time() - 600)
        triggers.daemon_heartbeat("daemon-stopped-01", time.time() - 500, stopped=True)
        triggers.daemon_started("daemon-silent-001", "lost-host", 9, time.time() - 60)  # no beat for 12 periods
        run_id = store.list_runs(limit=1)[0].run_id
    finally:
        store.close()
    assert len(report.ready) == 5
    page = client.get("/", headers=HTML)
    assert page.status_code == 200
    assert f'href="/runs/{run_id}"' in page.text and 'class="run" data-status="running"' in page.text
    assert 'class="daemon" data-state="serving"' in page.text and "build-host" in page.text
    assert 'class="daemon" data-state="stopped"' in page.text and 'class="daemon" data-state="silent"' in page.text
    flows = dict(re.findall(r'class="flow" data-flow="([a-z_]+)">(.*?)</tr>', page.text, re.S))
    assert set(flows) == {"daily_totals", "archiving"}
    cells = re.findall(r'<td class="num">(\d+)</td>', flows["archiving"])
    assert "asset events" in flows["archiving"] and "active" in flows["archiving"] and cells == ["5", "0", "0"]
    assert "none" in flows["daily_totals"]
    store = open_store(store_url)
    try:
        TriggerStore(store).set_paused("archiving", True, time.time())
    finally:
        store.close()
    assert "paused" in client.get("/", headers=HTML).text


def test_the_assets_page_lists_the_catalog_and_draws_the_lineage(client: TestClient) -> None:
    page = client.get("/assets", headers=HTML).text
    rows = re.findall(r'class="asset-row" data-asset="([a-z_]+)"', page)
    assert rows == ["exports", "daily_total", "archive"]
    layers = dict(re.findall(r'data-asset="([a-z_]+)" data-layer="(\d+)"', page))
    assert layers == {"exports": "0", "daily_total": "1", "archive": "0"}
    assert page.count('class="lineage-edge"') == 1
    assert 'style="' not in page and "<script>" not in page


def test_a_store_failure_is_a_503_page_and_the_next_request_reads_again(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = SqlStore.succeeded_keys
    calls = {"count": 0}

    def fails_once(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls["count"] += 1
        if calls["count"] == 1:
            raise StoreError("store sqlite:///x: cannot read the keys with a success: disk I/O error")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SqlStore, "succeeded_keys", fails_once)
    failed = client.get("/assets/exports", params=WINDOW, headers=HTML)
    assert failed.status_code == 503 and "<h1>503: StoreError</h1>" in failed.text and "Traceback" not in failed.text
    assert client.get("/assets/exports", params=WINDOW, headers=HTML).status_code == 200
