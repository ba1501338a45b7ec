"""``/api/v1/events``: the event log in pages, and publishing an external event as ``partita events emit`` does."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from partita.cli.main import cli
from partita.events.extra import MAX_EXTRA_BYTES, MAX_EXTRA_DEPTH
from partita.store import open_store

from .support import ENTRY, TOKEN, auth
from .test_api_documents import assert_valid, run_entry


def _publish(client: TestClient, body: Any, headers: dict[str, str] | None = None) -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(
        "/api/v1/events", content=content, headers={**auth(), "content-type": "application/json", **(headers or {})}
    )


def _refused(client: TestClient, body: Any, status: int) -> str:
    response = _publish(client, body)
    assert response.status_code == status, response.text
    document = response.json()
    assert_valid(document)
    return str(document["error"]["message"])


def test_events_page_through_the_log_with_the_next_cursor(client: TestClient, store_url: str) -> None:
    run_entry(store_url)  # ten outlet events
    first = client.get("/api/v1/events", params={"limit": 4}).json()
    assert_valid(first)
    ids = [event["id"] for event in first["events"]]
    rest = client.get("/api/v1/events", params={"since": first["next"]}).json()
    assert rest["next"] is None
    assert ids + [event["id"] for event in rest["events"]] == sorted(ids + [event["id"] for event in rest["events"]])
    assert len(ids) + len(rest["events"]) == 10


def test_events_filter_by_asset_and_key(client: TestClient, store_url: str) -> None:
    run_entry(store_url)
    one = client.get("/api/v1/events", params={"asset": "daily_total", "partition_key": "2026-08-02"}).json()
    assert [(event["asset"], event["partition_key"]) for event in one["events"]] == [("daily_total", "2026-08-02")]
    assert client.get("/api/v1/events", params={"asset": "nothing"}).json()["events"] == []


def test_a_published_event_gets_a_receipt_and_a_repeat_of_its_dedupe_key_replays_it(client: TestClient) -> None:
    body = {"asset": "exports", "partition_key": "2026-08-09", "extra": {"rows": 3}, "dedupe_key": "export-0809"}
    first, again = _publish(client, body), _publish(client, body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert_valid(first.json())
    assert first.json()["receipt"]["duplicate"] is False
    assert again.json()["receipt"] == {**first.json()["receipt"], "duplicate": True}
    (stored,) = client.get("/api/v1/events", params={"asset": "exports"}).json()["events"]
    assert (stored["source"]["kind"], stored["extra"], stored["partition_key"]) == ("external", {"rows": 3}, "2026-08-09")


def test_the_api_and_the_cli_share_one_dedupe_identity(client: TestClient, store_url: str, monkeypatch: Any) -> None:
    body = {"asset": "exports", "partition_key": "2026-08-09", "extra": {"rows": 3}, "dedupe_key": "shared-key"}
    receipt = _publish(client, body).json()["receipt"]
    monkeypatch.setenv("PARTITA_STORE", store_url)
    arguments = ["events", "emit", "exports", ENTRY, "--partition-key", "2026-08-09", "--extra", '{"rows": 3}']
    result = CliRunner().invoke(cli, [*arguments, "--dedupe-key", "shared-key", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["receipt"] == {**receipt, "duplicate": True}


def test_a_partition_date_is_kept_and_needs_an_offset(client: TestClient) -> None:
    body = {"asset": "exports", "partition_key": "2026-08-09", "partition_date": "2026-08-09T00:00:00+02:00"}
    assert _publish(client, body).status_code == 201
    message = _refused(client, {**body, "partition_date": "2026-08-09T00:00:00"}, 400)
    assert message.startswith("partition_date must carry a UTC offset")


def test_publishing_needs_the_token(client: TestClient) -> None:
    body = json.dumps({"asset": "exports", "partition_key": "2026-08-09"})
    response = client.post("/api/v1/events", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 401
    wrong = client.post("/api/v1/events", content=body, headers={"Authorization": "Bearer x" * 3})
    assert wrong.status_code == 401


def test_publishing_is_refused_on_a_read_only_server(ui_client: Callable[..., TestClient]) -> None:
    response = _publish(ui_client(read_only=True), {"asset": "exports", "partition_key": "2026-08-09"})
    assert response.status_code == 403


def test_a_browser_session_publishes_with_its_csrf_token(client: TestClient) -> None:
    from partita.ui.security import CSRF_HEADER, SESSION_COOKIE, csrf_token

    client.post("/login", data={"token": TOKEN}, follow_redirects=False)
    session = client.cookies[SESSION_COOKIE]
    body = json.dumps({"asset": "exports", "partition_key": "2026-08-09"})
    plain = {"content-type": "application/json"}
    assert client.post("/api/v1/events", content=body, headers=plain).status_code == 403
    signed = {**plain, CSRF_HEADER: csrf_token(TOKEN, session)}
    assert client.post("/api/v1/events", content=body, headers=signed).status_code == 201


BAD_BODIES: list[tuple[str, Any, int, str]] = [
    ("not JSON", b"{asset: exports", 400, "must be one JSON object"),
    ("not UTF-8", b'{"asset": "\xff"}', 400, "UTF-8"),
    ("NaN", b'{"asset": "exports", "partition_key": "2026-08-09", "extra": {"a": NaN}}', 400, "NaN"),
    ("an array", [{"asset": "exports"}], 400, "must be a JSON object"),
    ("a string", "exports", 400, "must be a JSON object"),
    ("empty", b"", 400, "must be one JSON object"),
    ("an unknown field", {"asset": "exports", "partition_key": "2026-08-09", "key": "x"}, 422, "body.key"),
    ("no asset", {"partition_key": "2026-08-09"}, 422, "body.asset"),
    ("a numeric asset", {"asset": 7}, 422, "body.asset"),
    ("a numeric key", {"asset": "exports", "partition_key": 20260809}, 422, "body.partition_key"),
    ("extra an array", {"asset": "exports", "partition_key": "2026-08-09", "extra": [1]}, 422, "body.extra"),
    ("a numeric dedupe key", {"asset": "exports", "partition_key": "2026-08-09", "dedupe_key": 5}, 422, "body.dedupe_key"),
    ("an unknown asset", {"asset": "nothing"}, 422, "asset 'nothing' is not registered"),
    ("a malformed key", {"asset": "exports", "partition_key": "9 August"}, 422, "partition_key for asset 'exports'"),
    ("a key before the start", {"asset": "exports", "partition_key": "2020-01-01"}, 422, "partition_key"),
    ("no key for a partitioned asset", {"asset": "exports"}, 422, "pass partition_key"),
    ("a date without a key", {"asset": "exports", "partition_date": "2026-08-09T00:00:00+00:00"}, 422, "partition"),
    ("a malformed date", {"asset": "exports", "partition_key": "2026-08-09", "partition_date": "soon"}, 400, "partition_date"),
    ("an empty dedupe key", {"asset": "exports", "partition_key": "2026-08-09", "dedupe_key": ""}, 422, "dedupe_key"),
    ("a dedupe key with a control character", {"asset": "exports", "partition_key": "2026-08-09", "dedupe_key": "a\nb"}, 422, "dedupe_key"),
    ("a dedupe key too long", {"asset": "exports", "partition_key": "2026-08-09", "dedupe_key": "d" * 300}, 422, "body.dedupe_key"),
    ("extra too deep", b'{"asset": "exports", "partition_key": "2026-08-09", "extra": ' + b'{"a": ' * 40 + b"1" + b"}" * 41, 400, f"deeper than {MAX_EXTRA_DEPTH}"),
    ("extra just too deep", {"asset": "exports", "partition_key": "2026-08-09", "extra": json.loads('{"a": ' * (MAX_EXTRA_DEPTH + 1) + "1" + "}" * (MAX_EXTRA_DEPTH + 1))}, 400, "deeper than"),
    ("extra too large", {"asset": "exports", "partition_key": "2026-08-09", "extra": {"blob": "x" * (MAX_EXTRA_BYTES + 10)}}, 422, f"the limit is {MAX_EXTRA_BYTES}"),
    ("a lone surrogate in extra", b'{"asset": "exports", "partition_key": "2026-08-09", "extra": {"a": "\\ud800"}}', 422, "extra"),
]


@pytest.mark.parametrize(("case", "body", "status", "words"), BAD_BODIES, ids=[case[0] for case in BAD_BODIES])
def test_a_bad_event_body_is_a_4xx_naming_the_field_and_stores_nothing(
    client: TestClient, store_url: str, case: str, body: Any, status: int, words: str
) -> None:
    assert words in _refused(client, body, status)
    store = open_store(store_url)
    try:
        assert store.list_events() == []
    finally:
        store.close()


def test_a_dedupe_key_reused_for_another_event_is_refused_naming_it(client: TestClient) -> None:
    body = {"asset": "exports", "partition_key": "2026-08-09", "dedupe_key": "once"}
    assert _publish(client, body).status_code == 201
    message = _refused(client, {**body, "partition_key": "2026-08-10"}, 422)
    assert "dedupe_key was already used for a different event" in message and "2026-08-10" not in message


def test_a_body_over_the_cap_is_refused_before_it_is_read(client: TestClient) -> None:
    response = _publish(client, b'{"asset": "' + b"x" * (300 * 1024) + b'"}')
    assert response.status_code == 413 and response.json()["error"]["status"] == 413
