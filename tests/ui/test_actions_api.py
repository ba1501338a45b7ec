"""Plan-first actions through the JSON API: plan, run exactly that plan once, cancel, pause and resume.

Every test runs on SQLite and PostgreSQL (the ``client`` fixture's store).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from partita.cli.main import cli
from partita.store import open_store
from partita.ui.launcher import PlanBook

from ..results.test_document_schemas import assert_valid
from .actions_support import launch, plan, run_status, seed, wait_for, wait_until_finished
from .support import ENTRY, auth

RANGE = ["2026-08-01", "2026-08-05"]


# --- planning ---------------------------------------------------------------


def test_a_plan_shows_the_text_partita_plan_prints(client: TestClient, store_url: str) -> None:
    document = plan(client, {"partition_range": RANGE, "max_concurrency": 2})
    printed = CliRunner().invoke(
        cli, ["plan", ENTRY, "--partition-range", *RANGE, "--max-concurrency", "2", "--store", store_url]
    )
    assert printed.exit_code == 0, printed.output
    assert document["schema"] == "partita.planned" and document["runnable"] is True
    assert document["text"] == printed.output
    assert document["plan"]["schema"] == "partita.plan"
    assert document["plan"]["selection"]["key_count"] == 5
    assert client.get(f"/api/v1/plans/{document['plan_id']}").json()["text"] == printed.output
    assert_valid(document, "planned.v1.json")


def test_planning_records_nothing_and_needs_the_token(client: TestClient, store_url: str) -> None:
    refused = client.post("/api/v1/plans", json={"partition_range": RANGE})
    assert refused.status_code == 401 and refused.json()["schema"] == "partita.error"
    plan(client, {"partition_range": RANGE})
    assert client.get("/api/v1/runs").json()["runs"] == []


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"partition_range": ["2026-08-05", "2026-08-01"]}, 422, "start is later than end"),
        ({"partition_key": "not-a-day"}, 422, "partition_keys"),
        ({"partition_range": RANGE, "surprise": 1}, 422, "surprise"),
        ({"partition_range": ["2026-08-01"]}, 422, "partition_range"),
        ({"max_concurrency": 0, "partition_range": RANGE}, 422, "max_concurrency"),
        ({"targets": ["no_such_asset"], "partition_range": RANGE}, 422, "no_such_asset"),
        ({"missing": True}, 400, "bounded selection"),
        ({"missing": True, "failed_from": "abcd", "partition_range": RANGE}, 400, "cannot be combined"),
        ({"failed_from": "abcd", "partition_range": RANGE}, 400, "cannot be combined with partition_range"),
        ({"failed_from": "no-such-run"}, 404, "no-such-run"),
        ({"partition_keys": [str(n) for n in range(1001)]}, 422, "partition_keys"),
    ],
)
def test_a_bad_plan_request_is_a_4xx_naming_the_field_never_a_500(
    client: TestClient, body: dict[str, object], status: int, words: str
) -> None:
    response = client.post("/api/v1/plans", json=body, headers=auth())
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert words in error["message"] and "Traceback" not in error["message"]
    assert "not-a-day" not in error["message"]  # a rejected key is never repeated


def test_a_malformed_json_body_is_a_422(client: TestClient) -> None:
    response = client.post(
        "/api/v1/plans", content=b"{not json", headers={**auth(), "content-type": "application/json"}
    )
    assert response.status_code == 422 and response.json()["schema"] == "partita.error"


def test_an_unknown_plan_is_a_404(client: TestClient) -> None:
    assert client.get("/api/v1/plans/no-such-plan-id").status_code == 404
    response = client.post("/api/v1/plans/no-such-plan-id/run", headers=auth())
    assert response.status_code == 404 and "plan again" in response.json()["error"]["message"]


def test_a_plan_expires_and_the_oldest_plans_make_room(store_url: str) -> None:
    from partita.entry import load_entry

    flow = load_entry(ENTRY)
    now = [1000.0]
    book = PlanBook(capacity=2, ttl=60, clock=lambda: now[0])
    first = book.keep(flow, flow.plan({"partition_keys": ["2026-08-01"]}), "text")
    now[0] += 61
    with pytest.raises(Exception, match="no plan with this id"):
        book.get(first.plan_id)
    kept = [book.keep(flow, first.plan, "text") for _ in range(3)]
    with pytest.raises(Exception, match="no plan with this id"):
        book.get(kept[0].plan_id)
    assert book.get(kept[2].plan_id) is kept[2]


def test_a_plan_whose_start_failed_may_be_confirmed_again_but_not_one_whose_start_is_unconfirmed() -> None:
    from fastapi import HTTPException

    from partita.entry import load_entry
    from partita.errors import StoreError
    from partita.ui.launcher import StartUnconfirmed

    flow = load_entry(ENTRY)
    book = PlanBook()
    planned = book.keep(flow, flow.plan({"partition_keys": ["2026-08-01"]}), "text")

    def refused(_: object) -> str:
        raise StoreError("the store refused the run")

    with pytest.raises(StoreError):
        book.take(planned.plan_id, refused)
    assert book.get(planned.plan_id) is planned  # nothing started: confirm again

    def slow(_: object) -> str:
        raise StartUnconfirmed(503, "not recorded in time")

    with pytest.raises(StartUnconfirmed):
        book.take(planned.plan_id, slow)
    with pytest.raises(HTTPException) as again:
        book.take(planned.plan_id, lambda _: "never")
    assert again.value.status_code == 409  # it may still start: never twice


def test_a_plan_the_running_flow_did_not_make_is_refused_before_anything_is_recorded(store_url: str) -> None:
    from partita.entry import load_entry
    from partita.errors import PlanningError
    from partita.ui.launcher import Launcher

    flow = load_entry(ENTRY)
    other = flow.with_targets(["exports"])  # another configuration: approval.py names the difference
    planned = PlanBook().keep(flow, other.plan({"partition_keys": ["2026-08-01"]}), "text")
    store = open_store(store_url)
    try:
        with pytest.raises(PlanningError, match="targets"):
            Launcher(store, record_partition_keys=None).launch(planned)
        assert store.list_runs(limit=5) == []
    finally:
        store.close()


# --- launching ---------------------------------------------------------------


def test_a_confirmed_plan_runs_in_the_server_recorded_as_launched_from_the_ui(client: TestClient) -> None:
    document = plan(client, {"partition_range": RANGE})
    response = client.post(f"/api/v1/plans/{document['plan_id']}/run", headers=auth())
    assert response.status_code == 202
    started = response.json()
    run_id = started["run"]["run_id"]
    assert started["schema"] == "partita.run" and response.headers["location"] == f"/api/v1/runs/{run_id}"
    assert started["launched_by"] == "ui" and started["tags"] == {"partita.launched_from": "ui"}
    assert_valid(started, "run.v1.json")
    assert wait_until_finished(client, run_id) == "success"
    assert client.get(f"/api/v1/runs/{run_id}").json()["run"]["counts"]["success"] == 10


def test_a_plan_runs_once_a_second_confirmation_names_the_first_run(client: TestClient) -> None:
    document = plan(client, {"partition_key": "2026-08-01"})
    run_id = launch(client, document["plan_id"])
    again = client.post(f"/api/v1/plans/{document['plan_id']}/run", headers=auth())
    assert again.status_code == 409 and run_id in again.json()["error"]["message"]
    wait_until_finished(client, run_id)
    assert len(client.get("/api/v1/runs").json()["runs"]) == 1


def test_a_backfill_of_missing_keys_selects_only_keys_without_a_success(client: TestClient, store_url: str) -> None:
    seed(store_url, {"partition_range": ["2026-08-01", "2026-08-03"]})
    document = plan(client, {"partition_range": RANGE, "missing": True})
    assert document["plan"]["selection"]["key_count"] == 2
    assert "backfill of missing keys: 2 of 5 selected keys lack a success of daily_total" in document["text"]
    run_id = launch(client, document["plan_id"])
    assert wait_until_finished(client, run_id) == "success"
    shown = client.get(f"/api/v1/runs/{run_id}").json()
    assert shown["launched_by"] == "backfill"  # a backfill is recorded as one, whoever launches it
    assert shown["tags"]["partita.launched_from"] == "ui" and shown["tags"]["partita.backfill"] == "missing"


def test_an_empty_backfill_says_so_and_cannot_be_launched(client: TestClient, store_url: str) -> None:
    seed(store_url, {"partition_range": RANGE})
    document = plan(client, {"partition_range": RANGE, "missing": True})
    assert document["runnable"] is False and "nothing to run" in document["text"]
    response = client.post(f"/api/v1/plans/{document['plan_id']}/run", headers=auth())
    assert response.status_code == 409 and "nothing to backfill" in response.json()["error"]["message"]
    assert len(client.get("/api/v1/runs").json()["runs"]) == 1  # only the seeded run


def test_a_confirmed_plan_runs_the_keys_it_showed_even_when_the_store_moved_on(
    client: TestClient, store_url: str
) -> None:
    document = plan(client, {"partition_range": RANGE, "missing": True})
    assert document["plan"]["selection"]["key_count"] == 5
    seed(store_url, {"partition_range": RANGE})  # meanwhile every key succeeded
    run_id = launch(client, document["plan_id"])
    assert wait_until_finished(client, run_id) == "success"
    assert client.get(f"/api/v1/runs/{run_id}").json()["run"]["selection"]["key_count"] == 5


def test_rerunning_a_runs_failed_keys_plans_exactly_those(
    client: TestClient, store_url: str, failing_days: Callable[[str], None]
) -> None:
    failing_days("2026-08-02,2026-08-04")
    failed = seed(store_url, {"partition_range": RANGE})
    failing_days("")
    document = plan(client, {"failed_from": failed.run_id})
    assert document["plan"]["selection"]["key_count"] == 2
    assert f"failed in run {failed.run_id}" in document["text"] or failed.run_id in document["text"]
    run_id = launch(client, document["plan_id"])
    assert wait_until_finished(client, run_id) == "success"


def test_the_failed_keys_of_a_window_are_planned_from_their_status(
    client: TestClient, store_url: str, failing_days: Callable[[str], None]
) -> None:
    failing_days("2026-08-03")
    seed(store_url, {"partition_range": RANGE})
    document = plan(client, {"partition_range": RANGE, "failed": True, "targets": ["daily_total"]})
    assert document["plan"]["selection"]["key_count"] == 1  # exports failed it, so daily_total was skipped
    failing_days("")
    seed(store_url, {"partition_range": RANGE})
    response = client.post("/api/v1/plans", json={"partition_range": RANGE, "failed": True}, headers=auth())
    assert response.status_code == 400 and "no selected key has a failed attempt" in response.json()["error"]["message"]


# --- cancelling ---------------------------------------------------------------


@pytest.fixture
def hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """While this file exists, ``exports`` keeps running (up to 30 s)."""
    path = tmp_path / "hold"
    path.touch()
    monkeypatch.setenv("PARTITA_TEST_HOLD", str(path))
    return path


def test_cancelling_a_running_run_records_it_cancelled(client: TestClient, hold: Path) -> None:
    run_id = launch(client, plan(client, {"partition_key": "2026-08-01"})["plan_id"])
    response = client.post(f"/api/v1/runs/{run_id}/cancel", headers=auth())
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["schema"] == "partita.run-cancel" and document["outcome"] == "requested"
    assert_valid(document, "run-cancel.v1.json")
    assert wait_until_finished(client, run_id) == "cancelled"
    again = client.post(f"/api/v1/runs/{run_id}/cancel", headers=auth())
    assert again.status_code == 409 and "already finished (cancelled)" in again.json()["error"]["message"]


def test_cancelling_needs_the_token_and_an_unknown_run_is_a_404(client: TestClient) -> None:
    assert client.post("/api/v1/runs/abcdef0123/cancel").status_code == 401
    response = client.post("/api/v1/runs/abcdef0123/cancel", headers=auth())
    assert response.status_code == 404 and response.json()["schema"] == "partita.error"


def test_stopping_the_server_cancels_the_runs_it_launched(
    ui_client: Callable[..., TestClient], store_url: str, hold: Path
) -> None:
    client = ui_client()
    run_id = launch(client, plan(client, {"partition_key": "2026-08-01"})["plan_id"])
    assert run_status(client, run_id) == "running"
    client.__exit__(None, None, None)  # the server's shutdown (what SIGINT or SIGTERM lead to)
    store = open_store(store_url)
    try:
        assert store.get_run(run_id).status == "cancelled"
    finally:
        store.close()


# --- triggers -------------------------------------------------------------------


def test_the_pending_preview_is_the_documents_of_plan_pending(client: TestClient, store_url: str) -> None:
    seed(store_url, {"partition_range": ["2026-08-01", "2026-08-02"]})
    document = client.get("/api/v1/pending").json()
    printed = CliRunner().invoke(cli, ["plan", ENTRY, "--pending", "--json", "--store", store_url])
    assert_valid(document, "pending.v1.json")
    assert document["flows"] == json.loads(printed.stdout)["flows"]
    assert document["flows"][0]["flow"] == "archiving" and document["flows"][0]["would_start"] == [
        "2026-08-01", "2026-08-02",
    ]  # fmt: skip


def test_pausing_and_resuming_a_flow_answers_its_state_read_back(client: TestClient) -> None:
    paused = client.post("/api/v1/flows/archiving/pause", headers=auth())
    assert paused.json() == {"schema": "partita.flow-state", "version": 1, "flow": "archiving", "paused": True}
    assert_valid(paused.json(), "flow-state.v1.json")
    assert client.get("/api/v1/pending").json()["flows"][0]["paused"] is True
    resumed = client.post("/api/v1/flows/archiving/resume", headers=auth())
    assert resumed.json()["paused"] is False


def test_pausing_an_unknown_flow_is_a_404_and_needs_the_token(client: TestClient) -> None:
    assert client.post("/api/v1/flows/archiving/pause").status_code == 401
    response = client.post("/api/v1/flows/no-such-flow/pause", headers=auth())
    assert response.status_code == 404 and "archiving" in response.json()["error"]["message"]
    # a non-triggered flow of the entry is not pausable either
    assert client.post("/api/v1/flows/daily_totals/pause", headers=auth()).status_code == 404


def test_a_read_only_server_refuses_every_action(ui_client: Callable[..., TestClient]) -> None:
    client = ui_client(read_only=True)
    for path in (
        "/api/v1/plans",
        "/api/v1/plans/abcdefghijkl/run",
        "/api/v1/runs/abcd/cancel",
        "/api/v1/flows/archiving/pause",
    ):
        response = client.post(path, json={"partition_range": RANGE}, headers=auth())
        assert response.status_code == 403 and "--read-only" in response.json()["error"]["message"], path


def test_runs_launched_at_once_do_not_wait_for_each_other(client: TestClient, hold: Path) -> None:
    first = launch(client, plan(client, {"partition_key": "2026-08-01"})["plan_id"])
    second = launch(client, plan(client, {"partition_key": "2026-08-02"})["plan_id"])
    assert run_status(client, first) == run_status(client, second) == "running"
    assert client.get("/api/v1/runs").status_code == 200  # requests are served while both run
    hold.unlink()
    assert wait_until_finished(client, first) == wait_until_finished(client, second) == "success"


def test_past_the_limit_of_running_launches_a_plan_waits_and_can_be_confirmed_later(
    client: TestClient, hold: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("partita.ui.launcher.MAX_RUNNING", 1)
    first = launch(client, plan(client, {"partition_keys": ["2026-08-01"]})["plan_id"])
    waiting = plan(client, {"partition_keys": ["2026-08-02"]})["plan_id"]
    refused = client.post(f"/api/v1/plans/{waiting}/run", headers=auth())
    assert refused.status_code == 429 and "still running" in refused.json()["error"]["message"]
    hold.unlink()
    assert wait_until_finished(client, first) == "success"
    second = wait_for(
        lambda: (r := client.post(f"/api/v1/plans/{waiting}/run", headers=auth())).status_code == 202 and r,
        "a free slot",
    )
    assert wait_until_finished(client, second.json()["run"]["run_id"]) == "success"
