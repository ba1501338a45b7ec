"""The CLI and the run history (SPEC §6, §13, §14).

``partita run`` records into ``.partita/partita.db`` under the working
directory unless ``$PARTITA_STORE``, ``--store URL`` or ``--no-store`` say
otherwise; ``partita runs list/show/compare`` read it back as tables or as
one ``--json`` document. Entry files are written into ``tmp_path``, which is
also the working directory.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from partita.cli.main import cli
from partita.store import open_store

CREATED = "created the run-history store"
TENANTS = ["acme-private-4411", "globex-private-9923"]

PIPELINE = """
import pathlib
from partita import DatePartitionDef, StaticPartitionDef, asset

BROKEN = pathlib.Path({broken!r})
OUT = pathlib.Path({out!r})


@asset(partition_def=DatePartitionDef())
def load(context):
    OUT.mkdir(exist_ok=True)
    (OUT / ("load-" + context.partition_key.isoformat())).write_text("ran")
    if BROKEN.exists() and context.partition_key.day == 2:
        raise RuntimeError("bad input file")
    return 1


@asset(partition_def=DatePartitionDef())
def report(context, load):
    return load + 1


@asset(partition_def=StaticPartitionDef("tenants", {tenants!r}))
def tenant_export(context):
    return 1
"""


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def entry(tmp_path: Path) -> str:
    path = tmp_path / "pipeline.py"
    path.write_text(
        textwrap.dedent(PIPELINE).format(broken=str(tmp_path / "broken"), out=str(tmp_path / "out"), tenants=TENANTS)
    )
    return "pipeline.py"


def _cli(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _run(entry: str, *extra: str, keys: tuple[str, str] = ("2026-05-01", "2026-05-03")) -> Any:
    return _cli("run", entry, "--target", "report", "--partition-range", *keys, "--yes", *extra)


def _run_id(result: Any) -> str:
    """The run id from ``recorded as run ID in URL`` on stderr."""
    text = " ".join(result.stderr.split())
    assert "recorded as run " in text, result.stderr
    return text.split("recorded as run ", 1)[1].split()[0]


def _json(result: Any) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _ids(url: str) -> list[str]:
    store = open_store(url)
    try:
        return [run.run_id for run in store.list_runs()]
    finally:
        store.close()


# -- where runs are recorded -------------------------------------------------------------


def test_run_records_into_the_default_store_and_prints_its_location_once(tmp_path, entry):
    first = _run(entry)

    assert first.exit_code == 0, first.output
    assert (tmp_path / ".partita" / "partita.db").is_file()
    assert first.stderr.count(CREATED) == 1
    assert "sqlite:///.partita/partita.db" in first.stderr
    first_id = _run_id(first)

    second = _run(entry)
    assert second.exit_code == 0, second.output
    assert CREATED not in second.output
    second_id = _run_id(second)

    listed = _cli("runs", "list", "--json")
    assert CREATED not in listed.output
    document = _json(listed)
    assert document["store"] == "sqlite:///.partita/partita.db"
    assert [run["run_id"] for run in document["runs"]] == [second_id, first_id]


def test_the_default_store_follows_the_working_directory(tmp_path, entry, monkeypatch):
    recorded = _run_id(_run(entry))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    result = _run(str(tmp_path / entry))

    assert result.exit_code == 0, result.output
    assert CREATED in result.stderr
    assert (elsewhere / ".partita" / "partita.db").is_file()
    assert [run["run_id"] for run in _json(_cli("runs", "list", "--json"))["runs"]] == [_run_id(result)]
    assert _ids(f"sqlite:///{tmp_path}/.partita/partita.db") == [recorded]


def test_run_json_on_first_use_prints_one_document_and_the_location_on_stderr(tmp_path, entry):
    result = _run(entry, "--json")

    document = _json(result)
    assert document["schema"] == "partita.run-result"
    assert CREATED not in result.stdout
    assert CREATED in result.stderr
    assert _ids("sqlite:///.partita/partita.db") == [document["result"]["run_id"]]


def test_partita_store_is_honoured(tmp_path, entry, monkeypatch):
    url = f"sqlite:///{tmp_path}/from-env.db"
    monkeypatch.setenv("PARTITA_STORE", url)

    run_id = _run_id(_run(entry))

    assert _ids(url) == [run_id]
    assert not (tmp_path / ".partita").exists()
    assert [run["run_id"] for run in _json(_cli("runs", "list", "--json"))["runs"]] == [run_id]
    assert _json(_cli("runs", "show", run_id, "--json"))["run"]["run_id"] == run_id


def test_store_url_option_wins_over_partita_store(tmp_path, entry, monkeypatch, store_url):
    monkeypatch.setenv("PARTITA_STORE", f"sqlite:///{tmp_path}/from-env.db")

    result = _run(entry, "--store", store_url)

    assert result.exit_code == 0, result.output
    run_id = _run_id(result)
    assert _ids(store_url) == [run_id]
    assert not (tmp_path / "from-env.db").exists()
    assert not (tmp_path / ".partita").exists()
    document = _json(_cli("runs", "list", "--json", "--store", store_url))
    assert [run["run_id"] for run in document["runs"]] == [run_id]
    assert _json(_cli("runs", "show", run_id, "--json", "--store", store_url))["run"]["status"] == "success"


def test_no_store_records_nothing(tmp_path, entry, monkeypatch):
    result = _run(entry, "--no-store")

    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "load-2026-05-01").exists()  # it ran
    assert not (tmp_path / ".partita").exists()
    assert "recorded as run" not in result.output
    assert CREATED not in result.output

    monkeypatch.setenv("PARTITA_STORE", f"sqlite:///{tmp_path}/from-env.db")
    assert _run(entry, "--no-store").exit_code == 0
    assert not (tmp_path / "from-env.db").exists()


def test_store_and_no_store_together_are_a_usage_error(tmp_path, entry):
    result = _run(entry, "--store", f"sqlite:///{tmp_path}/x.db", "--no-store")

    assert result.exit_code == 2
    assert "--store" in result.stderr and "--no-store" in result.stderr
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "x.db").exists()
    assert not (tmp_path / ".partita").exists()


# -- runs list ----------------------------------------------------------------------------


def test_runs_list_on_an_empty_store(tmp_path):
    result = _cli("runs", "list", "--store", f"sqlite:///{tmp_path}/empty.db")

    assert result.exit_code == 0, result.output
    assert "No runs recorded" in result.stdout
    assert _json(_cli("runs", "list", "--json", "--store", f"sqlite:///{tmp_path}/empty.db"))["runs"] == []


def test_runs_list_table_and_json(tmp_path, entry):
    ok = _run_id(_run(entry))
    (tmp_path / "broken").write_text("")
    failed_result = _run(entry)
    assert failed_result.exit_code == 1
    failed = _run_id(failed_result)

    table = _cli("runs", "list")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    failed_line = next(line for line in lines if failed[:12] in line)
    ok_line = next(line for line in lines if ok[:12] in line)
    assert lines.index(failed_line) < lines.index(ok_line)  # newest first
    assert "failed" in failed_line and "report" in failed_line
    assert "success" in ok_line

    document = _json(_cli("runs", "list", "--json"))
    assert document["schema"] == "partita.runs"
    assert document["version"] == 1
    assert [run["run_id"] for run in document["runs"]] == [failed, ok]
    newest = document["runs"][0]
    assert newest["status"] == "failed"
    assert newest["targets"] == ["report"]
    assert newest["selection"] == {"kind": "range", "domain": "date", "key_count": 3}
    assert newest["attempt_count"] == 6
    assert newest["counts"] == {"success": 4, "failed": 1, "skipped": 1}
    assert newest["finished_at"] is not None and newest["duration_seconds"] >= 0
    assert set(newest) >= {"run_id", "status", "started_at", "finished_at", "duration_seconds", "targets"}


def test_runs_list_limit_and_status(tmp_path, entry):
    ids = [_run_id(_run(entry)) for _ in range(3)]
    (tmp_path / "broken").write_text("")
    failed = _run_id(_run(entry))

    assert [r["run_id"] for r in _json(_cli("runs", "list", "--limit", "2", "--json"))["runs"]] == [failed, ids[2]]
    assert [r["run_id"] for r in _json(_cli("runs", "list", "--status", "failed", "--json"))["runs"]] == [failed]
    successes = _json(_cli("runs", "list", "--status", "success", "--limit", "2", "--json"))["runs"]
    assert [r["run_id"] for r in successes] == [ids[2], ids[1]]
    assert _json(_cli("runs", "list", "--status", "running", "--json"))["runs"] == []
    assert _json(_cli("runs", "list", "--status", "interrupted", "--json"))["runs"] == []

    table = _cli("runs", "list", "--status", "failed")
    assert failed[:12] in table.stdout
    assert not any(run_id[:12] in table.stdout for run_id in ids)


@pytest.mark.parametrize("args", [["--limit", "0"], ["--limit", "-1"], ["--limit", "many"], ["--status", "bogus"]])
def test_runs_list_rejects_bad_options(args):
    result = _cli("runs", "list", *args)

    assert result.exit_code == 2
    assert "Traceback" not in result.output


# -- runs show ----------------------------------------------------------------------------


def test_runs_show_table_and_json(tmp_path, entry):
    (tmp_path / "broken").write_text("")
    run_id = _run_id(_run(entry))

    table = _cli("runs", "show", run_id[:8])
    assert table.exit_code == 0, table.output
    assert run_id in table.stdout
    assert "failed" in table.stdout
    assert "load" in table.stdout and "report" in table.stdout
    assert "bad input file" in table.stdout

    document = _json(_cli("runs", "show", run_id, "--json"))
    assert document["schema"] == "partita.run"
    assert document["version"] == 1
    record = document["run"]
    assert record["schema"] == "partita.run-record"
    assert record["run_id"] == run_id
    assert record["status"] == "failed"
    assert record["partition_keys_recorded"] is False
    tasks = {task["asset"]: task for task in record["tasks"]}
    assert [a["status"] for a in tasks["load"]["attempts"]] == ["success", "failed", "success"]
    assert [a["status"] for a in tasks["report"]["attempts"]] == ["success", "skipped", "success"]
    assert tasks["report"]["attempts"][1]["reason"] == "dependency_failed"
    assert tasks["load"]["attempts"][1]["failure"]["message"] == "bad input file"
    assert all("partition_key" not in a for task in record["tasks"] for a in task["attempts"])
    assert "resources" in record and "callback_errors" in record


def test_runs_show_json_with_a_prefix_is_the_same_document(entry):
    run_id = _run_id(_run(entry))

    assert _json(_cli("runs", "show", run_id[:6], "--json")) == _json(_cli("runs", "show", run_id, "--json"))


def test_an_unknown_run_id_exits_2(entry):
    run_id = _run_id(_run(entry))
    missing = "0" * 32 if not run_id.startswith("0") else "f" * 32

    for args in (
        ["runs", "show", missing],
        ["runs", "show", "nope"],
        ["runs", "compare", run_id, missing],
        ["runs", "compare", missing, run_id],
    ):
        result = _cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "no run with id" in result.stderr
        assert "Traceback" not in result.output

    result = _cli("runs", "show", missing, "--json")
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert document["schema"] == "partita.error"
    assert document["error"]["type"] == "UnknownRunError"
    assert document["error"]["exit_code"] == 2
    assert missing in document["error"]["message"]


def test_an_ambiguous_prefix_exits_2(tmp_path, entry):
    ids = [_run_id(_run(entry)) for _ in range(2)]
    # Random ids share a prefix only by chance: give both the same first characters.
    with sqlite3.connect(tmp_path / ".partita" / "partita.db") as connection:
        for table in ("partita_attempts", "partita_invocations", "partita_runs"):
            connection.execute(f"UPDATE {table} SET run_id = 'abcd' || substr(run_id, 5)")
    connection.close()

    result = _cli("runs", "show", "abcd")
    assert result.exit_code == 2, result.output
    assert "several" in result.stderr
    assert _cli("runs", "compare", "abcd", ids[0]).exit_code == 2
    shown = _json(_cli("runs", "show", "abcd" + ids[0][4:], "--json"))
    assert [len(task["attempts"]) for task in shown["run"]["tasks"]] == [3, 3]


# -- runs compare -------------------------------------------------------------------------


def test_runs_compare_a_failing_and_a_fixed_run(tmp_path, entry):
    (tmp_path / "broken").write_text("")
    failing = _run_id(_run(entry))
    (tmp_path / "broken").unlink()
    fixed = _run_id(_run(entry))

    table = _cli("runs", "compare", failing[:8], fixed[:8])
    assert table.exit_code == 0, table.output
    assert failing in table.stdout and fixed in table.stdout
    assert "status failed -> success" in table.stdout
    assert "status skipped -> success" in table.stdout

    document = _json(_cli("runs", "compare", failing, fixed, "--json"))
    assert document["schema"] == "partita.runs-compare"
    assert document["version"] == 1
    assert (document["a"]["run_id"], document["b"]["run_id"]) == (failing, fixed)
    assert (document["a"]["status"], document["b"]["status"]) == ("failed", "success")
    assert document["status_changed"] is True
    assert document["changed"] is True
    assert isinstance(document["duration_delta_seconds"], float)
    rows = {row["asset"]: row for row in document["assets"]}
    assert list(rows) == ["load", "report"]
    assert rows["load"]["changes"] == ["status failed -> success", "failed 1 -> 0", "success 2 -> 3"]
    assert rows["report"]["changes"] == ["status skipped -> success", "skipped 1 -> 0", "success 2 -> 3"]
    for row in rows.values():
        assert set(row["a"]) >= {"status", "attempts", "duration_seconds"}
        assert row["a"]["attempts"] == row["b"]["attempts"] == 3


def test_runs_compare_shows_an_attempts_change(entry):
    wide = _run_id(_run(entry))
    narrow = _run_id(_run(entry, keys=("2026-05-01", "2026-05-02")))

    document = _json(_cli("runs", "compare", wide, narrow, "--json"))
    rows = {row["asset"]: row for row in document["assets"]}
    assert rows["load"]["changes"] == ["attempts 3 -> 2"]
    assert rows["report"]["changes"] == ["attempts 3 -> 2"]
    assert document["status_changed"] is False
    table = _cli("runs", "compare", wide, narrow)
    assert "attempts 3 -> 2" in table.stdout


def test_runs_compare_of_identical_runs_says_unchanged(entry):
    first = _run_id(_run(entry))
    second = _run_id(_run(entry))

    document = _json(_cli("runs", "compare", first, second, "--json"))
    assert document["changed"] is False
    assert "unchanged" in _cli("runs", "compare", first, second).stdout


# -- raw partition keys ---------------------------------------------------------------------


def _history_dump(tmp_path: Path) -> str:
    """Every row of every run-history table (asset events, the SPEC §1.6 exception, aside)."""
    with sqlite3.connect(tmp_path / ".partita" / "partita.db") as connection:
        tables = [
            name
            for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if name != "partita_events"
        ]
        assert {"partita_runs", "partita_attempts", "partita_invocations"} <= set(tables)
        dump = "\n".join(repr(row) for table in tables for row in connection.execute(f'SELECT * FROM "{table}"'))
    connection.close()
    return dump


def test_runs_keep_no_raw_key_unless_asked(tmp_path, entry):
    result = _cli(
        "run", entry, "--target", "tenant_export", "--partition-key", TENANTS[0], "--partition-key", TENANTS[1], "--yes"
    )
    assert result.exit_code == 0, result.output
    run_id = _run_id(result)

    shown = _cli("runs", "show", run_id, "--json")
    listed = _cli("runs", "list", "--json")
    for key in TENANTS:
        assert key not in shown.stdout
        assert key not in listed.stdout
        assert key not in _history_dump(tmp_path)
    attempts = _json(shown)["run"]["tasks"][0]["attempts"]
    assert [a["partition_key_present"] for a in attempts] == [True, True]
    assert run_id in _history_dump(tmp_path)  # the dump does hold the run


def test_record_partition_keys_flag_keeps_the_key_text(tmp_path, entry):
    result = _cli(
        "run",
        entry,
        "--target",
        "tenant_export",
        "--partition-key",
        TENANTS[0],
        "--partition-key",
        TENANTS[1],
        "--yes",
        "--record-partition-keys",
    )
    assert result.exit_code == 0, result.output
    run_id = _run_id(result)

    record = _json(_cli("runs", "show", run_id, "--json"))["run"]
    assert record["partition_keys_recorded"] is True
    assert [a["partition_key"] for a in record["tasks"][0]["attempts"]] == TENANTS
