"""Every portable document validates against its JSON Schema in docs/schemas (SPEC §6, §13, §14).

The documents are produced for real, never written by hand: plans of every
selection form, run records of every version from a run with successes,
failures, dependency and circuit skips, retries, resource statistics and
raising callbacks (with and without recorded partition keys), a cancelled
run's record, and every ``--json`` document of the CLI, including a run whose
process was killed. The schemas close fixed shapes with
``additionalProperties: false``, so a new, renamed or leaked field fails here.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import partita as p
from partita.cli.main import cli
from partita.results.record import render_record
from partita.store import open_store

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "docs" / "schemas"
RECORD_VERSIONS = (1, 2, 3, 4)
CLI_DOCUMENTS = (
    "assets",
    "partitions",
    "plan",
    "run-result",
    "error",
    "runs",
    "run",
    "runs-compare",
    "run-cancel",
    "events",
    "emission",
    "partition-retired",
    "partition-status",
    # Trigger commands; their documents are checked in tests/automation/test_trigger_documents.py.
    "pending",
    "trigger-pass",
    "flow-state",
    "schedules",
    "attempt-logs",
    # Checked in tests/cli/test_pools.py.
    "pools",
)
#: Documents only the HTTP API serves; tests/ui/test_api_documents.py and test_actions_api.py validate them.
API_DOCUMENTS = ("overview", "asset", "attempts", "planned", "partition-ranges")
SECRET = "tenant-secret-42"  # a distinctive key: it must never leak unless recorded on purpose
WAIT = 30.0  # seconds any wait for work may take before the test fails

# -- validation ----------------------------------------------------------------

FORMATS = FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _timezone_aware_iso(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parsed = dt.datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError("timestamp has no UTC offset")
    return True


def _schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / name).read_text())


# The files refer to each other by file name ("plan.v1.json#/$defs/task"), so
# the registry serves each under its name, as a validator loading them from one
# directory would.
REGISTRY: Registry = Registry().with_resources(
    (path.name, Resource.from_contents(json.loads(path.read_text()), default_specification=DRAFT202012))
    for path in sorted(SCHEMAS.glob("*.json"))
)


def _errors(document: Any, schema_name: str) -> list[str]:
    validator = Draft202012Validator(_schema(schema_name), registry=REGISTRY, format_checker=FORMATS)
    # The document must be JSON as it is: no tuples, NaN or non-string keys.
    portable = json.loads(json.dumps(document, allow_nan=False))
    assert portable == document
    return [f"{error.json_path}: {error.message}" for error in validator.iter_errors(portable)]


def assert_valid(document: Any, schema_name: str) -> None:
    errors = _errors(document, schema_name)
    assert not errors, f"document does not match {schema_name}:\n" + "\n".join(errors[:15])


def assert_invalid(document: Any, schema_name: str) -> None:
    assert _errors(document, schema_name), f"{schema_name} accepted a document it should reject"


def _attempts(record: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for task in record["tasks"]:
        yield from task["attempts"]


def test_schema_files_are_valid_draft_2020_12_and_complete():
    names = sorted(path.name for path in SCHEMAS.glob("*.json"))
    expected = sorted(
        ["plan.v1.json", *(f"run-record.v{n}.json" for n in RECORD_VERSIONS)]
        + [f"{kind}.v1.json" for kind in (*CLI_DOCUMENTS, *API_DOCUMENTS) if kind != "plan"]
    )
    assert names == expected
    for name in names:
        schema = _schema(name)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("version", RECORD_VERSIONS[1:])
def test_record_schema_versions_keep_every_earlier_field_unchanged(version: int):
    older, newer = _schema(f"run-record.v{version - 1}.json"), _schema(f"run-record.v{version}.json")
    for name, field in older["properties"].items():
        if name != "version":
            assert newer["properties"][name] == field, f"top-level field {name!r} changed in v{version}"
    for definition, body in older["$defs"].items():
        for name, field in body.get("properties", {}).items():
            assert newer["$defs"][definition]["properties"][name] == field, f"{definition}.{name} changed"


# -- plans -----------------------------------------------------------------------


def _plan_registry() -> p.AssetRegistry:
    registry = p.AssetRegistry()
    days = p.DatePartitionDef(start="2026-01-01", end="2026-12-31")

    @p.asset(
        partition_def=days,
        registry=registry,
        resource="warehouse",
        retry=p.RetryPolicy(max_attempts=3, delay=2.0, max_delay=10.0, jitter=0.5),
    )
    def extract(context) -> int:
        return 1

    @p.asset(partition_def=days, registry=registry, resource="warehouse")
    async def load(extract: int) -> int:
        return extract

    @p.asset(registry=registry, resource="api")
    def rates() -> float:
        return 1.0

    @p.asset(partition_def=days, registry=registry)
    def publish(load: int, rates: float) -> int:
        return load

    @p.asset(registry=registry)
    def dashboard(publish: dict) -> int:
        return len(publish)

    @p.asset(registry=registry)
    def constant() -> int:
        return 1

    grid = p.MultiPartitionDef(
        {
            "hour": p.HourlyPartitionDef(timezone="Europe/Berlin"),
            "region": p.StaticPartitionDef("regions", ["eu", "us"]),
        }
    )

    @p.asset(partition_def=grid, registry=registry)
    def traffic(context) -> int:
        return 1

    @p.asset(partition_def=p.MonthlyPartitionDef(start="2025-01"), registry=registry)
    def invoices(context) -> int:
        return 1

    return registry


def _plan_flow(targets: list[str], registry: p.AssetRegistry, **options: Any) -> p.Flow:
    return p.Flow(
        targets,
        registry=registry,
        resources={
            "warehouse": p.ResourcePolicy(max_concurrency=2, rate_limit=p.RateLimit(requests=5, per_seconds=1.5)),
            "api": p.ResourcePolicy(max_attempts=3, classify_failure=lambda error: p.Fail()),
        },
        **options,
    )


PLAN_CASES: dict[str, tuple[list[str], dict[str, Any], dict[str, Any]]] = {
    "keys, with a group and resources": (
        ["dashboard"],
        {"partition_keys": ["2026-08-08", "2026-08-09"]},
        {"partition_groups": [p.PartitionGroup(["extract", "load"], max_active_keys=2)], "max_concurrency": 4},
    ),
    "range": (["publish"], {"partition_range": ("2026-08-01", "2026-08-31"), "max_concurrency": 3}, {}),
    "empty": (["dashboard"], {"empty_partitions": True}, {"partition_groups": [p.PartitionGroup(["extract"])]}),
    "unpartitioned": (["constant"], None, {}),
    "multi-dimensional keys": (["traffic"], {"partition_keys": [{"hour": "2026-10-25T02+01:00", "region": "eu"}]}, {}),
    "monthly range": (["invoices"], {"partition_range": ("2025-11", "2026-02")}, {}),
}


@pytest.mark.parametrize("case", sorted(PLAN_CASES))
def test_plan_document_matches_its_schema(case: str):
    targets, config, options = PLAN_CASES[case]
    plan = _plan_flow(targets, _plan_registry(), **options).plan(config)
    document = plan.to_dict()
    assert_valid(document, "plan.v1.json")
    assert json.loads(plan.to_json()) == document


def test_plan_schema_covers_groups_resources_and_partition_descriptions():
    targets, config, options = PLAN_CASES["keys, with a group and resources"]
    document = _plan_flow(targets, _plan_registry(), **options).plan(config).to_dict()
    assert document["groups"] == [{"assets": ["extract", "load"], "max_active_keys": 2}]
    assert {resource["name"] for resource in document["resources"]} == {"warehouse", "api"}
    traffic = _plan_flow(["traffic"], _plan_registry()).plan(
        {"partition_keys": [{"hour": "2026-10-25T02+01:00", "region": "eu"}]}
    )
    assert set(traffic.to_dict()["tasks"][0]["partition"]["dimensions"]) == {"hour", "region"}


def test_backfill_plan_documents_match_the_plan_schema_and_carry_no_keys(tmp_path: Path):
    url = f"sqlite:///{tmp_path}/backfill.db"
    flow = _plan_flow(["publish"], _plan_registry(), store=url, record_partition_keys=True)
    done = flow.run({"partition_keys": ["2026-08-08"]})
    missing = p.plan_missing(flow, {"partition_range": ("2026-08-08", "2026-08-10")}, store=url).to_dict()
    assert_valid(missing, "plan.v1.json")
    assert missing["backfill"]["selected"] == 2 and "2026-08-09" not in json.dumps(missing)
    empty = p.plan_failed_from(flow, done.run_id, store=url).to_dict()
    assert_valid(empty, "plan.v1.json")
    assert (empty["backfill"]["empty"], empty["backfill"]["source_run_id"]) == (True, done.run_id)
    assert_invalid({**missing, "backfill": {**missing["backfill"], "keys": ["2026-08-09"]}}, "plan.v1.json")


def test_plan_schema_rejects_drift():
    document = _plan_flow(["publish"], _plan_registry()).plan({"partition_keys": ["2026-08-08"]}).to_dict()
    assert_invalid({**document, "partition_keys": ["2026-08-08"]}, "plan.v1.json")
    assert_invalid({**document, "version": 2}, "plan.v1.json")
    assert_invalid({**document, "selection": {**document["selection"], "keys": ["2026-08-08"]}}, "plan.v1.json")
    task = {**document["tasks"][0], "owner": "someone"}
    assert_invalid({**document, "tasks": [task, *document["tasks"][1:]]}, "plan.v1.json")
    unpartitioned = {**document, "selection": {"kind": "unpartitioned", "domain": "date", "key_count": 0}}
    assert_invalid(unpartitioned, "plan.v1.json")


# -- run records ---------------------------------------------------------------

TENANTS = p.StaticPartitionDef("tenants", [SECRET, "acme", "globex", "initech"])
NEVER_ARRIVES = {"globex"}  # kept out of the raising lines: tracebacks quote them
TIMES_OUT_ONCE = {"acme"}


class ObservedResult:
    """Observer keeping the result that `RunFinished` carries."""

    def __init__(self) -> None:
        self.result: p.RunResult | None = None

    def on_event(self, event: Any) -> None:
        if isinstance(event, p.RunFinished):
            self.result = event.result


def _eventful_flow(**options: Any) -> p.Flow:
    """Successes, a failure after retries, a recovery, dependency and circuit skips, raising callbacks."""
    registry = p.AssetRegistry()

    def page_on_call(context: p.CallbackContext) -> None:
        raise RuntimeError("the pager service is offline")

    def classify(error: BaseException) -> Any:
        return p.OpenCircuit() if isinstance(error, ConnectionError) else p.Fail()

    @p.asset(
        partition_def=TENANTS,
        registry=registry,
        resource="billing",
        retry=p.RetryPolicy(max_attempts=2, delay=1.0),
        on_failure=page_on_call,
    )
    def invoices(context) -> int:
        if context.partition_key in NEVER_ARRIVES:
            raise LookupError("the invoice feed has not arrived")
        if context.partition_key in TIMES_OUT_ONCE and context.invocation_number == 1:
            raise TimeoutError("the invoice feed timed out")
        return 10

    @p.asset(partition_def=TENANTS, registry=registry)
    def ledger(invoices: int) -> int:
        return invoices + 1

    @p.asset(partition_def=TENANTS, registry=registry, resource="mailer")
    def statements(context) -> str:
        raise ConnectionError("the mail relay refused the connection")

    @p.asset(registry=registry)
    def month_end(ledger: dict, statements: dict) -> int:
        return len(ledger)

    return p.Flow(
        ["month_end"],
        registry=registry,
        resources={
            "billing": p.ResourcePolicy(max_concurrency=2),
            "mailer": p.ResourcePolicy(max_concurrency=1, classify_failure=classify),
        },
        partition_groups=[p.PartitionGroup(["invoices", "ledger"], max_active_keys=2)],
        clock=p.FastForwardClock(),
        on_complete=page_on_call,
        **options,
    )


@pytest.fixture(scope="module")
def history_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("schema-history")


@pytest.fixture(scope="module")
def eventful_result(history_folder: Path) -> p.RunResult:
    flow = _eventful_flow(store=f"sqlite:///{history_folder}/plain.db")
    return flow.run({"partition_keys": list(TENANTS.keys)})


def test_the_eventful_run_has_every_outcome(eventful_result: p.RunResult):
    statuses = {(a.asset_name, a.status.value, a.reason and a.reason.value) for a in eventful_result.attempts()}
    assert ("invoices", "failed", None) in statuses
    assert ("ledger", "skipped", "dependency_failed") in statuses
    assert ("statements", "skipped", "resource_circuit_open") in statuses
    assert ("month_end", "skipped", "dependency_failed") in statuses
    retried = [a for a in eventful_result.attempts() if len(a.invocations) > 1]
    assert retried and any(a.status is p.AttemptStatus.SUCCESS for a in retried)
    assert eventful_result.resources["billing"].retries >= 2
    assert {error.callback for error in eventful_result.callback_errors} >= {"flow.on_complete"}
    assert any(error.asset_name == "invoices" for error in eventful_result.callback_errors)


@pytest.mark.parametrize("record_keys", [False, True], ids=["keys-omitted", "keys-recorded"])
@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_run_record_matches_its_version_schema(eventful_result: p.RunResult, version: int, record_keys: bool):
    record = eventful_result.to_record(version=version, record_partition_keys=record_keys)
    assert record["version"] == version
    assert record["partition_keys_recorded"] is record_keys
    assert_valid(record, f"run-record.v{version}.json")
    for other in RECORD_VERSIONS:
        if other != version:
            assert_invalid(record, f"run-record.v{other}.json")


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_a_record_never_carries_a_raw_key_unless_asked(eventful_result: p.RunResult, version: int):
    plain = json.dumps(eventful_result.to_record(version=version))
    assert SECRET not in plain
    assert all("partition_key" not in attempt for attempt in _attempts(json.loads(plain)))
    recorded = eventful_result.to_record(version=version, record_partition_keys=True)
    assert SECRET in json.dumps(recorded)
    keys = {attempt["partition_key"] for attempt in _attempts(recorded) if attempt["partition_key_present"]}
    assert keys == set(TENANTS.keys)
    unkeyed = [attempt for attempt in _attempts(recorded) if not attempt["partition_key_present"]]
    assert unkeyed and all(attempt["partition_key"] is None for attempt in unkeyed)


def test_record_schemas_reject_a_key_that_was_not_opted_in(eventful_result: p.RunResult):
    record = eventful_result.to_record(version=4)
    record["tasks"][0]["attempts"][0]["partition_key"] = SECRET
    assert_invalid(record, "run-record.v4.json")
    recorded = eventful_result.to_record(version=4, record_partition_keys=True)
    del recorded["tasks"][0]["attempts"][0]["partition_key"]
    assert_invalid(recorded, "run-record.v4.json")


def _restricted(newer: Any, older: Any) -> Any:
    """``newer`` cut down to the fields ``older`` has, recursively."""
    if isinstance(older, dict):
        return {name: _restricted(newer[name], value) for name, value in older.items()}
    if isinstance(older, list):
        assert len(newer) == len(older)
        return [_restricted(n, o) for n, o in zip(newer, older, strict=True)]
    return newer


ADDED_IN = {
    2: ({"invocation_details"}, set()),
    3: (set(), {"resources", "callback_errors"}),
    4: ({"resolution", "materialization_id"}, set()),
}


@pytest.mark.parametrize("record_keys", [False, True], ids=["keys-omitted", "keys-recorded"])
@pytest.mark.parametrize("version", RECORD_VERSIONS[1:])
def test_a_newer_version_keeps_the_earlier_fields_unchanged(
    eventful_result: p.RunResult, version: int, record_keys: bool
):
    older = eventful_result.to_record(version=version - 1, record_partition_keys=record_keys)
    newer = eventful_result.to_record(version=version, record_partition_keys=record_keys)
    older["version"] = newer["version"]
    assert _restricted(newer, older) == older
    attempt_fields, top_fields = ADDED_IN[version]
    assert set(newer) - set(older) == top_fields
    for new_attempt, old_attempt in zip(_attempts(newer), _attempts(older), strict=True):
        assert set(new_attempt) - set(old_attempt) == attempt_fields


def test_version_1_fields_are_identical_in_every_later_version(eventful_result: p.RunResult):
    first = eventful_result.to_record(version=1)
    for version in RECORD_VERSIONS[1:]:
        later = eventful_result.to_record(version=version)
        assert _restricted(later, {**first, "version": version}) == {**first, "version": version}


def test_the_default_record_is_version_1(eventful_result: p.RunResult):
    assert eventful_result.to_record() == eventful_result.to_record(version=1)


@pytest.mark.parametrize("version", [0, 5, -1, True, False, None, "4"])
def test_an_unsupported_record_version_is_rejected(eventful_result: p.RunResult, version: Any):
    with pytest.raises(ValueError, match="record version must be one of 1, 2, 3, 4"):
        eventful_result.to_record(version=version)


def test_a_cancelled_runs_record_matches_every_version_schema():
    registry = p.AssetRegistry()

    @p.asset(partition_def=TENANTS, registry=registry)
    async def upload(context) -> str:
        await asyncio.sleep(3600)
        return "never"

    @p.asset(registry=registry)
    def summary(upload: dict) -> int:
        return len(upload)

    class Started(ObservedResult):
        def __init__(self, expected: int) -> None:
            super().__init__()
            self.remaining = expected
            self.all_started = asyncio.Event()

        def on_event(self, event: Any) -> None:
            super().on_event(event)
            if isinstance(event, p.AttemptStarted):
                self.remaining -= 1
                if self.remaining == 0:
                    self.all_started.set()

    async def cancel_mid_run() -> p.RunResult:
        observer = Started(expected=len(TENANTS.keys))
        flow = p.Flow(["summary"], registry=registry, store=False)
        running = asyncio.create_task(flow.run_async({"partition_keys": list(TENANTS.keys)}, observers=[observer]))
        await asyncio.wait_for(observer.all_started.wait(), WAIT)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert observer.result is not None
        return observer.result

    result = asyncio.run(cancel_mid_run())
    assert result.status is p.RunStatus.CANCELLED
    for version in RECORD_VERSIONS:
        record = result.to_record(version=version)
        assert record["status"] == "cancelled"
        assert {attempt["status"] for attempt in _attempts(record)} == {"cancelled"}
        tasks = {task["asset"]: task for task in record["tasks"]}
        assert tasks["summary"]["status"] == "not_started"  # never reached, not skipped
        assert {attempt["invocations"] for attempt in tasks["upload"]["attempts"]} == {1}  # cut short
        assert_valid(record, f"run-record.v{version}.json")
        assert_valid(result.to_record(version=version, record_partition_keys=True), f"run-record.v{version}.json")


# -- stored runs -----------------------------------------------------------------


@pytest.fixture(scope="module")
def keyed_store_url(history_folder: Path) -> str:
    url = f"sqlite:///{history_folder}/keyed.db"
    _eventful_flow(store=url, record_partition_keys=True).run({"partition_keys": list(TENANTS.keys)})
    return url


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_a_stored_runs_record_matches_its_version_schema(
    eventful_result: p.RunResult, history_folder: Path, keyed_store_url: str, version: int
):
    for url, recorded in ((f"sqlite:///{history_folder}/plain.db", False), (keyed_store_url, True)):
        store = open_store(url)
        try:
            run = store.list_runs(limit=1)[0]
            record = render_record(
                run.header, store.get_tasks(run.run_id), version, record_partition_keys=run.record_partition_keys
            )
        finally:
            store.close()
        assert run.record_partition_keys is recorded
        assert_valid(record, f"run-record.v{version}.json")
        assert (SECRET in json.dumps(record)) is recorded


def _stored_rows(path: Path, *, events: bool) -> str:
    """Every row of the store's run-history tables (or of its event log) as text."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        chosen = [name for name in tables if (name == "partita_events") is events]
        return json.dumps(
            [[str(value) for value in row] for name in chosen for row in connection.execute(f"SELECT * FROM {name}")]
        )


def test_run_history_holds_no_raw_key_unless_asked_while_events_keep_theirs_on_purpose(
    eventful_result: p.RunResult, history_folder: Path, keyed_store_url: str
):
    assert SECRET not in _stored_rows(history_folder / "plain.db", events=False)
    assert SECRET in _stored_rows(history_folder / "keyed.db", events=False)  # the check above can see a key
    # SPEC §1, §8: an event's key is the routing pointer, so the successful
    # attempts' outlet events keep it even when run history does not.
    assert SECRET in _stored_rows(history_folder / "plain.db", events=True)


# -- CLI documents -------------------------------------------------------------

ENTRY = f"""
import time

from partita import FastForwardClock, Flow, ResourcePolicy, RetryPolicy, StaticPartitionDef, asset

tenants = StaticPartitionDef("tenants", [{SECRET!r}, "acme", "globex"])
never_arrives = {{"globex"}}


@asset(partition_def=tenants, resource="billing", retry=RetryPolicy(max_attempts=2, delay=1.0))
def invoices(context) -> int:
    if context.partition_key in never_arrives:
        raise LookupError("the invoice feed has not arrived")
    return 10


@asset(partition_def=tenants)
def ledger(invoices: int) -> int:
    return invoices + 1


@asset
def month_end(ledger: dict) -> int:
    return len(ledger)


flow = Flow(["month_end"], resources={{"billing": ResourcePolicy(max_concurrency=2)}}, clock=FastForwardClock())
"""

ALL_TENANTS = [arg for key in TENANTS.keys[:3] for arg in ("--partition-key", key)]


@pytest.fixture
def cli_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path}/history.db"
    monkeypatch.setenv("PARTITA_STORE", url)
    (tmp_path / "entry.py").write_text(ENTRY)
    return url


def _json(*args: str, code: int = 0) -> dict[str, Any]:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, result.output
    document = json.loads(result.stdout)  # exactly one document on stdout
    assert document["version"] == 1
    return document


def _run(*selection: str, keys: bool = False) -> dict[str, Any]:
    extra = ["--record-partition-keys"] if keys else []
    document = _json("run", "entry.py", *selection, "--yes", "--json", *extra, code=1 if "globex" in selection else 0)
    return document


def test_assets_document_matches_its_schema(cli_store: str):
    document = _json("assets", "entry.py", "--json")
    assert document["schema"] == "partita.assets"
    assert_valid(document, "assets.v1.json")
    assert_valid(_json("assets", "entry.py", "--target", "ledger", "--json"), "assets.v1.json")
    assert_invalid({**document, "assets": [{**document["assets"][0], "attempt_count": 1}]}, "assets.v1.json")


def test_partitions_document_matches_its_schema(cli_store: str):
    document = _json("partitions", "entry.py", "--json")
    assert document["schema"] == "partita.partitions"
    assert_valid(document, "partitions.v1.json")
    assert SECRET not in json.dumps(document)


def test_plan_document_from_the_cli_matches_its_schema(cli_store: str):
    document = _json("plan", "entry.py", *ALL_TENANTS, "--max-concurrency", "2", "--json")
    assert document["schema"] == "partita.plan"
    assert_valid(document, "plan.v1.json")
    assert SECRET not in json.dumps(document)


def test_run_result_document_matches_its_schema(cli_store: str):
    failed = _run(*ALL_TENANTS)
    assert failed["schema"] == "partita.run-result"
    assert failed["result"]["status"] == "failed"
    assert_valid(failed, "run-result.v1.json")
    succeeded = _run("--partition-key", "acme")
    assert_valid(succeeded, "run-result.v1.json")
    # Recording keys in the history does not put them into the printed document.
    keyed = _run(*ALL_TENANTS, keys=True)
    assert_valid(keyed, "run-result.v1.json")
    assert SECRET not in json.dumps(keyed)
    leaked = json.loads(json.dumps(failed))
    leaked["result"]["partition_keys_recorded"] = True
    assert_invalid(leaked, "run-result.v1.json")


def test_runs_document_matches_its_schema(cli_store: str):
    assert_valid(_json("runs", "list", "--json"), "runs.v1.json")  # an empty history
    _run(*ALL_TENANTS)
    _run("--partition-key", "acme")
    document = _json("runs", "list", "--json")
    assert document["schema"] == "partita.runs"
    assert [run["status"] for run in document["runs"]] == ["success", "failed"]
    assert_valid(document, "runs.v1.json")
    assert_valid(_json("runs", "list", "--status", "failed", "--limit", "1", "--json"), "runs.v1.json")


def test_partition_status_document_matches_its_schema_with_every_state(cli_store: str):
    assert_valid(_json("status", "entry.py", *ALL_TENANTS, "--json"), "partition-status.v1.json")  # no store yet
    _run(*ALL_TENANTS, keys=True)
    document = _json("status", "entry.py", *ALL_TENANTS, "--json")
    assert document["schema"] == "partita.partition-status" and document["store_exists"] is True
    assert_valid(document, "partition-status.v1.json")
    states = {key["state"] for asset in document["assets"] for key in asset["keys"]}
    assert {"materialized", "failed", "missing"} <= states
    assert {asset["scope"]["kind"] for asset in document["assets"]} == {"keys", "unpartitioned"}
    # Without a selection a static domain covers its declared keys: listed on purpose (a status of one's own store).
    assert_valid(_json("status", "entry.py", "--json"), "partition-status.v1.json")
    drifted = json.loads(json.dumps(document))
    drifted["assets"][0]["keys"][0]["attempts"] = 1
    assert_invalid(drifted, "partition-status.v1.json")
    drifted = json.loads(json.dumps(document))
    drifted["assets"][0]["keys"][0]["state"] = "skipped"
    assert_invalid(drifted, "partition-status.v1.json")


LOGGING_ENTRY = """
from partita import Flow, LogCapture, StaticPartitionDef, asset

tenants = StaticPartitionDef("tenants", ["acme", "globex"])


@asset(partition_def=tenants)
def chatty(context) -> int:
    for number in range(5):
        context.logger.info("line %d", number)
    print("printed")
    try:
        raise KeyError("missing")
    except KeyError:
        context.logger.exception("failed lookup")
    return 1


flow = Flow(["chatty"], log_capture=LogCapture(output=True, head=2, tail=2))
"""


def test_attempt_logs_document_matches_its_schema_with_and_without_recorded_keys(cli_store: str):
    (Path.cwd() / "logging_entry.py").write_text(LOGGING_ENTRY)
    for keys in ([], ["--record-partition-keys"]):
        _json("run", "logging_entry.py", "--partition-key", "acme", "--partition-key", "globex", "--yes", "--json", *keys)
        document = _json("runs", "logs", _run_ids()[0], "--json")
        assert document["schema"] == "partita.attempt-logs"
        assert {line["stream"] for line in document["lines"]} == {"log", "stdout", "cut"}
        assert_valid(document, "attempt-logs.v1.json")
    assert {line["partition_key"] for line in document["lines"]} == {"acme", "globex"}
    plain = _json("runs", "logs", _run_ids()[1], "--json")
    assert {line["partition_key"] for line in plain["lines"]} == {None}
    assert_invalid({**document, "lines": [{**document["lines"][0], "stream": "other"}]}, "attempt-logs.v1.json")


def _run_ids() -> list[str]:
    return [run["run_id"] for run in _json("runs", "list", "--json")["runs"]]


def test_run_document_matches_its_schema_and_keeps_keys_only_when_recorded(cli_store: str):
    _run(*ALL_TENANTS)
    _run(*ALL_TENANTS, keys=True)
    keyed_id, plain_id = _run_ids()
    plain = _json("runs", "show", plain_id, "--json")
    assert plain["schema"] == "partita.run"
    assert plain["run"]["version"] == 4
    assert_valid(plain, "run.v1.json")
    assert SECRET not in json.dumps(plain)
    keyed = _json("runs", "show", keyed_id[:10], "--json")
    assert keyed["run"]["partition_keys_recorded"] is True
    assert_valid(keyed, "run.v1.json")
    assert SECRET in json.dumps(keyed)


def test_runs_compare_document_matches_its_schema(cli_store: str):
    _run(*ALL_TENANTS)
    _run("--partition-key", "acme")
    newer, older = _run_ids()
    document = _json("runs", "compare", older, newer, "--json")
    assert document["schema"] == "partita.runs-compare"
    assert document["status_changed"] is True
    assert_valid(document, "runs-compare.v1.json")
    assert_valid(_json("runs", "compare", newer, newer, "--json"), "runs-compare.v1.json")


def _running_run(url: str, run_id: str, *, pid: int | None = None) -> None:
    """A run's start recorded as this process (alive) or as ``pid``, as `partita run` records it."""
    import socket

    from partita.store import RunStart
    from partita.store.liveness import current_owner_token

    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def one() -> int:
        return 1

    with contextlib.closing(open_store(url)) as store:
        plan = p.Flow(["one"], registry=registry).plan()
        store.record_run_started(
            RunStart(
                run_id, dt.datetime.now(dt.UTC), plan.to_dict(), False, socket.gethostname(),
                os.getpid() if pid is None else pid, current_owner_token() if pid is None else "",
            )
        )  # fmt: skip


def test_run_cancel_document_matches_its_schema_for_every_outcome(cli_store: str):
    _run("--partition-key", "acme")
    [finished] = _run_ids()
    refused = _json("runs", "cancel", finished, "--json", code=2)
    assert (refused["schema"], refused["outcome"], refused["status"]) == ("partita.run-cancel", "finished", "success")
    assert_valid(refused, "run-cancel.v1.json")
    _running_run(cli_store, "a" * 32)
    requested = _json("runs", "cancel", "aaaa", "--json")
    assert (requested["run_id"], requested["outcome"], requested["wait"]) == ("a" * 32, "requested", None)
    assert_valid(requested, "run-cancel.v1.json")
    again = _json("runs", "cancel", "a" * 32, "--wait", "--timeout", "0", "--json", code=4)
    assert (again["outcome"], again["wait"]) == ("already_requested", {"timeout_seconds": 0, "timed_out": True})
    assert again["requested_at"] == requested["requested_at"]
    assert_valid(again, "run-cancel.v1.json")
    _running_run(cli_store, "b" * 32, pid=_dead_pid())
    gone = _json("runs", "cancel", "b" * 32, "--json", code=2)
    assert (gone["outcome"], gone["status"], gone["requested_at"]) == ("not_running", "interrupted", None)
    assert_valid(gone, "run-cancel.v1.json")
    assert_invalid({**requested, "outcome": "cancelled"}, "run-cancel.v1.json")
    assert_invalid({**requested, "owner": "x"}, "run-cancel.v1.json")


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_runs_compare_schema_accepts_assets_found_in_one_run_only(cli_store: str):
    _run(*ALL_TENANTS)
    (Path.cwd() / "other.py").write_text(ENTRY.replace('"month_end"]', '"ledger"]'))
    _json("run", "other.py", "--partition-key", "acme", "--yes", "--json")
    newer, older = _run_ids()
    document = _json("runs", "compare", older, newer, "--json")
    assert any(row["b"] is None for row in document["assets"])
    assert_valid(document, "runs-compare.v1.json")


@pytest.mark.parametrize(
    ("arguments", "code", "error_type"),
    [
        (["runs", "show", "no-such-run", "--json"], 2, "UnknownRunError"),
        (["plan", "entry.py", "--partition-key", "nobody", "--json"], 2, "SelectionError"),
        (["assets", "missing.py", "--json"], 3, "EntryLoadError"),
        (["runs", "list", "--store", "sqlite:///{tmp}", "--json"], 4, "StoreError"),
        (["events", "emit", "no_such_asset", "entry.py", "--json"], 2, "EmissionError"),
        (["events", "emit", "month_end", "entry.py", "--extra", "[1]", "--json"], 2, "EmissionError"),
        (["events", "list", "--store", "sqlite:///{tmp}", "--json"], 4, "StoreError"),
    ],
)
def test_error_document_matches_its_schema(
    cli_store: str, tmp_path: Path, arguments: list[str], code: int, error_type: str
):
    document = _json(*(argument.format(tmp=tmp_path) for argument in arguments), code=code)
    assert document["schema"] == "partita.error"
    assert document["error"]["type"] == error_type
    assert document["error"]["exit_code"] == code
    assert_valid(document, "error.v1.json")


# -- a run whose process was killed -----------------------------------------------

KILLED_ENTRY = """
import time

from partita import Flow, StaticPartitionDef, asset

parts = StaticPartitionDef("parts", ["quick", "stuck"])


@asset(partition_def=parts)
def work(context) -> str:
    if context.partition_key == "stuck":
        time.sleep(600)  # the test kills the process while this body runs
    return "done"


@asset
def report(work) -> int:  # waits for every key of work: it never starts before the kill
    return len(work)


flow = Flow(["report"])
"""


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.05)


def _stored_statuses(url: str) -> set[str]:
    store = open_store(url)
    try:
        found = store.list_runs(limit=1)
        if not found:
            return set()
        return {attempt.status for task in store.get_tasks(found[0].run_id) for attempt in task.attempts}
    finally:
        store.close()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and /proc liveness are POSIX")
def test_a_killed_runs_documents_match_their_schemas(cli_store: str, tmp_path: Path):
    (tmp_path / "killed.py").write_text(KILLED_ENTRY)
    command = [
        sys.executable,
        "-m",
        "partita",
        "run",
        "killed.py",
        "--partition-key",
        "quick",
        "--partition-key",
        "stuck",
        "--yes",
    ]
    child = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_until(
            lambda: child.poll() is not None or _stored_statuses(cli_store) == {"success", "running"},
            "one attempt finished and one is running",
        )
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
    finally:
        child.kill()
        child.wait(WAIT)
        if child.stderr:
            child.stderr.close()

    listed = _json("runs", "list", "--json")
    assert [run["status"] for run in listed["runs"]] == ["interrupted"]
    assert_valid(listed, "runs.v1.json")
    assert_valid(_json("runs", "list", "--status", "interrupted", "--json"), "runs.v1.json")
    shown = _json("runs", "show", listed["runs"][0]["run_id"], "--json")
    record = shown["run"]
    assert record["status"] == "interrupted"
    assert record["finished_at"] is None
    assert sorted(attempt["status"] for attempt in _attempts(record)) == ["interrupted", "success"]
    assert [task["status"] for task in record["tasks"]] == ["interrupted", "not_started"]
    assert_valid(shown, "run.v1.json")
    for version in RECORD_VERSIONS[:3]:
        store = open_store(cli_store)
        try:
            run = store.get_run(record["run_id"])
            older = render_record(run.header, store.get_tasks(run.run_id), version)
        finally:
            store.close()
        assert_valid(older, f"run-record.v{version}.json")
    _run("--partition-key", "acme")
    newest, killed = _run_ids()
    assert_valid(_json("runs", "compare", killed, newest, "--json"), "runs-compare.v1.json")


def test_timestamps_must_be_timezone_aware_iso_text(eventful_result: p.RunResult):
    record = eventful_result.to_record(version=1)
    assert_invalid({**record, "started_at": "2026-08-08T10:00:00"}, "run-record.v1.json")
    assert_invalid({**record, "started_at": "yesterday"}, "run-record.v1.json")


# -- materialization provenance (record v4) -----------------------------------------


def test_materialized_attempts_match_the_v4_schema_live_and_stored(tmp_path: Path):
    from partita.materialization import FileMaterialization

    registry = p.AssetRegistry()
    outputs = FileMaterialization(tmp_path / "outputs")

    @p.asset(partition_def=TENANTS, registry=registry, materialization=outputs, version="1")
    def balances(context) -> int:
        return 7

    url = f"sqlite:///{tmp_path}/history.db"
    flow = p.Flow(["balances"], registry=registry, store=url)
    executed = flow.run({"partition_keys": list(TENANTS.keys)})
    reused = flow.run({"partition_keys": list(TENANTS.keys)})
    first, second = executed.to_record(version=4), reused.to_record(version=4)
    assert {attempt["resolution"] for attempt in _attempts(first)} == {"executed"}
    assert {attempt["resolution"] for attempt in _attempts(second)} == {"materialized"}
    assert [a["materialization_id"] for a in _attempts(first)] == [a["materialization_id"] for a in _attempts(second)]
    for record in (first, second):
        assert_valid(record, "run-record.v4.json")
        assert SECRET not in json.dumps(record)
    plan = flow.plan({"partition_keys": list(TENANTS.keys)}).to_dict()
    assert plan["tasks"][0]["materialization"] == {"adapter": "FileMaterialization", "version": "1"}
    assert_valid(plan, "plan.v1.json")

    store = open_store(url)
    try:
        run = store.get_run(reused.run_id)
        stored = render_record(run.header, store.get_tasks(run.run_id), 4)
    finally:
        store.close()
    assert_valid(stored, "run-record.v4.json")
    assert {attempt["resolution"] for attempt in _attempts(stored)} == {"materialized"}
    broken = json.loads(json.dumps(second))
    broken["tasks"][0]["attempts"][0]["materialization_id"] = None
    assert_invalid(broken, "run-record.v4.json")


# -- asset events (SPEC §8) -----------------------------------------------------------

EVENTS_ENTRY = f"""
import datetime as dt

from partita import Flow, StaticPartitionDef, asset

tenants = StaticPartitionDef("tenants", [{SECRET!r}, "acme"])
berlin = dt.timezone(dt.timedelta(hours=2))


@asset(partition_def=tenants)
def statements_ready() -> None:
    pass


@asset
def incidents() -> None:
    pass


@asset(partition_def=tenants)
def statements(context) -> int:
    context.emit(
        "statements_ready",
        partition_key=context.partition_key,
        partition_date=dt.datetime(2026, 8, 8, tzinfo=berlin),
        extra={{"rows": 3, "files": ["a.csv"]}},
    )
    return 3


def report(context) -> None:
    context.emit("incidents", extra={{"run_id": context.run_id}})


flow = Flow(["statements"], on_complete=report)
"""


def _emission(*args: str) -> dict[str, Any]:
    document = _json("events", "emit", *args, "--json")
    assert document["schema"] == "partita.emission"
    assert_valid(document, "emission.v1.json")
    return document


@pytest.fixture
def events_store(cli_store: str) -> str:
    """A store with events of every kind a run or an outside producer publishes."""
    (Path.cwd() / "events.py").write_text(EVENTS_ENTRY)
    _json("run", "events.py", "--partition-key", SECRET, "--partition-key", "acme", "--yes", "--json")
    _emission("incidents", "events.py", "--extra", '{"ticket": 7}')
    _emission(
        "statements_ready",
        "events.py",
        "--partition-key",
        "acme",
        "--partition-date",
        "2026-08-09T00:00:00+00:00",
        "--dedupe-key",
        "acme-2026-08-09",
    )
    return cli_store


def test_events_document_matches_its_schema_for_every_source_kind(events_store: str):
    document = _json("events", "list", "--json")
    assert document["schema"] == "partita.events"
    assert_valid(document, "events.v1.json")
    kinds = [event["source"]["kind"] for event in document["events"]]
    assert sorted(set(kinds)) == ["attempt", "external", "flow", "outlet"]
    assert kinds.count("attempt") == 2 and kinds.count("outlet") == 2
    ids = [event["id"] for event in document["events"]]
    assert ids == sorted(ids)
    # The key is the routing pointer: events carry it as canonical text on purpose.
    assert SECRET in {event["partition_key"] for event in document["events"]}
    flow_source = next(event["source"] for event in document["events"] if event["source"]["kind"] == "flow")
    assert (flow_source["asset"], flow_source["partition_key_present"], flow_source["invocation"]) == (None, None, None)
    for arguments in (["--asset", "statements_ready"], ["--partition-key", "acme"], ["--since", "2", "--limit", "1"]):
        filtered = _json("events", "list", *arguments, "--json")
        assert filtered["events"]
        assert_valid(filtered, "events.v1.json")


def test_events_document_of_a_missing_store_is_empty_and_valid(cli_store: str):
    document = _json("events", "list", "--json")
    assert document["events"] == []
    assert_valid(document, "events.v1.json")
    assert not Path(cli_store.removeprefix("sqlite:///")).exists()  # reading creates no store


def test_events_schema_rejects_drift(events_store: str):
    document = _json("events", "list", "--json")
    by_kind = {event["source"]["kind"]: event for event in document["events"]}

    def with_event(event: dict[str, Any]) -> dict[str, Any]:
        return {**document, "events": [event]}

    attempt, flow = by_kind["attempt"], by_kind["flow"]
    assert_invalid(with_event({**flow, "source": {**flow["source"], "asset": "statements"}}), "events.v1.json")
    assert_invalid(with_event({**attempt, "source": {**attempt["source"], "invocation": None}}), "events.v1.json")
    assert_invalid(with_event({**attempt, "source": {**attempt["source"], "partition_key": "acme"}}), "events.v1.json")
    assert_invalid(with_event({**attempt, "source": {**attempt["source"], "kind": "sensor"}}), "events.v1.json")
    assert_invalid(with_event({**flow, "partition_date": "2026-08-08T00:00:00+00:00"}), "events.v1.json")
    assert_invalid(with_event({**attempt, "timestamp": "2026-08-08T00:00:00"}), "events.v1.json")
    assert_invalid(with_event({**attempt, "extra": [1]}), "events.v1.json")
    assert_invalid(with_event({**attempt, "dedupe_key": "x"}), "events.v1.json")


def test_emission_receipts_match_their_schema_and_a_repeat_is_a_duplicate(events_store: str):
    arguments = ("incidents", "events.py", "--extra", '{"ticket": 8}', "--dedupe-key", "ticket-8")
    first, again = _emission(*arguments), _emission(*arguments)
    assert first["receipt"]["duplicate"] is False
    assert again["receipt"] == {**first["receipt"], "duplicate": True}
    assert_invalid({**first, "receipt": {"id": 1, "timestamp": first["receipt"]["timestamp"]}}, "emission.v1.json")
    assert_invalid({**first, "receipt": {**first["receipt"], "asset": "incidents"}}, "emission.v1.json")
    assert_invalid({**first, "schema": "partita.events"}, "emission.v1.json")
    conflict = _json(
        "events",
        "emit",
        "incidents",
        "events.py",
        "--extra",
        '{"ticket": 9}',
        "--dedupe-key",
        "ticket-8",
        "--json",
        code=2,
    )
    assert conflict["error"]["type"] == "EmissionError"
    assert_valid(conflict, "error.v1.json")


def test_outlet_events_of_reused_outputs_match_the_events_schema(tmp_path: Path):
    from partita.materialization import FileMaterialization

    registry = p.AssetRegistry()

    @p.asset(
        partition_def=TENANTS, registry=registry, materialization=FileMaterialization(tmp_path / "out"), version="1"
    )
    def balances(context) -> int:
        return 7

    url = f"sqlite:///{tmp_path}/events.db"
    flow = p.Flow(["balances"], registry=registry, store=url)
    executed, reused = flow.run({"partition_keys": ["acme"]}), flow.run({"partition_keys": ["acme"]})
    store = open_store(url)
    try:
        outlets = [event.to_dict() for event in store.list_events(asset="balances")]
    finally:
        store.close()
    assert [event["source"]["run_id"] for event in outlets] == [executed.run_id, reused.run_id]
    assert [event["source"]["invocation"] for event in outlets] == [1, None]  # reused: the body was not invoked
    assert all(set(event["extra"]) == {"materialization_id"} for event in outlets)
    assert_valid({"schema": "partita.events", "version": 1, "store": url, "events": outlets}, "events.v1.json")


# -- partitions discovered at run time (SPEC §9) -------------------------------------


def _runtime_flow(**options: Any) -> p.Flow:
    """A producer discovering three tenants, two fanned-out assets, an unpartitioned total."""
    registry = p.AssetRegistry()
    tenants = p.PartitionAtRuntime("tenants", max_keys=10)

    @p.asset(partition_def=tenants, registry=registry)
    def discover(context) -> dict[str, int]:
        context.partition_keys = [p.PartitionKey(key, extra={"seats": 3}) for key in (SECRET, "acme", "globex")]
        return {SECRET: 3, "acme": 5, "globex": 8}

    @p.asset(partition_def=tenants, registry=registry, resource="billing")
    def usage(discover: int) -> int:
        return discover * 30

    @p.asset(partition_def=tenants, registry=registry)
    def invoice(usage: int) -> int:
        return usage // 3

    @p.asset(registry=registry)
    def total(invoice: dict) -> int:
        return sum(invoice.values())

    return p.Flow(
        ["total"],
        registry=registry,
        resources={"billing": p.ResourcePolicy(max_concurrency=2)},
        partition_groups=[p.PartitionGroup(["usage", "invoice"])],
        **options,
    )


RUNTIME_PLAN_CASES: dict[str, dict[str, Any] | None] = {
    "discover": None,
    "narrowed to explicit keys": {"partition_keys": ["acme", "initech"]},
    "deliberately empty": {"empty_partitions": True},
}


@pytest.mark.parametrize("case", sorted(RUNTIME_PLAN_CASES))
def test_runtime_plan_documents_match_the_plan_schema(case: str):
    document = _runtime_flow().plan(RUNTIME_PLAN_CASES[case]).to_dict()
    assert_valid(document, "plan.v1.json")
    assert document["selection"]["domain"] == "runtime:tenants"
    assert document["selection"]["runtime"]["producer"] == "discover"
    assert document["selection"]["runtime"]["max_keys"] == 10
    assert "acme" not in json.dumps(document)  # explicit keys are counted, never listed


def test_a_discover_plan_has_unknown_counts_and_marks_the_producer():
    document = _runtime_flow().plan().to_dict()
    assert document["selection"] == {
        "kind": "discover",
        "domain": "runtime:tenants",
        "key_count": None,
        "runtime": {"producer": "discover", "keys_known_at": "run time", "max_keys": 10},
    }
    assert document["attempt_count"] is None
    counts = {task["name"]: (task["attempt_count"], task.get("discovers")) for task in document["tasks"]}
    assert counts == {"discover": (1, True), "usage": (None, None), "invoice": (None, None), "total": (1, None)}
    partition = document["tasks"][0]["partition"]
    assert (partition["kind"], partition["max_keys"], partition["allowed"]) == ("runtime", 10, None)


def test_a_narrowed_runtime_plan_counts_the_selected_keys():
    document = _runtime_flow().plan({"partition_keys": ["acme", "initech"]}).to_dict()
    assert document["selection"]["kind"] == "keys"
    assert document["selection"]["key_count"] == 2
    assert document["selection"]["runtime"]["keys_known_at"] == "plan time"
    assert document["attempt_count"] == 1 + 2 + 2 + 1  # the producer still runs and discovers
    assert document["tasks"][0]["discovers"] is True


def test_plan_schema_rejects_runtime_drift():
    discover = _runtime_flow().plan().to_dict()
    narrowed = _runtime_flow().plan({"partition_keys": ["acme"]}).to_dict()
    selection, runtime = discover["selection"], discover["selection"]["runtime"]
    producer, fanned_out = discover["tasks"][0], discover["tasks"][1]
    assert_invalid({**discover, "selection": {**selection, "key_count": 3}}, "plan.v1.json")
    assert_invalid({**discover, "selection": {**selection, "domain": "date"}}, "plan.v1.json")
    assert_invalid({**discover, "selection": {**selection, "runtime": {**runtime, "keys": ["acme"]}}}, "plan.v1.json")
    assert_invalid(
        {**discover, "selection": {**selection, "runtime": {**runtime, "keys_known_at": "plan time"}}}, "plan.v1.json"
    )
    assert_invalid({**discover, "selection": {**selection, "runtime": {**runtime, "max_keys": 0}}}, "plan.v1.json")
    assert_invalid({**discover, "tasks": [{**producer, "discovers": False}, *discover["tasks"][1:]]}, "plan.v1.json")
    assert_invalid({**discover, "tasks": [{**producer, "attempt_count": None}, *discover["tasks"][1:]]}, "plan.v1.json")
    assert_invalid({**discover, "tasks": [producer, {**fanned_out, "attempt_count": -1}]}, "plan.v1.json")
    assert_invalid({**narrowed, "selection": {**narrowed["selection"], "key_count": None}}, "plan.v1.json")
    narrowed_runtime = {**narrowed["selection"]["runtime"], "keys_known_at": "run time"}
    assert_invalid({**narrowed, "selection": {**narrowed["selection"], "runtime": narrowed_runtime}}, "plan.v1.json")
    unpartitioned = {"kind": "unpartitioned", "domain": None, "key_count": 0, "runtime": runtime}
    assert_invalid({**discover, "selection": unpartitioned}, "plan.v1.json")


def test_discovering_runs_match_the_record_and_history_schemas(tmp_path: Path):
    url = f"sqlite:///{tmp_path}/runtime.db"
    flow = _runtime_flow(store=url)
    discovered, narrowed = flow.run(), flow.run({"partition_keys": ["acme", "initech"]})
    assert discovered.discovered_partition_keys("discover") == (SECRET, "acme", "globex")
    for result in (discovered, narrowed):
        for version in RECORD_VERSIONS:
            record = result.to_record(version=version)
            assert_valid(record, f"run-record.v{version}.json")
            assert SECRET not in json.dumps(record)
    assert discovered.to_record(version=4)["tasks"][0]["discovered_key_count"] == 3
    store = open_store(url)
    try:
        stored_runs = store.list_runs(limit=5)
        for run in stored_runs:
            stored = render_record(run.header, store.get_tasks(run.run_id), 4)
            assert_valid(stored, "run-record.v4.json")
            assert SECRET not in json.dumps(stored)
    finally:
        store.close()
    assert [run.run_id for run in stored_runs] == [narrowed.run_id, discovered.run_id]


RUNTIME_ENTRY = """
import json
from pathlib import Path

from partita import Flow, PartitionAtRuntime, PartitionKey, asset

tenants = PartitionAtRuntime("tenants", max_keys=10)


@asset(partition_def=tenants)
def discover(context) -> None:
    # The test edits tenants.json between runs: the set evolves without code changes.
    for key in json.loads(Path("tenants.json").read_text()):
        context.add_partition(PartitionKey(key, extra={"source": "tenants.json"}))


@asset(partition_def=tenants)
def usage(context, discover: None) -> str:
    return context.partition_key


flow = Flow(["usage"])
"""


def _tenants(*keys: str) -> None:
    (Path.cwd() / "tenants.json").write_text(json.dumps(list(keys)))


@pytest.fixture
def runtime_entry(cli_store: str) -> str:
    (Path.cwd() / "runtime.py").write_text(RUNTIME_ENTRY)
    return cli_store


def _known(*args: str) -> dict[str, dict[str, Any]]:
    document = _json("partitions", "runtime.py", "--domain", "tenants", *args, "--json")
    assert document["schema"] == "partita.partitions"
    assert document["domain"] == "runtime:tenants"
    assert_valid(document, "partitions.v1.json")
    return {entry["key"]: entry for entry in document["keys"]}


def test_the_registry_listing_matches_the_partitions_schema_as_keys_evolve(runtime_entry: str):
    assert _known() == {}  # no store yet: an empty, valid listing
    assert not Path(runtime_entry.removeprefix("sqlite:///")).exists()  # reading creates no store
    _tenants("acme", "globex")
    first_run = _json("run", "runtime.py", "--yes", "--json")
    assert_valid(first_run, "run-result.v1.json")
    assert first_run["plan"]["selection"]["kind"] == "discover"
    known = _known()
    assert {key: entry["state"] for key, entry in known.items()} == {"acme": "active", "globex": "active"}
    assert known["acme"]["first_seen"] == known["acme"]["last_seen"]
    assert known["acme"]["last_run_id"] == first_run["result"]["run_id"]

    retired = _json("partitions", "retire", "tenants", "globex", "--json")
    assert retired["schema"] == "partita.partition-retired"
    assert (retired["domain"], retired["partition"]["key"], retired["partition"]["state"]) == (
        "runtime:tenants",
        "globex",
        "retired",
    )
    assert_valid(retired, "partition-retired.v1.json")
    again = _json("partitions", "retire", "runtime:tenants", "globex", "--json")  # no change the second time
    assert again == retired

    _tenants("acme", "initech")
    _json("run", "runtime.py", "--yes", "--json")
    known = _known()
    assert {key: entry["state"] for key, entry in known.items()} == {
        "acme": "active",
        "globex": "retired",
        "initech": "active",
    }
    assert known["globex"]["last_seen"] == retired["partition"]["last_seen"]  # not discovered since
    assert known["acme"]["last_seen"] > known["acme"]["first_seen"]

    _tenants("acme", "globex", "initech")
    _json("run", "runtime.py", "--yes", "--json")
    back = _known()["globex"]
    assert back["state"] == "active"
    assert back["retired_at"] == retired["partition"]["retired_at"]  # the last retirement is kept
    assert back["reactivated_at"] is not None
    assert_valid(_json("runs", "list", "--json"), "runs.v1.json")  # discovering runs have no planned count
    events = _json("events", "list", "--asset", "discover", "--json")
    assert_valid(events, "events.v1.json")
    keys_per_run = [["acme", "globex"], ["acme", "initech"], ["acme", "globex", "initech"]]
    assert [event["partition_key"] for event in events["events"]] == [key for keys in keys_per_run for key in keys]
    assert {event["source"]["kind"] for event in events["events"]} == {"discovery"}  # no outlet for the producer
    assert {json.dumps(event["extra"]) for event in events["events"]} == {'{"source": "tenants.json"}'}


def test_partitions_schemas_reject_registry_drift(runtime_entry: str):
    _tenants("acme")
    _json("run", "runtime.py", "--yes", "--json")
    listing = _json("partitions", "runtime.py", "--domain", "tenants", "--json")
    entry = listing["keys"][0]
    retired = _json("partitions", "retire", "tenants", "acme", "--json")

    def with_entry(changed: dict[str, Any]) -> dict[str, Any]:
        return {**listing, "keys": [changed]}

    assert_invalid(with_entry({**entry, "state": "gone"}), "partitions.v1.json")
    assert_invalid(with_entry({**entry, "state": "retired"}), "partitions.v1.json")  # retired without a time
    assert_invalid(with_entry({**entry, "run_ids": []}), "partitions.v1.json")
    assert_invalid(with_entry({**entry, "first_seen": "2026-08-08T10:00:00"}), "partitions.v1.json")
    assert_invalid({**listing, "domain": "date"}, "partitions.v1.json")
    assert_invalid({**listing, "assets": []}, "partitions.v1.json")  # one form or the other, not both
    assert_invalid({**retired, "partition": {**retired["partition"], "state": "active"}}, "partition-retired.v1.json")
    assert_invalid({**retired, "schema": "partita.partitions"}, "partition-retired.v1.json")
    assert_invalid(retired, "partitions.v1.json")


@pytest.mark.parametrize(
    ("arguments", "code", "error_type"),
    [
        (["partitions", "retire", "tenants", "nobody", "--json"], 2, "UnknownPartitionError"),
        (["partitions", "runtime.py", "--domain", "regions", "--json"], 2, "ConfigurationError"),
    ],
)
def test_registry_errors_match_the_error_schema(runtime_entry: str, arguments: list[str], code: int, error_type: str):
    _tenants("acme")
    _json("run", "runtime.py", "--yes", "--json")
    document = _json(*arguments, code=code)
    assert document["error"]["type"] == error_type
    assert_valid(document, "error.v1.json")


def test_runs_and_run_documents_with_launch_metadata_and_tags_match_their_schemas(cli_store: str):
    _run("--partition-key", "acme", "--tag", "team=data", "--tag", "ticket=OPS-12")
    listed = _json("runs", "list", "--json", "--tag", "team=data")
    (summary,) = listed["runs"]
    assert (summary["launched_by"], summary["tags"]) == ("cli", {"team": "data", "ticket": "OPS-12"})
    assert_valid(listed, "runs.v1.json")
    shown = _json("runs", "show", summary["run_id"], "--json")
    assert_valid(shown, "run.v1.json")
    wrong = json.loads(json.dumps(shown))
    wrong["launched_by"] = "cron"
    assert_invalid(wrong, "run.v1.json")
    compared = _json("runs", "compare", summary["run_id"], summary["run_id"], "--json")
    assert_valid(compared, "runs-compare.v1.json")
