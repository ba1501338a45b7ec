"""Crash safety (SPEC §1.4, §6): a flow killed with SIGKILL leaves an interrupted run.

A real ``partita run`` process records into a store (SQLite, then
PostgreSQL), finishes some attempts and blocks in others; the test kills it
with SIGKILL. Afterwards ``partita runs list/show --json`` report the run as
``interrupted`` — never running forever — with the finished attempts intact
and the unfinished ones ``interrupted``. The first read after the kill is a
fresh process; the later reads invoke the CLI in this process, which is no
less a stranger to the killed owner (its liveness is checked by pid and
token) and spares a Python start per command.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from partita.cli.main import cli
from partita.store import open_store

DEADLINE_SECONDS = 60.0

# Six daily keys; the first three finish at once, the other three block for
# good. With at most two bodies at once, two attempts are left running and
# one never starts.
ENTRY = """
import threading
from partita import DatePartitionDef, Flow, asset

@asset(partition_def=DatePartitionDef())
def slow(context):
    if context.partition_key.day > 3:
        threading.Event().wait()  # "slow": never finishes before the kill
    return context.partition_key.day

flow = Flow(["slow"], max_concurrency=2)
"""


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    monkeypatch.chdir(tmp_path)


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PARTITA_STORE"}
    env["COLUMNS"] = "200"
    return env


def _partita(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "partita", *args],
        cwd=cwd,
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def flow_process(tmp_path: Path, store_url: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    (tmp_path / "entry.py").write_text(textwrap.dedent(ENTRY))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "partita",
            "run",
            "entry.py",
            "--yes",
            "--store",
            store_url,
            "--partition-range",
            "2026-08-01",
            "2026-08-06",
        ],
        cwd=tmp_path,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process, store_url
    finally:
        if process.poll() is None:
            process.kill()  # only the process this test started
        process.wait()
        if process.stderr is not None:
            process.stderr.close()


def _progress(store_url: str) -> tuple[str, list[str]] | None:
    """(run id, attempt statuses) of the newest run, or None while nothing is recorded."""
    if store_url.startswith("sqlite:///") and not Path(store_url.removeprefix("sqlite:///")).exists():
        return None
    store = open_store(store_url)
    try:
        runs = store.list_runs(limit=1)
        if not runs:
            return None
        tasks = store.get_tasks(runs[0].run_id)
        return runs[0].run_id, [attempt.status for attempt in tasks[0].attempts]
    finally:
        store.close()


def _wait_until_mid_run(process: subprocess.Popen[str], store_url: str) -> str:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        assert process.poll() is None, f"the flow exited early: {process.stderr.read() if process.stderr else ''}"
        progress = _progress(store_url)
        if progress is not None:
            run_id, statuses = progress
            if sorted(statuses) == ["running", "running", "success", "success", "success"]:
                return run_id
        if time.monotonic() > deadline:
            raise AssertionError(f"the flow never reached mid-run; last progress: {progress}")
        time.sleep(0.05)


def _in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI invoked in this process, its outcome shaped as a child's would be."""
    result = CliRunner().invoke(cli, list(args))
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def _json(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_killed_run_is_shown_as_interrupted_with_its_finished_attempts_intact(flow_process, tmp_path):
    process, store_url = flow_process
    run_id = _wait_until_mid_run(process, store_url)

    # While the flow is alive, another process reads it as running (and is not blocked).
    live = _json(_partita("runs", "list", "--json", "--store", store_url, cwd=tmp_path))
    assert [(run["run_id"], run["status"]) for run in live["runs"]] == [(run_id, "running")]

    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=DEADLINE_SECONDS) == -signal.SIGKILL

    listed = _json(_partita("runs", "list", "--json", "--store", store_url, cwd=tmp_path))
    assert listed["schema"] == "partita.runs"
    [run] = listed["runs"]
    assert run["run_id"] == run_id
    assert run["status"] == "interrupted"
    assert run["finished_at"] is None
    assert run["duration_seconds"] is None
    assert run["attempt_count"] == 6
    assert run["counts"]["success"] == 3

    shown = _json(_in_process("runs", "show", run_id[:8], "--json", "--store", store_url))
    assert shown["schema"] == "partita.run"
    record = shown["run"]
    assert record["run_id"] == run_id
    assert record["status"] == "interrupted"
    [task] = record["tasks"]
    assert task["asset"] == "slow"
    assert task["status"] == "interrupted"
    attempts = task["attempts"]
    assert [a["index"] for a in attempts] == [0, 1, 2, 3, 4]
    finished = [a for a in attempts if a["status"] == "success"]
    unfinished = [a for a in attempts if a["status"] != "success"]
    assert [a["index"] for a in finished] == [0, 1, 2]
    for attempt in finished:
        assert attempt["started_at"] is not None and attempt["finished_at"] is not None
        assert attempt["failure"] is None
        assert attempt["invocations"] == 1
        assert attempt["partition_key_present"] is True
        assert "partition_key" not in attempt
    assert [a["status"] for a in unfinished] == ["interrupted", "interrupted"]
    assert all(a["finished_at"] is None for a in unfinished)
    assert record["counts"]["success"] == 3
    assert record["counts"]["interrupted"] == 2
    assert record["counts"].get("running", 0) == 0

    interrupted = _json(_in_process("runs", "list", "--status", "interrupted", "--json", "--store", store_url))
    assert [r["run_id"] for r in interrupted["runs"]] == [run_id]
    running = _json(_in_process("runs", "list", "--status", "running", "--json", "--store", store_url))
    assert running["runs"] == []

    table = _in_process("runs", "show", run_id, "--store", store_url)
    assert table.returncode == 0, table.stderr
    assert "interrupted" in table.stdout


def test_an_interrupted_run_stays_interrupted_and_later_runs_are_unaffected(flow_process, tmp_path):
    process, store_url = flow_process
    run_id = _wait_until_mid_run(process, store_url)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=DEADLINE_SECONDS)

    (tmp_path / "quick.py").write_text("from partita import asset\n\n@asset\ndef quick():\n    return 1\n")
    after = _partita("run", "quick.py", "--yes", "--store", store_url, cwd=tmp_path)
    assert after.returncode == 0, after.stderr

    listed = _json(_in_process("runs", "list", "--json", "--store", store_url))
    assert [(r["status"], r["targets"]) for r in listed["runs"]] == [("success", ["quick"]), ("interrupted", ["slow"])]
    compared = _json(_in_process("runs", "compare", run_id, listed["runs"][0]["run_id"], "--json", "--store", store_url))
    assert compared["a"]["status"] == "interrupted"
    assert compared["status_changed"] is True
    rows = {row["asset"]: row for row in compared["assets"]}
    assert rows["slow"]["a"]["status"] == "interrupted"
    assert rows["slow"]["changes"] == ["only in A"]
