"""Weekly and cron-defined partitions on the command line: plan, run, status and the store."""

from __future__ import annotations

import json

WEEKLY = """
from partita import WeeklyPartitionDef


@asset(partition_def=WeeklyPartitionDef("sunday", start="2026-11-01"))
def digest(context):
    mark("digest", context.partition_key.isoformat())
    return 1


flow = Flow(["digest"])
"""

CRON = """
from partita import CronPartitionDef

quarters = CronPartitionDef("*/15 * * * *", timezone="Europe/Berlin")


@asset(partition_def=quarters)
def readings(context):
    mark("readings", quarters.format_key(context.partition_key).replace(":", ""))
    return 1


@asset(partition_def=quarters)
def cleaned(readings):
    return readings


flow = Flow(["cleaned"])
"""


def test_a_weekly_range_plans_one_attempt_per_week(invoke, write_entry):
    path = write_entry(WEEKLY)

    result = invoke("plan", path, "--partition-range", "2026-11-01", "2026-11-29", "--json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["selection"]["key_count"] == 5
    assert document["selection"]["domain"] == "week:sunday"


def test_a_weekly_range_endpoint_that_is_not_a_week_start_exits_2_naming_the_flag(invoke, write_entry):
    path = write_entry(WEEKLY)

    result = invoke("plan", path, "--partition-range", "2026-11-01", "2026-11-30")

    assert result.exit_code == 2, result.output
    assert "--partition-range" in result.output and "first day of its week" in result.output
    assert "Traceback" not in result.output


def test_weekly_runs_are_reported_by_status(invoke, write_entry, ran):
    path = write_entry(WEEKLY)
    run = invoke("run", path, "--partition-range", "2026-11-08", "2026-11-15", "--yes", "--record-partition-keys")
    assert run.exit_code == 0, run.output
    assert ran() == ["digest-2026-11-08", "digest-2026-11-15"]

    result = invoke("status", path, "--partition-range", "2026-11-01", "2026-11-22")

    assert result.exit_code == 0, result.output
    assert "digest (week:sunday): 4 keys" in result.stdout
    assert "# materialized 2" in result.stdout and ". missing 2" in result.stdout
    document = json.loads(invoke("status", path, "--partition-range", "2026-11-01", "2026-11-22", "--json").stdout)
    states = {key["key"]: key["state"] for key in document["assets"][0]["keys"]}
    assert states == {"2026-11-01": "missing", "2026-11-08": "materialized", "2026-11-15": "materialized", "2026-11-22": "missing"}


def test_weekly_status_without_a_selection_reports_a_recent_window(invoke, write_entry):
    result = invoke("status", write_entry(WEEKLY))

    assert result.exit_code == 0, result.output
    assert "digest (week:sunday)" in result.stdout and "weeks" in result.stdout


def test_a_cron_range_across_the_spring_forward_gap_runs_each_real_quarter_hour(invoke, write_entry, ran):
    path = write_entry(CRON)

    plan = invoke("plan", path, "--partition-range", "2026-03-29T01:30+01:00", "2026-03-29T03:15+02:00", "--json")
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.stdout)["selection"]["key_count"] == 4

    run = invoke("run", path, "--partition-range", "2026-03-29T01:30+01:00", "2026-03-29T03:15+02:00", "--yes", "--record-partition-keys")
    assert run.exit_code == 0, run.output
    assert ran() == [
        "readings-2026-03-29T0130+0100", "readings-2026-03-29T0145+0100",
        "readings-2026-03-29T0300+0200", "readings-2026-03-29T0315+0200",
    ]  # fmt: skip


def test_cron_status_keeps_the_two_occurrences_of_a_repeated_quarter_hour_apart(invoke, write_entry):
    path = write_entry(CRON)
    run = invoke("run", path, "--partition-key", "2026-10-25T02:15+01:00", "--yes", "--record-partition-keys")
    assert run.exit_code == 0, run.output

    result = invoke("status", path, "--asset", "readings", "--partition-range", "2026-10-25T02:00+02:00", "2026-10-25T02:30+01:00", "--json")

    assert result.exit_code == 0, result.output
    keys = json.loads(result.stdout)["assets"][0]["keys"]
    states = {key["key"]: key["state"] for key in keys}
    assert len(keys) == 7
    assert states["2026-10-25T02:15+01:00"] == "materialized"
    assert states["2026-10-25T02:15+02:00"] == "missing"
    text = invoke("status", path, "--asset", "readings", "--partition-range", "2026-10-25T02:00+02:00", "2026-10-25T02:30+01:00")
    assert text.exit_code == 0, text.output
    assert "readings (cron:*/15 * * * *@Europe/Berlin): 7 keys" in text.stdout
    assert "# 2026-10-25T02:15+01:00" in text.stdout


def test_cron_status_without_a_selection_reports_the_latest_ticks(invoke, write_entry):
    result = invoke("status", write_entry(CRON), "--asset", "readings")

    assert result.exit_code == 0, result.output
    assert "readings (cron:*/15 * * * *@Europe/Berlin)" in result.stdout and "ticks" in result.stdout


def test_a_cron_key_that_is_not_a_tick_exits_2_naming_the_flag_without_repeating_it(invoke, write_entry):
    result = invoke("plan", write_entry(CRON), "--partition-key", "2026-03-29T01:50+01:00")

    assert result.exit_code == 2, result.output
    assert "--partition-key" in result.output and "not a tick" in result.output
    assert "01:50" not in result.output and "Traceback" not in result.output


def test_a_cron_range_too_large_for_a_status_is_refused_before_it_is_expanded(invoke, write_entry):
    path = write_entry(CRON.replace("*/15 * * * *", "* * * * *"))

    result = invoke("status", path, "--asset", "readings", "--partition-range", "2000-01-01T00:00+01:00", "2026-01-01T00:00+01:00")

    assert result.exit_code == 2, result.output
    assert "narrow the range" in result.output


def test_weekly_keys_draw_weeks_by_year_in_80_columns(invoke, write_entry):
    path = write_entry(WEEKLY)
    invoke("run", path, "--partition-key", "2026-12-27", "--yes")

    result = invoke("status", path, "--partition-range", "2026-11-29", "2027-01-10")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "  year  12345678901234567890123456789012345678901234567890123" in lines
    assert "  2026  " + " " * 47 + "....#" in lines  # 2026-11-29 starts the 48th week of the year, 2026-12-27 the 52nd
    assert "  2027  .." in lines
    assert all(len(line) <= 80 for line in lines)
