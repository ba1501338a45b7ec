"""The `partita` subcommands (SPEC §4 selection, §13 CLI conventions, §14 documents)."""

from __future__ import annotations

import json

import pytest

import partita.cli.main as cli_main

from ._sources import DAILY_PIPELINE, UNPARTITIONED_PIPELINE

MIXED_PIPELINE = """
@asset
def lookup():
    mark("lookup")
    return 1


@asset(partition_def=DatePartitionDef())
def daily(context, lookup):
    mark("daily", context.partition_key.isoformat())
    return lookup


@asset(partition_def=HourlyPartitionDef(timezone="Europe/Paris"))
def hourly(context):
    mark("hourly")
    return 1


@asset(partition_def=MonthlyPartitionDef())
def monthly(context):
    mark("monthly")
    return 1


@asset(partition_def=StaticPartitionDef("tenants", ["acme-zq81", "globex-zq82", "initech-zq83"]))
def per_tenant(context):
    mark("tenant", context.partition_key)
    return 1


@asset
def standalone():
    mark("standalone")
    return 1
"""

SECRET_TENANTS = ("acme-zq81", "globex-zq82", "initech-zq83")

FAILING_PIPELINE = """
@asset(partition_def=DatePartitionDef())
def load(context):
    if context.partition_key.day == 9:
        raise RuntimeError("source unavailable")
    mark("load", context.partition_key.isoformat())
    return 1


@asset(partition_def=DatePartitionDef())
def report(context, load):
    mark("report", context.partition_key.isoformat())
    return load


@asset(partition_def=DatePartitionDef())
def independent(context):
    mark("independent", context.partition_key.isoformat())
    return 1
"""


def _document(result, schema: str) -> dict:
    document = json.loads(result.stdout)
    assert document["schema"] == schema
    assert document["version"] == 1
    return document


# --- assets --------------------------------------------------------------------


def test_assets_lists_the_closure_with_dependencies_and_domains(invoke, write_entry, ran):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("assets", path)

    assert result.exit_code == 0, result.stderr
    for text in ("settings", "extract", "publish", "date"):
        assert text in result.stdout
    assert ran() == []


def test_assets_json_is_one_assets_document(invoke, write_entry, ran):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("assets", path, "--json")

    assert result.exit_code == 0, result.stderr
    document = _document(result, "partita.assets")
    assert document["targets"] == ["publish"]
    by_name = {item["name"]: item for item in document["assets"]}
    assert list(by_name) == ["settings", "extract", "publish"]
    assert by_name["settings"]["partitioned"] is False
    assert by_name["settings"]["partition"] is None
    assert by_name["extract"]["deps"] == ["settings"]
    assert by_name["extract"]["partition"]["domain"] == "date"
    assert by_name["publish"]["target"] is True
    assert by_name["extract"]["target"] is False
    assert ran() == []


def test_assets_target_narrows_the_closure(invoke, write_entry):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("assets", path, "--target", "extract", "--json")

    document = _document(result, "partita.assets")
    assert document["targets"] == ["extract"]
    assert [item["name"] for item in document["assets"]] == ["settings", "extract"]


def test_assets_accepts_several_targets(invoke, write_entry):
    path = write_entry(MIXED_PIPELINE)

    result = invoke("assets", path, "--target", "daily", "--target", "standalone", "--json")

    document = _document(result, "partita.assets")
    assert document["targets"] == ["daily", "standalone"]
    assert {item["name"] for item in document["assets"]} == {"lookup", "daily", "standalone"}


# --- partitions ----------------------------------------------------------------


def test_partitions_reports_kind_domain_key_format_and_range_support(invoke, write_entry, ran):
    path = write_entry(MIXED_PIPELINE)

    result = invoke("partitions", path, "--json")

    assert result.exit_code == 0, result.stderr
    document = _document(result, "partita.partitions")
    described = {item["asset"]: item["partition"] for item in document["assets"]}
    assert set(described) == {"daily", "hourly", "monthly", "per_tenant"}
    daily = {field: described["daily"][field] for field in ("kind", "domain", "key_format", "supports_range")}
    assert daily == {"kind": "date", "domain": "date", "key_format": "YYYY-MM-DD", "supports_range": True}
    assert described["hourly"]["domain"] == "hour:Europe/Paris"
    assert described["hourly"]["key_format"] == "YYYY-MM-DDTHH"
    assert described["hourly"]["supports_range"] is True
    assert described["monthly"]["domain"] == "month"
    assert described["monthly"]["key_format"] == "YYYY-MM"
    assert described["per_tenant"]["kind"] == "static"
    assert described["per_tenant"]["domain"] == "static:tenants"
    assert described["per_tenant"]["supports_range"] is False
    assert described["per_tenant"]["key_count"] == 3
    assert ran() == []


def test_partitions_text_shows_the_definitions(invoke, write_entry):
    path = write_entry(MIXED_PIPELINE)

    result = invoke("partitions", path)

    assert result.exit_code == 0, result.stderr
    for text in ("daily", "date", "YYYY-MM-DD", "hour:Europe/Paris", "month", "static:tenants", "yes", "no"):
        assert text in result.stdout
    assert "standalone" not in result.stdout


@pytest.mark.parametrize("as_json", [False, True])
def test_partitions_never_enumerates_static_keys(invoke, write_entry, as_json):
    path = write_entry(MIXED_PIPELINE)

    result = invoke("partitions", path, *(["--json"] if as_json else []))

    assert result.exit_code == 0, result.stderr
    for key in SECRET_TENANTS:
        assert key not in result.stdout
        assert key not in result.stderr


def test_partitions_target_narrows_to_the_selected_closure(invoke, write_entry):
    path = write_entry(MIXED_PIPELINE)

    result = invoke("partitions", path, "--target", "daily", "--json")

    document = _document(result, "partita.partitions")
    assert [item["asset"] for item in document["assets"]] == ["daily"]


def test_partitions_of_an_unpartitioned_closure_says_so(invoke, write_entry):
    path = write_entry(UNPARTITIONED_PIPELINE)

    text = invoke("partitions", path)
    as_json = invoke("partitions", path, "--json")

    assert text.exit_code == 0
    assert "No selected asset is partitioned" in text.stdout
    assert _document(as_json, "partita.partitions")["assets"] == []


# --- plan ----------------------------------------------------------------------


def test_plan_with_repeated_partition_keys(invoke, write_entry, ran):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("plan", path, "--partition-key", "2026-08-08", "--partition-key", "2026-08-09", "--json")

    assert result.exit_code == 0, result.stderr
    document = _document(result, "partita.plan")
    assert document["selection"] == {"kind": "keys", "domain": "date", "key_count": 2}
    attempts = {task["name"]: task["attempt_count"] for task in document["tasks"]}
    assert attempts == {"settings": 1, "extract": 2, "publish": 2}
    assert document["attempt_count"] == 5
    assert document["targets"] == ["publish"]
    assert ran() == []


def test_plan_accepts_the_partition_alias(invoke, write_entry):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("plan", path, "--partition", "2026-08-08", "--partition-key", "2026-08-09", "--json")

    assert result.exit_code == 0, result.stderr
    assert _document(result, "partita.plan")["selection"]["key_count"] == 2


def test_plan_selects_duplicate_keys_once(invoke, write_entry):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("plan", path, "--partition-key", "2026-08-08", "--partition", "2026-08-08", "--json")

    assert _document(result, "partita.plan")["selection"]["key_count"] == 1


def test_plan_with_a_range_expands_it_inclusively(invoke, write_entry, ran):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("plan", path, "--partition-range", "2026-08-08", "2026-08-10", "--json")

    assert result.exit_code == 0, result.stderr
    document = _document(result, "partita.plan")
    assert document["selection"] == {"kind": "range", "domain": "date", "key_count": 3}
    assert document["attempt_count"] == 1 + 3 + 3
    assert ran() == []


def test_plan_with_empty_partitions_has_no_partition_attempts(invoke, write_entry):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("plan", path, "--empty-partitions", "--json")

    assert result.exit_code == 0, result.stderr
    document = _document(result, "partita.plan")
    assert document["selection"] == {"kind": "empty", "domain": "date", "key_count": 0}
    assert {task["name"]: task["attempt_count"] for task in document["tasks"]} == {
        "settings": 1,
        "extract": 0,
        "publish": 0,
    }


def test_plan_records_max_concurrency(invoke, write_entry):
    path = write_entry(DAILY_PIPELINE)

    as_json = invoke("plan", path, "--partition-key", "2026-08-08", "--max-concurrency", "3", "--json")
    text = invoke("plan", path, "--partition-key", "2026-08-08", "--max-concurrency", "3")

    assert _document(as_json, "partita.plan")["options"] == {"max_concurrency": 3}
    assert "max concurrency: 3" in text.stdout


def test_plan_without_max_concurrency_uses_the_flow_default(invoke, write_entry):
    path = write_entry(DAILY_PIPELINE.replace('Flow(["publish"])', 'Flow(["publish"], max_concurrency=5)'))

    default = invoke("plan", path, "--partition-key", "2026-08-08", "--json")
    narrowed = invoke("plan", path, "--target", "extract", "--partition-key", "2026-08-08", "--json")
    overridden = invoke("plan", path, "--partition-key", "2026-08-08", "--max-concurrency", "2", "--json")

    assert _document(default, "partita.plan")["options"]["max_concurrency"] == 5
    assert _document(narrowed, "partita.plan")["options"]["max_concurrency"] == 5
    assert _document(overridden, "partita.plan")["options"]["max_concurrency"] == 2


def test_plan_target_plans_only_that_closure(invoke, write_entry):
    path = write_entry(MIXED_PIPELINE)

    result = invoke("plan", path, "--target", "daily", "--partition-key", "2026-08-08", "--json")

    assert result.exit_code == 0, result.stderr
    document = _document(result, "partita.plan")
    assert document["targets"] == ["daily"]
    assert [task["name"] for task in document["tasks"]] == ["lookup", "daily"]


def test_plan_of_an_unpartitioned_closure_needs_no_selector(invoke, write_entry):
    path = write_entry(MIXED_PIPELINE)

    result = invoke("plan", path, "--target", "standalone", "--json")

    assert result.exit_code == 0, result.stderr
    document = _document(result, "partita.plan")
    assert document["selection"] == {"kind": "unpartitioned", "domain": None, "key_count": 0}
    assert document["attempt_count"] == 1


def test_plan_static_keys_are_selected_by_their_text(invoke, write_entry):
    path = write_entry(MIXED_PIPELINE)

    result = invoke("plan", path, "--target", "per_tenant", "--partition-key", "acme-zq81", "--json")

    assert result.exit_code == 0, result.stderr
    assert _document(result, "partita.plan")["selection"] == {"kind": "keys", "domain": "static:tenants", "key_count": 1}


def test_plan_hourly_and_monthly_ranges(invoke, write_entry):
    path = write_entry(MIXED_PIPELINE)

    hourly = invoke("plan", path, "--target", "hourly", "--partition-range", "2026-08-08T22", "2026-08-09T01", "--json")
    monthly = invoke("plan", path, "--target", "monthly", "--partition-range", "2025-11", "2026-02", "--json")

    assert _document(hourly, "partita.plan")["selection"] == {"kind": "range", "domain": "hour:Europe/Paris", "key_count": 4}
    assert _document(monthly, "partita.plan")["selection"] == {"kind": "range", "domain": "month", "key_count": 4}


@pytest.mark.parametrize("as_json", [False, True])
def test_plan_never_prints_the_selected_raw_keys(invoke, write_entry, as_json):
    path = write_entry(MIXED_PIPELINE)

    result = invoke(
        "plan", path, "--target", "per_tenant", "--partition-key", "globex-zq82", "--partition-key", "initech-zq83",
        *(["--json"] if as_json else []),
    )

    assert result.exit_code == 0, result.stderr
    for key in SECRET_TENANTS:
        assert key not in result.output


def test_plan_text_shows_tasks_selection_and_attempts(invoke, write_entry, ran):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("plan", path, "--partition-key", "2026-08-08", "--partition-key", "2026-08-09")

    assert result.exit_code == 0, result.stderr
    for text in ("settings", "extract", "publish", "selection: keys in domain date, 2 keys", "attempts: 5"):
        assert text in result.stdout
    assert "2026-08-08" not in result.stdout
    assert ran() == []


# --- run -----------------------------------------------------------------------


def test_run_with_yes_runs_every_planned_body_and_exits_0(invoke, write_entry, ran):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("run", path, "--partition-key", "2026-08-08", "--partition-key", "2026-08-09", "--yes")

    assert result.exit_code == 0, result.stderr
    assert ran() == [
        "extract-2026-08-08",
        "extract-2026-08-09",
        "publish-2026-08-08",
        "publish-2026-08-09",
        "settings",
    ]
    assert "status: success" in result.stdout


def test_run_short_yes_flag_approves(invoke, write_entry, ran):
    path = write_entry(UNPARTITIONED_PIPELINE)

    result = invoke("run", path, "-y")

    assert result.exit_code == 0, result.stderr
    assert ran() == ["raw", "total"]


def test_run_shows_the_plan_on_stderr(invoke, write_entry):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("run", path, "--partition-key", "2026-08-08", "--yes")

    assert "selection: keys in domain date, 1 key" in result.stderr
    assert "selection:" not in result.stdout


def test_run_with_a_range_runs_each_day(invoke, write_entry, ran):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("run", path, "--partition-range", "2026-08-08", "2026-08-10", "--yes")

    assert result.exit_code == 0, result.stderr
    assert [mark for mark in ran() if mark.startswith("publish")] == [
        "publish-2026-08-08",
        "publish-2026-08-09",
        "publish-2026-08-10",
    ]


def test_run_with_empty_partitions_skips_partitioned_assets(invoke, write_entry, ran):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("run", path, "--empty-partitions", "--yes", "--json")

    assert result.exit_code == 0, result.stderr
    tasks = {task["asset"]: task for task in _document(result, "partita.run-result")["result"]["tasks"]}
    assert tasks["settings"]["status"] == "success"
    assert tasks["extract"]["status"] == tasks["publish"]["status"] == "skipped"
    assert tasks["extract"]["reason"] == tasks["publish"]["reason"] == "no_partition_keys"
    assert ran() == ["settings"]


def test_run_of_a_static_key_runs_only_that_key(invoke, write_entry, ran):
    path = write_entry(MIXED_PIPELINE)

    result = invoke("run", path, "--target", "per_tenant", "--partition-key", "globex-zq82", "--yes")

    assert result.exit_code == 0, result.stderr
    assert ran() == ["tenant-globex-zq82"]


def test_run_with_max_concurrency_runs_every_body(invoke, write_entry, ran):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("run", path, "--partition-range", "2026-08-08", "2026-08-11", "--max-concurrency", "1", "--yes")

    assert result.exit_code == 0, result.stderr
    assert len(ran()) == 1 + 4 + 4


def test_run_with_a_failing_asset_exits_1_and_runs_independent_work(invoke, write_entry, ran):
    path = write_entry(FAILING_PIPELINE)

    result = invoke("run", path, "--partition-range", "2026-08-08", "2026-08-10", "--yes")

    assert result.exit_code == 1, result.stderr
    assert ran() == [
        "independent-2026-08-08",
        "independent-2026-08-09",
        "independent-2026-08-10",
        "load-2026-08-08",
        "load-2026-08-10",
        "report-2026-08-08",
        "report-2026-08-10",
    ]
    assert "source unavailable" in result.stdout
    assert "status: failed" in result.stdout


def test_run_json_with_a_failing_asset_exits_1_with_one_document(invoke, write_entry):
    path = write_entry(FAILING_PIPELINE)

    result = invoke("run", path, "--partition-key", "2026-08-09", "--yes", "--json")

    assert result.exit_code == 1
    record = _document(result, "partita.run-result")["result"]
    assert record["status"] == "failed"
    tasks = {task["asset"]: task for task in record["tasks"]}
    assert tasks["load"]["status"] == "failed"
    assert tasks["report"]["attempts"][0]["reason"] == "dependency_failed"
    assert tasks["independent"]["status"] == "success"


def test_run_json_prints_one_run_result_document(invoke, write_entry, ran):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("run", path, "--partition-key", "2026-08-08", "--yes", "--json")

    assert result.exit_code == 0, result.stderr
    document = _document(result, "partita.run-result")
    assert document["plan"]["schema"] == "partita.plan"
    assert document["plan"]["selection"] == {"kind": "keys", "domain": "date", "key_count": 1}
    assert document["result"]["status"] == "success"
    assert [task["asset"] for task in document["result"]["tasks"]] == ["settings", "extract", "publish"]
    assert "2026-08-08" not in result.stdout
    assert len(ran()) == 3


def test_run_json_sends_the_plan_rendering_to_stderr(invoke, write_entry):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("run", path, "--partition-key", "2026-08-08", "--yes", "--json")

    json.loads(result.stdout)
    assert "selection:" in result.stderr


@pytest.mark.parametrize(
    ("command", "schema"),
    [("assets", "partita.assets"), ("partitions", "partita.partitions"), ("plan", "partita.plan")],
)
def test_json_stdout_is_exactly_one_document(invoke, write_entry, command, schema):
    path = write_entry(DAILY_PIPELINE)
    extra = ["--partition-key", "2026-08-08"] if command == "plan" else []

    result = invoke(command, path, *extra, "--json")

    assert result.exit_code == 0, result.stderr
    _document(result, schema)  # json.loads rejects any extra text
    assert result.stdout.lstrip().startswith("{")
    assert result.stderr == ""


# --- approval ------------------------------------------------------------------


def test_run_asks_for_confirmation_and_runs_on_yes(invoke, write_entry, ran, monkeypatch):
    monkeypatch.setattr(cli_main, "_stdin_is_interactive", lambda: True)
    path = write_entry(DAILY_PIPELINE)

    result = invoke("run", path, "--partition-key", "2026-08-08", input="y\n")

    assert result.exit_code == 0, result.stderr
    assert "Run 3 attempts?" in result.stderr
    assert "Run 3 attempts?" not in result.stdout
    assert ran() == ["extract-2026-08-08", "publish-2026-08-08", "settings"]


@pytest.mark.parametrize("answer", ["n\n", "\n"], ids=["no", "default"])
def test_declining_the_confirmation_exits_0_and_runs_nothing(invoke, write_entry, ran, monkeypatch, answer):
    monkeypatch.setattr(cli_main, "_stdin_is_interactive", lambda: True)
    path = write_entry(DAILY_PIPELINE)

    result = invoke("run", path, "--partition-key", "2026-08-08", input=answer)

    assert result.exit_code == 0, result.stderr
    assert "Declined; nothing ran." in result.stderr
    assert ran() == []


def test_run_without_yes_on_a_non_interactive_stdin_is_a_usage_error(invoke, write_entry, ran, monkeypatch):
    monkeypatch.setattr(cli_main, "_stdin_is_interactive", lambda: False)
    path = write_entry(DAILY_PIPELINE)

    result = invoke("run", path, "--partition-key", "2026-08-08", input="y\n")

    assert result.exit_code == 2
    assert "--yes" in result.stderr
    assert ran() == []


def test_cli_runner_stdin_counts_as_non_interactive(invoke, write_entry, ran):
    path = write_entry(UNPARTITIONED_PIPELINE)

    result = invoke("run", path)

    assert result.exit_code == 2
    assert ran() == []


@pytest.mark.parametrize("interactive", [False, True])
def test_run_json_without_yes_is_a_usage_error(invoke, write_entry, ran, monkeypatch, interactive):
    monkeypatch.setattr(cli_main, "_stdin_is_interactive", lambda: interactive)
    path = write_entry(DAILY_PIPELINE)

    result = invoke("run", path, "--partition-key", "2026-08-08", "--json", input="y\n")

    assert result.exit_code == 2
    error = _document(result, "partita.error")["error"]
    assert error["exit_code"] == 2
    assert "--yes" in error["message"]
    assert ran() == []


# --- --help --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        ([], ["assets", "partitions", "plan", "run"]),
        (["assets"], ["ENTRY", "--target", "--json"]),
        (["partitions"], ["ENTRY", "--target", "--json"]),
        (
            ["plan"],
            ["ENTRY", "--target", "--partition-key", "--partition", "--partition-range", "--empty-partitions",
             "--max-concurrency", "--json"],
        ),
        (
            ["run"],
            ["ENTRY", "--target", "--partition-key", "--partition-range", "--empty-partitions", "--max-concurrency",
             "--yes", "--json"],
        ),
    ],
    ids=["partita", "assets", "partitions", "plan", "run"],
)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_works_for_every_subcommand(invoke, args, mentions, flag):
    result = invoke(*args, flag)

    assert result.exit_code == 0
    assert "Usage:" in result.stdout
    for text in mentions:
        assert text in result.stdout


def test_version_option_reports_the_package_version(invoke):
    from partita import __version__

    result = invoke("--version")

    assert result.exit_code == 0
    assert __version__ in result.stdout
