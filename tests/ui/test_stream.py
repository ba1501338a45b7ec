"""The live stream ``/api/v1/stream``: messages within a second of a change made elsewhere, on both backends.

A real server (the ``live_server`` fixture) is read with an HTTP client as a
browser's EventSource would; changes come from another process (``partita
events emit``) or from a run in another thread with its own store.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from partita.store import open_store
from partita.store.protocol import AttemptQuery, RunFilter
from partita.ui.api.stream import sse_messages
from partita.ui.changes import MessageKind, Subscription

from .runs_seed import StreamReader, entry_flow, run_days, wait_until
from .support import ENTRY

PARTITA = str(Path(sys.executable).with_name("partita"))


@pytest.fixture
def reader_of():
    opened: list[StreamReader] = []

    def open_reader(url: str) -> StreamReader:
        reader = StreamReader(url)
        opened.append(reader)
        return reader

    yield open_reader
    for reader in opened:
        reader.close()


def _emit(store_url: str, asset: str, key: str) -> dict:
    """Publish an event from another process, as a producer outside partita would; its receipt."""
    done = subprocess.run(
        [PARTITA, "events", "emit", asset, ENTRY, "--partition-key", key, "--store", store_url, "--json"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(ENTRY).parent)},
    )
    return json.loads(done.stdout)["receipt"]


def test_an_event_emitted_by_another_process_reaches_the_stream_within_a_second(
    store_url, live_server, reader_of
) -> None:
    run_days(store_url, "2026-08-01", "2026-08-02")
    server = live_server()
    every = reader_of(f"{server.url}/api/v1/stream?initial=runs,events")
    of_totals = reader_of(f"{server.url}/api/v1/stream?asset=daily_total&initial=events")
    every.next("runs")  # on connecting, each message asked for: the current state
    first = every.next("events")
    assert of_totals.next("events").data != "0"
    receipt = _emit(store_url, "exports", "2026-08-09")
    arrived = every.next("events", lambda m: m.data == str(receipt["id"]))
    assert int(arrived.data) > int(first.data)
    assert arrived.at - dt.datetime.fromisoformat(receipt["timestamp"]).timestamp() < 1.0
    assert not [m for m in of_totals.drain(settle=0.5) if m.event == "events"], "another asset's event is not announced"


def test_an_event_published_by_another_thread_arrives_within_a_second_and_only_for_its_asset(
    store_url, live_server, reader_of
) -> None:
    from partita.events.external import publish_event

    server = live_server()
    of_exports = reader_of(f"{server.url}/api/v1/stream?asset=exports&initial=events")
    of_totals = reader_of(f"{server.url}/api/v1/stream?asset=daily_total&initial=events")
    assert of_exports.next("events").data == "0"
    assert of_totals.next("events").data == "0"
    store = open_store(store_url)  # its own pool: the server learns of the event through the database only
    try:
        published = time.time()
        receipt = publish_event(store, entry_flow(), "exports", partition_key="2026-08-05")
        arrived = of_exports.next("events")
        assert arrived.data == str(receipt.id)
        assert arrived.at - published < 1.0
        assert not [m for m in of_totals.drain(settle=0.5) if m.event == "events"]
    finally:
        store.close()


def _held_run(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, threading.Thread]:
    """A run of two days, one at a time, to start in a thread: ``exports`` waits while the returned file exists."""
    hold = tmp_path / "hold"
    hold.touch()
    monkeypatch.setenv("PARTITA_TEST_HOLD", str(hold))
    flow = entry_flow().with_store(store_url, record_partition_keys=True)
    config = {"partition_range": ("2026-08-01", "2026-08-02"), "max_concurrency": 1}
    return hold, threading.Thread(target=lambda: flow.run(flow.plan_from_text(config)))


def test_a_page_that_shows_the_newest_event_is_not_sent_it_again_but_a_newer_one_at_once(
    store_url, live_server, reader_of
) -> None:
    from partita.events.external import publish_event

    store = open_store(store_url)
    try:
        shown = publish_event(store, entry_flow(), "exports", partition_key="2026-08-05").id
        server = live_server()
        current = reader_of(f"{server.url}/api/v1/stream?asset=exports&initial=events,attempts&shown_events={shown}")
        current.next("attempts")  # the first read is over: its events message was left out
        with pytest.raises(AssertionError, match="no 'events' message"):
            current.next("events", timeout=0.5)
        behind = reader_of(f"{server.url}/api/v1/stream?asset=exports&initial=events&shown_events={shown - 1}")
        assert behind.next("events").data == str(shown)
    finally:
        store.close()


def test_a_run_in_another_thread_sends_run_runs_and_logs_messages_within_a_second(
    store_url, live_server, reader_of, tmp_path, monkeypatch
) -> None:
    hold, worker = _held_run(store_url, tmp_path, monkeypatch)
    server = live_server()
    every = reader_of(f"{server.url}/api/v1/stream?initial=runs")
    every.next("runs")
    worker.start()
    store = open_store(store_url)
    try:
        started = every.next("runs")  # the run's start
        run = wait_until(lambda: store.list_runs(limit=1, where=RunFilter()), what="the run's row")[0]
        assert started.at - run.header.started_at.timestamp() < 1.0
        wait_until(lambda: store.attempt_logs(run.run_id), what="the first log line")
        one = reader_of(f"{server.url}/api/v1/stream?run_id={run.run_id}&initial=run,logs")
        assert one.next("run").data == "running"
        first_logs = int(one.next("logs").data)
        released = time.time()
        hold.unlink()
        more = one.next("logs", lambda m: int(m.data) > first_logs)
        assert more.at - released < 1.0
        assert int(more.data) in {line.id for line in store.attempt_logs(run.run_id)}
        ended = one.next("run", lambda m: m.data != "running")
        worker.join(timeout=10)
        finished = store.get_run(run.run_id)
        assert ended.data == finished.status == "success"
        assert ended.at - finished.header.finished_at.timestamp() < 1.0
        assert every.next("runs").at - finished.header.finished_at.timestamp() < 1.0
    finally:
        hold.unlink(missing_ok=True)
        worker.join(timeout=30)
        store.close()


def test_an_asset_stream_hears_of_a_failure_inside_a_running_run_within_a_second(
    store_url, live_server, reader_of, tmp_path, monkeypatch
) -> None:
    hold, worker = _held_run(store_url, tmp_path, monkeypatch)
    monkeypatch.setenv("PARTITA_TEST_FAIL_DAYS", "2026-08-01")
    server = live_server()
    grid = reader_of(f"{server.url}/api/v1/stream?asset=exports&initial=attempts")
    grid.next("attempts")
    worker.start()  # 2026-08-01 fails at once; 2026-08-02 is held, so the run stays running
    store = open_store(store_url)
    try:
        run = wait_until(lambda: store.list_runs(limit=1, where=RunFilter()), what="the run's row")[0]
        failed = AttemptQuery(asset="exports", status="failed")
        wait_until(lambda: store.list_attempts(run.run_id, failed), what="the failed attempt stored")
        stored = time.time()
        shown = f"{server.url}/assets/exports/grid?start=2026-08-01&end=2026-08-02"
        while True:  # each attempts message makes the page read its grid again, until it shows the failure
            message = grid.next("attempts")
            if 'title="2026-08-01: failed"' in httpx.get(shown).text:
                break
        assert message.at - stored < 1.0
        assert store.get_run(run.run_id).status == "running"  # heard mid-run, not at its end
    finally:
        hold.unlink(missing_ok=True)
        worker.join(timeout=30)
        store.close()


def test_a_client_that_goes_away_is_unsubscribed_and_one_poller_serves_all(store_url, live_server, reader_of) -> None:
    server = live_server()
    readers = [reader_of(f"{server.url}/api/v1/stream?initial=runs") for _ in range(3)]
    for reader in readers:
        reader.next("runs")
    feed = server.app.state.changes
    assert feed.subscriber_count == 3
    assert [t.name for t in threading.enumerate()].count("partita-ui-changes") == 1
    for reader in readers:
        reader.close()
    wait_until(lambda: feed.subscriber_count == 0, timeout=5, what="every subscription ended")


def test_stopping_the_server_ends_open_streams_at_once(store_url, live_server, reader_of) -> None:
    server = live_server()
    readers = [reader_of(f"{server.url}/api/v1/stream?initial=runs") for _ in range(2)]
    for reader in readers:
        reader.next("runs")
    began = time.monotonic()
    server.stop()
    assert time.monotonic() - began < 3.0
    assert all(reader.ended.wait(3) for reader in readers)
    assert not server.thread.is_alive()


def test_a_stream_for_an_unknown_run_is_a_json_404(client) -> None:
    response = client.get("/api/v1/stream", params={"run_id": "0123456789abcdef"})
    assert response.status_code == 404
    assert response.json()["schema"] == "partita.error"


def test_stream_parameters_are_bounded(client) -> None:
    assert client.get("/api/v1/stream", params={"asset": "x" * 201}).status_code == 422
    assert client.get("/api/v1/stream", params={"run_id": ""}).status_code == 422


def test_an_idle_stream_sends_keep_alive_comments_and_ends_when_closed() -> None:
    async def scenario() -> list[str]:
        subscription = Subscription(None, None, asyncio.get_running_loop())
        messages = sse_messages(subscription, heartbeat=0.05)
        seen = [await messages.__anext__(), await asyncio.wait_for(messages.__anext__(), 2)]
        subscription.offer(MessageKind.EVENTS, "7")
        seen.append(await asyncio.wait_for(messages.__anext__(), 2))
        subscription.close()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(messages.__anext__(), 2)
        return seen

    assert asyncio.run(scenario()) == ["retry: 2000\n\n", ": keep-alive\n\n", "event: events\nid: 0\ndata: 7\n\n"]


def test_a_slow_client_holds_only_the_newest_message_of_each_kind() -> None:
    async def scenario() -> list[tuple[str, str]]:
        subscription = Subscription("r", None, asyncio.get_running_loop())
        for number in range(1000):
            subscription.offer(MessageKind.EVENTS, str(number))
            subscription.offer(MessageKind.RUNS, str(number))
        messages, _ = subscription.take()
        return [(str(kind), data) for kind, data in messages]

    assert asyncio.run(scenario()) == [("runs", "999"), ("events", "999")]


def test_a_store_failure_pauses_live_updates_and_they_resume_on_the_open_streams(
    store_url, live_server, reader_of, monkeypatch, caplog
) -> None:
    from partita.errors import StoreError
    from partita.events.external import publish_event
    from partita.store.change_markers import ChangeMarkers

    server = live_server()
    reader = reader_of(f"{server.url}/api/v1/stream?initial=events")
    reader.next("events")
    failures = {"left": 3}
    reading = ChangeMarkers.reading

    def failing(self):  # noqa: ANN001, ANN202 - the store refuses a few reads, as during a restart
        if failures["left"]:
            failures["left"] -= 1
            raise StoreError("store: cannot read what changed: the database is restarting")
        return reading(self)

    monkeypatch.setattr(ChangeMarkers, "reading", failing)
    store = open_store(store_url)
    try:
        receipt = publish_event(store, entry_flow(), "exports", partition_key="2026-08-07")
        assert reader.next("events", lambda m: m.data == str(receipt.id)).data == str(receipt.id)
    finally:
        store.close()
    assert failures["left"] == 0 and not reader.ended.is_set()
    assert "live updates paused" in caplog.text
    wait_until(lambda: "live updates resumed" in caplog.text, what="the poller said it resumed")  # logged after telling


def test_a_run_whose_process_is_killed_is_shown_interrupted_within_a_second(
    store_url, live_server, reader_of, tmp_path
) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    command = [PARTITA, "run", ENTRY, "--partition-range", "2026-08-01", "2026-08-01", "--store", store_url, "-y"]
    process = subprocess.Popen(
        command,
        env={**os.environ, "PARTITA_TEST_HOLD": str(hold), "PYTHONPATH": str(Path(ENTRY).parent)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    store = open_store(store_url)
    try:
        run = wait_until(lambda: store.list_runs(limit=1, status="running"), timeout=30, what="the run started")[0]
        server = live_server()
        one = reader_of(f"{server.url}/api/v1/stream?run_id={run.run_id}&initial=run,runs")
        assert one.next("run").data == "running"
        one.next("runs")
        process.kill()  # SIGKILL: the run's owner writes nothing more
        process.wait(timeout=10)
        killed = time.time()
        interrupted = one.next("run", lambda m: m.data == "interrupted")
        assert interrupted.at - killed < 1.0
        assert one.next("runs", lambda m: m.at >= killed).at - killed < 1.0
        assert store.get_run(run.run_id).status == "interrupted"
        page = httpx.get(f"{server.url}/runs/{run.run_id}").text
        assert '<span class="status status-interrupted">interrupted</span>' in page
        assert 'class="tl-bar tl-interrupted"' in page  # its attempt left running is drawn as history reads it
    finally:
        hold.unlink(missing_ok=True)
        if process.poll() is None:
            process.kill()
        store.close()


def test_partita_ui_stops_at_once_on_sigint_with_pages_streaming(store_url, reader_of, tmp_path) -> None:
    import signal
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = {**os.environ, "PARTITA_UI_TOKEN": "test-token-0123456789abcdef", "XDG_CONFIG_HOME": str(tmp_path)}
    process = subprocess.Popen(
        [PARTITA, "ui", ENTRY, "--store", store_url, "--port", str(port)],
        env={**environment, "PYTHONPATH": str(Path(ENTRY).parent)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/api/v1/stream?initial=runs"

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return True
            except OSError:
                return False

        wait_until(listening, timeout=30, what="partita ui listening")
        readers = [reader_of(url) for _ in range(2)]
        for reader in readers:
            reader.next("runs")
        process.send_signal(signal.SIGINT)
        began = time.monotonic()
        process.wait(timeout=10)
        assert time.monotonic() - began < 3.0
        assert all(reader.ended.wait(3) for reader in readers)
        assert "Traceback" not in (process.stderr.read() if process.stderr else "")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_client_hears_only_of_changes_unless_it_asks_for_the_current_state(store_url, live_server, reader_of) -> None:
    run_days(store_url, "2026-08-01", "2026-08-01")
    server = live_server()
    quiet = reader_of(f"{server.url}/api/v1/stream")
    asking = reader_of(f"{server.url}/api/v1/stream?initial=events")
    assert asking.next("events").data == "2"
    wait_until(lambda: server.app.state.changes.subscriber_count == 2, what="both subscribed")
    assert not quiet.drain(settle=0.6), "nothing changed, so nothing is said"
    reconnecting = StreamReader.with_headers(f"{server.url}/api/v1/stream", {"Last-Event-ID": "17"})
    try:
        assert {reconnecting.next(kind).data for kind in ("runs", "events")} == {"0", "2"}
    finally:
        reconnecting.close()


def test_initial_names_only_the_stream_s_messages(client) -> None:
    assert client.get("/api/v1/stream", params={"initial": "runs,gossip"}).status_code == 422
