"""Outcomes of triggered runs: `trigger --once` counts and exit codes, `serve` run lines, roll-up progress (issue 14, item 7)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from partita.cli.main import cli
from partita.errors import StoreError
from partita.store.sql import SqlStore

from .conftest import publish, wait_for
from .test_trigger_documents import assert_valid as assert_schema


def assert_valid(document: dict[str, Any]) -> None:
    assert_schema(document, document["schema"].removeprefix("partita.") + ".v1.json")

# The consumer fails for 2024-01-02; the store does not record keys (the flow's default).
ENTRY = '''
from partita import DatePartitionDef, Flow, OnAssetEvents, asset


@asset(partition_def=DatePartitionDef())
def raw():
    return 1


@asset(partition_def=DatePartitionDef())
def consumer(context):
    if context.partition_key.day == 2:
        raise RuntimeError("warehouse rejected the load")
    return 1


consumer_flow = Flow(["consumer"], name="consumer_flow", trigger=OnAssetEvents(["raw"]))
'''

BROKEN_FLOW = '''

from partita.automation.triggers import CronPartitions


class UnreachableSchedule(CronPartitions):
    def ticks(self, after, until):
        raise RuntimeError("schedule source unreachable")


@asset(partition_def=DatePartitionDef(end="2025-01-03"))
def nightly():
    return 1


schedule = Flow(["nightly"], name="schedule", trigger=UnreachableSchedule("0 0 * * *", start="2025-01-01T00:00"))
'''

ROLLUP = '''
from partita import DatePartitionDef, Flow, HourlyPartitionDef, OnAssetEvents, RollupMapper, asset


@asset(partition_def=HourlyPartitionDef(timezone="Europe/Paris"))
def raw():
    return 1


@asset(partition_def=DatePartitionDef())
def daily():
    return 1


daily_flow = Flow(["daily"], name="daily_flow", trigger=OnAssetEvents(["raw"], mapper=RollupMapper("day")))
'''


def _write(tmp_path: Path, source: str, name: str = "entry.py") -> str:
    path = tmp_path / name
    path.write_text(source)
    return str(path)


def _seed(url: str, *keys: str) -> None:
    with closing(SqlStore(url)) as store:
        publish(store, *keys)


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def _json_lines(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.strip()]


# --- trigger --once ----------------------------------------------------------------------------


def test_trigger_once_counts_succeeded_and_failed_runs_and_exits_1(store_url: str, tmp_path: Path) -> None:
    entry = _write(tmp_path, ENTRY)
    _seed(store_url, "2024-01-01", "2024-01-02")

    result = _invoke("trigger", entry, "--once", "--store", store_url, "--json")

    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert_valid(document)
    assert (document["started_runs"], document["succeeded_runs"], document["failed_runs"]) == (2, 1, 1)
    assert document["unstarted_runs"] == 0 and document["failing"] == []
    assert "2024-01-02" not in result.stdout  # portable documents carry no key text


def test_trigger_once_text_names_the_failed_key_the_store_does_not_record(store_url: str, tmp_path: Path) -> None:
    entry = _write(tmp_path, ENTRY)
    _seed(store_url, "2024-01-01", "2024-01-02")

    result = _invoke("trigger", entry, "--once", "--store", store_url)

    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "started 2 consumer runs: 1 succeeded, 1 failed"
    assert any(line.startswith("consumer run ") and line.endswith("of flow consumer_flow: failed") for line in lines)
    assert "consumer: 1 failed" in lines
    assert "  2024-01-02  RuntimeError: warehouse rejected the load" in lines
    assert "Traceback" not in result.output
    with closing(SqlStore(store_url)) as store:
        for run in store.list_runs(limit=10):
            for task in store.get_tasks(run.header.run_id):
                assert all(attempt.partition_key is None for attempt in task.attempts)


def test_trigger_once_succeeding_runs_exit_0_with_counts(store_url: str, tmp_path: Path) -> None:
    entry = _write(tmp_path, ENTRY)
    _seed(store_url, "2024-01-01", "2024-01-03")

    result = _invoke("trigger", entry, "--once", "--store", store_url)

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["started 2 consumer runs: 2 succeeded, 0 failed"]


def test_a_run_that_cannot_start_exits_4_over_a_failed_run(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = _write(tmp_path, ENTRY)
    _seed(store_url, "2024-01-01", "2024-01-02", "2024-01-03")
    original, refused = SqlStore.record_run_started, []

    def refuse_once(self: SqlStore, run: Any) -> None:
        if not refused:
            refused.append(run)
            raise StoreError(f"store {self.url}: cannot record the run's start: database is locked")
        original(self, run)

    monkeypatch.setattr(SqlStore, "record_run_started", refuse_once)
    result = _invoke("trigger", entry, "--once", "--store", store_url, "--json", "--max-in-flight", "1")

    assert result.exit_code == 4, result.output  # infrastructure beats an asset failure
    document = json.loads(result.stdout)
    assert_valid(document)
    assert document["unstarted_runs"] == 1
    assert document["started_runs"] == document["succeeded_runs"] + document["failed_runs"] == 2
    assert "could not start" in result.stderr


def test_a_flow_failing_evaluation_exits_2_over_a_failed_run(store_url: str, tmp_path: Path) -> None:
    entry = _write(tmp_path, ENTRY + BROKEN_FLOW)
    _seed(store_url, "2024-01-02")

    result = _invoke("trigger", entry, "--once", "--store", store_url)

    assert result.exit_code == 2, result.output
    assert result.stdout.splitlines()[0] == "started 1 consumer run: 0 succeeded, 1 failed"
    assert "flow schedule failing" in result.stderr
    assert "Traceback" not in result.output


def test_trigger_once_json_logs_make_every_stderr_line_json(store_url: str, tmp_path: Path) -> None:
    entry = _write(tmp_path, ENTRY + BROKEN_FLOW)
    _seed(store_url, "2024-01-01", "2024-01-02")

    result = _invoke("trigger", entry, "--once", "--store", store_url, "--log-format", "json")

    assert result.exit_code == 2, result.output
    records = _json_lines(result.stderr)  # raises on any line that is not one JSON object
    finished = [r for r in records if r["message"].startswith("consumer run finished")]
    assert sorted(r["status"] for r in finished) == ["failed", "success"]
    assert any("flow schedule failing" in r["message"] for r in records if r["level"] == "error")


def test_trigger_once_json_logs_report_an_unloadable_entry_as_json(tmp_path: Path, store_url: str) -> None:
    entry = _write(tmp_path, "raise SystemError('broken entry')\n")

    result = _invoke("trigger", entry, "--once", "--store", store_url, "--log-format", "json")

    assert result.exit_code == 3, result.output
    (record,) = _json_lines(result.stderr)
    assert record["level"] == "error"


# --- serve -------------------------------------------------------------------------------------


def _serve(entry: str, url: str, *options: str, until: Any) -> str:
    process = subprocess.Popen(
        [sys.executable, "-m", "partita", "serve", entry, "--store", url, "--poll-interval", "0.05", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: process.poll() is not None or until())
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    return err


def _finished_runs(url: str) -> int:
    with closing(SqlStore(url)) as store:
        return sum(run.header.status in ("success", "failed") for run in store.list_runs(limit=100))


def test_serve_logs_each_consumer_run_start_and_end_with_its_outcome(store_url: str, tmp_path: Path) -> None:
    entry = _write(tmp_path, ENTRY)
    _seed(store_url, "2024-01-01", "2024-01-02")

    err = _serve(entry, store_url, "--log-format", "json", until=lambda: _finished_runs(store_url) == 2)

    records = _json_lines(err)
    started = {r["run_id"]: r for r in records if r["message"] == "starting consumer run"}
    finished = {r["run_id"]: r for r in records if r["message"].startswith("consumer run finished")}
    assert len(started) == 2 and set(finished) == set(started)
    outcomes = sorted((r["status"], r["failed_attempts"], r["flow"]) for r in finished.values())
    assert outcomes == [("failed", 1, "consumer_flow"), ("success", 0, "consumer_flow")]
    assert all(r["duration"] >= 0 for r in finished.values())
    assert next(r for r in finished.values() if r["status"] == "failed")["level"] == "warning"


def test_serve_text_logs_are_one_line_per_record(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/text.db"
    entry = _write(tmp_path, ENTRY)
    _seed(url, "2024-01-02")

    err = _serve(entry, url, until=lambda: _finished_runs(url) == 1)

    lines = [line for line in err.splitlines() if line.strip()]
    assert not any(line.lstrip().startswith("{") for line in lines)
    (end,) = [line for line in lines if "consumer run finished" in line]
    assert "warning consumer run finished: failed in " in end
    assert "flow=consumer_flow" in end and "failed_attempts=1" in end and "status=failed" in end


def test_serve_rejects_an_unknown_log_format(tmp_path: Path) -> None:
    result = _invoke("serve", _write(tmp_path, ENTRY), "--log-format", "yaml")
    assert result.exit_code == 2


# --- plan --pending ----------------------------------------------------------------------------


def _publish_hours(url: str, entry: str, *hours: str) -> None:
    import partita as p
    from partita.entry import load_trigger_flows

    (flow,) = load_trigger_flows(entry)
    with closing(SqlStore(url)) as store:
        for hour in hours:
            p.publish_event(store, flow.registry, "raw", partition_key=hour)


def test_plan_pending_shows_rollup_progress_of_waiting_keys(store_url: str, tmp_path: Path) -> None:
    entry = _write(tmp_path, ROLLUP, "rollup_entry.py")
    _publish_hours(store_url, entry, "2026-10-25T03")  # the day clocks go back in Paris: 25 hours

    text = _invoke("plan", entry, "--pending", "--store", store_url)
    document = json.loads(_invoke("plan", entry, "--pending", "--store", store_url, "--json").stdout)

    assert text.exit_code == 0, text.output
    assert "flow daily_flow: waiting 2026-10-25: 1 of 25 upstream keys" in text.stdout.splitlines()
    assert_valid(document)
    (flow,) = document["flows"]
    assert flow["waiting"] == ["2026-10-25"]
    assert flow["waiting_progress"] == [
        {"partition_key": "2026-10-25", "present": 1, "required": 25, "upstream_keys": 25}
    ]
    _publish_hours(store_url, entry, "2026-10-25T04", "2026-10-25T05")
    document = json.loads(_invoke("plan", entry, "--pending", "--store", store_url, "--json").stdout)
    assert document["flows"][0]["waiting_progress"][0]["present"] == 3


def test_plan_pending_progress_with_a_minimum_says_how_many_are_needed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/minimum.db"
    entry = _write(tmp_path, ROLLUP.replace('RollupMapper("day")', 'RollupMapper("day", minimum=3)'), "minimum_entry.py")
    _publish_hours(url, entry, "2026-10-26T01")

    text = _invoke("plan", entry, "--pending", "--store", url)

    assert "flow daily_flow: waiting 2026-10-26: 1 of 3 needed (24 upstream keys in the window)" in text.stdout


def test_plan_pending_without_waiting_keys_prints_no_progress(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/none.db"
    entry = _write(tmp_path, ENTRY)
    _seed(url, "2024-01-01")

    text = _invoke("plan", entry, "--pending", "--store", url)
    document = json.loads(_invoke("plan", entry, "--pending", "--store", url, "--json").stdout)

    assert "waiting 2024" not in text.stdout
    assert document["flows"][0]["waiting_progress"] == []
