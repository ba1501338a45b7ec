"""The ``--json`` documents of the trigger commands validate against their schemas (SPEC §12, §13).

`partita plan ENTRY --pending` prints ``partita.pending``, `partita trigger
ENTRY --once` prints ``partita.trigger-pass`` and `partita flows pause|resume
NAME` print ``partita.flow-state``; each has a schema under docs/schemas.
The documents are produced by the CLI against the trigger examples (and a
few small entries for the shapes the examples do not reach: a cron trigger,
an ignored event, an unpartitioned consumer) with a temporary SQLite store,
never written by hand. Every schema also rejects broken copies of a real
document, so a renamed, retyped, missing or leaked field fails here.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from partita.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "docs" / "schemas"
EXAMPLES = REPO / "examples"
BATCH_VALIDATION = str(EXAMPLES / "batch_validation.py")
HOURLY_ROLLUP = str(EXAMPLES / "hourly_rollup.py")
RUNTIME_TRIGGERED = str(EXAMPLES / "runtime_triggered.py")

FORMATS = FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _timezone_aware_iso(value: object) -> bool:
    if isinstance(value, str) and dt.datetime.fromisoformat(value).tzinfo is None:
        raise ValueError("timestamp has no UTC offset")
    return True


REGISTRY: Registry = Registry().with_resources(
    (path.name, Resource.from_contents(json.loads(path.read_text()), default_specification=DRAFT202012))
    for path in sorted(SCHEMAS.glob("*.json"))
)


def _errors(document: Any, schema_name: str) -> list[str]:
    schema = json.loads((SCHEMAS / schema_name).read_text())
    validator = Draft202012Validator(schema, registry=REGISTRY, format_checker=FORMATS)
    return [f"{error.json_path}: {error.message}" for error in validator.iter_errors(document)]


def assert_valid(document: Any, schema_name: str) -> None:
    errors = _errors(document, schema_name)
    assert not errors, f"document does not match {schema_name}:\n" + "\n".join(errors[:15])


def assert_invalid(document: Any, schema_name: str) -> None:
    assert _errors(document, schema_name), f"{schema_name} accepted a document it should reject"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/triggers.db"


def _cli(*args: str, code: int = 0) -> dict[str, Any]:
    """Run one command with --json; its one stdout document, checked against the schema it names."""
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == code, result.output
    document = json.loads(result.stdout)  # exactly one document on stdout
    assert document["version"] == 1
    assert_valid(document, document["schema"].removeprefix("partita.") + ".v1.json")
    return document


def _pending(entry: str, url: str) -> dict[str, Any]:
    document = _cli("plan", entry, "--pending", "--store", url)
    assert document["schema"] == "partita.pending"
    return document


def _trigger_once(entry: str, url: str) -> int:
    document = _cli("trigger", entry, "--once", "--store", url)
    assert document["schema"] == "partita.trigger-pass"
    return document["started_runs"]


def _flows(action: str, name: str, url: str) -> dict[str, Any]:
    document = _cli("flows", action, name, "--entry", BATCH_VALIDATION, "--store", url)
    assert document["schema"] == "partita.flow-state"
    return document


# -- real documents ----------------------------------------------------------------


def test_batch_validation_documents_match_their_schemas(url: str):
    _cli("run", BATCH_VALIDATION, "--yes", "--store", url, code=1)  # the producer fails on batch 43
    (flow,) = _pending(BATCH_VALIDATION, url)["flows"]
    assert flow == {
        "flow": "validate_batches",
        "trigger": {"kind": "asset_events", "assets": ["arrived_batch"], "mapper": "IdentityMapper", "max_keys_per_run": 1},
        "paused": False,
        "would_start": ["41", "42"],
        "waiting": [],
        "waiting_progress": [],
        "rejected_events": [],
        "error": None,
        "follow_ups": [],
        "retrying": [],
        "abandoned": [],
    }
    assert _trigger_once(BATCH_VALIDATION, url) == 2
    assert _pending(BATCH_VALIDATION, url)["flows"][0]["would_start"] == []
    assert _trigger_once(BATCH_VALIDATION, url) == 0  # the events have been handled


def test_pause_and_resume_documents_report_the_stored_state(url: str):
    _cli("run", BATCH_VALIDATION, "--yes", "--store", url, code=1)
    paused = _flows("pause", "validate_batches", url)
    assert paused == {"schema": "partita.flow-state", "version": 1, "flow": "validate_batches", "paused": True}
    assert _flows("pause", "validate_batches", url) == paused  # pausing again changes nothing
    (flow,) = _pending(BATCH_VALIDATION, url)["flows"]
    assert flow["paused"] is True
    assert _trigger_once(BATCH_VALIDATION, url) == 0
    assert _flows("resume", "validate_batches", url)["paused"] is False
    assert _trigger_once(BATCH_VALIDATION, url) == 2


def test_flow_state_text_output_is_unchanged_without_json(url: str):
    result = CliRunner().invoke(cli, ["flows", "pause", "validate_batches", "--entry", BATCH_VALIDATION, "--store", url])
    assert result.exit_code == 0, result.output
    assert "flow validate_batches paused" in result.stdout
    assert not result.stdout.lstrip().startswith("{")


def test_a_waiting_rollup_day_matches_the_pending_schema(url: str):
    result = CliRunner().invoke(
        cli,
        ["events", "emit", "meter_readings", HOURLY_ROLLUP, "--partition-key", "2026-10-25T00",
         "--extra", '{"kwh":2}', "--store", url],
    )
    assert result.exit_code == 0, result.output
    (flow,) = _pending(HOURLY_ROLLUP, url)["flows"]
    assert flow["trigger"] == {"kind": "asset_events", "assets": ["meter_readings"], "mapper": "RollupMapper('day')",
                               "max_keys_per_run": 1}
    assert (flow["would_start"], flow["waiting"]) == ([], ["2026-10-25"])
    assert _trigger_once(HOURLY_ROLLUP, url) == 0
    assert _pending(HOURLY_ROLLUP, url)["flows"][0]["waiting"] == ["2026-10-25"]


def test_runtime_triggered_documents_match_their_schemas(url: str):
    _cli("run", RUNTIME_TRIGGERED, "--yes", "--store", url)
    (flow,) = _pending(RUNTIME_TRIGGERED, url)["flows"]
    assert (flow["flow"], flow["would_start"]) == ("stock_check", ["hamburg", "lyon"])
    assert _trigger_once(RUNTIME_TRIGGERED, url) == 2


CRON_ENTRY = """
import datetime as dt

from partita import DatePartitionDef, Flow, asset
from partita.automation.triggers import CronPartitions


@asset(partition_def=DatePartitionDef())
def nightly(context):
    return 1


# Three days back, so the preview has a few elapsed midnight ticks whatever today is.
start = (dt.datetime.now(dt.UTC) - dt.timedelta(days=3)).date().isoformat()
flow = Flow(["nightly"], name="nightly", trigger=CronPartitions("0 0 * * *", start=start, timezone="Europe/Berlin"))
"""


def test_a_cron_trigger_matches_the_pending_schema(tmp_path: Path, url: str):
    entry = tmp_path / "cron_entry.py"
    entry.write_text(CRON_ENTRY)
    (flow,) = _pending(str(entry), url)["flows"]
    trigger = flow["trigger"]
    assert (trigger["kind"], trigger["cron"], trigger["timezone"]) == ("cron", "0 0 * * *", "Europe/Berlin")
    assert dt.datetime.fromisoformat(trigger["start"]).tzinfo is not None
    assert len(flow["would_start"]) >= 3  # a midnight tick for each day since the start
    assert flow["waiting"] == [] and flow["rejected_events"] == []


IGNORED_AND_UNPARTITIONED_ENTRY = """
from partita import DatePartitionDef, Flow, asset
from partita.partitions.mappers import FixedKeyMapper
from partita.automation.triggers import OnAssetEvents


@asset(partition_def=DatePartitionDef())
def raw(context):
    return 1


@asset(partition_def=DatePartitionDef(start="2024-06-01"))
def recent(context):
    return 1


@asset
def summary():
    return 1


recent_flow = Flow(["recent"], name="recent", trigger=OnAssetEvents(["raw"]))
summary_flow = Flow(["summary"], name="summary", trigger=OnAssetEvents(["raw"], mapper=FixedKeyMapper()))
"""


def test_ignored_events_and_an_unpartitioned_consumer_match_the_pending_schema(tmp_path: Path, url: str):
    entry = tmp_path / "ignored.py"
    entry.write_text(IGNORED_AND_UNPARTITIONED_ENTRY)
    for key in ("2024-01-01", "2024-07-01"):
        result = CliRunner().invoke(cli, ["events", "emit", "raw", str(entry), "--partition-key", key, "--store", url])
        assert result.exit_code == 0, result.output
    recent, summary = _pending(str(entry), url)["flows"]
    assert (recent["flow"], recent["would_start"], recent["rejected_events"]) == ("recent", ["2024-07-01"], [1])
    assert (summary["flow"], summary["would_start"], summary["trigger"]["mapper"]) == ("summary", [""], "FixedKeyMapper")
    assert _trigger_once(str(entry), url) == 2


@pytest.mark.parametrize(
    ("arguments", "code", "error_type"),
    [
        (["plan", "missing.py", "--pending"], 3, "EntryLoadError"),
        (["trigger", "missing.py", "--once"], 3, "EntryLoadError"),
        (["flows", "pause", ""], 2, "ConfigurationError"),
    ],
)
def test_trigger_command_errors_match_the_error_schema(url: str, arguments: list[str], code: int, error_type: str):
    document = _cli(*arguments, "--store", url, code=code)
    assert document["error"]["type"] == error_type


# -- the schemas reject drift ---------------------------------------------------------


DELETE = object()  # for `_changed`: remove the field


def _changed(document: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """A deep copy of ``document`` with the field at ``path`` set to ``value`` (or removed for `DELETE`)."""
    changed = copy.deepcopy(document)
    *parents, last = path
    target: Any = changed
    for step in parents:
        target = target[step]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return changed


PENDING_DRIFT: dict[str, tuple[tuple[str | int, ...], Any]] = {
    "no flows": (("flows",), DELETE),
    "wrong version": (("version",), 2),
    "another document's schema": (("schema",), "partita.plan"),
    "an extra top-level field": (("started_runs",), 0),
    "flows not a list": (("flows",), {}),
    "a flow without its name": (("flows", 0, "flow"), DELETE),
    "an empty flow name": (("flows", 0, "flow"), ""),
    "paused as text": (("flows", 0, "paused"), "false"),
    "an extra flow field": (("flows", 0, "run_ids"), []),
    "would_start missing": (("flows", 0, "would_start"), DELETE),
    "a key that is not text": (("flows", 0, "would_start"), [41]),
    "a key listed twice": (("flows", 0, "would_start"), ["41", "41"]),
    "waiting not a list": (("flows", 0, "waiting"), "41"),
    "an event id that is not an id": (("flows", 0, "rejected_events"), [0]),
    "an event id as text": (("flows", 0, "rejected_events"), ["1"]),
    "an unknown trigger kind": (("flows", 0, "trigger", "kind"), "webhook"),
    "a trigger without assets": (("flows", 0, "trigger", "assets"), []),
    "a trigger without a mapper": (("flows", 0, "trigger", "mapper"), DELETE),
    "an extra trigger field": (("flows", 0, "trigger", "cron"), "0 * * * *"),
    "error missing": (("flows", 0, "error"), DELETE),
    "an empty error": (("flows", 0, "error"), ""),
    "an error that is not text": (("flows", 0, "error"), {"message": "broken"}),
}


@pytest.fixture
def pending_document(url: str) -> dict[str, Any]:
    _cli("run", BATCH_VALIDATION, "--yes", "--store", url, code=1)
    return _pending(BATCH_VALIDATION, url)


@pytest.mark.parametrize("drift", sorted(PENDING_DRIFT))
def test_the_pending_schema_rejects_drift(pending_document: dict[str, Any], drift: str):
    path, value = PENDING_DRIFT[drift]
    assert_invalid(_changed(pending_document, path, value), "pending.v1.json")


def test_the_pending_schema_rejects_a_broken_cron_trigger(tmp_path: Path, url: str):
    entry = tmp_path / "cron_entry.py"
    entry.write_text(CRON_ENTRY)
    document = _pending(str(entry), url)
    trigger = ("flows", 0, "trigger")
    naive_start = dt.datetime.fromisoformat(document["flows"][0]["trigger"]["start"]).replace(tzinfo=None)
    assert_invalid(_changed(document, (*trigger, "start"), naive_start.isoformat()), "pending.v1.json")
    assert_invalid(_changed(document, (*trigger, "timezone"), DELETE), "pending.v1.json")
    assert_invalid(_changed(document, (*trigger, "mapper"), "IdentityMapper"), "pending.v1.json")
    assert_invalid(_changed(document, (*trigger, "kind"), "asset_events"), "pending.v1.json")


def test_the_trigger_pass_schema_rejects_drift(url: str, tmp_path: Path):
    document = _cli("trigger", RUNTIME_TRIGGERED, "--once", "--store", url)
    for path, value in [
        (("started_runs",), DELETE),
        (("started_runs",), -1),
        (("started_runs",), "2"),
        (("started_runs",), 1.5),
        (("started",), 0),
        (("failing",), DELETE),
        (("failing",), ["schedule"]),
        (("failing",), [{"flow": "schedule"}]),
        (("failing",), [{"flow": "schedule", "error": ""}]),
        (("failing",), [{"flow": "schedule", "error": "broken", "exit_code": 2}]),
        (("schema",), "partita.pending"),
        (("version",), 2),
    ]:
        assert_invalid(_changed(document, path, value), "trigger-pass.v1.json")
    assert_invalid(document, "pending.v1.json")


def test_the_flow_state_schema_rejects_drift(url: str):
    document = _flows("pause", "validate_batches", url)
    for path, value in [
        (("paused",), DELETE),
        (("paused",), "true"),
        (("paused",), 1),
        (("flow",), DELETE),
        (("flow",), ""),
        (("flow",), None),
        (("changed_at",), "2026-08-08T10:00:00+00:00"),
        (("schema",), "partita.flows"),
        (("version",), 2),
    ]:
        assert_invalid(_changed(document, path, value), "flow-state.v1.json")
    assert_invalid(document, "trigger-pass.v1.json")


# -- partita schedules ----------------------------------------------------------------

SCHEDULES_ENTRY = """
from partita import Flow, HourlyPartitionDef, OnAssetEvents, asset
from partita.automation.triggers import CronPartitions


@asset(partition_def=HourlyPartitionDef("UTC"))
def hourly(context):
    return 1


@asset(partition_def=HourlyPartitionDef("UTC"))
def quarter(context):
    return 1


@asset(partition_def=HourlyPartitionDef("UTC"))
def follows(context):
    return 1


hourly_flow = Flow(["hourly"], name="hourly", trigger=CronPartitions("0 * * * *", start="2024-01-01T00:00", catchup="latest"))
quarter_flow = Flow(["quarter"], name="quarter", trigger=CronPartitions("*/15 * * * *", start="2024-01-01T00:00"))
events_flow = Flow(["follows"], name="follows", trigger=OnAssetEvents(["hourly"]))
"""


def _schedules(entry: str, url: str, *more: str) -> dict[str, Any]:
    document = _cli("schedules", entry, "--store", url, *more)
    assert document["schema"] == "partita.schedules"
    return document


def test_schedules_lists_each_scheduled_flow_with_its_next_ticks_and_what_they_run(tmp_path: Path, url: str):
    entry = tmp_path / "schedules.py"
    entry.write_text(SCHEDULES_ENTRY)

    hourly, quarter = _schedules(str(entry), url, "--next", "4")["flows"]  # the event-driven flow is not listed

    assert (hourly["flow"], hourly["paused"], hourly["last_tick"]) == ("hourly", False, None)
    assert hourly["trigger"]["catchup"] == "latest" and quarter["trigger"]["catchup"] == "all"
    ticks = [dt.datetime.fromisoformat(tick["at"]) for tick in hourly["next_ticks"]]
    assert len(ticks) == 4 and ticks[0] > dt.datetime.now(dt.UTC)
    assert all(later - earlier == dt.timedelta(hours=1) for earlier, later in itertools.pairwise(ticks))
    # The tick at HH:00 runs the hour that ended there.
    assert [tick["partition_key"] for tick in hourly["next_ticks"]] == [
        (at - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H") for at in ticks
    ]
    # Of four quarter-hour ticks, only the one on the hour runs a partition.
    runs = [tick["partition_key"] for tick in quarter["next_ticks"]]
    assert len(runs) == 4 and sum(key is not None for key in runs) == 1


def test_schedules_show_the_last_handled_tick_and_the_pause_state(tmp_path: Path, url: str):
    entry = tmp_path / "schedules.py"
    entry.write_text(SCHEDULES_ENTRY)
    paused = CliRunner().invoke(cli, ["flows", "pause", "quarter", "--entry", str(entry), "--store", url])
    assert paused.exit_code == 0, paused.output
    # Catch-up "latest": of every hour since 2024 only the last one runs, and its event starts `follows`.
    # A pass that crosses the top of an hour also handles the new tick (and its follower): 4.
    assert _trigger_once(str(entry), url) in (2, 4)

    hourly, quarter = _schedules(str(entry), url)["flows"]

    assert hourly["last_tick"] is not None and quarter["paused"] is True
    last = dt.datetime.fromisoformat(hourly["last_tick"])
    assert dt.datetime.now(dt.UTC) - last < dt.timedelta(hours=1)
    assert dt.datetime.fromisoformat(hourly["next_ticks"][0]["at"]) > last


def test_schedules_of_an_entry_without_a_schedule_is_an_entry_error(url: str):
    document = _cli("schedules", BATCH_VALIDATION, "--store", url, code=3)
    assert document["error"]["type"] == "EntryLoadError"
    assert "CronPartitions" in document["error"]["message"]


def test_schedules_text_output_names_flows_ticks_and_catchup(tmp_path: Path, url: str):
    entry = tmp_path / "schedules.py"
    entry.write_text(SCHEDULES_ENTRY)
    result = CliRunner().invoke(cli, ["schedules", str(entry), "--store", url])
    assert result.exit_code == 0, result.output
    assert "hourly (active)" in result.output and "catch-up latest" in result.output
    assert "last tick: none handled yet" in result.output
    assert "nothing (inside a partition)" in result.output


def test_the_schedules_schema_rejects_drift(tmp_path: Path, url: str):
    entry = tmp_path / "schedules.py"
    entry.write_text(SCHEDULES_ENTRY)
    document = _schedules(str(entry), url)
    assert_invalid(_changed(document, ("flows", 0, "trigger", "catchup"), 0), "schedules.v1.json")
    assert_invalid(_changed(document, ("flows", 0, "next_ticks", 0, "at"), "tomorrow"), "schedules.v1.json")
    assert_invalid(_changed(document, ("flows", 0, "paused"), DELETE), "schedules.v1.json")
