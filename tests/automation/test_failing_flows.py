"""One failing flow never stops the others (SPEC §12): it is logged, shown as failing and retried.

The failing flow's trigger is user code that raises on every pass while a
flag file exists (a schedule source that is unreachable); removing the file
is the repair. Its neighbour, an event-driven flow of the same entry, must
keep getting its runs from the same daemon meanwhile.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from partita.automation.daemon import TriggerDaemon, json_log_handler
from partita.cli.main import cli
from partita.entry import load_trigger_flows
from partita.store import open_store
from partita.store.sql import SqlStore

from .conftest import publish, wait_for
from .test_trigger_documents import assert_valid

ENTRY = '''
import os
from pathlib import Path

from partita import DatePartitionDef, Flow, OnAssetEvents, asset
from partita.automation.triggers import CronPartitions

FLAG = Path(os.environ["BROKEN_FLAG"])
ATTEMPTS = Path(os.environ["BROKEN_ATTEMPTS"])


class UnreachableSchedule(CronPartitions):
    """A schedule whose source is unreachable while the flag file exists."""

    def ticks(self, after, until):
        if FLAG.exists():
            with ATTEMPTS.open("a") as attempts:
                attempts.write("attempt\\n")
            raise RuntimeError("schedule source unreachable")
        return CronPartitions.ticks(self, after, until)


@asset(partition_def=DatePartitionDef())
def raw():
    return 1


@asset(partition_def=DatePartitionDef())
def consumer(context):
    return 1


@asset(partition_def=DatePartitionDef(end="2025-01-03"))
def nightly():
    return 1


events = Flow(["consumer"], name="events", trigger=OnAssetEvents(["raw"]), record_partition_keys=True)
schedule = Flow(["nightly"], name="schedule", trigger=UnreachableSchedule("0 0 * * *", start="2025-01-01T00:00"), record_partition_keys=True)
'''


@pytest.fixture
def entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path, Path]:
    flag, attempts = tmp_path / "broken", tmp_path / "attempts"
    flag.touch()
    monkeypatch.setenv("BROKEN_FLAG", str(flag))
    monkeypatch.setenv("BROKEN_ATTEMPTS", str(attempts))
    path = tmp_path / "entry.py"
    path.write_text(ENTRY)
    return str(path), flag, attempts


def _attempts(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _runs_of(store: SqlStore, asset: str) -> list[str]:
    keys = []
    for run in store.list_runs(limit=1000):
        for task in store.get_tasks(run.header.run_id):
            if task.asset == asset:
                keys += [attempt.partition_key for attempt in task.attempts]
    return sorted(keys)


def _pending(entry: str, store_url: str) -> dict[str, dict[str, object]]:
    result = CliRunner().invoke(cli, ["plan", entry, "--pending", "--store", store_url, "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert_valid(document, "pending.v1.json")
    return {flow["flow"]: flow for flow in document["flows"]}


def test_a_flow_whose_trigger_raises_every_pass_does_not_stop_the_daemon_serving_the_others(
    entry: tuple[str, Path, Path], store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    path, flag, attempts = entry
    caplog.set_level(logging.INFO, logger="partita")
    store = open_store(store_url)
    daemon = TriggerDaemon(load_trigger_flows(path), store, poll_interval=0.02)
    serving = threading.Thread(target=daemon.serve)
    serving.start()
    try:
        publish(store, "2026-08-01")
        wait_for(lambda: _runs_of(store, "consumer") == ["2026-08-01"])
        publish(store, "2026-08-02")
        wait_for(lambda: _runs_of(store, "consumer") == ["2026-08-01", "2026-08-02"])
        wait_for(lambda: _attempts(attempts) >= 3)  # retried on later passes
        assert daemon.failing["schedule"].reason == "RuntimeError: schedule source unreachable"
        assert "events" not in daemon.failing
        errors = [r for r in caplog.records if r.levelno == logging.ERROR and getattr(r, "flow", None) == "schedule"]
        assert len(errors) == 1, "the same failure is logged once, not once per pass"
        assert "schedule source unreachable" in errors[0].getMessage()
        line = json_log_handler().format(errors[0])  # what serve writes on stderr: one JSON line
        assert "\n" not in line
        assert "RuntimeError: schedule source unreachable" in json.loads(line)["traceback"]

        pending = _pending(path, store_url)
        assert pending["schedule"]["error"] == "RuntimeError: schedule source unreachable"
        assert pending["events"]["error"] is None

        flag.unlink()  # the repair: the next pass evaluates the schedule again
        wait_for(lambda: _runs_of(store, "nightly") == ["2025-01-01", "2025-01-02", "2025-01-03"])
        wait_for(lambda: "schedule" not in daemon.failing)
        assert any(r.getMessage() == "flow recovered" and getattr(r, "flow", None) == "schedule" for r in caplog.records)
        assert _pending(path, store_url)["schedule"]["error"] is None
    finally:
        daemon.stop()
        serving.join(timeout=30)
        store.close()
    assert not serving.is_alive()


def test_plan_pending_shows_the_failing_flow_and_still_previews_the_others(
    entry: tuple[str, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _, _ = entry
    url = f"sqlite:///{tmp_path}/cli.db"
    store = open_store(url)
    try:
        publish(store, "2026-08-01")
    finally:
        store.close()
    pending = _pending(path, url)
    assert pending["events"]["would_start"] == ["2026-08-01"]
    assert pending["schedule"]["error"] == "RuntimeError: schedule source unreachable"
    assert pending["schedule"]["would_start"] == []
    monkeypatch.setenv("COLUMNS", "250")
    table = CliRunner().invoke(cli, ["plan", path, "--pending", "--store", url])
    assert table.exit_code == 0, table.output
    assert "failing" in table.stdout
    assert "flow schedule failing: RuntimeError: schedule source unreachable" in table.stdout


def test_trigger_once_serves_the_healthy_flow_and_exits_2_naming_the_failing_one(
    entry: tuple[str, Path, Path], tmp_path: Path
) -> None:
    path, _, _ = entry
    url = f"sqlite:///{tmp_path}/cli.db"
    store = open_store(url)
    try:
        publish(store, "2026-08-01")
    finally:
        store.close()
    result = CliRunner().invoke(cli, ["trigger", path, "--once", "--store", url, "--json"])
    assert result.exit_code == 2, result.output
    document = json.loads(result.stdout)
    assert_valid(document, "trigger-pass.v1.json")
    assert document["started_runs"] == 1
    assert document["failing"] == [{"flow": "schedule", "error": "RuntimeError: schedule source unreachable"}]
    text = CliRunner().invoke(cli, ["trigger", path, "--once", "--store", url])
    assert text.exit_code == 2
    assert "started 0 consumer runs" in text.stdout
    assert "flow schedule failing" in text.stderr
