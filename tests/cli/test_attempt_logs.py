"""Attempt logs on the CLI: live lines while ``partita run`` runs, and ``partita runs logs`` (SPEC §13, §15)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from partita.cli.main import cli
from partita.store import open_store

PARTITA = Path(sys.executable).with_name("partita")
WAIT = 30.0

ENTRY = """
import os
import pathlib
import time

from partita import DatePartitionDef, Flow, asset


@asset(partition_def=DatePartitionDef())
def extract(context):
    context.logger.debug("detail for %s", context.partition_key)
    context.logger.info("loaded %d rows", 120)
    context.logger.warning("late file")
    print("printed by the body")
    release = os.environ.get("LOGS_RELEASE")
    if release:
        context.logger.info("waiting")
        deadline = time.monotonic() + 30
        while not pathlib.Path(release).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        context.logger.info("released")
    return 1


@asset
def quiet():
    return 1


flow = Flow(["extract"])
silent = Flow(["quiet"])
"""


@pytest.fixture
def entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PARTITA_STORE", f"sqlite:///{tmp_path}/history.db")
    monkeypatch.delenv("LOGS_RELEASE", raising=False)
    path = tmp_path / "entry.py"
    path.write_text(ENTRY)
    return path


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def _run(*extra: str, target: str = "flow") -> tuple[int, str, str]:
    return _invoke("run", f"entry.py:{target}", "--partition-key", "2026-10-03", "--yes", *extra)


def _last_run_id() -> str:
    code, out, _ = _invoke("runs", "list", "--json")
    assert code == 0
    return str(json.loads(out)["runs"][0]["run_id"])


def test_run_shows_lines_live_prefixed_by_asset_and_key_from_info_up_as_plain_lines_in_a_pipe(entry: Path) -> None:
    code, _, err = _run()
    assert code == 0
    assert "extract[2026-10-03] INFO loaded 120 rows" in err
    assert "extract[2026-10-03] WARNING late file" in err
    assert "DEBUG" not in err
    assert "printed by the body" not in err  # output capture is off: the body's print went to stdout
    assert "\x1b[" not in err


def test_verbose_shows_and_keeps_debug_lines_and_quiet_shows_only_warnings(entry: Path) -> None:
    code, _, err = _run("-v")
    assert code == 0 and "extract[2026-10-03] DEBUG detail for 2026-10-03" in err
    code, out, _ = _invoke("runs", "logs", _last_run_id())
    assert code == 0 and "DEBUG detail for 2026-10-03" in out

    code, _, err = _run("-q")
    assert code == 0 and "WARNING late file" in err and "INFO loaded" not in err
    assert _run("-q", "-v")[0] == 2


def test_capture_output_keeps_the_bodys_prints_with_its_attempt(entry: Path) -> None:
    code, out, err = _run("--capture-output")
    assert code == 0
    assert "extract[2026-10-03] stdout printed by the body" in err
    assert "printed by the body" not in out
    code, out, _ = _invoke("runs", "logs", _last_run_id(), "--asset", "extract")
    assert code == 0
    assert out.splitlines() == [
        "extract#0 INFO loaded 120 rows",
        "extract#0 WARNING late file",
        "extract#0 stdout printed by the body",
    ]


def test_the_project_configuration_turns_output_capture_on(entry: Path) -> None:
    (entry.parent / "partita.toml").write_text("log_capture = true\n")
    code, _, err = _run()
    assert code == 0 and "stdout printed by the body" in err
    code, _, err = _run("--no-capture-output")
    assert code == 0 and "stdout printed by the body" not in err


def test_runs_logs_shows_recorded_keys_filters_by_key_and_level_and_prints_a_document(entry: Path) -> None:
    assert _run("--record-partition-keys")[0] == 0
    run_id = _last_run_id()
    code, out, _ = _invoke("runs", "logs", run_id[:8], "--key", "2026-10-03", "--level", "warning")
    assert code == 0
    assert out.splitlines() == ["extract[2026-10-03] WARNING late file"]

    code, out, _ = _invoke("runs", "logs", run_id, "--json")
    document = json.loads(out)
    assert (document["schema"], document["version"], document["run_id"]) == ("partita.attempt-logs", 1, run_id)
    assert [line["message"] for line in document["lines"]] == ["loaded 120 rows", "late file"]
    assert {line["partition_key"] for line in document["lines"]} == {"2026-10-03"}


def test_runs_logs_of_an_unknown_run_is_the_same_error_as_runs_show(entry: Path) -> None:
    assert _run()[0] == 0
    shown = _invoke("runs", "show", "f" * 32)
    logged = _invoke("runs", "logs", "f" * 32)
    assert shown[0] == logged[0] == 2
    assert logged[2] == shown[2] and "no run with id" in logged[2]


def test_runs_logs_before_any_store_exists_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PARTITA_STORE", f"sqlite:///{tmp_path}/none.db")
    code, _, err = _invoke("runs", "logs", "abcdef")
    assert code == 2 and "no run-history store exists" in err


def test_runs_logs_of_a_run_without_lines_says_so_and_its_document_has_none(entry: Path) -> None:
    assert _invoke("run", "entry.py:silent", "--yes")[0] == 0
    run_id = _last_run_id()
    code, out, err = _invoke("runs", "logs", run_id)
    assert code == 0 and out == "" and f"run {run_id} kept no log lines" in err
    code, out, _ = _invoke("runs", "logs", run_id, "--json")
    assert code == 0 and json.loads(out)["lines"] == []


def test_runs_logs_refuses_a_key_of_a_run_that_did_not_record_keys_and_an_unknown_asset(entry: Path) -> None:
    assert _run()[0] == 0
    run_id = _last_run_id()
    code, _, err = _invoke("runs", "logs", run_id, "--key", "2026-10-03")
    assert code == 2 and "--key needs a run that recorded partition keys" in err
    assert "2026-10-03" not in err
    code, _, err = _invoke("runs", "logs", run_id, "--asset", "nope")
    assert code == 2 and "--asset names no asset of run" in err
    assert _invoke("runs", "logs", run_id, "--follow", "--json")[0] == 2


def _read_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, "the follower ended before printing the line"
    return line.rstrip("\n")


def test_follow_prints_lines_as_a_running_run_logs_them_and_ends_when_it_finishes(entry: Path, tmp_path: Path) -> None:
    release = tmp_path / "release"
    env = {**os.environ, "LOGS_RELEASE": str(release)}
    runner = subprocess.Popen(
        [str(PARTITA), "run", "entry.py:flow", "--partition-key", "2026-10-03", "--yes"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    follower = None
    try:
        store = open_store(os.environ["PARTITA_STORE"].replace("sqlite:///", "sqlite:///", 1))
        deadline = time.monotonic() + WAIT
        runs: list = []
        while not runs and time.monotonic() < deadline:
            runs = store.list_runs(limit=1)
        store.close()
        assert runs, "the run did not start"
        follower = subprocess.Popen(
            [str(PARTITA), "runs", "logs", runs[0].run_id, "--follow"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        seen = [_read_line(follower) for _ in range(3)]
        assert seen == ["extract#0 INFO loaded 120 rows", "extract#0 WARNING late file", "extract#0 INFO waiting"]
        release.write_text("go")  # the body logs its last line and the run finishes
        assert _read_line(follower) == "extract#0 INFO released"
        assert follower.wait(WAIT) == 0
        assert runner.wait(WAIT) == 0
    finally:
        release.write_text("go")
        for process in (runner, follower):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(WAIT)
