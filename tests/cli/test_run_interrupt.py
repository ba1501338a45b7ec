"""Ctrl-C during `partita run` and progress output (SPEC §5, §13).

The real console script runs in a child process. Bodies write a mark into
``out_dir`` when they start, so the test knows work is under way (polling
with a deadline) before it sends SIGINT. An interrupted run exits 130, says
so on stderr and reports the cancelled result.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("partita")
DEADLINE = 30.0

SLOW_PIPELINE = """
import time


@asset(partition_def=DatePartitionDef())
def slow(context):
    mark("slow", context.partition_key.isoformat())
    time.sleep(0.05)
    return 1


@asset(partition_def=DatePartitionDef())
def publish(slow):
    return slow + 1


flow = Flow(["publish"])
"""

FIRST_DAY = dt.date(2026, 1, 1)
LAST_DAY = FIRST_DAY + dt.timedelta(days=199)  # 200 keys
RANGE = ("--partition-range", FIRST_DAY.isoformat(), LAST_DAY.isoformat())

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT to a child process")


def _env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}


def _marks(out_dir: Path) -> list[str]:
    return sorted(path.name for path in out_dir.iterdir()) if out_dir.exists() else []


def _interrupt_run(entry: str, out_dir: Path, cwd: Path, *extra: str) -> tuple[int, str, str]:
    """Start a run, wait until bodies have run, send SIGINT, return (code, stdout, stderr)."""
    command = [str(SCRIPT), "run", entry, *RANGE, "--max-concurrency", "2", "--yes", *extra]
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + DEADLINE
        while len(_marks(out_dir)) < 3:
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"the run ended before it was interrupted ({proc.returncode}):\n{err}")
            if time.monotonic() > deadline:
                pytest.fail("no asset body ran before the deadline")
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=DEADLINE * 2)
        return proc.returncode, out, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _row(table: str, asset_name: str) -> dict[str, str]:
    """The cells of ``asset_name``'s row in the rendered result table (boxed, or plain in a pipe)."""
    header = next(line for line in table.splitlines() if "success" in line and "cancelled" in line)
    columns = [cell.strip() for cell in re.split(r"[│┃|]|\s{2,}", header) if cell.strip()]
    for line in table.splitlines():
        cells = [cell.strip() for cell in re.split(r"[│┃|]|\s{2,}", line)]
        cells = [cell for cell in cells if cell]
        if cells and cells[0] == asset_name:
            return dict(zip(columns, cells, strict=True))
    raise AssertionError(f"no row for {asset_name!r} in:\n{table}")


_PROGRESS = [
    re.compile(r"\x1b\["),  # terminal control sequences (cursor, colour, line erase)
    re.compile(r"\r"),
    re.compile(r"\b\d+/(\d+|\?)\b"),  # done/total
    re.compile(r"\d+ failed \d+ skipped"),
    re.compile(r"[\d,-]+/s\b"),  # rate
    re.compile(r"[╸╺]"),  # partial bar cells
]


def _assert_no_progress(stderr: str) -> None:
    for pattern in _PROGRESS:
        assert pattern.search(stderr) is None, f"progress output {pattern.pattern!r} on piped stderr:\n{stderr!r}"


def test_sigint_cancels_the_run_exits_130_and_prints_the_cancelled_result(tmp_path, write_entry, out_dir):
    entry = write_entry(SLOW_PIPELINE)

    code, out, err = _interrupt_run(entry, out_dir, tmp_path)

    assert code == 130, err
    assert "interrupted" in err.lower()
    assert "Traceback" not in err
    assert "status: cancelled" in out
    slow = _row(out, "slow")
    publish = _row(out, "publish")
    assert slow["status"] == "cancelled"
    assert int(slow["cancelled"]) > 0
    assert int(publish["cancelled"]) > 0
    # Bodies that started before the interrupt finished within the grace period and
    # kept their real outcome; nothing else was admitted afterwards.
    ran = [name for name in _marks(out_dir) if name.startswith("slow-")]
    assert int(slow["success"]) == len(ran)
    assert int(slow["success"]) + int(slow["cancelled"]) == 200
    assert int(slow["failed"]) == int(slow["skipped"]) == 0
    assert sum(int(publish[column]) for column in ("success", "failed", "skipped", "cancelled")) == 200


def test_sigint_with_json_prints_one_cancelled_run_result_document(tmp_path, write_entry, out_dir):
    entry = write_entry(SLOW_PIPELINE)

    code, out, err = _interrupt_run(entry, out_dir, tmp_path, "--json")

    assert code == 130, err
    assert "interrupted" in err.lower()
    document = json.loads(out)  # exactly one document, nothing else on stdout
    assert document["schema"] == "partita.run-result"
    assert document["version"] == 1
    assert document["plan"]["schema"] == "partita.plan"
    result = document["result"]
    assert result["status"] == "cancelled"
    assert result["counts"]["cancelled"] > 0
    assert sum(result["counts"].values()) == 400
    tasks = {task["asset"]: task for task in result["tasks"]}
    assert tasks["slow"]["counts"]["success"] == len(_marks(out_dir))
    for task in tasks.values():
        assert len(task["attempts"]) == 200
        for attempt in task["attempts"]:
            assert attempt["status"] in ("success", "cancelled")
            if attempt["status"] == "cancelled":
                assert attempt["reason"] == "cancelled"


def test_an_interrupted_piped_run_shows_no_progress_display(tmp_path, write_entry, out_dir):
    entry = write_entry(SLOW_PIPELINE)

    code, _, err = _interrupt_run(entry, out_dir, tmp_path)

    assert code == 130
    _assert_no_progress(err)


def test_a_piped_run_shows_no_progress_display(tmp_path, write_entry, out_dir):
    entry = write_entry(SLOW_PIPELINE.replace("time.sleep(0.05)", "pass"))

    completed = subprocess.run(
        [str(SCRIPT), "run", entry, "--partition-range", "2026-01-01", "2026-01-30", "--yes"],
        cwd=tmp_path,
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEADLINE * 2,
    )

    assert completed.returncode == 0, completed.stderr
    assert "status: success" in completed.stdout
    assert "attempts: 60" in completed.stderr  # the plan still goes to stderr
    _assert_no_progress(completed.stderr)


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_a_run_on_a_terminal_shows_progress(tmp_path, write_entry, out_dir):
    """The counterpart of the piped tests: the same patterns do appear on a terminal."""
    entry = write_entry(SLOW_PIPELINE.replace("time.sleep(0.05)", "pass"))
    master, slave = os.openpty()
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    try:
        proc = subprocess.Popen(
            [str(SCRIPT), "run", entry, "--partition-range", "2026-01-01", "2026-01-30", "--yes"],
            cwd=tmp_path,
            env={**_env(), "TERM": "xterm"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=slave,
        )
    finally:
        os.close(slave)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.communicate(timeout=DEADLINE * 2)
        reader.join(DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        os.close(master)

    assert proc.returncode == 0
    err = b"".join(chunks).decode(errors="replace")
    assert "60/60" in err
    assert re.search(r"\d+ failed", err)


PROCESS_PIPELINE = """
import os
import time

from partita import ProcessExecutor


@asset(partition_def=DatePartitionDef())
def slow(context):
    mark("slow", context.partition_key.isoformat(), os.getpid())
    time.sleep(0.05)
    return 1


flow = Flow(["slow"], executor=ProcessExecutor(max_workers=2))
"""


def test_ctrl_c_on_the_process_group_cancels_a_process_executor_run_and_its_workers_end(
    tmp_path, write_entry, out_dir
):
    """A terminal's Ctrl-C reaches every process of the group: workers leave the cancelling to the driver."""
    entry = write_entry(PROCESS_PIPELINE)
    command = [str(SCRIPT), "run", entry, *RANGE, "--max-concurrency", "2", "--yes"]
    proc = subprocess.Popen(
        command, cwd=tmp_path, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + DEADLINE
        while len(_marks(out_dir)) < 3:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no body ran before the deadline ({proc.poll()}):\n{proc.communicate()[1]}")
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=DEADLINE * 2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "status: cancelled" in out
    workers = {int(name.rsplit("-", 1)[1]) for name in _marks(out_dir)}
    assert proc.pid not in workers
    deadline = time.monotonic() + DEADLINE
    while any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in workers):
        assert time.monotonic() < deadline, "a worker outlived the cancelled run"
        time.sleep(0.01)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
