"""``partita pools ENTRY``: the holders and waiters of every process using the store, and its exit codes.

A holder is a real process (``tests/execution/pool_child.py``) whose body
waits for a file; a second one waits for the pool's one slot.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator, FormatChecker

from partita.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "schemas" / "pools.v1.json").read_text())
CHILD = REPO / "tests" / "execution" / "pool_child.py"
WAIT = 60.0
FORMATS = FormatChecker()

ENTRY = """
import partita as p

@p.asset(resource="api")
def work() -> int:
    return 1

flow = p.Flow(["work"], resources={"api": p.ResourcePolicy(max_concurrency=1, shared=True)})
"""


@FORMATS.checks("date-time", raises=ValueError)
def _timezone_aware_iso(value: object) -> bool:
    if isinstance(value, str) and dt.datetime.fromisoformat(value).tzinfo is None:
        raise ValueError("timestamp has no UTC offset")
    return True


def _pools(*args: str, code: int = 0) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["pools", *args, "--json"])
    assert result.exit_code == code, result.output
    document = json.loads(result.stdout)
    if code == 0:
        errors = [error.message for error in Draft202012Validator(SCHEMA, format_checker=FORMATS).iter_errors(document)]
        assert not errors, errors
    return document


def _until(check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + WAIT
    while not (found := check()):
        assert time.monotonic() < deadline, "the processes never reached the expected state"
        time.sleep(0.02)
    return found


@pytest.fixture
def entry(tmp_path: Path) -> str:
    path = tmp_path / "pools_entry.py"
    path.write_text(ENTRY)
    return str(path)


def test_pools_lists_a_holding_and_a_waiting_process_with_their_runs(store_url: str, entry: str, tmp_path: Path):
    hold = tmp_path / "release"
    outs = [tmp_path / "holder", tmp_path / "waiter"]
    for out in outs:
        out.mkdir()
    options = ["--limit", "1", "--keys", "1", "--hold", str(hold)]
    holder = subprocess.Popen([sys.executable, str(CHILD), store_url, str(outs[0]), *options], stdout=subprocess.PIPE)
    waiter = None
    try:
        _until(lambda: list(outs[0].glob("*.entered")))
        waiter = subprocess.Popen(
            [sys.executable, str(CHILD), store_url, str(outs[1]), *options], stdout=subprocess.PIPE
        )
        document = _until(lambda: (d := _pools(entry, "--store", store_url))["pools"][0]["waiters"] and d)
        [pool] = document["pools"]
        assert (pool["name"], pool["declared"], pool["max_concurrency"], pool["resources"]) == ("api", True, 1, ["api"])
        [held] = pool["holders"]
        assert (held["pid"], held["asset"], held["key_index"], held["partition_key"], held["slot"]) == (
            holder.pid, "work", 0, "0", 0,
        )
        [waiting] = pool["waiters"]
        assert (waiting["pid"], waiting["asset"], waiting["waiting"]) == (waiter.pid, "work", 1)
        text = CliRunner().invoke(cli, ["pools", entry, "--store", store_url])
        assert text.exit_code == 0, text.output
        assert "pool api: 1 of 1 slots held, 1 attempts waiting in 1 runs" in text.output
        assert held["run_id"] in text.output and waiting["run_id"] in text.output
        hold.write_text("")
        for process in (holder, waiter):
            assert process.wait(WAIT) == 0
    finally:
        hold.write_text("")
        holder.kill()
        if waiter is not None:
            waiter.kill()
    assert _pools(entry, "--store", store_url)["pools"][0]["holders"] == []


def test_pools_of_a_store_that_does_not_exist_yet_lists_no_holders(entry: str, tmp_path: Path):
    document = _pools(entry, "--store", f"sqlite:///{tmp_path}/missing.db")
    assert [(pool["name"], pool["holders"], pool["waiters"]) for pool in document["pools"]] == [("api", [], [])]
    assert not (tmp_path / "missing.db").exists()


def test_pools_exit_codes_follow_the_spec(entry: str, tmp_path: Path):
    assert _pools(str(tmp_path / "absent.py"), code=3)["error"]["exit_code"] == 3
    assert _pools(entry, "--store", "mysql://nowhere/x", code=2)["error"]["exit_code"] == 2
    unreachable = "postgresql://partita@127.0.0.1:1/partita"
    assert _pools(entry, "--store", unreachable, code=4)["error"]["type"] == "StoreError"


BLOCKING_ENTRY = """
import time
from pathlib import Path

import partita as p

@p.asset(resource="api")
def work() -> int:
    Path({entered!r}).write_text("")
    while not Path({release!r}).exists():
        time.sleep(0.01)  # the body's own work: it runs until released
    return 1

flow = p.Flow(["work"], resources={{"api": p.ResourcePolicy(max_concurrency=1, shared=True)}}, cancel_grace_seconds=0.2)
"""


def test_sigterm_to_partita_run_releases_its_slot_and_exits_143(store_url: str, tmp_path: Path):
    import signal

    entered, release = tmp_path / "entered", tmp_path / "release"
    entry = tmp_path / "blocking.py"
    entry.write_text(BLOCKING_ENTRY.format(entered=str(entered), release=str(release)))
    partita = Path(sys.executable).with_name("partita")
    run = subprocess.Popen(
        [str(partita), "run", str(entry), "--yes", "--store", store_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _until(entered.exists)
        [pool] = _pools(str(entry), "--store", store_url)["pools"]
        assert [holder["pid"] for holder in pool["holders"]] == [run.pid]
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=WAIT)
    finally:
        release.write_text("")
        run.kill()
    assert run.returncode == 143, stderr
    assert _pools(str(entry), "--store", store_url)["pools"][0]["holders"] == []
