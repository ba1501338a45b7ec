"""Bad input to any ``/api/v1`` read is a 4xx with a JSON error, never a 5xx, on both backends.

The sweep takes every GET route and parameter from the OpenAPI document
(routes other modules add are swept too) and sends each a set of hostile
values: empty, negative, huge, not a number, NUL and other control
characters, markup, a lone percent sign. Any answer is fine but a server
error, and every error is the JSON error document.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from .test_api_documents import assert_valid, run_entry

HOSTILE = ("", "-1", "0", "9" * 40, "x" * 5000, "\x00", "a\x01b", "<script>alert(1)</script>", "%", "..", "2026-02-30")
#: Routes the sweep leaves alone: the live stream never ends on its own.
UNENDING = ("/api/v1/stream",)


def _get_routes(client: TestClient) -> list[tuple[str, list[dict[str, Any]]]]:
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    return [
        (path, operations["get"].get("parameters", []))
        for path, operations in paths.items()
        if "get" in operations and path.startswith("/api/v1") and path not in UNENDING
    ]


def _fill(path: str, run_id: str, overrides: dict[str, str] | None = None) -> str:
    values = {"run_id": run_id, "name": "exports", **(overrides or {})}
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    return path


def _assert_client_error(response: Any, what: str) -> None:
    assert response.status_code < 500, f"{what}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith("application/json"), what
        assert_valid(response.json())


def test_hostile_query_values_never_cause_a_server_error(client: TestClient, store_url: str) -> None:
    run_id = run_entry(store_url).run_id
    routes = _get_routes(client)
    assert len(routes) >= 9
    for path, parameters in routes:
        for parameter in parameters:
            if parameter["in"] != "query":
                continue
            for value in HOSTILE:
                response = client.get(_fill(path, run_id), params={parameter["name"]: value})
                _assert_client_error(response, f"{path}?{parameter['name']}={value[:20]!r}")


def test_hostile_path_values_never_cause_a_server_error(client: TestClient, store_url: str) -> None:
    run_entry(store_url)
    for path, parameters in _get_routes(client):
        for parameter in parameters:
            if parameter["in"] != "path":
                continue
            for value in HOSTILE:
                if value in ("", "..", "%"):
                    continue  # not a path segment a client can send
                url = _fill(path, "f" * 32, {parameter["name"]: quote(value, safe="")})
                _assert_client_error(client.get(url), f"{path} with {parameter['name']}={value[:20]!r}")


@pytest.mark.parametrize(
    ("path", "params", "status", "field"),
    [
        ("/api/v1/runs", {"status": "finished"}, 422, "query.status"),
        ("/api/v1/runs", {"limit": "501"}, 422, "query.limit"),
        ("/api/v1/runs", {"limit": "ten"}, 422, "query.limit"),
        ("/api/v1/runs", {"tag": "=x"}, 400, "tag"),
        ("/api/v1/runs", {"launched_by": "cron"}, 422, "query.launched_by"),
        ("/api/v1/runs", {"before": "x" * 65}, 422, "query.before"),
        ("/api/v1/runs/{run_id}/attempts", {"status": "done"}, 422, "query.status"),
        ("/api/v1/runs/{run_id}/attempts", {"limit": "1001"}, 422, "query.limit"),
        ("/api/v1/runs/{run_id}/attempts", {"after": "exports"}, 400, "after"),
        ("/api/v1/runs/{run_id}/attempts", {"after": "exports:-1"}, 400, "after"),
        ("/api/v1/runs/{run_id}/logs", {"level": "loud"}, 422, "query.level"),
        ("/api/v1/runs/{run_id}/logs", {"after": "-1"}, 422, "query.after"),
        ("/api/v1/runs/{run_id}/logs", {"limit": "0"}, 422, "query.limit"),
        ("/api/v1/events", {"since": "-1"}, 422, "query.since"),
        ("/api/v1/events", {"since": "first"}, 422, "query.since"),
        ("/api/v1/events", {"limit": "1001"}, 422, "query.limit"),
        ("/api/v1/events", {"asset": ""}, 422, "query.asset"),
        ("/api/v1/assets/{name}/status", {"start": "x" * 201, "end": "2026-08-01"}, 422, "query.start"),
        ("/api/v1/assets/{name}/partitions", {"limit": "0"}, 422, "query.limit"),
        ("/api/v1/overview", {"runs": "-3"}, 422, "query.runs"),
    ],
)
def test_a_malformed_filter_is_a_4xx_naming_the_parameter(
    client: TestClient, store_url: str, path: str, params: dict[str, str], status: int, field: str
) -> None:
    run_id = run_entry(store_url, days=("2026-08-01", "2026-08-01")).run_id
    response = client.get(_fill(path, run_id), params=params)
    assert response.status_code == status, response.text
    document = response.json()
    assert_valid(document)
    assert field in document["error"]["message"]
