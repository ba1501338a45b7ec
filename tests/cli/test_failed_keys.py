"""`partita run` ends by naming the failed and dependency-skipped keys (issue 14, item 1)."""

from __future__ import annotations

import json
import re

from partita.store.sql import SqlStore

FAILING_DAYS = """
@asset(partition_def=DatePartitionDef())
def extract(context):
    day = context.partition_key.day
    if day in FAIL_DAYS:
        raise ValueError("source unavailable\\nsecond line of detail")
    if day == LONG_DAY:
        raise KeyError("x" * 300)
    return 1


@asset(partition_def=DatePartitionDef())
def transform(context, extract):
    return extract


@asset(partition_def=DatePartitionDef())
def independent(context):
    return 1
"""


def _entry(write_entry, fail_days: str, long_day: int = 0) -> str:
    return write_entry(f"FAIL_DAYS = {fail_days}\nLONG_DAY = {long_day}\n" + FAILING_DAYS)


def test_run_lists_each_failed_and_skipped_key_with_its_error(invoke, write_entry):
    path = _entry(write_entry, "{9, 10}")

    result = invoke("run", path, "--partition-range", "2026-08-08", "2026-08-11", "--yes")

    assert result.exit_code == 1, result.stderr
    lines = result.stdout.splitlines()
    assert "extract: 2 failed" in lines
    assert "  2026-08-09  ValueError: source unavailable" in lines
    assert "  2026-08-10  ValueError: source unavailable" in lines
    assert "transform: 2 skipped (dependency failed)" in lines
    assert "  2026-08-09  skipped, upstream failed: extract" in lines
    # Only the first line of a message; succeeded keys and assets are not listed.
    assert "second line of detail" not in result.stdout
    assert "2026-08-08" not in result.stdout
    assert not any(line.startswith("independent:") for line in lines)


def test_keys_are_listed_although_the_store_does_not_record_them(invoke, write_entry, tmp_path):
    path = _entry(write_entry, "{9}")
    url = f"sqlite:///{tmp_path}/keys.db"

    result = invoke("run", path, "--partition-key", "2026-08-09", "--yes", "--store", url)

    assert result.exit_code == 1, result.stderr
    assert "  2026-08-09  ValueError: source unavailable" in result.stdout.splitlines()
    store = SqlStore(url)
    try:
        (run,) = store.list_runs(limit=10)
        attempts = [attempt for task in store.get_tasks(run.header.run_id) for attempt in task.attempts]
        assert attempts and all(attempt.partition_key is None for attempt in attempts)
    finally:
        store.close()


def test_failed_key_listing_shows_20_keys_per_asset_and_counts_the_rest(invoke, write_entry):
    path = _entry(write_entry, "set(range(1, 32))")

    result = invoke("run", path, "--partition-range", "2026-08-01", "2026-08-25", "--yes")

    assert result.exit_code == 1, result.stderr
    lines = result.stdout.splitlines()
    extract = lines[lines.index("extract: 25 failed") + 1 :]
    assert [line.split()[0] for line in extract[:20]] == [f"2026-08-{day:02d}" for day in range(1, 21)]
    assert extract[20] == "  ... and 5 more"
    assert "2026-08-21" not in result.stdout
    assert "transform: 25 skipped (dependency failed)" in lines


def test_failed_key_lines_fit_80_columns_with_the_key_whole(invoke, write_entry):
    path = _entry(write_entry, "set()", long_day=9)

    result = invoke("run", path, "--partition-key", "2026-08-09", "--yes")

    assert result.exit_code == 1, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("extract: 1 failed")
    listed = lines[start : start + 4]
    assert listed[1].startswith("  2026-08-09  KeyError: 'xxx")
    assert listed[1].endswith("…")
    assert all(len(line) <= 80 for line in listed)


def test_long_keys_are_never_cut_and_the_error_moves_below(invoke, write_entry):
    tenant = "tenant-" + "k" * 70
    path = write_entry(
        f"""
@asset(partition_def=StaticPartitionDef("tenants", [{tenant!r}]))
def per_tenant(context):
    raise RuntimeError("tenant api down")
"""
    )

    result = invoke("run", path, "--partition-key", tenant, "--yes")

    assert result.exit_code == 1, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("per_tenant: 1 failed")
    assert lines[start + 1] == f"  {tenant}"
    assert lines[start + 2] == "    RuntimeError: tenant api down"


def test_unpartitioned_failure_is_listed_without_a_key(invoke, write_entry):
    path = write_entry(
        """
@asset
def lookup():
    raise RuntimeError("lookup service down")
"""
    )

    result = invoke("run", path, "--yes")

    assert result.exit_code == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[lines.index("lookup: 1 failed") + 1] == "  RuntimeError: lookup service down"


def test_successful_run_lists_no_failed_keys(invoke, write_entry):
    path = _entry(write_entry, "set()")

    result = invoke("run", path, "--partition-range", "2026-08-08", "2026-08-09", "--yes")

    assert result.exit_code == 0, result.stderr
    assert not any(re.match(r"^\w+: \d+ (failed|skipped)", line) for line in result.stdout.splitlines())
    assert "2026-08-08" not in result.stdout
    assert "skipped, upstream" not in result.stdout


def test_run_json_keeps_key_text_out_of_the_document(invoke, write_entry):
    path = _entry(write_entry, "{9}")

    result = invoke("run", path, "--partition-range", "2026-08-08", "2026-08-10", "--yes", "--json")

    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["schema"] == "partita.run-result"
    for day in ("2026-08-08", "2026-08-09", "2026-08-10"):
        assert day not in result.stdout
    assert "upstream failed" not in result.stdout
