"""``partita events list`` and ``partita events emit`` (SPEC §8, §13, §14).

``events list`` reads the event log oldest first, filtered by ``--asset``,
``--partition-key``, ``--since ID`` and ``--limit N``; ``--json`` prints one
``partita.events`` version 1 document with the documented event shape. A
missing store lists nothing and is not created. ``events emit ASSET ENTRY``
publishes an ``external`` event validated against the entry's definitions:
key, date, extra and dedupe key are stored as given, a repeated dedupe key
is reported as a duplicate, bad input exits 2 without repeating the raw key,
and an entry that cannot be loaded exits 3.
"""

from __future__ import annotations

import datetime as dt
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import partita as p
from partita.cli.main import cli
from partita.events.emission import MAX_EXTRA_BYTES

SECRET_TENANT = "tenant-secret-zq5512"
EVENT_KEYS = {"id", "asset", "partition_key", "partition_date", "extra", "timestamp", "source"}
SOURCE_KEYS = {"kind", "run_id", "asset", "partition_key_present", "invocation"}

ENTRY = """
from partita import DatePartitionDef, StaticPartitionDef, asset

@asset(partition_def=DatePartitionDef())
def daily():
    return 1

@asset(partition_def=StaticPartitionDef("tenants", ["acme-private-7731", "globex-private-8842"]))
def tenant_export():
    return 1

@asset
def plain():
    return 1
"""

EMITTING_ENTRY = """
from partita import Flow, StaticPartitionDef, asset, emit

@asset
def announced():
    return 1

@asset(partition_def=StaticPartitionDef("tenants", ["acme-private-7731"]))
def producer(context):
    emit("announced", extra={"rows": 7})
    return 1

def on_complete(context):
    context.emit("announced", extra={"run": "complete"})

flow = Flow(["producer"], on_complete=on_complete)
"""


@pytest.fixture
def entry(tmp_path: Path) -> str:
    (tmp_path / "entry.py").write_text(textwrap.dedent(ENTRY))
    return "entry.py"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/events.db"


def _cli(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _document(outcome: Any) -> dict[str, Any]:
    assert outcome.exit_code == 0, outcome.output
    return json.loads(outcome.stdout)


def _registry() -> p.AssetRegistry:
    registry = p.AssetRegistry()
    for name, definition in (
        ("daily", p.DatePartitionDef()),
        ("tenant_export", p.StaticPartitionDef("tenants", ["acme-private-7731", "globex-private-8842"])),
        ("plain", None),
    ):
        p.asset(name=name, partition_def=definition, registry=registry)(lambda: 1)
    return registry


def _seed(url: str) -> list[p.EmissionReceipt]:
    """Six external events over three assets, in a known order."""
    registry = _registry()
    store = p.open_store(url)
    try:
        return [
            p.publish_event(store, registry, "daily", partition_key="2026-08-08", extra={"n": 1}),
            p.publish_event(store, registry, "plain", extra={"n": 2}),
            p.publish_event(store, registry, "daily", partition_key="2026-08-09", extra={"n": 3}),
            p.publish_event(store, registry, "tenant_export", partition_key="acme-private-7731", extra={"n": 4}),
            p.publish_event(store, registry, "daily", partition_key="2026-08-08", extra={"n": 5}),
            p.publish_event(
                store,
                registry,
                "daily",
                partition_key="2026-08-10",
                partition_date=dt.datetime(2026, 8, 10, tzinfo=dt.UTC),
                extra={"n": 6},
            ),
        ]
    finally:
        store.close()


def _stored(url: str) -> list[p.AssetEvent]:
    store = p.open_store(url)
    try:
        return store.list_events()
    finally:
        store.close()


def _listed(url: str, *options: str) -> list[int]:
    """The ``n`` of every listed event, in listed order."""
    document = _document(_cli("events", "list", "--store", url, "--json", *options))
    return [event["extra"]["n"] for event in document["events"]]


# -- events list --------------------------------------------------------------------------------------


def test_list_filters_by_asset_key_since_and_limit(store_url):
    receipts = _seed(store_url)

    assert _listed(store_url) == [1, 2, 3, 4, 5, 6]
    assert _listed(store_url, "--asset", "daily") == [1, 3, 5, 6]
    assert _listed(store_url, "--partition-key", "2026-08-08") == [1, 5]
    assert _listed(store_url, "--asset", "tenant_export", "--partition-key", "acme-private-7731") == [4]
    assert _listed(store_url, "--since", str(receipts[2].id)) == [4, 5, 6]
    assert _listed(store_url, "--limit", "2") == [1, 2]
    assert _listed(store_url, "--asset", "daily", "--since", str(receipts[0].id), "--limit", "2") == [3, 5]
    assert _listed(store_url, "--since", str(receipts[-1].id)) == []
    assert _listed(store_url, "--asset", "no_such_asset") == []


def test_list_json_is_one_partita_events_document_with_the_documented_shape(store_url):
    receipts = _seed(store_url)

    document = _document(_cli("events", "list", "--store", store_url, "--json"))

    assert document["schema"] == "partita.events"
    assert document["version"] == 1
    events = document["events"]
    assert [event["id"] for event in events] == [receipt.id for receipt in receipts]
    for event, receipt in zip(events, receipts, strict=True):
        assert set(event) == EVENT_KEYS
        assert set(event["source"]) == SOURCE_KEYS
        assert dt.datetime.fromisoformat(event["timestamp"]) == receipt.timestamp
        assert event["source"] == {
            "kind": "external",
            "run_id": None,
            "asset": None,
            "partition_key_present": None,
            "invocation": None,
        }
    assert events[0]["asset"] == "daily" and events[0]["partition_key"] == "2026-08-08"
    assert events[1]["partition_key"] is None and events[1]["partition_date"] is None
    assert events[5]["partition_date"] == "2026-08-10T00:00:00+00:00"
    assert events[5]["extra"] == {"n": 6}


def test_list_json_shows_run_provenance_for_bodies_callbacks_and_outlets(tmp_path: Path, store_url):
    (tmp_path / "emitting.py").write_text(textwrap.dedent(EMITTING_ENTRY))
    ran = _cli("run", "emitting.py", "--yes", "--store", store_url, "--partition-key", "acme-private-7731")
    assert ran.exit_code == 0, ran.output

    events = _document(_cli("events", "list", "--store", store_url, "--json"))["events"]

    by_kind = {event["source"]["kind"]: event for event in events}
    assert sorted(by_kind) == ["attempt", "flow", "outlet"]
    run_id = by_kind["attempt"]["source"]["run_id"]
    assert by_kind["attempt"]["asset"] == "announced"
    assert by_kind["attempt"]["extra"] == {"rows": 7}
    assert by_kind["attempt"]["source"] == {
        "kind": "attempt",
        "run_id": run_id,
        "asset": "producer",
        "partition_key_present": True,
        "invocation": 1,
    }
    assert by_kind["flow"]["source"] == {
        "kind": "flow",
        "run_id": run_id,
        "asset": None,
        "partition_key_present": None,
        "invocation": None,
    }
    assert by_kind["outlet"]["asset"] == "producer"
    assert by_kind["outlet"]["partition_key"] == "acme-private-7731"


def test_list_prints_a_table_of_events(url):
    _seed(url)

    outcome = _cli("events", "list", "--store", url, "--asset", "tenant_export")

    assert outcome.exit_code == 0, outcome.output
    assert "tenant_export" in outcome.stdout
    assert "external" in outcome.stdout
    assert "daily" not in outcome.stdout

    nothing = _cli("events", "list", "--store", url, "--asset", "no_such_asset")
    assert nothing.exit_code == 0
    assert "No matching events" in nothing.stdout


@pytest.mark.parametrize("json_output", [False, True], ids=["table", "json"])
def test_list_on_a_missing_store_shows_nothing_and_creates_no_file(tmp_path: Path, json_output):
    flag = ["--json"] if json_output else []
    missing = tmp_path / "nowhere" / "events.db"

    default = _cli("events", "list", *flag)
    explicit = _cli("events", "list", "--store", f"sqlite:///{missing}", *flag)

    for outcome in (default, explicit):
        assert outcome.exit_code == 0, outcome.output
        if json_output:
            document = json.loads(outcome.stdout)
            assert document["schema"] == "partita.events" and document["events"] == []
        else:
            assert "No matching events" in outcome.stdout
    assert not (tmp_path / ".partita").exists()
    assert not missing.exists() and not missing.parent.exists()


@pytest.mark.parametrize("option", [["--limit", "0"], ["--since", "-1"], ["--limit", "many"]])
def test_list_rejects_bad_bounds_as_usage_errors(url, option):
    _seed(url)

    outcome = _cli("events", "list", "--store", url, *option)

    assert outcome.exit_code == 2


# -- events emit ---------------------------------------------------------------------------------------


def test_emit_publishes_key_date_extra_and_dedupe_key(entry, store_url):
    outcome = _cli(
        "events",
        "emit",
        "daily",
        entry,
        "--partition-key",
        "2026-08-08",
        "--partition-date",
        "2026-08-08T02:00:00+02:00",
        "--extra",
        '{"rows": 100, "path": "s3://bucket/2026-08-08"}',
        "--dedupe-key",
        "upload-2026-08-08",
        "--store",
        store_url,
        "--json",
    )

    document = _document(outcome)
    assert document["schema"] == "partita.emission" and document["version"] == 1
    receipt = document["receipt"]
    assert receipt["duplicate"] is False
    (event,) = _stored(store_url)
    assert event.id == receipt["id"]
    assert event.timestamp == dt.datetime.fromisoformat(receipt["timestamp"])
    assert (event.asset, event.partition_key) == ("daily", "2026-08-08")
    assert event.partition_date == dt.datetime(2026, 8, 8, tzinfo=dt.UTC)
    assert event.partition_date.utcoffset() == dt.timedelta(hours=2)
    assert event.extra == {"rows": 100, "path": "s3://bucket/2026-08-08"}
    assert event.source.kind is p.SourceKind.EXTERNAL


def test_emit_repeated_with_its_dedupe_key_is_reported_as_a_duplicate(entry, url):
    args = ["events", "emit", "tenant_export", entry, "--partition-key", "acme-private-7731", "--dedupe-key", "d-1"]

    first = _document(_cli(*args, "--store", url, "--json"))["receipt"]
    again = _cli(*args, "--store", url)
    repeated = _document(_cli(*args, "--store", url, "--json"))["receipt"]

    assert again.exit_code == 0, again.output
    assert "duplicate" in again.stdout and str(first["id"]) in again.stdout
    assert repeated == {**first, "duplicate": True}
    assert len(_stored(url)) == 1


def test_emit_without_a_dedupe_key_publishes_every_time(entry, url):
    for _ in range(2):
        outcome = _cli("events", "emit", "plain", entry, "--store", url)
        assert outcome.exit_code == 0, outcome.output
        assert "published" in outcome.stdout

    assert len(_stored(url)) == 2


def test_emit_validates_against_the_entrys_own_definitions(tmp_path: Path, url):
    (tmp_path / "other.py").write_text("from partita import asset\n\n@asset\ndef unrelated():\n    return 1\n")

    outcome = _cli("events", "emit", "plain", "other.py", "--store", url)

    assert outcome.exit_code == 2
    assert "is not registered" in outcome.output


BAD_EMIT = {
    "unknown asset": (["no_such_asset"], "is not registered"),
    "key for an unpartitioned asset": (["plain", "--partition-key", SECRET_TENANT], "is not partitioned"),
    "no key for a partitioned asset": (["tenant_export"], "pass partition_key explicitly"),
    "key rejected by its definition": (
        ["tenant_export", "--partition-key", SECRET_TENANT],
        "rejected by its definition",
    ),
    "non-canonical date key": (["daily", "--partition-key", "2026-8-8-zq771"], "rejected by its definition"),
    "naive partition date": (
        ["daily", "--partition-key", "2026-08-08", "--partition-date", "2026-08-08T00:00:00"],
        "UTC offset",
    ),
    "partition date that is not ISO": (
        ["daily", "--partition-key", "2026-08-08", "--partition-date", "next tuesday"],
        "--partition-date must be an ISO 8601",
    ),
    "partition date without a key": (
        ["plain", "--partition-date", "2026-08-08T00:00:00+00:00"],
        "partition_date requires a partition_key",
    ),
    "extra that is a list": (["plain", "--extra", "[1, 2]"], "JSON object"),
    "extra that is a string": (["plain", "--extra", '"rows"'], "JSON object"),
    "extra that is not JSON": (["plain", "--extra", "{rows: 1}"], "--extra must be a JSON object"),
    "extra holding NaN": (["plain", "--extra", '{"rows": NaN}'], "--extra must be a JSON object"),
    "extra holding Infinity": (["plain", "--extra", '{"rows": [1, -Infinity]}'], "--extra must be a JSON object"),
    "oversized extra": (["plain", "--extra", json.dumps({"pad": "x" * MAX_EXTRA_BYTES})], "the limit is"),
    "dedupe key with a control character": (["plain", "--dedupe-key", "batch\n41"], "dedupe_key must be"),
}


@pytest.mark.parametrize("case", list(BAD_EMIT), ids=list(BAD_EMIT))
def test_emit_bad_input_exits_2_naming_the_rule(entry, url, case):
    arguments, rule = BAD_EMIT[case]
    asset_name, *options = arguments

    outcome = _cli("events", "emit", asset_name, entry, *options, "--store", url)
    as_json = _cli("events", "emit", asset_name, entry, *options, "--store", url, "--json")

    assert outcome.exit_code == 2, outcome.output
    assert rule in " ".join(outcome.stderr.split())
    assert "Traceback" not in outcome.output
    assert SECRET_TENANT not in outcome.output and "2026-8-8-zq771" not in outcome.output
    assert as_json.exit_code == 2
    document = json.loads(as_json.stdout)
    assert document["schema"] == "partita.error"
    assert document["error"]["exit_code"] == 2
    assert SECRET_TENANT not in as_json.stdout
    assert _stored(url) == []


def test_emit_with_a_dedupe_key_reused_for_another_payload_exits_2(entry, url):
    first = _cli("events", "emit", "plain", entry, "--extra", '{"rows": 1}', "--dedupe-key", "d-1", "--store", url)
    assert first.exit_code == 0, first.output

    conflict = _cli("events", "emit", "plain", entry, "--extra", '{"rows": 2}', "--dedupe-key", "d-1", "--store", url)

    assert conflict.exit_code == 2
    assert "dedupe_key was already used for a different event" in " ".join(conflict.stderr.split())
    assert [event.extra for event in _stored(url)] == [{"rows": 1}]


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("missing.py", None),
        ("broken.py", "def oops(:\n"),
        ("raising.py", "raise RuntimeError('cannot configure')\n"),
        ("no_such_package_zq.module:flow", None),
    ],
    ids=["missing file", "syntax error", "raises while loading", "unimportable module"],
)
def test_emit_with_an_entry_that_cannot_be_loaded_exits_3(tmp_path: Path, url, name, source):
    if source is not None:
        (tmp_path / name).write_text(source)

    outcome = _cli("events", "emit", "plain", name, "--store", url)
    as_json = _cli("events", "emit", "plain", name, "--store", url, "--json")

    assert outcome.exit_code == 3, outcome.output
    assert as_json.exit_code == 3
    assert json.loads(as_json.stdout)["error"]["exit_code"] == 3
    assert not Path(url.removeprefix("sqlite:///")).exists() or _stored(url) == []
