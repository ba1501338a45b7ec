"""``/api/v1/runs``: filtered pages of runs, one run, a run's attempts and its logs, on both backends."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from partita.definitions.launch import LaunchKind
from partita.entry import load_entry

from .support import ENTRY
from .test_api_documents import DAYS, FAILING_DAY, assert_valid, failing_run, run_entry


def _get(client: TestClient, path: str, expect: int = 200, **params: Any) -> dict[str, Any]:
    response = client.get(path, params=params)
    assert response.status_code == expect, response.text
    document = response.json()
    assert_valid(document)
    return document


def test_runs_page_through_the_history_with_the_next_cursor(client: TestClient, store_url: str) -> None:
    ran = [run_entry(store_url, days=(day, day)).run_id for day in ("2026-08-01", "2026-08-02", "2026-08-03")]
    first = _get(client, "/api/v1/runs", limit=2)
    assert [run["run_id"] for run in first["runs"]] == ran[:0:-1]
    second = _get(client, "/api/v1/runs", limit=2, before=first["next"])
    assert [run["run_id"] for run in second["runs"]] == [ran[0]] and second["next"] is None
    assert _get(client, "/api/v1/runs", limit=3)["next"] == ran[0]  # a full page has a cursor, even the last one


def test_runs_filter_by_how_they_were_launched(client: TestClient, store_url: str) -> None:
    flow = load_entry(ENTRY).with_store(store_url)
    by_python = flow.run({"partition_keys": ["2026-08-01"]})
    by_cli = flow.run({"partition_keys": ["2026-08-02"]}, launched_by=LaunchKind.CLI)
    listed = {kind: [run["run_id"] for run in _get(client, "/api/v1/runs", launched_by=kind)["runs"]] for kind in ("python", "cli", "ui")}
    assert listed == {"python": [by_python.run_id], "cli": [by_cli.run_id], "ui": []}


def test_an_unknown_or_ambiguous_cursor_is_a_json_4xx(client: TestClient, store_url: str) -> None:
    run_entry(store_url)
    assert _get(client, "/api/v1/runs", 404, before="0" * 32)["error"]["type"] == "UnknownRunError"
    assert _get(client, "/api/v1/runs", 404, before="ab")["error"]["type"] == "UnknownRunError"  # too short a prefix


def test_a_run_attempts_come_in_pages_of_asset_and_index(client: TestClient, store_url: str, monkeypatch: Any) -> None:
    run = failing_run(store_url, monkeypatch).run_id
    seen: list[tuple[str, int]] = []
    cursor = None
    while True:
        page = _get(client, f"/api/v1/runs/{run}/attempts", limit=3, **({} if cursor is None else {"after": cursor}))
        seen += [(entry["asset"], entry["attempt"]["index"]) for entry in page["attempts"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert seen == sorted(seen) and len(seen) == 10 == len(set(seen))
    failed = _get(client, f"/api/v1/runs/{run}/attempts", status="failed")["attempts"]
    assert [(entry["asset"], entry["attempt"]["partition_key"]) for entry in failed] == [("exports", FAILING_DAY)]
    assert failed[0]["attempt"]["failure"]["type"] == "builtins.FileNotFoundError"
    skipped = _get(client, f"/api/v1/runs/{run}/attempts", asset="daily_total", status="skipped")["attempts"]
    assert [entry["attempt"]["blocked_by"] for entry in skipped] == [[{"asset": "exports", "attempt": 2}]]


def test_a_run_without_its_attempts_keeps_every_task_status_and_count(
    client: TestClient, store_url: str, monkeypatch: Any
) -> None:
    run = failing_run(store_url, monkeypatch).run_id
    full = _get(client, f"/api/v1/runs/{run}", attempts="all")
    bare = _get(client, f"/api/v1/runs/{run}", attempts="none")
    assert full["attempts_listed"] is True and bare["attempts_listed"] is False
    assert [task["attempts"] for task in bare["run"]["tasks"]] == [[], []]
    for task in full["run"]["tasks"]:
        task["attempts"] = []
    assert bare["run"] == full["run"]  # statuses, counts, resources and the rest, read without the attempts
    assert full["run"]["counts"] == {"success": 8, "failed": 1, "skipped": 1, "cancelled": 0}


def test_a_large_run_is_described_without_its_attempts_unless_asked(
    client: TestClient, store_url: str, monkeypatch: Any
) -> None:
    import partita.documents.runs as documents

    run = run_entry(store_url).run_id  # 10 attempts
    assert _get(client, f"/api/v1/runs/{run}")["attempts_listed"] is True
    monkeypatch.setattr(documents, "MAX_LISTED_ATTEMPTS", 9)
    assert _get(client, f"/api/v1/runs/{run}")["attempts_listed"] is False
    assert _get(client, f"/api/v1/runs/{run}", attempts="all")["attempts_listed"] is True
    refused = _get(client, f"/api/v1/runs/{run}", 422, attempts="some")
    assert "attempts" in refused["error"]["message"]


def test_attempts_name_keys_only_when_the_run_recorded_them(client: TestClient, store_url: str) -> None:
    run = run_entry(store_url, record_keys=False).run_id
    page = _get(client, f"/api/v1/runs/{run}/attempts")
    assert page["partition_keys_recorded"] is False
    assert all("partition_key" not in entry["attempt"] for entry in page["attempts"])
    assert all(DAYS[0] not in str(entry) for entry in page["attempts"])


def test_a_run_can_be_named_by_a_unique_prefix(client: TestClient, store_url: str) -> None:
    run = run_entry(store_url).run_id
    assert _get(client, f"/api/v1/runs/{run[:8]}")["run"]["run_id"] == run
    assert _get(client, f"/api/v1/runs/{run[:8]}/attempts", limit=1)["run_id"] == run


def test_logs_are_the_cli_document_with_filters_and_pages(client: TestClient, store_url: str, monkeypatch: Any) -> None:
    run = failing_run(store_url, monkeypatch).run_id
    everything = _get(client, f"/api/v1/runs/{run}/logs")
    assert [line["message"] for line in everything["lines"]] == ["reading the export"] * 5
    assert everything["next"] is None
    first = _get(client, f"/api/v1/runs/{run}/logs", limit=2)
    rest = _get(client, f"/api/v1/runs/{run}/logs", after=first["next"])
    assert [line["id"] for line in first["lines"] + rest["lines"]] == [line["id"] for line in everything["lines"]]
    one_key = _get(client, f"/api/v1/runs/{run}/logs", partition_key=FAILING_DAY)["lines"]
    assert [line["partition_key"] for line in one_key] == [FAILING_DAY]
    assert _get(client, f"/api/v1/runs/{run}/logs", level="warning")["lines"] == []
    assert len(_get(client, f"/api/v1/runs/{run}/logs", level="INFO", asset="exports")["lines"]) == 5


def test_a_key_filter_on_a_run_that_recorded_no_keys_is_refused_naming_the_parameter(
    client: TestClient, store_url: str
) -> None:
    run = run_entry(store_url, record_keys=False).run_id
    message = _get(client, f"/api/v1/runs/{run}/logs", 400, partition_key=DAYS[0])["error"]["message"]
    assert message.startswith("partition_key needs a run that recorded partition keys") and DAYS[0] not in message
    assert _get(client, f"/api/v1/runs/{run}/logs", 400, asset="nothing")["error"]["message"].startswith("asset names no asset")


@pytest.mark.parametrize("suffix", ["", "/attempts", "/logs"])
def test_an_unknown_run_is_a_json_404_on_every_run_route(client: TestClient, suffix: str) -> None:
    document = _get(client, f"/api/v1/runs/{'f' * 32}{suffix}", 404)
    assert document["error"]["type"] == "UnknownRunError"
