"""`partita status ENTRY`: counts per state and a grid that fits 80 columns, piped or not (issue 14, item 3)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from partita.events.emission import payload_hash
from partita.events.model import EventDraft, EventSource, SourceKind
from partita.store import open_store
from partita.store.sql import SqlStore

DAILY = """
FAIL = {"2026-08-09"}


@asset(partition_def=DatePartitionDef(start="2026-08-01"))
def extract(context):
    if context.partition_key.isoformat() in FAIL:
        raise ValueError("source unavailable")
    return 1


@asset(partition_def=DatePartitionDef(start="2026-08-01"))
def transform(context, extract):
    return extract


@asset
def report(transform):
    return 1


flow = Flow(["transform"])
"""

MIXED = """
regions = StaticPartitionDef("regions", ["eu", "us", "apac"])


@asset(partition_def=DatePartitionDef())
def daily(context):
    return 1


@asset(partition_def=regions)
def regional(context):
    return 1


flow = Flow(["daily", "regional"])
"""

ANSI = re.compile(r"\x1b\[")
WAIT = 30.0  # seconds a wait for work may take before the test fails


def _store_url() -> str:
    return os.environ["PARTITA_STORE"]


def _run(invoke, path: str, *selection: str) -> None:
    invoke("run", path, *selection, "--yes", "--record-partition-keys")


def test_status_prints_counts_and_a_month_calendar_that_reads_without_colour(invoke, write_entry):
    path = write_entry(DAILY)
    _run(invoke, path, "--partition-range", "2026-08-08", "2026-08-10")

    result = invoke("status", path, "--partition-range", "2026-08-01", "2026-09-03")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "extract (date): 34 keys, --partition-range 2026-08-01 .. 2026-09-03" in lines
    assert "  # materialized 2  x failed 1  > running 0  . missing 31" in lines
    assert "  month    1234567890123456789012345678901" in lines
    assert "  2026-08  .......#x#....................." in lines
    assert "  2026-09  ..." in lines
    assert "  # materialized 0  x failed 0  > running 0  . missing 1" not in lines
    assert any(line.startswith("legend: # materialized") for line in lines)
    assert not ANSI.search(result.stdout) and all(len(line) <= 80 for line in lines)


def test_the_flows_unpartitioned_asset_reports_its_one_outcome(invoke, write_entry):
    path = write_entry(DAILY.replace('Flow(["transform"])', 'Flow(["report"])'))
    _run(invoke, path, "--partition-key", "2026-08-08")

    result = invoke("status", path, "--asset", "report")

    assert result.exit_code == 0, result.output
    assert "report (unpartitioned)" in result.stdout
    assert re.search(r"  # materialized, last success \S+ \S+Z in run [0-9a-f]{32}", result.stdout)


def test_hourly_keys_draw_hours_by_day(invoke, write_entry):
    path = write_entry("""
        @asset(partition_def=HourlyPartitionDef())
        def meter(context):
            return 1

        flow = Flow(["meter"])
        """)
    invoke("run", path, "--partition-range", "2026-10-25T00", "2026-10-25T05", "--yes")

    result = invoke("status", path, "--partition-range", "2026-10-24T00", "2026-10-25T23")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "  day         00     06     12     18" in lines
    assert "  2026-10-24  ...... ...... ...... ......" in lines
    assert "  2026-10-25  ###### ...... ...... ......" in lines


def test_monthly_keys_draw_months_by_year(invoke, write_entry):
    path = write_entry("""
        @asset(partition_def=MonthlyPartitionDef())
        def ledger(context):
            return 1

        flow = Flow(["ledger"])
        """)
    invoke("run", path, "--partition-key", "2026-03", "--yes")

    result = invoke("status", path, "--partition-range", "2025-11", "2026-04")

    assert "  year  JFMAMJJASOND" in result.stdout.splitlines()
    assert "  2025            .." in result.stdout.splitlines()
    assert "  2026  ..#." in result.stdout.splitlines()


def test_static_keys_are_listed_with_their_symbols(invoke, write_entry):
    path = write_entry(MIXED)
    invoke("run", path, "--target", "regional", "--partition-key", "eu", "--yes")

    result = invoke("status", path, "--asset", "regional")

    assert result.exit_code == 0, result.output
    assert "regional (static:regions): 3 keys, every declared key of static:regions" in result.stdout
    assert "  # eu   . us   . apac" in result.stdout.splitlines()


def _outlets(url: str, asset: str, keys: list[str]) -> None:
    store = open_store(url)
    try:
        for key in keys:
            source = EventSource(SourceKind.OUTLET, "r" * 32, asset, True, 1)
            store.record_event(
                EventDraft(asset, key, None, {}, source, None, payload_hash(asset, key, None, {}), dt.datetime.now(dt.UTC))
            )
    finally:
        store.close()


def test_a_hundred_thousand_keys_aggregate_into_ranges_of_equal_state(invoke, write_entry):
    path = write_entry("""
        @asset(partition_def=DatePartitionDef())
        def history(context):
            return 1

        flow = Flow(["history"])
        """)
    first = dt.date(1800, 1, 1)
    days = [(first + dt.timedelta(days=offset)).isoformat() for offset in range(100_000)]
    _outlets(_store_url(), "history", [days[index] for index in range(0, 100_000, 2000)][:30] + days[50_001:50_011])

    result = invoke("status", path, "--partition-range", days[0], days[-1])

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "  # materialized 40  x failed 0  > running 0  . missing 99,960" in lines
    assert f"  # {days[0]}  materialized, 1 key" in lines
    assert f"  . {days[1]} .. {days[1999]}  missing, 1,999 keys" in lines
    assert any("more ranges; --json lists every key" in line for line in lines)
    assert len(lines) < 40 and all(len(line) <= 80 for line in lines)


def test_json_lists_every_key_and_matches_its_schema(invoke, write_entry):
    path = write_entry(DAILY)
    _run(invoke, path, "--partition-range", "2026-08-08", "2026-08-10")

    result = invoke("status", path, "--asset", "extract", "--partition-range", "2026-08-08", "2026-08-10", "--json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["schema"] == "partita.partition-status" and document["store_exists"] is True
    (extract,) = document["assets"]
    assert extract["counts"] == {"materialized": 2, "failed": 1, "running": 0, "missing": 0}
    assert [(key["key"], key["state"]) for key in extract["keys"]] == [
        ("2026-08-08", "materialized"), ("2026-08-09", "failed"), ("2026-08-10", "materialized"),
    ]  # fmt: skip
    assert extract["keys"][1]["last_failure"]["run_id"] == extract["keys"][0]["last_success"]["run_id"]
    assert extract["scope"] == {
        "kind": "range", "description": "--partition-range 2026-08-08 .. 2026-08-10", "retired_keys": 0,
    }  # fmt: skip


# -- domains: a selection applies where it parses ---------------------------------------------------


def test_a_selection_applies_to_the_assets_whose_domain_it_parses_in(invoke, write_entry):
    path = write_entry(MIXED)
    open_store(_store_url()).close()

    result = invoke("status", path, "--partition-key", "eu", "--json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [item["asset"] for item in document["assets"]] == ["regional"]
    (left_out,) = document["left_out"]
    assert (left_out["asset"], left_out["domain"]) == ("daily", "date")
    assert "--partition-key #1 is rejected" in left_out["reason"] and "eu" not in left_out["reason"].split(":")[-1]
    text = invoke("status", path, "--partition-key", "eu").stdout
    assert "daily (date) left out: the selection does not fit its definition" in text


def test_a_named_asset_the_selection_does_not_fit_is_an_error(invoke, write_entry):
    path = write_entry(MIXED)

    result = invoke("status", path, "--asset", "daily", "--partition-key", "eu")

    assert result.exit_code == 2
    assert "--partition-key #1 is rejected by asset 'daily'" in result.stderr


def test_a_selection_no_asset_accepts_is_an_error(invoke, write_entry):
    path = write_entry(MIXED)

    result = invoke("status", path, "--partition-range", "eu", "us")

    assert result.exit_code == 2
    assert "--partition-range" in result.stderr


# -- bad input --------------------------------------------------------------------------------------


def test_an_unknown_asset_is_a_usage_error_naming_it(invoke, write_entry):
    path = write_entry(DAILY)

    result = invoke("status", path, "--asset", "extract", "--asset", "nope")

    assert result.exit_code == 2
    assert "--asset 'nope' is not an asset of" in result.stderr and "extract, transform" in result.stderr


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        (["--partition-range", "2026-08-10", "2026-08-01"], "--partition-range is rejected by asset 'extract' (date): range start is later than end"),
        (["--partition-key", "2026-8-1"], "--partition-key #1 is rejected by asset 'extract' (date): date partition key text is not canonical"),
        (["--partition-range", "2026-08-01", "9999-12-31"], "--partition-range selects 2,912,231 keys; a partition status reads at most 1,000,000"),
        (["--partition-key", "2026-08-01", "--partition-range", "2026-08-01", "2026-08-02"], "cannot be combined"),
    ],
)
def test_a_bad_selection_exits_2_naming_the_flag_without_traceback(invoke, write_entry, selection, message):
    path = write_entry(DAILY)

    result = invoke("status", path, "--asset", "extract", *selection)

    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output
    assert "2026-8-1" not in result.stderr


def test_an_asset_without_a_bounded_default_asks_for_a_selection(invoke, write_entry):
    path = write_entry("""
        from partita import PartitionDef

        class Anything(PartitionDef):
            pass

        @asset(partition_def=Anything())
        def custom(context):
            return 1

        flow = Flow(["custom"])
        """)

    result = invoke("status", path)

    assert result.exit_code == 2
    assert "has no bounded set of keys to report by default; select keys with --partition-key" in result.stderr


def test_a_missing_store_reads_every_key_missing_and_creates_nothing(invoke, write_entry, tmp_path: Path):
    path = write_entry(DAILY)
    url = f"sqlite:///{tmp_path}/absent.db"

    result = invoke("status", path, "--asset", "extract", "--partition-key", "2026-08-08", "--store", url)
    document = json.loads(invoke("status", path, "--partition-key", "2026-08-08", "--store", url, "--json").stdout)

    assert result.exit_code == 0, result.output
    assert f"No run-history store exists at {url} yet: every key reads missing." in result.stdout
    assert document["store_exists"] is False and document["assets"][0]["counts"]["missing"] == 1
    assert not (tmp_path / "absent.db").exists()


def test_a_store_that_is_not_a_database_is_an_infrastructure_error(invoke, write_entry, tmp_path: Path):
    path = write_entry(DAILY)
    broken = tmp_path / "broken.db"
    broken.write_text("not a database")

    result = invoke("status", path, "--store", f"sqlite:///{broken}")

    assert result.exit_code == 4
    assert "Traceback" not in result.output


def test_a_status_reads_and_never_writes(invoke, write_entry):
    path = write_entry(DAILY)
    _run(invoke, path, "--partition-key", "2026-08-08")
    store = SqlStore(_store_url())
    try:
        before = len(store.list_runs(limit=100)), len(store.list_events())
    finally:
        store.close()

    assert invoke("status", path).exit_code == 0

    store = SqlStore(_store_url())
    try:
        assert (len(store.list_runs(limit=100)), len(store.list_events())) == before
    finally:
        store.close()


def test_the_repeated_hour_of_a_clock_change_shares_its_column(invoke, write_entry):
    path = write_entry("""
        @asset(partition_def=HourlyPartitionDef(timezone="Europe/Berlin"))
        def meter(context):
            return 1

        flow = Flow(["meter"])
        """)
    invoke("run", path, "--partition-key", "2026-10-25T02+01:00", "--yes")

    result = invoke("status", path, "--partition-range", "2026-10-25T00", "2026-10-25T05")

    assert result.exit_code == 0, result.output
    assert "meter (hour:Europe/Berlin): 7 keys" in result.stdout
    # 02 and 02+01:00 share column 02: the missing first occurrence is graver than the materialized second.
    assert "  2026-10-25  ......" in result.stdout.splitlines()


def test_many_static_keys_are_a_strip_of_symbols_64_a_row(invoke, write_entry):
    path = write_entry("""
        shops = StaticPartitionDef("shops", [f"shop-{number:03d}" for number in range(100)])

        @asset(partition_def=shops)
        def sales(context):
            return 1

        flow = Flow(["sales"])
        """)
    invoke("run", path, "--partition-key", "shop-000", "--partition-key", "shop-065", "--yes")

    lines = invoke("status", path).stdout.splitlines()

    assert "    1  #....... ........ ........ ........ ........ ........ ........ ........" in lines
    assert "   65  .#...... ........ ........ ........ ...." in lines


# -- the grid reads its states apart from the records: both must say the same -------------------------------


@pytest.mark.parametrize("key_read", ["by name", "by span"])
def test_the_grid_and_the_json_document_give_every_key_the_same_state(
    invoke, write_entry, store_url, monkeypatch, key_read
):
    import partita as p
    from partita.store import event_store

    if key_read == "by span":
        monkeypatch.setattr(event_store, "_NAMED_KEYS", 0)
    fail: set[str] = {"2026-08-03", "2026-08-04"}
    started, release = threading.Event(), threading.Event()
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.DatePartitionDef(start="2026-08-01"), registry=registry)
    def extract(context) -> int:
        key = context.partition_key.isoformat()
        if key == "2026-08-06":
            started.set()
            release.wait(WAIT)
        if key in fail:
            raise ValueError("source unavailable")
        return 1

    flow = p.Flow(["extract"], registry=registry, store=store_url, record_partition_keys=True)
    flow.run({"partition_range": ("2026-08-01", "2026-08-05")})
    fail.clear()
    fail.add("2026-08-05")
    flow.run({"partition_keys": ["2026-08-04", "2026-08-05"]})  # 04 succeeds after its failure, 05 fails after success
    runner = threading.Thread(target=flow.run, args=({"partition_keys": ["2026-08-06"]},))
    runner.start()
    path = write_entry("""
        @asset(partition_def=DatePartitionDef(start="2026-08-01"))
        def extract(context):
            return 1

        flow = Flow(["extract"])
        """)
    selection = ("--partition-range", "2026-08-01", "2026-08-08", "--store", store_url)
    try:
        assert started.wait(WAIT)
        deadline = time.monotonic() + WAIT
        running = {"partition_keys": ["2026-08-06"]}
        while p.partition_status(flow, "extract", running).keys[0].state is not p.KeyState.RUNNING:
            assert time.monotonic() < deadline, "the running attempt never became visible"
        text = invoke("status", path, *selection)
        document = invoke("status", path, *selection, "--json")
    finally:
        release.set()
        runner.join(WAIT)

    assert text.exit_code == 0 and document.exit_code == 0, text.output + document.output
    symbols = {"materialized": "#", "failed": "x", "running": ">", "missing": "."}
    (entry,) = json.loads(document.stdout)["assets"]
    assert "".join(symbols[key["state"]] for key in entry["keys"]) == "##x#x>.."
    assert "  2026-08  ##x#x>.." in text.stdout.splitlines()
    assert "  # materialized 3  x failed 2  > running 1  . missing 2" in text.stdout.splitlines()
    assert entry["counts"] == {"materialized": 3, "failed": 2, "running": 1, "missing": 2}


def test_a_status_loads_neither_the_engine_nor_the_other_commands(write_entry, tmp_path: Path):
    path = write_entry(
        "from partita import DatePartitionDef, Flow, asset\n\n\n"
        "@asset(partition_def=DatePartitionDef(start='2026-08-01'))\n"
        "def extract(context):\n"
        "    return 1\n\n\n"
        "flow = Flow(['extract'])\n",
        header=False,
    )
    heavy = (
        "partita.execution.engine", "partita.execution.executors", "partita.automation.daemon", "partita.cli.running",
        "partita.cli.runs", "partita.materialization", "multiprocessing", "croniter", "alembic",
    )  # fmt: skip
    program = (
        "import sys\n"
        "from partita.cli.main import cli\n"
        f"cli(['status', {path!r}, '--partition-key', '2026-08-08'], prog_name='partita', standalone_mode=False)\n"
        f"print('loaded:', sorted(name for name in {heavy!r} if name in sys.modules))\n"
    )
    url = f"sqlite:///{tmp_path}/status.db"
    open_store(url).close()  # an existing store: opening it needs no migration
    environment = {**os.environ, "PARTITA_STORE": url}

    found = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=environment, check=True)

    assert "loaded: []" in found.stdout.splitlines(), found.stdout + found.stderr
    assert "extract (date): 1 key" in found.stdout
