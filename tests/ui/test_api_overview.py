"""``GET /api/v1/overview``: recent runs, daemons with their last heartbeat, flows with trigger, pause and open requests."""

from __future__ import annotations

import threading
import time
from typing import Any

from fastapi.testclient import TestClient

from partita.automation.daemon import TriggerDaemon
from partita.automation.evaluation import TriggerEvaluator
from partita.store import open_store
from partita.store.triggers import TriggerStore

from .test_api_documents import assert_valid, failing_run, run_entry, trigger_flow

WAIT = 20.0


def _overview(client: TestClient, **params: Any) -> dict[str, Any]:
    response = client.get("/api/v1/overview", params=params)
    assert response.status_code == 200
    document = response.json()
    assert_valid(document)
    return document


def test_the_overview_lists_recent_runs_newest_first_with_status_launch_and_duration(
    client: TestClient, store_url: str, monkeypatch: Any
) -> None:
    first = run_entry(store_url)
    second = failing_run(store_url, monkeypatch)
    runs = _overview(client)["runs"]
    assert [run["run_id"] for run in runs] == [second.run_id, first.run_id]
    assert [(run["status"], run["launched_by"]) for run in runs] == [("failed", "python"), ("success", "python")]
    assert all(run["duration_seconds"] is not None and run["duration_seconds"] >= 0 for run in runs)
    assert [run["run_id"] for run in _overview(client, runs=1)["runs"]] == [second.run_id]


def test_the_overview_of_an_empty_store_lists_the_entry_flows_and_nothing_else(client: TestClient) -> None:
    document = _overview(client)
    assert document["runs"] == [] and document["daemons"] == []
    flows = {flow["name"]: flow for flow in document["flows"]}
    assert set(flows) == {"daily_totals", "archiving"}
    assert (flows["daily_totals"]["trigger_kind"], flows["daily_totals"]["trigger"]) == (None, None)
    assert flows["archiving"]["trigger_kind"] == "asset_events"
    assert flows["archiving"]["trigger"]["assets"] == ["daily_total"]
    assert flows["archiving"]["requests"] == {"pending": 0, "claimed": 0, "abandoned": 0, "waiting": 0}


def test_pending_counts_come_from_recorded_requests_and_pausing_shows(client: TestClient, store_url: str) -> None:
    run_entry(store_url)  # five daily_total successes: five consumer keys of archiving
    archiving = trigger_flow()
    before = {flow["name"]: flow for flow in _overview(client)["flows"]}["archiving"]
    assert before["requests"]["pending"] == 0  # nothing is evaluated to answer: no pass has read the events yet
    store = open_store(store_url)
    try:
        TriggerEvaluator(archiving, store).evaluate()
        TriggerStore(store).set_paused("archiving", True, time.time())
    finally:
        store.close()
    after = {flow["name"]: flow for flow in _overview(client)["flows"]}["archiving"]
    assert after["requests"]["pending"] == 5
    assert after["paused"] is True


def test_a_serving_daemon_shows_serving_with_its_heartbeat_then_stopped(client: TestClient, store_url: str) -> None:
    store = open_store(store_url)
    daemon = TriggerDaemon([trigger_flow()], store, listen=False)
    serving = threading.Thread(target=daemon.serve)
    serving.start()
    try:
        deadline = time.monotonic() + WAIT
        while not (daemons := _overview(client)["daemons"]) and time.monotonic() < deadline:
            time.sleep(0.02)
        (shown,) = daemons
        assert (shown["daemon_id"], shown["state"], shown["stopped_at"]) == (daemon.daemon_id, "serving", None)
        assert shown["heartbeat_at"] >= shown["started_at"]
    finally:
        daemon.stop()
        serving.join(WAIT)
        store.close()
    (stopped,) = _overview(client)["daemons"]
    assert stopped["state"] == "stopped" and stopped["stopped_at"] is not None


def test_a_daemon_without_a_recent_heartbeat_reads_silent(client: TestClient, store_url: str) -> None:
    store = open_store(store_url)
    try:
        TriggerStore(store).daemon_started("d" * 32, "elsewhere", 4242, time.time() - 3600)
    finally:
        store.close()
    (shown,) = _overview(client)["daemons"]
    assert (shown["host"], shown["pid"], shown["state"]) == ("elsewhere", 4242, "silent")


def test_the_run_limit_is_bounded(client: TestClient) -> None:
    for value in ("0", "101", "many"):
        response = client.get("/api/v1/overview", params={"runs": value})
        assert response.status_code == 422 and "runs" in response.json()["error"]["message"]

