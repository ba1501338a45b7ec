"""The CLI reads the project configuration: store and record_partition_keys, by precedence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ._sources import DAILY_PIPELINE

FAILING = """
@asset(partition_def=DatePartitionDef())
def load(context):
    if context.partition_key.day == 2:
        raise RuntimeError("source unavailable")
    return 1


@asset(partition_def=DatePartitionDef())
def report(context, load):
    return load


flow = Flow([report])
"""


def _runs(invoke, *args: str) -> list[dict]:
    result = invoke("runs", "list", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["runs"]


def test_the_configured_store_is_used_when_no_flag_or_environment_names_one(
    invoke, write_entry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PARTITA_STORE")
    (tmp_path / "pyproject.toml").write_text('[tool.partita]\nstore = "sqlite:///history/p.db"\n')
    entry = write_entry(DAILY_PIPELINE)
    result = invoke("run", f"{entry}:flow", "--partition-key", "2026-01-01", "--yes")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "history" / "p.db").exists()
    assert not (tmp_path / ".partita").exists()
    assert len(_runs(invoke)) == 1


def test_the_environment_beats_the_configured_store_and_the_flag_beats_both(
    invoke, write_entry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARTITA_STORE", f"sqlite:///{tmp_path}/env.db")
    (tmp_path / "partita.toml").write_text('store = "sqlite:///file.db"\n')
    entry = write_entry(DAILY_PIPELINE)
    assert invoke("run", f"{entry}:flow", "--partition-key", "2026-01-01", "--yes").exit_code == 0
    flag = f"sqlite:///{tmp_path}/flag.db"
    assert invoke("run", f"{entry}:flow", "--partition-key", "2026-01-01", "--yes", "--store", flag).exit_code == 0
    assert (tmp_path / "env.db").exists() and (tmp_path / "flag.db").exists()
    assert not (tmp_path / "file.db").exists()


def test_a_bad_configuration_file_is_exit_2_naming_the_file_and_key(invoke, tmp_path: Path) -> None:
    (tmp_path / "partita.toml").write_text("colour = true\n")
    result = invoke("runs", "list")
    assert result.exit_code == 2
    assert "partita.toml: colour is not a known key" in result.output
    assert "Traceback" not in result.output


def test_a_configuration_file_that_does_not_parse_is_exit_2(invoke, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.partita\n")
    result = invoke("runs", "list", "--json")
    assert result.exit_code == 2
    assert "pyproject.toml is not valid TOML" in result.output


def test_configured_record_partition_keys_makes_runs_show_and_compare_name_the_failed_keys(
    invoke, write_entry, tmp_path: Path
) -> None:
    (tmp_path / "partita.toml").write_text("record_partition_keys = true\n")
    entry = write_entry(FAILING)
    for _ in range(2):
        result = invoke("run", f"{entry}:flow", "--partition-range", "2026-01-01", "2026-01-03", "--yes")
        assert result.exit_code == 1, result.output
    second, first = (run["run_id"] for run in _runs(invoke))
    shown = invoke("runs", "show", first)
    assert "load 2026-01-02 (attempt 1): builtins.RuntimeError" in shown.output
    assert "load failed: 2026-01-02" in shown.output
    assert "report skipped: 2026-01-02" in shown.output
    compared = json.loads(invoke("runs", "compare", first, second, "--json").output)
    assert compared["assets"][0]["a"]["failed_keys"] == ["2026-01-02"]


def test_no_record_partition_keys_overrides_the_configuration(invoke, write_entry, tmp_path: Path) -> None:
    (tmp_path / "partita.toml").write_text("record_partition_keys = true\n")
    entry = write_entry(FAILING)
    args = ("run", f"{entry}:flow", "--partition-range", "2026-01-01", "2026-01-03", "--yes")
    assert invoke(*args, "--no-record-partition-keys").exit_code == 1
    (run,) = _runs(invoke)
    shown = invoke("runs", "show", run["run_id"])
    assert "2026-01-02" not in shown.output
    compared = json.loads(invoke("runs", "compare", run["run_id"], run["run_id"], "--json").output)
    assert "failed_keys" not in compared["assets"][0]["a"]
