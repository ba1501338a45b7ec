"""SIGTERM to `partita run` is handled like Ctrl-C, and unfinished runs say what never started (SPEC §5, §6, §13).

The real console script runs in a child process. Two of five ``slow``
bodies start (they write a mark, then block for good); the test waits for
both marks (polling with a deadline) and sends SIGTERM. The run stops
admitting work, records ``cancelled``, prints its result and exits 143.
The two bodies that had started report their invocation; the attempts and
the task that never started are shown as not started, never as skipped.
A run killed outright (SIGKILL) shows its never-started tasks the same way.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(sys.executable).with_name("partita")
DEADLINE = 30.0
KEYS = ["a", "b", "c", "d", "e"]
STARTED = 2  # --max-concurrency: bodies running when the signal arrives

BLOCKING_PIPELINE = """
import threading


@asset(partition_def=StaticPartitionDef("tenants", {keys!r}))
def slow(context):
    mark("slow", context.partition_key)
    threading.Event().wait()  # blocks until the process ends


@asset(partition_def=StaticPartitionDef("tenants", {keys!r}))
def publish(slow):
    return slow


flow = Flow(["publish"], cancel_grace_seconds={grace})
"""

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="sends POSIX signals to a child process")


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PARTITA_STORE"}
    return {**env, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}


def _marks(out_dir: Path) -> list[str]:
    return sorted(path.name for path in out_dir.iterdir()) if out_dir.exists() else []


def _signal_mid_run(
    entry: str, out_dir: Path, cwd: Path, signum: int, *extra: str, ignore_sigint: bool = False
) -> tuple[int, str, str]:
    """Start a run, wait until STARTED bodies run, send ``signum``; (exit code, stdout, stderr)."""
    keys = [arg for key in KEYS for arg in ("--partition-key", key)]
    command = [str(SCRIPT), "run", entry, *keys, "--max-concurrency", str(STARTED), "--yes", *extra]
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A background job of a non-interactive shell starts with SIGINT ignored.
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None,
    )
    try:
        deadline = time.monotonic() + DEADLINE
        while len(_marks(out_dir)) < STARTED:
            if proc.poll() is not None:
                _, err = proc.communicate()
                pytest.fail(f"the run ended before the signal ({proc.returncode}):\n{err}")
            if time.monotonic() > deadline:
                pytest.fail("the bodies did not start before the deadline")
            time.sleep(0.01)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=DEADLINE * 2)
        return proc.returncode, out, err
    finally:
        if proc.poll() is None:
            proc.kill()  # only the process this test started
            proc.communicate()


def _partita_json(*args: str, cwd: Path) -> dict[str, Any]:
    completed = subprocess.run(
        [str(SCRIPT), *args, "--json"], cwd=cwd, env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=DEADLINE * 2,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def _row(table: str, asset_name: str) -> dict[str, str]:
    """The cells of ``asset_name``'s row in a rendered table (boxed, or plain in a pipe)."""
    header = next(line for line in table.splitlines() if "success" in line and "cancelled" in line)
    columns = [cell.strip() for cell in re.split(r"[│┃|]|\s{2,}", header) if cell.strip()]
    for line in table.splitlines():
        cells = [cell.strip() for cell in re.split(r"[│┃|]|\s{2,}", line) if cell.strip()]
        if cells and cells[0] == asset_name:
            return dict(zip(columns, cells, strict=True))
    raise AssertionError(f"no row for {asset_name!r} in:\n{table}")


def _started_keys(out_dir: Path) -> list[str]:
    return [name.removeprefix("slow-") for name in _marks(out_dir)]


def _assert_cancelled_record(record: dict[str, Any], started: list[str]) -> None:
    """A cancelled run: started attempts report their invocation, the rest never started."""
    assert record["status"] == "cancelled"
    tasks = {task["asset"]: task for task in record["tasks"]}
    slow, publish = tasks["slow"], tasks["publish"]
    assert slow["status"] == "cancelled"
    assert [attempt["status"] for attempt in slow["attempts"]] == ["cancelled"] * len(KEYS)
    ran = [attempt for attempt in slow["attempts"] if attempt["invocations"]]
    assert sorted(KEYS[attempt["index"]] for attempt in ran) == started
    for attempt in ran:
        assert attempt["invocations"] == 1
        assert attempt["started_at"] is not None and attempt["finished_at"] is not None
        assert attempt["failure"] is None  # cancelled, not failed
        if "invocation_details" in attempt:
            (invocation,) = attempt["invocation_details"]
            assert invocation["succeeded"] is False
            assert invocation["failure"]["type"] == "asyncio.exceptions.CancelledError"
    for attempt in slow["attempts"]:
        if not attempt["invocations"]:
            assert attempt["started_at"] is None
    assert publish["status"] == "not_started"
    assert publish["counts"]["cancelled"] == len(KEYS)
    assert all(attempt["invocations"] == 0 for attempt in publish["attempts"])


def test_sigterm_cancels_the_run_exits_143_prints_the_result_and_records_it_cancelled(tmp_path, write_entry, out_dir):
    entry = write_entry(BLOCKING_PIPELINE.format(keys=KEYS, grace=0.2))
    store = f"sqlite:///{tmp_path / 'history.db'}"

    code, out, err = _signal_mid_run(entry, out_dir, tmp_path, signal.SIGTERM, "--store", store)

    assert code == 143, err
    assert "terminated" in err.lower()
    assert "Traceback" not in err
    assert "status: cancelled" in out
    slow, publish = _row(out, "slow"), _row(out, "publish")
    assert slow["status"] == "cancelled"
    assert int(slow["cancelled"]) == len(KEYS)
    assert publish["status"] == "not started"
    assert int(publish["skipped"]) == 0

    [run] = _partita_json("runs", "list", "--store", store, cwd=tmp_path)["runs"]
    assert run["status"] == "cancelled"
    shown = _partita_json("runs", "show", run["run_id"], "--store", store, cwd=tmp_path)
    _assert_cancelled_record(shown["run"], _started_keys(out_dir))


def test_sigterm_with_json_prints_one_cancelled_run_result_document(tmp_path, write_entry, out_dir):
    entry = write_entry(BLOCKING_PIPELINE.format(keys=KEYS, grace=0.2))

    code, out, err = _signal_mid_run(entry, out_dir, tmp_path, signal.SIGTERM, "--json", "--no-store")

    assert code == 143, err
    assert "terminated" in err.lower()
    document = json.loads(out)  # exactly one document, nothing else on stdout
    assert document["schema"] == "partita.run-result"
    _assert_cancelled_record(document["result"], _started_keys(out_dir))


def test_sigterm_after_the_grace_period_still_ends_a_run_whose_bodies_never_return(tmp_path, write_entry, out_dir):
    """A zero grace period: the blocked bodies are abandoned at once and the run still ends cleanly."""
    entry = write_entry(BLOCKING_PIPELINE.format(keys=KEYS, grace=0))

    code, out, err = _signal_mid_run(entry, out_dir, tmp_path, signal.SIGTERM, "--no-store")

    assert code == 143, err
    assert "status: cancelled" in out


def test_sigterm_cancels_the_run_even_when_sigint_is_ignored(tmp_path, write_entry, out_dir):
    entry = write_entry(BLOCKING_PIPELINE.format(keys=KEYS, grace=0.2))

    code, out, err = _signal_mid_run(
        entry, out_dir, tmp_path, signal.SIGTERM, "--json", "--no-store", ignore_sigint=True
    )

    assert code == 143, err
    _assert_cancelled_record(json.loads(out)["result"], _started_keys(out_dir))


def test_a_killed_run_shows_its_never_started_tasks_as_not_started(tmp_path, write_entry, out_dir):
    entry = write_entry(BLOCKING_PIPELINE.format(keys=KEYS, grace=0.2))
    store = f"sqlite:///{tmp_path / 'history.db'}"
    db = tmp_path / "history.db"

    def two_running() -> bool:
        import sqlite3

        if not db.exists():
            return False
        with sqlite3.connect(db) as connection:
            try:
                rows = connection.execute("SELECT count(*) FROM partita_attempts WHERE status = 'running'").fetchone()
            except sqlite3.OperationalError:
                return False
        return rows[0] == STARTED

    keys = [arg for key in KEYS for arg in ("--partition-key", key)]
    proc = subprocess.Popen(
        [str(SCRIPT), "run", entry, *keys, "--max-concurrency", str(STARTED), "--yes", "--store", store],
        cwd=tmp_path,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + DEADLINE
        while not two_running():  # the running rows are stored: the kill leaves them behind
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the attempts were never recorded as running"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=DEADLINE) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()

    [run] = _partita_json("runs", "list", "--store", store, cwd=tmp_path)["runs"]
    assert run["status"] == "interrupted"
    record = _partita_json("runs", "show", run["run_id"], "--store", store, cwd=tmp_path)["run"]
    tasks = {task["asset"]: task for task in record["tasks"]}
    assert tasks["slow"]["status"] == "interrupted"
    assert tasks["publish"]["status"] == "not_started"
    assert tasks["publish"]["attempts"] == []
    assert tasks["publish"]["reason"] is None

    table = subprocess.run(
        [str(SCRIPT), "runs", "show", run["run_id"], "--store", store],
        cwd=tmp_path, env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=DEADLINE * 2,
    )
    assert table.returncode == 0, table.stderr
    publish = _row(table.stdout, "publish")
    assert publish["status"] == "not started"
    assert publish["not started"] == str(len(KEYS))
    assert _row(table.stdout, "slow")["not started"] == str(len(KEYS) - STARTED)


def test_runs_show_of_a_cancelled_run_counts_the_attempts_that_never_began_as_not_started(
    tmp_path, write_entry, out_dir
):
    """The table's columns split the planned attempts: cut short (cancelled) apart from never begun (not started)."""
    entry = write_entry(BLOCKING_PIPELINE.format(keys=KEYS, grace=0.2))
    store = f"sqlite:///{tmp_path / 'history.db'}"
    code, _, err = _signal_mid_run(entry, out_dir, tmp_path, signal.SIGTERM, "--store", store)
    assert code == 143, err
    [run] = _partita_json("runs", "list", "--store", store, cwd=tmp_path)["runs"]

    table = subprocess.run(
        [str(SCRIPT), "runs", "show", run["run_id"], "--store", store],
        cwd=tmp_path, env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=DEADLINE * 2,
    )  # fmt: skip

    assert table.returncode == 0, table.stderr
    slow, publish = _row(table.stdout, "slow"), _row(table.stdout, "publish")
    assert (slow["status"], slow["cancelled"], slow["not started"]) == ("cancelled", str(STARTED), str(len(KEYS) - STARTED))
    assert (publish["status"], publish["cancelled"], publish["not started"]) == ("not started", "0", str(len(KEYS)))
