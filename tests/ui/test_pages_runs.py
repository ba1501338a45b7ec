"""The runs, run and events pages through the ASGI client, on both backends: filters, cursors, content, escaping."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from partita import Flow
from partita.events.external import publish_event
from partita.store import open_store

from .runs_seed import entry_flow, run_days
from .ui_entry import HOSTILE_KEYS

HTML = {"accept": "text/html"}


def _run_ids(html: str) -> list[str]:
    return re.findall(r'href="/runs/([0-9a-f]{32})"', html)


def _main(html: str) -> str:
    return html.split("<main>", 1)[1]


def test_the_runs_page_filters_by_status_tag_and_flow(store_url, client, failing_days) -> None:
    ok = run_days(store_url, "2026-08-01", "2026-08-01", tags={"team": "a"})
    failing_days("2026-08-03")
    bad = run_days(store_url, "2026-08-03", "2026-08-03", tags={"team": "b"})
    assert _run_ids(client.get("/runs").text) == [bad.run_id, ok.run_id]
    failed = client.get("/runs", params={"status": "failed"}).text
    assert _run_ids(failed) == [bad.run_id]
    assert '<option value="failed" selected>' in failed
    assert _run_ids(client.get("/runs", params={"tag": "team=a"}).text) == [ok.run_id]
    none = client.get("/runs", params={"flow": "archiving"}).text
    assert _run_ids(none) == [] and "match these filters" in none
    launched = client.get("/runs", params={"launched_by": "python"}).text
    assert '<option value="python" selected>' in launched and bad.run_id in launched



def test_the_runs_form_keeps_every_tag_filter_and_ignores_its_empty_field(store_url, client) -> None:
    both = run_days(store_url, "2026-08-01", "2026-08-01", tags={"team": "a", "tier": "gold"})
    run_days(store_url, "2026-08-02", "2026-08-02", tags={"team": "a"})
    page = client.get("/runs", params=[("tag", "team=a"), ("tag", "tier=gold"), ("tag", "")]).text
    assert _run_ids(page) == [both.run_id]
    assert 'name="tag" value="team=a"' in page and 'name="tag" value="tier=gold"' in page
    assert page.count('name="tag" value=""') == 1  # one more field, for another tag


def test_runs_page_filters_are_validated_as_4xx(client) -> None:
    assert client.get("/runs", params={"launched_by": "telepathy"}, headers=HTML).status_code == 422
    assert client.get("/runs", params={"limit": "0"}, headers=HTML).status_code == 422
    assert client.get("/runs", params={"before": "x" * 65}, headers=HTML).status_code == 422
    assert client.get("/runs", params={"tag": "no-equals"}, headers=HTML).status_code == 400


def test_older_runs_pages_through_every_run_once(store_url, client) -> None:
    made = [run_days(store_url, day, day).run_id for day in ("2026-08-01", "2026-08-02", "2026-08-03")]
    seen: list[str] = []
    page = client.get("/runs", params={"limit": 1}).text
    while True:
        seen.extend(_run_ids(page))
        older = re.search(r'<a href="(/runs\?[^"]+)" rel="next">', page)
        if older is None:
            break
        page = client.get(older.group(1).replace("&amp;", "&")).text
        assert "does not update live" in page
    assert seen == made[::-1]


def test_the_runs_table_fragment_renders_alone(store_url, client) -> None:
    made = run_days(store_url, "2026-08-01", "2026-08-01")
    fragment = client.get("/runs/table", params={"status": "success"}).text
    assert "<html" not in fragment and made.run_id in fragment


def test_a_failed_run_page_shows_tasks_error_traceback_invocations_timeline_and_logs(
    store_url, client, failing_days
) -> None:
    failing_days("2026-08-02")
    result = run_days(store_url, "2026-08-01", "2026-08-03")
    response = client.get(f"/runs/{result.run_id}")
    assert response.status_code == 200
    page = _main(response.text)
    assert '<span class="status status-failed">failed</span>' in page
    assert "launched by</dt><dd>python · flow <strong>daily_totals</strong>" in page
    tasks = page.split('<table class="tasks">', 1)[1].split("</table>", 1)[0]
    exports = tasks.split("<td>exports</td>", 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'<td class="num">(\d+)</td>', exports)[:2] == ["2", "1"]  # success, failed
    failure = page.split('<details class="failure"', 1)[1].split("</details>", 1)[0]
    assert '<span class="key">2026-08-02</span>' in failure
    assert "FileNotFoundError" in failure and "the export for this day has not arrived" in failure
    assert "Traceback (most recent call last)" in failure and "ui_entry.py" in failure
    assert '<table class="invocations">' in failure
    svg = page.split('<svg role="img"', 1)[1].split("</svg>", 1)[0]
    assert svg.count('class="tl-bar tl-success"') == 4 and svg.count('class="tl-bar tl-failed"') == 1
    assert "exports 2026-08-02 (attempt 1): failed" in svg  # the bar's text, for readers without colour
    assert page.count("reading the export") == 3
    assert f'sse-connect="/api/v1/stream?run_id={result.run_id}&amp;initial=run,logs"' in page


def test_a_run_that_did_not_record_keys_shows_none(store_url, client, failing_days) -> None:
    failing_days("2026-08-02")
    result = run_days(store_url, "2026-08-01", "2026-08-03", keys=False)
    page = _main(client.get(f"/runs/{result.run_id}").text)
    assert "FileNotFoundError" in page and "keys not recorded" in page
    assert "2026-08-0" not in page


def test_a_large_run_is_counted_in_timeline_buckets_and_its_log_tail_catches_up_in_batches(store_url, client) -> None:
    result = run_days(store_url, "2026-08-01", "2028-03-22")  # 600 days: 1,200 attempts, 600 log lines
    page = _main(client.get(f"/runs/{result.run_id}").text)
    svg = page.split('<svg role="img"', 1)[1].split("</svg>", 1)[0]
    bars = svg.count('class="tl-bar ')
    assert 0 < bars <= 2 * 120
    assert "counted per" in svg
    assert "exports: 600 success" in page
    assert page.count('class="line stream-log"') == 200  # the tail the page opens with
    first = client.get(f"/runs/{result.run_id}/logs", params={"after": 0})
    assert first.text.count('class="line stream-log"') == 500
    assert first.headers["HX-Trigger-After-Settle"] == "partita-more-logs"  # the page asks again at once
    cursor = re.search(r'id="log-after" name="after" value="(\d+)"', first.text).group(1)
    rest = client.get(f"/runs/{result.run_id}/logs", params={"after": cursor})
    assert rest.text.count('class="line stream-log"') == 100 and "HX-Trigger-After-Settle" not in rest.headers


def test_attempts_stamped_outside_their_run_s_span_are_grouped_in_its_buckets(store_url, client) -> None:
    from partita.store.run_digest import RunDigest
    from partita.store.schema import runs

    result = run_days(store_url, "2026-08-01", "2027-04-27")  # 270 days: 540 attempts
    store = open_store(store_url)
    try:
        with store.database.write() as connection:  # the run's own clock ran ahead of its workers'
            connection.execute(
                runs.update().where(runs.c.run_id == result.run_id).values(started_at=runs.c.finished_at - 0.01)
            )
        _, scan = RunDigest(store).read(result.run_id, buckets=120, now=0.0)
    finally:
        store.close()
    assert sum(bucket.count for bucket in scan.buckets) == 540
    assert len(scan.buckets) <= 2 * 120 and all(0 <= bucket.bucket < 120 for bucket in scan.buckets)
    assert "exports: 270 success" in _main(client.get(f"/runs/{result.run_id}").text)


def test_a_run_of_hostile_keys_shows_them_escaped_in_failures_timeline_and_logs(store_url, client) -> None:
    flow = entry_flow()
    tenants = Flow(["tenant_report"], registry=flow.registry, name="tenants", record_partition_keys=True)
    result = tenants.with_store(store_url, record_partition_keys=True).run({"partition_keys": list(HOSTILE_KEYS)})
    body = client.get(f"/runs/{result.run_id}").text
    assert "<script>document.title" not in body and "<img src=x" not in body
    assert body.count("&lt;script&gt;document.title=&#39;owned&#39;") >= 2  # a bar's title and a log line


def test_the_log_fragment_sends_only_lines_after_its_cursor_and_moves_it(store_url, client) -> None:
    result = run_days(store_url, "2026-08-01", "2026-08-03")
    ids = [line.id for line in open_store(store_url).attempt_logs(result.run_id)]
    fragment = client.get(f"/runs/{result.run_id}/logs", params={"after": ids[0]}).text
    assert re.findall(r'data-id="(\d+)"', fragment) == [str(i) for i in ids[1:]]
    assert f'id="log-after" name="after" value="{ids[-1]}" hx-swap-oob="true"' in fragment
    nothing = client.get(f"/runs/{result.run_id}/logs", params={"after": ids[-1]}).text
    assert "data-id" not in nothing and f'value="{ids[-1]}"' in nothing
    assert client.get(f"/runs/{result.run_id}/logs", params={"after": "-1"}).status_code == 422


def test_an_unknown_run_is_a_404_page(client) -> None:
    response = client.get("/runs/0123456789abcdef", headers=HTML)
    assert response.status_code == 404
    assert "text/html" in response.headers["content-type"] and "no run with id" in response.text


def test_the_events_page_filters_by_asset_and_key_newest_first(store_url, client) -> None:
    run_days(store_url, "2026-08-01", "2026-08-02")
    every = client.get("/events").text
    ids = [int(i) for i in re.findall(r'<td class="num">(\d+)</td>', every)]
    assert ids == sorted(ids, reverse=True) and len(ids) == 4
    exports = client.get("/events", params={"asset": "exports"}).text
    assert exports.count("<td>exports</td>") == 2 and "<td>daily_total</td>" not in exports
    newest_exports = max(int(i) for i in re.findall(r'<td class="num">(\d+)</td>', exports))
    assert f'sse-connect="/api/v1/stream?asset=exports&amp;initial=events&amp;shown_events={newest_exports}"' in exports
    one = client.get("/events", params={"asset": "exports", "partition_key": "2026-08-02"}).text
    assert one.count("<td>exports</td>") == 1 and "2026-08-01" not in _main(one).split("<tbody>", 1)[1]
    alone = client.get("/events", params={"partition_key": "2026-08-02"}, headers=HTML)
    assert alone.status_code == 400 and "choose an asset too" in alone.text


def test_older_events_are_a_page_of_their_own(store_url, client) -> None:
    run_days(store_url, "2026-08-01", "2026-08-02")
    first = client.get("/events", params={"limit": 3}).text
    older = re.search(r'<a href="(/events\?[^"]+)" rel="next">', first)
    assert older is not None
    rest = client.get(older.group(1).replace("&amp;", "&")).text
    assert "does not update live" in rest
    assert re.findall(r'<td class="num">(\d+)</td>', rest) == ["1"]


def test_event_keys_and_extra_are_escaped_everywhere(store_url, client) -> None:
    store = open_store(store_url)
    try:
        for key in HOSTILE_KEYS:
            publish_event(
                store, entry_flow(), "tenant_report", partition_key=key, extra={"note": key, "html": "<b>bold</b>"}
            )
    finally:
        store.close()
    for path in ("/events", "/events/feed", "/events?asset=tenant_report"):
        body = client.get(path).text
        assert "<script>document.title" not in body and "<img src=x" not in body and "<b>bold</b>" not in body
        assert "&lt;script&gt;document.title=&#39;owned&#39;" in body
        assert "&#34;onmouseover=&#34;" in body or "&quot;onmouseover=&quot;" in body


@pytest.mark.parametrize("path", ["/runs/{id}/summary", "/runs/{id}"])
def test_run_fragments_and_pages_accept_a_unique_id_prefix(store_url, client: TestClient, path: str) -> None:
    result = run_days(store_url, "2026-08-01", "2026-08-01")
    response = client.get(path.format(id=result.run_id[:10]))
    assert response.status_code == 200 and result.run_id in response.text


def test_a_running_run_page_shows_its_end_as_soon_as_it_is_stored(store_url, client, tmp_path, monkeypatch) -> None:
    import threading

    from .runs_seed import wait_until

    hold = tmp_path / "hold"
    hold.touch()
    monkeypatch.setenv("PARTITA_TEST_HOLD", str(hold))
    flow = entry_flow().with_store(store_url, record_partition_keys=True)
    worker = threading.Thread(target=lambda: flow.run(flow.plan_from_text({"partition_keys": ["2026-08-01"]})))
    worker.start()
    store = open_store(store_url)
    try:
        run = wait_until(lambda: store.list_runs(limit=1, status="running"), what="the held run")[0]
        assert '<span class="status status-running">running</span>' in client.get(f"/runs/{run.run_id}/summary").text
        hold.unlink()
        worker.join(timeout=20)
        assert store.get_run(run.run_id).status == "success"
        # Read again at once: a page kept for other viewers of a running run is not shown once its status moved.
        assert '<span class="status status-success">success</span>' in client.get(f"/runs/{run.run_id}/summary").text
    finally:
        hold.unlink(missing_ok=True)
        worker.join(timeout=30)
        store.close()


def test_a_consumer_run_page_names_its_trigger_request_and_consumer_key(store_url, client) -> None:
    from partita.automation.daemon import TriggerDaemon
    from partita.entry import load_trigger_flows

    from .support import ENTRY

    run_days(store_url, "2026-08-01", "2026-08-01")
    store = open_store(store_url)
    try:
        TriggerDaemon(load_trigger_flows(ENTRY), store, listen=False).run_once()
        consumer = store.list_runs(limit=1)[0]
    finally:
        store.close()
    page = _main(client.get(f"/runs/{consumer.run_id}").text)
    assert "launched by</dt><dd>trigger · flow <strong>archiving</strong>" in page
    request = page.split("<dt>trigger request</dt>", 1)[1].split("</dd>", 1)[0]
    assert "of flow archiving" in request and '<span class="key">2026-08-01</span>' in request and "try 1" in request
