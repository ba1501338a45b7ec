"""`partita plan --pending`, `trigger --once`, `flows pause/resume`, `serve` (SPEC §12, §13)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from partita.cli.main import cli
from partita.store.sql import SqlStore

from .conftest import publish, runs_per_key, wait_for


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/cli.db"


def _invoke(*args: str) -> object:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _seed(url: str, *keys: str) -> None:
    store = SqlStore(url)
    try:
        publish(store, *keys)
    finally:
        store.close()


def _runs(url: str) -> int:
    store = SqlStore(url)
    try:
        return len(store.list_runs(limit=1000))
    finally:
        store.close()


def test_plan_pending_json_starts_nothing(entry: str, url: str) -> None:
    _seed(url, "2024-01-01", "2024-01-02")
    result = _invoke("plan", entry, "--pending", "--store", url, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["schema"] == "partita.pending"
    assert isinstance(document["version"], int)
    (flow,) = document["flows"]
    assert flow["flow"] == "consumer_flow"
    assert flow["paused"] is False
    assert flow["would_start"] == ["2024-01-01", "2024-01-02"]
    assert flow["waiting"] == []
    assert flow["trigger"]["kind"] == "asset_events"
    assert _runs(url) == 0
    # Nothing was recorded either: the same preview again.
    again = json.loads(_invoke("plan", entry, "--pending", "--store", url, "--json").stdout)
    assert again == document


def test_plan_pending_table(entry: str, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _seed(url, "2024-01-01")
    monkeypatch.setenv("PARTITA_STORE", url)
    result = _invoke("plan", entry, "--pending")
    assert result.exit_code == 0, result.output
    assert "consumer_flow" in result.output
    assert "2024-01-01" in result.output
    assert "active" in result.output
    assert _runs(url) == 0


def test_plan_pending_shows_waiting_rollup(tmp_path: Path, url: str) -> None:
    entry = tmp_path / "rollup.py"
    entry.write_text(
        "from partita import DatePartitionDef, Flow, OnAssetEvents, RollupMapper, asset\n"
        "@asset(partition_def=DatePartitionDef())\n"
        "def raw():\n    return 1\n"
        "@asset(partition_def=DatePartitionDef())\n"
        "def weekly():\n    return 1\n"
        "weekly_flow = Flow(['weekly'], name='weekly_flow', trigger=OnAssetEvents(['raw'], mapper=RollupMapper('week')))\n"
    )
    _seed(url, "2024-01-01", "2024-01-02")
    document = json.loads(_invoke("plan", str(entry), "--pending", "--store", url, "--json").stdout)
    (flow,) = document["flows"]
    assert flow["would_start"] == []
    assert flow["waiting"] == ["2024-01-01"]
    # Processing keeps it waiting, visible, never dropped.
    assert json.loads(_invoke("trigger", str(entry), "--once", "--store", url, "--json").stdout)["started_runs"] == 0
    document = json.loads(_invoke("plan", str(entry), "--pending", "--store", url, "--json").stdout)
    assert document["flows"][0]["waiting"] == ["2024-01-01"]


def test_trigger_once_text_and_json(entry: str, url: str) -> None:
    _seed(url, "2024-01-01", "2024-01-02")
    result = _invoke("trigger", entry, "--once", "--store", url)
    assert result.exit_code == 0, result.output
    assert "started 2 consumer runs" in result.stdout
    _seed(url, "2024-01-03")
    result = _invoke("trigger", entry, "--once", "--store", url, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["schema"] == "partita.trigger-pass"
    assert document["started_runs"] == 1
    assert json.loads(_invoke("trigger", entry, "--once", "--store", url, "--json").stdout)["started_runs"] == 0
    store = SqlStore(url)
    try:
        assert runs_per_key(store) == {"2024-01-01": 1, "2024-01-02": 1, "2024-01-03": 1}
    finally:
        store.close()


def test_flows_pause_and_resume(entry: str, url: str) -> None:
    _seed(url, "2024-01-01")
    result = _invoke("flows", "pause", "consumer_flow", "--entry", entry, "--store", url)
    assert result.exit_code == 0, result.output
    assert "paused" in result.output
    document = json.loads(_invoke("plan", entry, "--pending", "--store", url, "--json").stdout)
    assert document["flows"][0]["paused"] is True
    assert json.loads(_invoke("trigger", entry, "--once", "--store", url, "--json").stdout)["started_runs"] == 0
    assert _runs(url) == 0
    result = _invoke("flows", "resume", "consumer_flow", "--store", url)
    assert result.exit_code == 0, result.output
    assert "resumed" in result.output
    assert json.loads(_invoke("trigger", entry, "--once", "--store", url, "--json").stdout)["started_runs"] == 1


def test_entry_without_triggered_flow_exits_3(tmp_path: Path, url: str) -> None:
    entry = tmp_path / "plain.py"
    entry.write_text("from partita import Flow, asset\n@asset\ndef a():\n    return 1\nflow = Flow(['a'])\n")
    result = CliRunner().invoke(cli, ["trigger", str(entry), "--once", "--store", url])
    assert result.exit_code == 3


def test_invalid_cron_in_entry_is_reported(tmp_path: Path, url: str) -> None:
    entry = tmp_path / "cron.py"
    entry.write_text(
        "from partita import DatePartitionDef, Flow, CronPartitions, asset\n"
        "@asset(partition_def=DatePartitionDef())\n"
        "def a():\n    return 1\n"
        "flow = Flow(['a'], name='f', trigger=CronPartitions('every hour', start='2024-01-01T00:00'))\n"
    )
    result = CliRunner().invoke(cli, ["trigger", str(entry), "--once", "--store", url])
    assert result.exit_code in (2, 3)
    assert "cron" in result.output.lower()


def _newer_schema(url: str) -> None:
    store = SqlStore(url)
    try:
        with store._engine.begin() as connection:  # noqa: SLF001
            tables = [row[0] for row in connection.execute(text("SELECT name FROM sqlite_master WHERE type='table'"))]
            version_table = next(name for name in tables if "version" in name)
            connection.execute(text(f"UPDATE {version_table} SET version_num = '9999'"))
    finally:
        store.close()


@pytest.mark.parametrize("command", [["serve"], ["trigger", "--once"]])
def test_newer_schema_store_is_refused_with_exit_4(entry: str, url: str, command: list[str]) -> None:
    _newer_schema(url)
    args = [command[0], entry, *command[1:], "--store", url]
    result = subprocess.run([sys.executable, "-m", "partita", *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 4, result.stderr
    assert "newer" in result.stderr


def test_serve_processes_event_and_stops_on_sigterm(entry: str, url: str) -> None:
    _seed(url, "2024-01-01")
    process = subprocess.Popen(
        [sys.executable, "-m", "partita", "serve", entry, "--store", url, "--poll-interval", "0.05", "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        wait_for(lambda: _runs(url) >= 1, timeout=30)
        _seed(url, "2024-01-02")
        wait_for(lambda: _runs(url) >= 2, timeout=30)
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    lines = [line for line in err.splitlines() if line.strip()]
    documents = [json.loads(line) for line in lines]
    messages = [document["message"] for document in documents]
    assert "daemon started" in messages
    assert "daemon stopped" in messages
    assert any(document.get("run_id") for document in documents)
    assert all({"at", "level", "logger", "message"} <= set(document) for document in documents)
    assert out == ""
    store = SqlStore(url)
    try:
        assert runs_per_key(store) == {"2024-01-01": 1, "2024-01-02": 1}
    finally:
        store.close()
