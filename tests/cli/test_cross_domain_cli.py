"""Runs across partition domains on the command line: plan, run and the planning errors' exit code."""

from __future__ import annotations

import json

REPORT = """
from partita import HourlyPartitionDef, RollupMapper

hours = HourlyPartitionDef("Europe/Berlin")


@asset(partition_def=hours)
def hourly_events(context):
    return 1


@asset(partition_def=DatePartitionDef(), deps={"hourly_events": RollupMapper("day")})
def daily_report(context, hourly_events):
    mark("daily_report", context.partition_key.isoformat(), len(hourly_events))
    return len(hourly_events)


flow = Flow(["daily_report"])
"""

NO_MAPPER = """
from partita import HourlyPartitionDef


@asset(partition_def=HourlyPartitionDef("UTC"))
def hourly_events(context):
    return 1


@asset(partition_def=DatePartitionDef())
def daily_report(hourly_events):
    return 1


flow = Flow(["daily_report"])
"""

MONTHS_INTO_HOURS = """
from partita import HourlyPartitionDef, MonthlyPartitionDef, RollupMapper


@asset(partition_def=MonthlyPartitionDef())
def monthly():
    return 1


@asset(partition_def=HourlyPartitionDef("UTC"), deps={"monthly": RollupMapper("hour")})
def hourly(monthly):
    return 1


flow = Flow(["hourly"])
"""


def test_plan_json_counts_each_domain(invoke, write_entry):
    result = invoke("plan", write_entry(REPORT), "--partition-key", "2026-10-25", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["attempt_count"] == 26
    assert [(entry["domain"], entry["key_count"]) for entry in document["domains"]] == [
        ("hour:Europe/Berlin", 25),
        ("date", 1),
    ]


def test_run_gives_each_day_its_hours(invoke, write_entry, ran):
    result = invoke("run", write_entry(REPORT), "--partition-range", "2026-03-28", "2026-03-29", "--yes")
    assert result.exit_code == 0, result.output
    assert ran() == ["daily_report-2026-03-28-24", "daily_report-2026-03-29-23"]


def test_an_edge_between_domains_without_a_mapper_exits_2_naming_both_assets(invoke, write_entry):
    result = invoke("plan", write_entry(NO_MAPPER), "--partition-key", "2026-01-02")
    assert result.exit_code == 2
    assert "asset 'daily_report' (date) depends on 'hourly_events' (hour:UTC) without a partition mapper" in result.output
    assert "Traceback" not in result.output


def test_a_roll_up_from_months_into_hours_exits_2_naming_the_mapper_and_the_rule(invoke, write_entry):
    result = invoke("run", write_entry(MONTHS_INTO_HOURS), "--partition-key", "2026-01-02T00", "--yes")
    assert result.exit_code == 2
    assert "RollupMapper('hour'), which does not fit the two definitions" in result.output
    assert "MonthlyPartitionDef keys are coarser" in result.output


SEGMENTED = """
from partita import MultiPartitionDef, StaticPartitionDef

product = MultiPartitionDef(
    {"date": DatePartitionDef(start="2026-08-01", end="2026-08-03"), "segment": StaticPartitionDef("s", ["eu", "us"])}
)


@asset(partition_def=product)
def segment_sales(context):
    mark("sales", product.format_key(context.partition_key).replace("|", "_"))
    return 1


flow = Flow(["segment_sales"])
"""


def test_a_product_range_runs_one_segment_and_status_lists_every_key(invoke, write_entry, ran):
    path = write_entry(SEGMENTED)
    result = invoke("run", path, "--partition-range", "2026-08-01|eu", "2026-08-02|eu", "--yes")
    assert result.exit_code == 0, result.output
    assert ran() == ["sales-2026-08-01_eu", "sales-2026-08-02_eu"]
    status = invoke("status", path, "--json")
    assert status.exit_code == 0, status.output
    document = json.loads(status.stdout)
    (asset,) = document["assets"]
    assert asset["counts"]["materialized"] == 2 and sum(asset["counts"].values()) == 6


def test_a_product_range_across_two_segments_exits_2_naming_the_flag(invoke, write_entry):
    result = invoke("plan", write_entry(SEGMENTED), "--partition-range", "2026-08-01|eu", "2026-08-02|us")
    assert result.exit_code == 2
    assert "--partition-range is rejected by asset 'segment_sales'" in result.output
    assert "every other dimension must have the same value at both ends" in result.output
