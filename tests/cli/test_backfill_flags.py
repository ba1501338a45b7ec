"""``partita plan|run ENTRY --missing`` and ``--failed-from RUN_ID``: backfills from the command line.

Bodies write a mark per key they ran (``out/extract-2026-03-02``), and a file
``failing`` next to the entry lists the keys extract refuses, so a test can
make a run fail and then let its backfill succeed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PIPELINE = """
FAILING = pathlib.Path(__file__).with_name("failing")


@asset(partition_def=DatePartitionDef())
def extract(context):
    day = context.partition_key.isoformat()
    mark("extract", day)
    if FAILING.exists() and day in FAILING.read_text().split():
        raise RuntimeError("the source is not there yet")
    return 1


@asset(partition_def=DatePartitionDef())
def publish(context, extract):
    mark("publish", context.partition_key.isoformat())
    return extract + 1


flow = Flow(["publish"], name="daily")
other = Flow(["extract"], name="extract-only")
"""


@pytest.fixture
def entry(write_entry, tmp_path: Path) -> str:
    path = write_entry(PIPELINE)
    return f"{path}:flow"


def _fail(tmp_path: Path, *keys: str) -> None:
    (tmp_path / "failing").write_text(" ".join(keys))


def _clear(out_dir: Path) -> None:
    for mark in out_dir.glob("*") if out_dir.exists() else ():
        mark.unlink()


def _runs(invoke, *args: str) -> list[dict]:
    result = invoke("runs", "list", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["runs"]


def _run_id(invoke, *args: str) -> str:
    return _runs(invoke, *args)[0]["run_id"]


def test_run_missing_runs_only_the_keys_without_a_success_and_a_second_one_starts_nothing(
    invoke, entry, ran, out_dir
) -> None:
    assert invoke("run", entry, "--partition-key", "2026-03-01", "--partition-key", "2026-03-03", "--yes").exit_code == 0
    _clear(out_dir)
    planned = invoke("plan", entry, "--missing", "--partition-range", "2026-03-01", "2026-03-04")
    assert planned.exit_code == 0, planned.output
    assert "backfill of missing keys: 2 of 4 selected keys lack a success of publish" in planned.output
    assert "attempts: 4" in planned.output
    result = invoke("run", entry, "--missing", "--partition-range", "2026-03-01", "2026-03-04", "--yes")
    assert result.exit_code == 0, result.output
    assert ran() == ["extract-2026-03-02", "extract-2026-03-04", "publish-2026-03-02", "publish-2026-03-04"]
    backfill = _runs(invoke)[0]
    assert (backfill["launched_by"], backfill["flow"], backfill["tags"]) == ("backfill", "daily", {"partita.backfill": "missing"})
    _clear(out_dir)
    again = invoke("run", entry, "--missing", "--partition-range", "2026-03-01", "2026-03-04", "--yes")
    assert again.exit_code == 0, again.output
    assert "0 of 4 selected keys lack a success of publish; nothing to run" in again.output
    assert "Nothing to backfill; no run was started." in again.output
    assert ran() == []
    assert len(_runs(invoke)) == 2


def test_plan_and_run_json_carry_the_backfill_counts_and_never_the_keys(invoke, entry) -> None:
    planned = invoke("plan", entry, "--missing", "--partition-key", "2026-03-01", "--json")
    assert planned.exit_code == 0, planned.output
    document = json.loads(planned.output)
    assert document["schema"] == "partita.plan"
    assert document["backfill"] == {
        "kind": "missing", "targets": ["publish"], "considered": 1, "selected": 1, "empty": False, "source_run_id": None,
    }
    assert "2026-03-01" not in planned.output
    ran = invoke("run", entry, "--missing", "--partition-key", "2026-03-01", "--yes", "--json")
    assert json.loads(ran.stdout)["plan"]["backfill"]["selected"] == 1
    nothing = invoke("run", entry, "--missing", "--partition-key", "2026-03-01", "--yes", "--json")
    assert nothing.exit_code == 0
    document = json.loads(nothing.stdout)
    assert (document["schema"], document["backfill"]["empty"], document["attempt_count"]) == ("partita.plan", True, 0)


def test_run_failed_from_reruns_the_failed_and_skipped_keys_and_runs_list_finds_it(
    invoke, entry, ran, out_dir, tmp_path
) -> None:
    _fail(tmp_path, "2026-03-02", "2026-03-03")
    failed = invoke("run", entry, "--partition-range", "2026-03-01", "2026-03-04", "--yes", "--record-partition-keys")
    assert failed.exit_code == 1, failed.output
    source = _run_id(invoke)
    _fail(tmp_path)
    _clear(out_dir)
    planned = invoke("plan", entry, "--failed-from", source[:8])
    assert planned.exit_code == 0, planned.output
    assert f"backfill of run {source}: 4 failed or dependency-skipped attempts" in planned.output
    assert "2 keys to rerun" in planned.output
    result = invoke("run", entry, "--failed-from", source[:8], "--yes")
    assert result.exit_code == 0, result.output
    assert ran() == ["extract-2026-03-02", "extract-2026-03-03", "publish-2026-03-02", "publish-2026-03-03"]
    (found,) = _runs(invoke, "--tag", f"partita.failed_from={source}")
    assert found["launched_by"] == "backfill" and found["tags"]["partita.backfill"] == "failed-from"
    shown = invoke("runs", "show", found["run_id"])
    assert "launched by backfill of flow daily" in shown.output
    nothing = invoke("plan", entry, "--failed-from", found["run_id"])
    assert nothing.exit_code == 0
    assert "0 failed or dependency-skipped attempts" in nothing.output and "nothing to run" in nothing.output


def test_failed_from_a_run_that_did_not_record_keys_is_exit_2_saying_how_to_record_them(
    invoke, entry, ran, out_dir, tmp_path
) -> None:
    _fail(tmp_path, "2026-03-02")
    assert invoke("run", entry, "--partition-range", "2026-03-01", "2026-03-02", "--yes").exit_code == 1
    _clear(out_dir)
    for command in ("plan", "run"):
        args = [command, entry, "--failed-from", _run_id(invoke)] + (["--yes"] if command == "run" else [])
        result = invoke(*args)
        assert result.exit_code == 2, result.output
        assert "that run did not record partition keys" in result.output
        assert "--record-partition-keys" in result.output and "[tool.partita]" in result.output
        assert "Traceback" not in result.output
    assert ran() == []


def test_failed_from_an_unknown_run_is_the_error_runs_show_gives(invoke, entry) -> None:
    invoke("run", entry, "--partition-key", "2026-03-01", "--yes")
    for run_id in ("ffffffff", "ab"):
        shown = invoke("runs", "show", run_id)
        planned = invoke("plan", entry, "--failed-from", run_id)
        assert planned.exit_code == shown.exit_code == 2
        assert planned.output == shown.output


def test_failed_from_before_any_store_exists_is_the_error_runs_show_gives(invoke, entry, tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/never.db"
    shown = invoke("runs", "show", "ffffffff", "--store", url)
    planned = invoke("plan", entry, "--failed-from", "ffffffff", "--store", url)
    assert planned.exit_code == shown.exit_code == 2
    assert planned.output == shown.output
    assert not (tmp_path / "never.db").exists()


def test_failed_from_a_run_of_another_flow_is_exit_2_naming_both(invoke, write_entry, tmp_path) -> None:
    path = write_entry(PIPELINE)
    assert invoke("run", f"{path}:other", "--partition-key", "2026-03-01", "--yes", "--record-partition-keys").exit_code == 0
    result = invoke("plan", f"{path}:flow", "--failed-from", _run_id(invoke))
    assert result.exit_code == 2
    assert "is a run of flow extract-only (targets extract), not of flow daily (targets publish)" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--missing"], "--missing needs a bounded selection to compare: give --partition-range or --partition-key"),
        (["--missing", "--empty-partitions"], "--missing cannot be combined with --empty-partitions"),
        (["--missing", "--failed-from", "abcd"], "--missing and --failed-from cannot be combined"),
        (["--failed-from", "abcd", "--partition-key", "2026-03-01"], "--partition-key cannot be combined with it"),
        (["--missing", "--partition-range", "2026-03-09", "2026-03-01"], "--partition-range is rejected"),
        (["--missing", "--pending"], "--missing cannot be combined with it"),
    ],
)
def test_bad_backfill_flags_are_exit_2_before_any_body_runs(invoke, entry, ran, args, message) -> None:
    result = invoke("plan", entry, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    if "--pending" not in args:
        run = invoke("run", entry, *args, "--yes")
        assert run.exit_code == 2 and message in run.output
    assert ran() == []


@pytest.mark.parametrize(
    "args",
    [
        ["--missing", "--partition-range", "2026-03-09", "2026-03-01"],
        ["--missing", "--partition-key", "03/01/2026"],
        ["--missing"],
        ["--missing", "--target", "nowhere", "--partition-key", "2026-03-01"],
    ],
)
def test_a_run_backfill_refused_for_its_selection_creates_no_store(invoke, entry, tmp_path, args) -> None:
    url = f"sqlite:///{tmp_path}/never.db"
    result = invoke("run", entry, *args, "--store", url, "--yes")
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "never.db").exists()


def test_a_backfill_that_selects_nothing_shows_no_attempts_table(invoke, entry) -> None:
    assert invoke("run", entry, "--partition-key", "2026-03-01", "--yes").exit_code == 0
    planned = invoke("plan", entry, "--missing", "--partition-key", "2026-03-01")
    assert planned.exit_code == 0, planned.output
    assert "nothing to run" in planned.output
    assert "attempts:" not in planned.output and "publish " not in planned.output


def test_run_missing_with_no_store_is_exit_2(invoke, entry, ran) -> None:
    result = invoke("run", entry, "--missing", "--partition-key", "2026-03-01", "--no-store", "--yes")
    assert result.exit_code == 2
    assert "--missing selects keys from the store's history; it cannot be combined with --no-store" in result.output
    assert ran() == []


def test_plan_missing_before_any_store_exists_finds_every_key_missing_and_creates_no_store(invoke, entry, tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/never.db"
    result = invoke("plan", entry, "--missing", "--partition-range", "2026-03-01", "2026-03-03", "--store", url)
    assert result.exit_code == 0, result.output
    assert "3 of 3 selected keys lack a success" in result.output
    assert not (tmp_path / "never.db").exists()


def test_backfills_read_and_record_in_a_postgresql_or_sqlite_store_given_by_flag(
    invoke, entry, ran, out_dir, tmp_path, store_url
) -> None:
    _fail(tmp_path, "2026-03-02")
    store = ["--store", store_url]
    failed = invoke("run", entry, "--partition-range", "2026-03-01", "2026-03-03", "--yes", "--record-partition-keys", *store)
    assert failed.exit_code == 1, failed.output
    _fail(tmp_path)
    _clear(out_dir)
    source = _run_id(invoke, *store)
    assert invoke("run", entry, "--failed-from", source, "--yes", *store).exit_code == 0
    assert ran() == ["extract-2026-03-02", "publish-2026-03-02"]
    _clear(out_dir)
    assert invoke("run", entry, "--missing", "--partition-range", "2026-03-01", "2026-03-04", "--yes", *store).exit_code == 0
    assert ran() == ["extract-2026-03-04", "publish-2026-03-04"]
    launched = [run["launched_by"] for run in _runs(invoke, *store)]
    assert launched == ["backfill", "backfill", "cli"]


def test_a_store_that_fails_while_the_backfill_is_selected_is_exit_4_and_nothing_runs(
    invoke, entry, ran, monkeypatch
) -> None:
    from partita.errors import StoreError
    from partita.store import SqlStore

    def unavailable(self, asset):
        raise StoreError("could not read the last successes: the database is locked")

    assert invoke("run", entry, "--partition-key", "2026-03-01", "--yes").exit_code == 0
    before = len(_runs(invoke))
    monkeypatch.setattr(SqlStore, "last_successes", unavailable)
    result = invoke("run", entry, "--missing", "--partition-range", "2026-03-01", "2026-03-02", "--yes")
    assert result.exit_code == 4, result.output
    assert "could not read the last successes" in result.output and "Traceback" not in result.output
    assert ran() == ["extract-2026-03-01", "publish-2026-03-01"]
    assert len(_runs(invoke)) == before


def test_run_shows_the_backfill_plan_before_asking_and_declining_runs_nothing(invoke, entry, ran, monkeypatch) -> None:
    from partita.cli import main as cli_main

    monkeypatch.setattr(cli_main, "_stdin_is_interactive", lambda: True)
    declined = invoke("run", entry, "--missing", "--partition-range", "2026-03-01", "2026-03-02", input="n\n")
    assert declined.exit_code == 0, declined.output
    shown = declined.output
    assert shown.index("backfill of missing keys: 2 of 2") < shown.index("Run 4 attempts? [y/N]")
    assert "Declined; nothing ran." in shown
    assert ran() == [] and _runs(invoke) == []
    approved = invoke("run", entry, "--missing", "--partition-range", "2026-03-01", "2026-03-02", input="y\n")
    assert approved.exit_code == 0, approved.output
    assert ran() == ["extract-2026-03-01", "extract-2026-03-02", "publish-2026-03-01", "publish-2026-03-02"]
