"""The default status window of weekly and cron-defined assets: recent, bounded, clipped to the definition."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

import partita as p

NOW = dt.datetime(2026, 12, 2, 9, 7, tzinfo=dt.UTC)  # a Wednesday


def _flow_of(partition_def, store: str) -> p.Flow:
    registry = p.AssetRegistry()
    p.asset(name="subject", partition_def=partition_def, registry=registry)(lambda: 1)
    return p.Flow(["subject"], registry=registry, store=store)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/status.db"
    p.open_store(url).close()
    return url


def _keys(flow: p.Flow, **options) -> list[str]:
    return [item.key for item in p.partition_status(flow, "subject", now=NOW, **options).keys]


def test_a_weekly_asset_without_selection_covers_26_weeks_ending_with_this_week(sqlite_url):
    keys = _keys(_flow_of(p.WeeklyPartitionDef("sunday"), sqlite_url))
    assert len(keys) == 26 and keys[-1] == "2026-11-29" and keys[0] == "2026-06-07"


def test_a_weekly_window_is_clipped_to_the_definitions_start_and_end(sqlite_url):
    assert _keys(_flow_of(p.WeeklyPartitionDef(start="2026-11-16"), sqlite_url)) == ["2026-11-16", "2026-11-23", "2026-11-30"]
    assert _keys(_flow_of(p.WeeklyPartitionDef(end="2026-07-06"), sqlite_url))[-1] == "2026-07-06"


def test_a_cron_asset_without_selection_covers_its_last_168_ticks_up_to_now(sqlite_url):
    status = p.partition_status(_flow_of(p.CronPartitionDef("*/15 * * * *", "Europe/Berlin"), sqlite_url), "subject", now=NOW)
    keys = [item.key for item in status.keys]
    assert len(keys) == 168 and keys[-1] == "2026-12-02T10:00+01:00" and keys[0] == "2026-11-30T16:15+01:00"
    assert "168 ticks" in status.scope.description


def test_a_sparse_cron_asset_finds_its_latest_ticks_years_back(sqlite_url):
    keys = _keys(_flow_of(p.CronPartitionDef("0 0 29 2 *"), sqlite_url))
    assert keys[-1] == "2024-02-29T00:00+00:00" and len(keys) >= 8  # the search reaches at least 32 years back
    assert all(key[4:10] == "-02-29" for key in keys)


def test_a_cron_window_is_clipped_to_the_definitions_start_and_end(sqlite_url):
    start = p.CronPartitionDef("0 6 * * *", "America/New_York", start="2026-11-30T06:00-05:00")
    assert _keys(_flow_of(start, sqlite_url)) == ["2026-11-30T06:00-05:00", "2026-12-01T06:00-05:00"]  # 04:07 in New York
    end = p.CronPartitionDef("0 6 * * *", "America/New_York", end="2026-11-03T06:00-05:00")
    assert _keys(_flow_of(end, sqlite_url))[-1] == "2026-11-03T06:00-05:00"
    status = p.partition_status(
        _flow_of(p.CronPartitionDef("0 6 * * *", start="2027-01-01T06:00+00:00"), sqlite_url), "subject", now=NOW
    )
    assert status.keys == () and "no key lies in it" in status.scope.description


@pytest.mark.parametrize(
    ("partition_def", "selected", "other"),
    [
        (p.WeeklyPartitionDef("sunday"), ["2026-11-29"], "2026-11-22"),
        (p.CronPartitionDef("*/15 * * * *", "Europe/Berlin"), ["2026-10-25T02:15+01:00"], "2026-10-25T02:15+02:00"),
    ],
    ids=["weekly", "cron"],
)
def test_recorded_keys_read_back_from_each_store_as_the_same_canonical_text(store_url, partition_def, selected, other):
    registry = p.AssetRegistry()
    p.asset(name="subject", partition_def=partition_def, registry=registry)(lambda: 1)
    flow = p.Flow(["subject"], registry=registry, store=store_url, record_partition_keys=True)
    assert flow.run({"partition_keys": selected}).status is p.RunStatus.SUCCESS

    status = p.partition_status(flow, "subject", {"partition_keys": [*selected, other]})

    assert {item.key: item.state.value for item in status.keys} == {selected[0]: "materialized", other: "missing"}
