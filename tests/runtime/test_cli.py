"""The CLI for runtime domains (SPEC §9, §13, §14).

``partita partitions ENTRY --domain NAME [--json]`` lists the keys a runtime
domain's producer has discovered with their state; ``partita partitions
retire NAME KEY`` retires one; ``partita partitions ENTRY`` still describes
definitions; ``plan`` shows the discovery; ``run --yes`` fans out and
records. Entry files are written into ``tmp_path`` and the store is a SQLite
file there (``PARTITA_STORE``).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import partita as p
from partita.cli.main import cli

SECRET = "tenant-secret-e7d0f1"

ENTRY = """\
import pathlib

from partita import PartitionAtRuntime, asset

KEYS = pathlib.Path({keys!r})
TENANTS = PartitionAtRuntime("tenants", max_keys=10)


@asset(partition_def=TENANTS)
def tenants(context):
    for key in KEYS.read_text().split():
        context.add_partition(key, extra={{"source": "directory"}})
    return {{key: len(key) for key in KEYS.read_text().split()}}


@asset(partition_def=TENANTS)
def load(context, tenants):
    return [context.partition_key, tenants]
"""


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    store_file = tmp_path / "history" / "partita.db"
    store_file.parent.mkdir()
    monkeypatch.setenv("PARTITA_STORE", f"sqlite:///{store_file}")
    return tmp_path


@pytest.fixture
def store_file(workspace) -> Path:
    return workspace / "history" / "partita.db"


@pytest.fixture
def keys_file(workspace) -> Path:
    path = workspace / "keys.txt"
    path.write_text("acme globex\n")
    return path


@pytest.fixture
def entry(workspace, keys_file) -> str:
    path = workspace / "tenants_entry.py"
    path.write_text(textwrap.dedent(ENTRY).format(keys=str(keys_file)))
    return str(path)


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def run_yes(entry, *extra):
    result = invoke("run", entry, "--yes", *extra)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


def known_keys(entry):
    result = invoke("partitions", entry, "--domain", "tenants", "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


# -- describing definitions ------------------------------------------------------------------------------


def test_partitions_entry_still_describes_definitions(entry):
    result = invoke("partitions", entry)

    assert result.exit_code == 0, result.stderr
    assert "runtime" in result.stdout
    assert "runtime:tenants" in result.stdout
    assert "tenants" in result.stdout and "load" in result.stdout


def test_partitions_entry_json_describes_the_runtime_definition(entry):
    result = invoke("partitions", entry, "--json")

    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["schema"] == "partita.partitions"
    assert isinstance(document["version"], int)
    by_asset = {item["asset"]: item["partition"] for item in document["assets"]}
    assert set(by_asset) == {"tenants", "load"}
    for described in by_asset.values():
        assert described["kind"] == "runtime"
        assert described["domain"] == "runtime:tenants"
        assert described["supports_range"] is False
        assert described["max_keys"] == 10


def test_describing_definitions_runs_no_body_and_creates_no_store(entry, keys_file, store_file):
    keys_file.unlink()  # a body reading it would fail

    result = invoke("partitions", entry)

    assert result.exit_code == 0, result.stderr
    assert not store_file.exists()


# -- plan ---------------------------------------------------------------------------------------------------


def test_plan_shows_the_discovery(entry, keys_file, store_file):
    keys_file.unlink()

    result = invoke("plan", entry)

    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "discovered at run time by 'tenants'" in text
    assert "runtime:tenants" in text
    assert "at most 10" in text
    assert not store_file.exists()


def test_plan_json_reports_the_discover_selection(entry):
    result = invoke("plan", entry, "--json")

    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["schema"] == "partita.plan"
    assert document["selection"]["kind"] == "discover"
    assert document["selection"]["key_count"] is None
    assert document["selection"]["runtime"]["producer"] == "tenants"
    assert document["selection"]["runtime"]["max_keys"] == 10
    assert document["attempt_count"] is None


def test_plan_with_a_partition_range_is_a_usage_error(entry):
    result = invoke("plan", entry, "--partition-range", "a", "b")

    assert result.exit_code == 2


# -- run ---------------------------------------------------------------------------------------------------


def test_run_yes_fans_out_and_records_the_discovery(entry, store_file):
    result = run_yes(entry)

    assert store_file.exists()
    store = p.open_store(f"sqlite:///{store_file}")
    try:
        (stored,) = store.list_runs()
        assert stored.status == "success"
        assert stored.header.discovered_key_counts == {"tenants": 2}
        events = store.list_events(asset="tenants", kinds=[p.SourceKind.DISCOVERY])
        assert [(event.partition_key, event.extra) for event in events] == [
            ("acme", {"source": "directory"}),
            ("globex", {"source": "directory"}),
        ]
        outlets = store.list_events(asset="load", kinds=[p.SourceKind.OUTLET])
        assert sorted(event.partition_key for event in outlets) == ["acme", "globex"]
        assert [record.key for record in store.list_partitions("runtime:tenants")] == ["acme", "globex"]
        tasks = {task.asset: task for task in store.get_tasks(stored.run_id)}
        assert len(tasks["load"].attempts) == 2
    finally:
        store.close()
    assert "load" in result.stdout


def test_run_json_reports_counts_but_no_discovered_keys(entry, keys_file):
    keys_file.write_text(f"{SECRET}-1 {SECRET}-2 {SECRET}-3")

    result = run_yes(entry, "--json")

    document = json.loads(result.stdout)
    assert document["schema"] == "partita.run-result"
    assert document["result"]["status"] == "success"
    assert SECRET not in result.stdout
    (load,) = [task for task in document["result"]["tasks"] if task["asset"] == "load"]
    assert load["counts"]["success"] == 3


def test_run_with_explicit_keys_narrows_to_them(entry, store_file):
    result = run_yes(entry, "--partition-key", "globex", "--partition-key", "umbrella", "--json")

    document = json.loads(result.stdout)
    (load,) = [task for task in document["result"]["tasks"] if task["asset"] == "load"]
    assert [(a["status"], a["reason"]) for a in load["attempts"]] == [
        ("success", None),
        ("skipped", "partition_not_discovered"),
    ]
    store = p.open_store(f"sqlite:///{store_file}")
    try:
        assert [record.key for record in store.list_partitions("runtime:tenants")] == ["acme", "globex"]
    finally:
        store.close()


def test_run_with_a_malformed_selected_key_is_a_usage_error_before_any_body(entry, keys_file, store_file):
    keys_file.unlink()  # the producer would fail if it ran

    result = invoke("run", entry, "--yes", "--partition-key", "")

    assert result.exit_code == 2
    assert "--partition-key #1" in result.stderr


def test_a_producer_violation_exits_1(entry, keys_file):
    keys_file.write_text(" ".join(f"t{i}" for i in range(11)))  # max_keys=10

    result = invoke("run", entry, "--yes")

    assert result.exit_code == 1
    assert "DiscoveryError" in result.stdout + result.stderr


def test_runs_list_and_show_of_a_discovery_run_print_no_python_none(entry):
    run_yes(entry)
    listed_json = invoke("runs", "list", "--json")
    (run,) = json.loads(listed_json.stdout)["runs"]

    listed = invoke("runs", "list")
    shown = invoke("runs", "show", run["run_id"])

    assert listed.exit_code == 0 and shown.exit_code == 0
    assert "None" not in listed.stdout
    assert "None" not in shown.stdout


# -- listing known keys ------------------------------------------------------------------------------------


def test_partitions_domain_lists_known_keys_with_their_state(entry):
    run_yes(entry)

    result = invoke("partitions", entry, "--domain", "tenants")

    assert result.exit_code == 0, result.stderr
    assert "acme" in result.stdout and "globex" in result.stdout
    assert "active" in result.stdout
    assert "retired" not in result.stdout


def test_partitions_domain_json_is_a_partitions_document(entry):
    run_yes(entry)

    document = known_keys(entry)

    assert document["schema"] == "partita.partitions"
    assert isinstance(document["version"], int)
    assert document["domain"] == "runtime:tenants"
    assert [(item["key"], item["state"]) for item in document["keys"]] == [("acme", "active"), ("globex", "active")]
    for item in document["keys"]:
        assert item["first_seen"] and item["last_seen"]
        assert item["retired_at"] is None


def test_partitions_domain_accepts_the_full_domain_name(entry):
    run_yes(entry)

    result = invoke("partitions", entry, "--domain", "runtime:tenants", "--json")

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["domain"] == "runtime:tenants"


def test_partitions_domain_without_a_store_lists_nothing_and_creates_no_store(entry, store_file):
    result = invoke("partitions", entry, "--domain", "tenants")

    assert result.exit_code == 0, result.stderr
    assert "No keys" in result.stdout
    assert not store_file.exists()
    document = known_keys(entry)
    assert document["keys"] == []
    assert not store_file.exists()


def test_partitions_domain_reads_the_store_option(entry, workspace):
    other = workspace / "other.db"
    run_yes(entry, "--store", f"sqlite:///{other}")

    default = invoke("partitions", entry, "--domain", "tenants", "--json")
    chosen = invoke("partitions", entry, "--domain", "tenants", "--store", f"sqlite:///{other}", "--json")

    assert json.loads(default.stdout)["keys"] == []
    assert [item["key"] for item in json.loads(chosen.stdout)["keys"]] == ["acme", "globex"]


def test_partitions_domain_that_is_not_in_the_entry_is_a_usage_error(entry):
    result = invoke("partitions", entry, "--domain", "regions")

    assert result.exit_code == 2
    assert "runtime:regions" in result.stderr


# -- retiring ---------------------------------------------------------------------------------------------------


def test_partitions_retire_retires_a_key(entry):
    run_yes(entry)

    result = invoke("partitions", "retire", "tenants", "acme")

    assert result.exit_code == 0, result.stderr
    states = {item["key"]: item["state"] for item in known_keys(entry)["keys"]}
    assert states == {"acme": "retired", "globex": "active"}
    table = invoke("partitions", entry, "--domain", "tenants")
    assert "retired" in table.stdout


def test_partitions_retire_twice_exits_0(entry):
    run_yes(entry)

    first = invoke("partitions", "retire", "tenants", "acme")
    second = invoke("partitions", "retire", "runtime:tenants", "acme")

    assert first.exit_code == 0 and second.exit_code == 0, second.stderr
    (acme,) = [item for item in known_keys(entry)["keys"] if item["key"] == "acme"]
    assert acme["state"] == "retired"


def test_a_retired_key_discovered_by_a_later_run_is_active_again(entry):
    run_yes(entry)
    assert invoke("partitions", "retire", "tenants", "acme").exit_code == 0

    run_yes(entry)

    (acme,) = [item for item in known_keys(entry)["keys"] if item["key"] == "acme"]
    assert acme["state"] == "active"
    assert acme["reactivated_at"] is not None


def test_retiring_an_unknown_key_exits_2(entry):
    run_yes(entry)

    result = invoke("partitions", "retire", "tenants", SECRET)

    assert result.exit_code == 2
    assert "runtime:tenants" in result.stderr
    assert [item["state"] for item in known_keys(entry)["keys"]] == ["active", "active"]


def test_retiring_in_an_unknown_domain_exits_2(entry):
    run_yes(entry)

    result = invoke("partitions", "retire", "regions", "acme")

    assert result.exit_code == 2


def test_retiring_without_a_store_exits_2_and_creates_no_store(workspace, store_file):
    result = invoke("partitions", "retire", "tenants", "acme")

    assert result.exit_code == 2
    assert not store_file.exists()
    explicit = workspace / "nowhere.db"
    result = invoke("partitions", "retire", "tenants", "acme", "--store", f"sqlite:///{explicit}")
    assert result.exit_code == 2
    assert not explicit.exists()


def test_retire_json_is_one_document(entry):
    run_yes(entry)

    result = invoke("partitions", "retire", "tenants", "globex", "--json")

    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["schema"].startswith("partita.")
    assert document["partition"]["state"] == "retired"


def test_retire_needs_a_name_and_a_key(workspace):
    assert invoke("partitions", "retire", "tenants").exit_code == 2
    assert invoke("partitions", "retire").exit_code == 2
