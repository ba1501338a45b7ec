"""Bad input on the command line: exit codes, clear messages, no raw keys (SPEC §1, §4, §13)."""

from __future__ import annotations

import json

import pytest

from ._sources import DAILY_PIPELINE

ENTRY = """
@asset
def lookup():
    mark("lookup")
    return 1


@asset(partition_def=DatePartitionDef())
def daily(context, lookup):
    mark("daily")
    return lookup


@asset(partition_def=DatePartitionDef(start="2026-01-01", end="2026-12-31"))
def bounded(context):
    mark("bounded")
    return 1


@asset(partition_def=HourlyPartitionDef())
def hourly(context):
    mark("hourly")
    return 1


@asset(partition_def=MonthlyPartitionDef())
def monthly(context):
    mark("monthly")
    return 1


@asset(partition_def=StaticPartitionDef("regions", ["eu-qq41", "us-qq42"]))
def regional(context):
    mark("regional")
    return 1


@asset
def plain():
    mark("plain")
    return 1
"""

# (id, extra arguments, raw texts that must not appear anywhere in the output)
SELECTION_ERRORS = [
    ("non-canonical-date", ["--target", "daily", "--partition-key", "2026-8-8"], ["2026-8-8"]),
    ("datetime-for-date", ["--target", "daily", "--partition-key", "2026-08-08T05:00"], ["2026-08-08T05:00"]),
    ("impossible-date", ["--target", "daily", "--partition-key", "2026-02-30"], ["2026-02-30"]),
    (
        "second-key-bad",
        ["--target", "daily", "--partition-key", "2026-08-08", "--partition", "2026-08-0x"],
        ["2026-08-0x"],
    ),
    ("key-outside-bounds", ["--target", "bounded", "--partition-key", "2027-03-04"], ["2027-03-04"]),
    ("non-canonical-hour", ["--target", "hourly", "--partition-key", "2026-08-08 7"], ["2026-08-08 7"]),
    ("non-canonical-month", ["--target", "monthly", "--partition-key", "2026-8"], ["2026-8"]),
    ("unknown-static-key", ["--target", "regional", "--partition-key", "apac-secret-qq99"], ["apac-secret-qq99"]),
    ("non-canonical-range-start", ["--target", "daily", "--partition-range", "2026-8-1", "2026-08-03"], ["2026-8-1"]),
    ("non-canonical-range-end", ["--target", "daily", "--partition-range", "2026-08-01", "2026-8-3"], ["2026-8-3"]),
    ("reversed-range", ["--target", "daily", "--partition-range", "2026-08-10", "2026-08-08"], ["2026-08-10", "2026-08-08"]),
    (
        "range-on-static",
        ["--target", "regional", "--partition-range", "eu-qq41", "us-qq42"],
        ["eu-qq41", "us-qq42"],
    ),
    (
        "keys-and-range",
        ["--target", "daily", "--partition-key", "2026-08-31", "--partition-range", "2026-08-08", "2026-08-10"],
        ["2026-08-31", "2026-08-08", "2026-08-10"],
    ),
    (
        "keys-and-empty",
        ["--target", "daily", "--partition-key", "2026-08-31", "--empty-partitions"],
        ["2026-08-31"],
    ),
    ("no-selector-partitioned", ["--target", "daily"], []),
    ("key-for-unpartitioned", ["--target", "plain", "--partition-key", "2026-08-31"], ["2026-08-31"]),
    ("range-for-unpartitioned", ["--target", "plain", "--partition-range", "2026-08-08", "2026-08-10"], ["2026-08-08"]),
    ("empty-for-unpartitioned", ["--target", "plain", "--empty-partitions"], []),
    ("two-domains", ["--target", "daily", "--target", "monthly", "--partition-key", "2026-08-31"], ["2026-08-31"]),
    ("unknown-target", ["--target", "nonexistent_asset"], []),
]

SELECTION_IDS = [case[0] for case in SELECTION_ERRORS]


@pytest.mark.parametrize("command", ["plan", "run"])
@pytest.mark.parametrize(("case", "args", "raw"), SELECTION_ERRORS, ids=SELECTION_IDS)
def test_bad_selection_exits_2_without_running_or_echoing_raw_keys(invoke, write_entry, ran, command, case, args, raw):
    path = write_entry(ENTRY)
    extra = ["--yes"] if command == "run" else []

    result = invoke(command, path, *args, *extra)

    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert isinstance(result.exception, SystemExit)
    assert result.stderr.startswith("error:")
    assert "Traceback" not in result.output
    for text in raw:
        assert text not in result.output
    assert ran() == []


@pytest.mark.parametrize(("case", "args", "raw"), SELECTION_ERRORS, ids=SELECTION_IDS)
def test_bad_selection_with_json_prints_one_error_document(invoke, write_entry, ran, case, args, raw):
    path = write_entry(ENTRY)

    result = invoke("plan", path, *args, "--json")

    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert document["schema"] == "partita.error"
    assert document["version"] == 1
    assert document["error"]["exit_code"] == 2
    assert document["error"]["type"] in {"SelectionError", "PlanningError", "ConfigurationError"}
    assert document["error"]["message"]
    for text in raw:
        assert text not in result.output


def test_non_canonical_date_message_names_the_field_and_rule(invoke, write_entry):
    path = write_entry(ENTRY)

    result = invoke("plan", path, "--target", "daily", "--partition-key", "2026-8-8")

    assert "--partition-key #1" in result.stderr
    assert "YYYY-MM-DD" in result.stderr
    assert "'daily'" in result.stderr


def test_reversed_range_message_says_start_is_later_than_end(invoke, write_entry):
    path = write_entry(ENTRY)

    result = invoke("plan", path, "--target", "daily", "--partition-range", "2026-08-10", "2026-08-08")

    assert "--partition-range" in result.stderr
    assert "later than end" in result.stderr


def test_range_on_static_definition_says_ranges_are_unsupported(invoke, write_entry):
    path = write_entry(ENTRY)

    result = invoke("plan", path, "--target", "regional", "--partition-range", "eu-qq41", "us-qq42")

    assert "--partition-range is not supported" in result.stderr
    assert "static:regions" in result.stderr


def test_no_selector_names_the_partitioned_assets_and_the_choices(invoke, write_entry):
    path = write_entry(ENTRY)

    result = invoke("plan", path, "--target", "daily")

    assert "'daily'" in result.stderr
    for choice in ("--partition-key", "--partition-range", "--empty-partitions"):
        assert choice in result.stderr


def test_selector_for_unpartitioned_closure_says_to_remove_it(invoke, write_entry):
    path = write_entry(ENTRY)

    result = invoke("plan", path, "--target", "plain", "--partition-key", "2026-08-31")

    assert "no selected asset is partitioned" in result.stderr


def test_two_domains_names_the_assets_and_domains(invoke, write_entry):
    path = write_entry(ENTRY)

    result = invoke("plan", path, "--target", "daily", "--target", "monthly", "--partition-key", "2026-08-31")

    for text in ("daily", "monthly", "date", "month"):
        assert text in result.stderr


def test_unknown_target_names_it(invoke, write_entry):
    path = write_entry(ENTRY)

    result = invoke("assets", path, "--target", "nonexistent_asset")

    assert result.exit_code == 2
    assert "nonexistent_asset" in result.stderr


def test_entry_default_closure_with_two_domains_exits_2(invoke, write_entry, ran):
    # Without a `flow`, the entry targets every terminal asset: here several domains.
    path = write_entry(ENTRY)

    result = invoke("run", path, "--partition-key", "2026-08-31", "--yes")

    assert result.exit_code == 2
    assert "partition domains" in result.stderr
    assert ran() == []


CYCLE_ENTRY = """
@asset
def first(third):
    mark("first")
    return third


@asset
def second(first):
    mark("second")
    return first


@asset
def third(second):
    mark("third")
    return second


@asset
def consumer(third):
    mark("consumer")
    return third


flow = Flow(["consumer"])
"""


@pytest.mark.parametrize("command", ["assets", "partitions", "plan", "run"])
def test_dependency_cycle_exits_2_naming_every_asset_on_it(invoke, write_entry, ran, command):
    path = write_entry(CYCLE_ENTRY)
    extra = ["--yes"] if command == "run" else []

    result = invoke(command, path, *extra)

    assert result.exit_code == 2
    assert "cycle" in result.stderr
    for name in ("first", "second", "third"):
        assert name in result.stderr
    assert ran() == []


def test_entry_made_only_of_a_cycle_reports_the_cycle(invoke, write_entry):
    path = write_entry(
        """
        @asset
        def ping(pong):
            return pong

        @asset
        def pong(ping):
            return ping
        """
    )

    result = invoke("plan", path)

    assert result.exit_code == 2
    assert "cycle" in result.stderr
    assert "ping" in result.stderr and "pong" in result.stderr


def test_parameter_naming_no_asset_exits_2_naming_asset_and_parameter(invoke, write_entry, ran):
    path = write_entry(
        """
        @asset
        def source():
            mark("source")
            return 1

        @asset
        def consumer(source, sourse):
            mark("consumer")
            return source
        """
    )

    result = invoke("run", path, "--yes")

    assert result.exit_code == 2
    assert "'consumer'" in result.stderr
    assert "'sourse'" in result.stderr
    assert ran() == []


def test_deps_naming_no_asset_exits_2(invoke, write_entry):
    path = write_entry(
        """
        @asset(deps=["ghost"])
        def haunted():
            return 1
        """
    )

    result = invoke("plan", path)

    assert result.exit_code == 2
    assert "ghost" in result.stderr


@pytest.mark.parametrize("command", ["plan", "run"])
@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_bad_max_concurrency_is_a_usage_error(invoke, write_entry, ran, command, value):
    path = write_entry(DAILY_PIPELINE)
    extra = ["--yes"] if command == "run" else []

    result = invoke(command, path, "--partition-key", "2026-08-08", "--max-concurrency", value, *extra)

    assert result.exit_code == 2
    assert "--max-concurrency" in result.stderr
    assert ran() == []


def test_partition_range_needs_two_values(invoke, write_entry):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("plan", path, "--partition-range", "2026-08-08")

    assert result.exit_code == 2
    assert "--partition-range" in result.stderr


def test_unknown_option_is_a_usage_error(invoke, write_entry):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("plan", path, "--partition-keys", "2026-08-08")

    assert result.exit_code == 2


def test_missing_entry_argument_is_a_usage_error(invoke):
    result = invoke("plan")

    assert result.exit_code == 2
    assert "ENTRY" in result.stderr


@pytest.mark.parametrize(
    ("source", "suffix", "code", "error_type"),
    [
        ("x = (\n", "", 3, "EntryLoadError"),
        ("from partita import Flow, asset\n@asset\ndef a():\n    return 1\nf1 = Flow(['a'])\nf2 = Flow(['a'])\n", "", 3,
         "EntryLoadError"),
        ("from partita import asset\n@asset\ndef a():\n    return 1\n@asset(name='a')\ndef b():\n    return 1\n", "", 2,
         "DefinitionError"),
    ],
    ids=["syntax-error", "ambiguous", "duplicate-name"],
)
@pytest.mark.parametrize("command", ["assets", "partitions", "plan", "run"])
def test_entry_errors_with_json_print_an_error_document(invoke, write_entry, source, suffix, code, error_type, command):
    path = write_entry(source, header=False)
    extra = ["--yes"] if command == "run" else []

    result = invoke(command, path + suffix, "--json", *extra)

    assert result.exit_code == code
    document = json.loads(result.stdout)
    assert document["schema"] == "partita.error"
    assert document["version"] == 1
    assert document["error"] == {"type": error_type, "message": document["error"]["message"], "exit_code": code}


# --- diagnostics are printed literally -----------------------------------------


def test_target_that_looks_like_markup_is_a_clean_usage_error(invoke, write_entry):
    path = write_entry(DAILY_PIPELINE)

    result = invoke("plan", path, "--target", "[/x]")

    assert result.exit_code == 2
    assert "[/x]" in result.stderr


def test_error_message_text_is_printed_literally(invoke, write_entry):
    path = write_entry("raise RuntimeError('bad [red]thing[/red] happened')\n", header=False)

    result = invoke("plan", path)

    assert result.exit_code == 3
    assert "bad [red]thing[/red] happened" in result.stderr


def test_failure_message_that_looks_like_markup_is_rendered_literally(invoke, write_entry):
    path = write_entry(
        """
        @asset
        def broken():
            raise ValueError("[/x] is not a valid column")
        """
    )

    result = invoke("run", path, "--yes")

    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert "[/x] is not a valid column" in result.stdout
