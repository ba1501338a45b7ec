"""The real console script and `python -m partita`: entry points and process exit codes (SPEC §13)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ._sources import DAILY_PIPELINE, UNPARTITIONED_PIPELINE

SCRIPT = Path(sys.executable).with_name("partita")


def _partita(*args: str, cwd: Path, module: bool = False) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "partita", *args] if module else [str(SCRIPT), *args]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_console_script_is_installed_next_to_the_interpreter():
    assert SCRIPT.is_file()
    assert os.access(SCRIPT, os.X_OK)


@pytest.mark.parametrize("module", [False, True], ids=["console-script", "python-m"])
def test_help_exits_0(tmp_path, module):
    result = _partita("--help", cwd=tmp_path, module=module)

    assert result.returncode == 0, result.stderr
    for command in ("assets", "partitions", "plan", "run"):
        assert command in result.stdout


@pytest.mark.parametrize("module", [False, True], ids=["console-script", "python-m"])
def test_plan_json_prints_exactly_one_document(tmp_path, write_entry, ran, module):
    path = write_entry(DAILY_PIPELINE)

    result = _partita("plan", path, "--partition-key", "2026-08-08", "--json", cwd=tmp_path, module=module)

    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["schema"] == "partita.plan"
    assert document["version"] == 1
    assert document["attempt_count"] == 3
    assert ran() == []


@pytest.mark.parametrize("module", [False, True], ids=["console-script", "python-m"])
def test_run_yes_runs_the_bodies_and_exits_0(tmp_path, write_entry, ran, module):
    path = write_entry(DAILY_PIPELINE)

    result = _partita("run", path, "--partition-range", "2026-08-08", "2026-08-09", "--yes", cwd=tmp_path, module=module)

    assert result.returncode == 0, result.stderr
    assert ran() == [
        "extract-2026-08-08",
        "extract-2026-08-09",
        "publish-2026-08-08",
        "publish-2026-08-09",
        "settings",
    ]


def test_run_json_prints_one_run_result_document_and_plan_on_stderr(tmp_path, write_entry):
    path = write_entry(UNPARTITIONED_PIPELINE)

    result = _partita("run", path, "--yes", "--json", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["schema"] == "partita.run-result"
    assert document["version"] == 1
    assert document["result"]["status"] == "success"
    assert "selection:" in result.stderr


@pytest.mark.parametrize("module", [False, True], ids=["console-script", "python-m"])
def test_run_with_a_failing_asset_exits_1(tmp_path, write_entry, module):
    path = write_entry(
        """
        @asset
        def broken():
            raise RuntimeError("upstream is down")
        """
    )

    result = _partita("run", path, "--yes", cwd=tmp_path, module=module)

    assert result.returncode == 1
    assert "upstream is down" in result.stdout
    assert "Traceback" not in result.stderr


def test_run_without_yes_on_non_interactive_stdin_exits_2_and_runs_nothing(tmp_path, write_entry, ran):
    path = write_entry(UNPARTITIONED_PIPELINE)

    result = _partita("run", path, cwd=tmp_path)

    assert result.returncode == 2
    assert "--yes" in result.stderr
    assert ran() == []


def test_run_json_without_yes_exits_2_with_an_error_document(tmp_path, write_entry, ran):
    path = write_entry(UNPARTITIONED_PIPELINE)

    result = _partita("run", path, "--json", cwd=tmp_path)

    assert result.returncode == 2
    assert json.loads(result.stdout)["schema"] == "partita.error"
    assert ran() == []


@pytest.mark.parametrize("module", [False, True], ids=["console-script", "python-m"])
def test_non_canonical_key_exits_2_without_echoing_it(tmp_path, write_entry, module):
    path = write_entry(DAILY_PIPELINE)

    result = _partita("plan", path, "--partition-key", "2026-8-8", cwd=tmp_path, module=module)

    assert result.returncode == 2
    assert "2026-8-8" not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("module", [False, True], ids=["console-script", "python-m"])
def test_syntax_error_entry_exits_3(tmp_path, write_entry, module):
    path = write_entry("a = 1\ndef (:\n", header=False)

    result = _partita("plan", path, cwd=tmp_path, module=module)

    assert result.returncode == 3
    assert "line 2" in result.stderr
    assert "Traceback" not in result.stderr


def test_max_concurrency_zero_exits_2(tmp_path, write_entry, ran):
    path = write_entry(UNPARTITIONED_PIPELINE)

    result = _partita("run", path, "--max-concurrency", "0", "--yes", cwd=tmp_path)

    assert result.returncode == 2
    assert ran() == []


def test_relative_entry_path_resolves_from_the_working_directory(tmp_path, write_entry):
    write_entry(UNPARTITIONED_PIPELINE, name="flows/pipeline.py")

    result = _partita("assets", "flows/pipeline.py", "--json", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert [item["name"] for item in json.loads(result.stdout)["assets"]] == ["raw", "total"]


def test_module_entry_imports_from_the_working_directory(tmp_path, package):
    name = package({"flows": UNPARTITIONED_PIPELINE + "\nflow = Flow(['total'])\n"})

    result = _partita("plan", f"{name}.flows:flow", "--json", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["targets"] == ["total"]
