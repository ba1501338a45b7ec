"""What the action tests share: seeding the test entry's history, and waiting for a run with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from partita.entry import load_entry
from partita.results.model import RunResult

from .support import ENTRY, auth

DEADLINE_SECONDS = 30.0


def seed(store_url: str, config: dict[str, Any]) -> RunResult:
    """Run the entry's flow (``daily_totals``) into the store, recording keys, as a Python program would."""
    flow = load_entry(ENTRY).with_store(store_url, record_partition_keys=True)
    return flow.run(config)


def wait_for(predicate: Callable[[], Any], what: str, deadline: float = DEADLINE_SECONDS) -> Any:
    """Poll ``predicate`` until it returns something truthy, or fail after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"{what} did not happen within {deadline:g} s")
        time.sleep(0.02)


def run_status(client: TestClient, run_id: str) -> str:
    return str(client.get(f"/api/v1/runs/{run_id}").json()["run"]["status"])


def wait_until_finished(client: TestClient, run_id: str) -> str:
    return str(
        wait_for(lambda: (status := run_status(client, run_id)) != "running" and status, f"run {run_id} finishing")
    )


def plan(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/api/v1/plans", json=body, headers=auth())
    assert response.status_code == 201, response.text
    document: dict[str, Any] = response.json()
    return document


def launch(client: TestClient, plan_id: str) -> str:
    response = client.post(f"/api/v1/plans/{plan_id}/run", headers=auth())
    assert response.status_code == 202, response.text
    return str(response.json()["run"]["run_id"])
