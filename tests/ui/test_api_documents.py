"""Every API document validates against its schema in docs/schemas, and every ``/api/v1`` route is in the OpenAPI document.

The documents are produced for real, over a store seeded by running the
test entry's flows. The other API test modules import `assert_valid` and
the seeding helpers from here.
"""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from partita.entry import load_entry, load_trigger_flows
from partita.results.model import RunResult
from partita.ui.routes import ROUTERS

from ..results.test_document_schemas import assert_valid as assert_valid_as
from .support import ENTRY, auth

#: The days every seeded run covers; exports fails on FAILING_DAY when asked to.
DAYS = ("2026-08-01", "2026-08-05")
FAILING_DAY = "2026-08-03"


def assert_valid(response_document: Any) -> None:
    """The document validates against the schema its ``schema`` field names (``partita.KIND`` → ``KIND.v1.json``)."""
    kind = response_document["schema"].removeprefix("partita.")
    assert_valid_as(response_document, f"{kind}.v{response_document['version']}.json")


def run_entry(store_url: str, *, record_keys: bool = True, days: tuple[str, str] = DAYS) -> RunResult:
    """One run of the entry's flow over ``days``, recorded in ``store_url``."""
    flow = load_entry(ENTRY).with_store(store_url, record_partition_keys=record_keys)
    return flow.run({"partition_range": days})


def failing_run(store_url: str, monkeypatch: Any, *, record_keys: bool = True) -> RunResult:
    """A run in which exports fails on `FAILING_DAY` (its daily_total is skipped)."""
    monkeypatch.setenv("PARTITA_TEST_FAIL_DAYS", FAILING_DAY)
    try:
        return run_entry(store_url, record_keys=record_keys)
    finally:
        monkeypatch.delenv("PARTITA_TEST_FAIL_DAYS")


def trigger_flow(name: str = "archiving") -> Any:
    return next(flow for flow in load_trigger_flows(ENTRY) if flow.name == name)


def test_every_api_document_matches_its_schema(client: TestClient, store_url: str, monkeypatch: Any) -> None:
    failed = failing_run(store_url, monkeypatch)
    published = client.post(
        "/api/v1/events", json={"asset": "exports", "partition_key": "2026-08-09", "extra": {"rows": 3}}, headers=auth()
    )
    run = failed.run_id
    documents = [
        published.json(),
        *(
            client.get(path, params=params).json()
            for path, params in (
                ("/api/v1/overview", {}),
                ("/api/v1/assets", {}),
                ("/api/v1/assets/exports", {}),
                ("/api/v1/assets/exports/status", {"start": DAYS[0], "end": "2026-08-10"}),
                ("/api/v1/assets/exports/status", {}),
                ("/api/v1/runs", {"limit": 1}),
                (f"/api/v1/runs/{run}", {}),
                (f"/api/v1/runs/{run}/attempts", {"limit": 3}),
                (f"/api/v1/runs/{run}/attempts", {"status": "failed"}),
                (f"/api/v1/runs/{run}/logs", {"limit": 2}),
                ("/api/v1/events", {"limit": 2}),
                ("/api/v1/runs/no-such-run", {}),
                ("/api/v1/assets/exports/status", {"start": "2026-08-10", "end": DAYS[0]}),
            )
        ),
    ]
    kinds = [document["schema"] for document in documents]
    assert kinds.count("partita.error") == 2 and "partita.emission" in kinds and "partita.attempts" in kinds
    for document in documents:
        assert_valid(document)


def _api_routes(_: TestClient) -> list[APIRoute]:
    """Every route under /api/v1 of every router the app mounts, whichever module adds it."""
    return [
        route
        for router in ROUTERS
        for route in router.routes
        if isinstance(route, APIRoute) and route.path.startswith("/api/v1")
    ]


def test_the_openapi_document_lists_every_api_route_with_a_summary(client: TestClient) -> None:
    document = client.get("/api/v1/openapi.json").json()
    paths = document["paths"]
    routes = _api_routes(client)
    assert len(routes) >= 10
    for route in routes:
        if not route.include_in_schema:
            continue
        assert route.path in paths, f"{route.path} is missing from the OpenAPI document"
        for method in route.methods:
            operation = paths[route.path][method.lower()]
            assert operation.get("summary"), f"{method} {route.path} has no summary"


def test_every_api_route_is_in_the_openapi_document(client: TestClient) -> None:
    """A route left out of the schema (include_in_schema=False) under /api/v1 would be undocumented API."""
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    hidden = [route.path for route in _api_routes(client) if route.path not in paths]
    assert hidden == []


def test_every_parameter_of_the_read_routes_is_described(client: TestClient) -> None:
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    reads = [
        "/api/v1/overview", "/api/v1/assets", "/api/v1/assets/{name}", "/api/v1/assets/{name}/status",
        "/api/v1/assets/{name}/partitions", "/api/v1/runs", "/api/v1/runs/{run_id}", "/api/v1/runs/{run_id}/attempts",
        "/api/v1/runs/{run_id}/logs", "/api/v1/events",
    ]  # fmt: skip
    undescribed = [
        f"GET {path} {parameter['name']}"
        for path in reads
        for parameter in paths[path]["get"].get("parameters", ())
        if not parameter.get("description")
    ]
    assert undescribed == []


def test_the_event_body_is_described_in_the_openapi_document(client: TestClient) -> None:
    operation = client.get("/api/v1/openapi.json").json()["paths"]["/api/v1/events"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert set(schema["properties"]) == {"asset", "partition_key", "partition_date", "extra", "dedupe_key"}
    assert schema["additionalProperties"] is False
