"""``/api/v1/assets``: the catalog, one asset, a window of its partition status, a runtime domain's keys."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from partita.entry import load_entry

from .test_api_documents import DAYS, FAILING_DAY, assert_valid, failing_run

RUNTIME_ENTRY = '''
from partita import Flow, PartitionAtRuntime, PartitionKey, asset

tenants = PartitionAtRuntime("tenants", max_keys=10)


@asset(partition_def=tenants)
def discover(context) -> None:
    for key in ("acme", "globex", "initech"):
        context.add_partition(PartitionKey(key))


@asset(partition_def=tenants)
def usage(context, discover: None) -> str:
    return context.partition_key


flow = Flow(["usage"], name="tenants")
'''


def _get(client: TestClient, path: str, expect: int = 200, **params: Any) -> dict[str, Any]:
    response = client.get(path, params=params)
    assert response.status_code == expect, response.text
    document = response.json()
    assert_valid(document)
    return document


def test_the_catalog_is_the_cli_assets_document(client: TestClient) -> None:
    document = _get(client, "/api/v1/assets")
    assert document["targets"] == ["daily_total"]
    assert [(asset["name"], asset["target"]) for asset in document["assets"]] == [("exports", False), ("daily_total", True)]


def test_one_asset_is_described_with_its_dependents(client: TestClient) -> None:
    exports = _get(client, "/api/v1/assets/exports")
    assert exports["asset"]["partition"]["kind"] == "date" and exports["dependents"] == ["daily_total"]
    assert _get(client, "/api/v1/assets/daily_total")["asset"]["deps"] == ["exports"]


def test_an_unknown_asset_is_a_json_404_on_every_asset_route(client: TestClient) -> None:
    for suffix in ("", "/status", "/status/ranges", "/partitions"):
        document = _get(client, f"/api/v1/assets/nothing-here{suffix}", 404)
        assert document["error"]["status"] == 404 and "nothing-here" not in document["error"]["message"]


def test_a_window_shows_each_key_state_for_a_known_history(client: TestClient, store_url: str, monkeypatch: Any) -> None:
    failed = failing_run(store_url, monkeypatch)
    document = _get(client, "/api/v1/assets/exports/status", start=DAYS[0], end="2026-08-07")
    (status,) = document["assets"]
    states = {entry["key"]: entry["state"] for entry in status["keys"]}
    assert states == {
        "2026-08-01": "materialized",
        "2026-08-02": "materialized",
        FAILING_DAY: "failed",
        "2026-08-04": "materialized",
        "2026-08-05": "materialized",
        "2026-08-06": "missing",
        "2026-08-07": "missing",
    }
    assert status["counts"] == {"materialized": 4, "failed": 1, "running": 0, "missing": 2}
    failure = next(entry for entry in status["keys"] if entry["key"] == FAILING_DAY)["last_failure"]
    assert failure["run_id"] == failed.run_id
    assert status["scope"]["kind"] == "range"


def test_a_window_as_ranges_gives_the_same_states_in_order(client: TestClient, store_url: str, monkeypatch: Any) -> None:
    failing_run(store_url, monkeypatch)
    document = _get(client, "/api/v1/assets/exports/status/ranges", start=DAYS[0], end="2026-08-07")
    assert [(r["first"], r["last"], r["state"], r["count"]) for r in document["ranges"]] == [
        ("2026-08-01", "2026-08-02", "materialized", 2),
        (FAILING_DAY, FAILING_DAY, "failed", 1),
        ("2026-08-04", "2026-08-05", "materialized", 2),
        ("2026-08-06", "2026-08-07", "missing", 2),
    ]
    assert document["total"] == 7 and document["counts"] == {"materialized": 4, "failed": 1, "running": 0, "missing": 2}
    assert document["scope"]["kind"] == "range" and document["partition"]["kind"] == "date"
    assert document["more_ranges"] == 0 and document["next"] is None


def test_ranges_beyond_the_limit_are_counted_and_continue_from_next(
    client: TestClient, store_url: str, monkeypatch: Any
) -> None:
    failing_run(store_url, monkeypatch)
    first = _get(client, "/api/v1/assets/exports/status/ranges", start=DAYS[0], end="2026-08-07", limit=2)
    assert [r["state"] for r in first["ranges"]] == ["materialized", "failed"]
    assert first["more_ranges"] == 2 and first["next"] == "2026-08-04"
    rest = _get(client, "/api/v1/assets/exports/status/ranges", start=first["next"], end="2026-08-07")
    assert [(r["first"], r["state"]) for r in rest["ranges"]] == [("2026-08-04", "materialized"), ("2026-08-06", "missing")]


def test_a_window_of_100000_keys_is_read_as_ranges_and_a_larger_one_refused(client: TestClient) -> None:
    # exports' days start on 2026-08-01: 100,000 of them end on 2300-05-16.
    document = _get(client, "/api/v1/assets/exports/status/ranges", start="2026-08-01", end="2300-05-16")
    assert document["total"] == 100_000
    assert document["ranges"] == [{"first": "2026-08-01", "last": "2300-05-16", "state": "missing", "count": 100_000}]
    refused = _get(client, "/api/v1/assets/exports/status/ranges", 422, start="2026-08-01", end="2300-05-17")
    assert "100,001 keys" in refused["error"]["message"] and "at most 100,000" in refused["error"]["message"]
    keyed = _get(client, "/api/v1/assets/exports/status", 422, start="2026-08-01", end="2300-05-16")
    assert "/status/ranges" in keyed["error"]["message"]


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"start": "2026-08-10", "end": "2026-08-01"}, ("start:", "later than its end")),
        ({"start": "2026-8-1", "end": "2026-08-02"}, ("start:", "canonical")),
        ({"start": "2026-08-01"}, ("end:", "needs both")),
        ({"start": "2026-08-01", "end": "2026-08-02", "limit": "0"}, ("limit",)),
    ],
)
def test_a_bad_ranges_request_is_a_422_naming_the_parameter(
    client: TestClient, params: dict[str, str], words: tuple[str, ...]
) -> None:
    document = _get(client, "/api/v1/assets/exports/status/ranges", 422, **params)
    for word in words:
        assert word in document["error"]["message"]


def test_without_a_window_the_status_covers_the_cli_default(client: TestClient) -> None:
    (status,) = _get(client, "/api/v1/assets/exports/status")["assets"]
    assert status["scope"]["kind"] == "window" and len(status["keys"]) == 30
    assert status["counts"]["missing"] == 30


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"start": "2026-08-10", "end": "2026-08-01"}, ("start/end", "later than end")),
        ({"start": "2026-13-01", "end": "2026-08-01"}, ("start/end", "start")),
        ({"start": "08/01/2026", "end": "2026-08-02"}, ("start/end", "start")),
        ({"start": "2026-08-01", "end": "2026-08-0x"}, ("start/end", "end")),
        ({"start": "2026-08-01"}, ("start and end go together", "end")),
        ({"end": "2026-08-01"}, ("start and end go together", "start")),
        ({"start": "2026-08-01", "end": "2099-12-31"}, ("start/end", "at most 5,000", "/status/ranges")),
        ({"start": "2020-01-01", "end": "2026-08-01"}, ("start/end", "earlier than the definition's start")),
    ],
)
def test_a_bad_window_is_a_4xx_naming_the_parameter_and_the_rule(
    client: TestClient, params: dict[str, str], words: tuple[str, ...]
) -> None:
    response = client.get("/api/v1/assets/exports/status", params=params)
    assert 400 <= response.status_code < 500
    document = response.json()
    assert_valid(document)
    for word in words:
        assert word in document["error"]["message"]
    for value in params.values():
        assert value not in document["error"]["message"]  # a rejected key is never repeated


def test_an_oversized_window_is_refused_before_it_is_expanded(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from partita.partitions.time import DatePartitionDef

    def no_expansion(*_: Any) -> Any:
        raise AssertionError("the window was expanded")

    monkeypatch.setattr(DatePartitionDef, "range", no_expansion)
    response = client.get("/api/v1/assets/exports/status", params={"start": "2026-08-01", "end": "9999-12-31"})
    assert response.status_code == 422


def test_the_known_keys_of_a_runtime_domain_are_listed_in_pages(
    ui_client: Callable[..., TestClient], store_url: str, tmp_path: Path
) -> None:
    entry = tmp_path / "tenants_entry.py"
    entry.write_text(RUNTIME_ENTRY)
    client = ui_client(entry=str(entry))
    assert _get(client, "/api/v1/assets/usage/partitions")["keys"] == []
    load_entry(str(entry)).with_store(store_url).run()
    document = _get(client, "/api/v1/assets/usage/partitions")
    assert document["domain"] == "runtime:tenants"
    assert [entry["key"] for entry in document["keys"]] == ["acme", "globex", "initech"]
    page = _get(client, "/api/v1/assets/discover/partitions", limit=2, offset=1)
    assert [entry["key"] for entry in page["keys"]] == ["globex", "initech"]
    (status,) = _get(client, "/api/v1/assets/usage/status")["assets"]
    assert status["scope"]["kind"] == "registry" and status["counts"]["materialized"] == 3


def test_the_keys_of_an_asset_not_partitioned_at_run_time_are_refused(client: TestClient) -> None:
    document = _get(client, "/api/v1/assets/exports/partitions", 422)
    assert "not partitioned at run time" in document["error"]["message"]
