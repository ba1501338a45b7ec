"""`partita.partition_status`: each key materialized, failed, running or missing (issue 14, item 3).

Runs are real (Flow.run into a real store, SQLite and PostgreSQL); the status
reads them back through the public API.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path

import pytest

import partita as p
from partita import KeyState

WAIT = 30.0  # seconds a wait for work may take before the test fails
NOW = dt.datetime(2026, 8, 20, 12, 30, tzinfo=dt.UTC)


def _daily(fail: set[str], *, record: bool = True, store: str):
    registry = p.AssetRegistry()
    days = p.DatePartitionDef(start="2026-08-01")

    @p.asset(partition_def=days, registry=registry)
    def extract(context) -> int:
        if context.partition_key.isoformat() in fail:
            raise RuntimeError("source unavailable")
        return 1

    @p.asset(partition_def=days, registry=registry)
    def transform(extract: int) -> int:
        return extract

    return p.Flow(["transform"], registry=registry, store=store, record_partition_keys=record)


def _states(status) -> dict[str | None, str]:
    return {item.key: item.state.value for item in status.keys}


def test_keys_read_materialized_failed_or_missing_with_the_last_success(store_url):
    flow = _daily({"2026-08-09"}, store=store_url)
    result = flow.run({"partition_range": ("2026-08-08", "2026-08-10")})

    status = p.partition_status(flow, "extract", {"partition_range": ("2026-08-07", "2026-08-10")})

    assert _states(status) == {
        "2026-08-07": "missing", "2026-08-08": "materialized", "2026-08-09": "failed", "2026-08-10": "materialized",
    }  # fmt: skip
    assert dict(status.counts) == {
        KeyState.MATERIALIZED: 2, KeyState.FAILED: 1, KeyState.RUNNING: 0, KeyState.MISSING: 1,
    }  # fmt: skip
    by_key = {item.key: item for item in status.keys}
    assert by_key["2026-08-08"].last_success.run_id == result.run_id
    assert by_key["2026-08-09"].last_failure.run_id == result.run_id
    assert status.asset == "extract" and status.definition is flow.registry["extract"].partition_def
    assert status.keys_in(KeyState.FAILED) == ("2026-08-09",)


def test_a_dependency_skipped_key_reads_missing_not_failed(store_url):
    flow = _daily({"2026-08-09"}, store=store_url)
    flow.run({"partition_keys": ["2026-08-09"]})

    status = p.partition_status(flow, "transform", {"partition_keys": ["2026-08-09"]})

    assert _states(status) == {"2026-08-09": "missing"}


def test_the_newest_outcome_decides_a_failure_after_a_success_and_a_success_after_a_failure(store_url):
    fail = {"2026-08-09"}
    flow = _daily(fail, store=store_url)
    flow.run({"partition_keys": ["2026-08-08", "2026-08-09"]})
    fail.clear()
    fail.add("2026-08-08")
    flow.run({"partition_keys": ["2026-08-08", "2026-08-09"]})

    status = p.partition_status(flow, "extract", {"partition_keys": ["2026-08-08", "2026-08-09"]})

    assert _states(status) == {"2026-08-08": "failed", "2026-08-09": "materialized"}
    failed = status.keys[0]
    assert failed.last_success is not None  # it succeeded once, before the failure


def test_without_recorded_keys_a_failed_key_reads_missing(store_url):
    flow = _daily({"2026-08-09"}, record=False, store=store_url)
    flow.run({"partition_keys": ["2026-08-08", "2026-08-09"]})

    status = p.partition_status(flow, "extract", {"partition_keys": ["2026-08-08", "2026-08-09"]})

    assert _states(status) == {"2026-08-08": "materialized", "2026-08-09": "missing"}


def test_a_key_of_a_live_run_reads_running_until_its_attempt_ends(store_url):
    started, release = threading.Event(), threading.Event()
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.StaticPartitionDef("regions", ["eu", "us"]), registry=registry)
    def load(context) -> int:
        if context.partition_key == "eu":
            started.set()
            release.wait(WAIT)
        return 1

    flow = p.Flow(["load"], registry=registry, store=store_url, record_partition_keys=True)
    runner = threading.Thread(target=flow.run, args=({"partition_keys": ["eu", "us"]},))
    runner.start()
    try:
        assert started.wait(WAIT)
        deadline = time.monotonic() + WAIT
        while p.partition_status(flow, "load").keys[0].state is not KeyState.RUNNING:
            assert time.monotonic() < deadline, "the running attempt never became visible"
        status = p.partition_status(flow, "load")
        assert status.keys[0].running is not None
    finally:
        release.set()
        runner.join(WAIT)
    assert _states(p.partition_status(flow, "load")) == {"eu": "materialized", "us": "materialized"}


def test_an_unpartitioned_asset_has_one_key_and_its_newest_outcome(store_url):
    registry = p.AssetRegistry()
    outcome = {"fail": False}

    @p.asset(registry=registry)
    def report() -> int:
        if outcome["fail"]:
            raise RuntimeError("broken")
        return 1

    flow = p.Flow(["report"], registry=registry, store=store_url)
    p.open_store(store_url).close()
    assert _states(p.partition_status(flow, "report")) == {None: "missing"}
    first = flow.run()
    status = p.partition_status(flow, report)
    assert _states(status) == {None: "materialized"} and status.keys[0].last_success.run_id == first.run_id
    outcome["fail"] = True
    flow.run()
    assert _states(p.partition_status(flow, "report")) == {None: "failed"}


# -- which keys: the selection, or a bounded default -----------------------------------------------


def _flow_of(partition_def, store: str, name: str = "subject") -> p.Flow:
    registry = p.AssetRegistry()
    p.asset(name=name, partition_def=partition_def, registry=registry)(lambda: 1)
    return p.Flow([name], registry=registry, store=store)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/status.db"
    p.open_store(url).close()
    return url


def test_a_date_asset_without_selection_covers_30_days_ending_today_clipped_to_its_start(sqlite_url):
    status = p.partition_status(_flow_of(p.DatePartitionDef(), sqlite_url), "subject", now=NOW)
    assert len(status.keys) == 30 and status.keys[-1].key == "2026-08-20" and status.keys[0].key == "2026-07-22"
    assert status.scope.kind.value == "window" and "30 days" in status.scope.description

    clipped = p.partition_status(_flow_of(p.DatePartitionDef(start="2026-08-15"), sqlite_url), "subject", now=NOW)
    assert [item.key for item in clipped.keys][0] == "2026-08-15" and "start" in clipped.scope.description


def test_an_hourly_asset_without_selection_covers_seven_days_of_real_hours_across_a_clock_change(sqlite_url):
    flow = _flow_of(p.HourlyPartitionDef(timezone="Europe/Berlin"), sqlite_url)
    status = p.partition_status(flow, "subject", now=dt.datetime(2026, 10, 26, 12, 30, tzinfo=dt.UTC))
    keys = [item.key for item in status.keys]
    assert len(keys) == 168 and keys[-1] == "2026-10-26T13"
    assert "2026-10-25T02" in keys and "2026-10-25T02+01:00" in keys  # the repeated hour, twice


def test_a_monthly_asset_without_selection_covers_24_months(sqlite_url):
    status = p.partition_status(_flow_of(p.MonthlyPartitionDef(), sqlite_url), "subject", now=NOW)
    assert [status.keys[0].key, status.keys[-1].key, len(status.keys)] == ["2024-09", "2026-08", 24]


def test_static_and_static_product_assets_cover_their_declared_keys(sqlite_url):
    regions = p.StaticPartitionDef("regions", ["eu", "us"])
    assert _states(p.partition_status(_flow_of(regions, sqlite_url), "subject")) == {"eu": "missing", "us": "missing"}
    product = p.MultiPartitionDef({"region": regions, "tier": p.StaticPartitionDef("tiers", ["a", "b"])})
    keys = [item.key for item in p.partition_status(_flow_of(product, sqlite_url), "subject").keys]
    assert keys == ["eu|a", "eu|b", "us|a", "us|b"]


def test_a_runtime_domain_covers_its_registry_without_retired_keys(tmp_path: Path):
    url = f"sqlite:///{tmp_path}/runtime.db"
    registry = p.AssetRegistry()
    tenants_def = p.PartitionAtRuntime("tenants")

    @p.asset(partition_def=tenants_def, registry=registry)
    def tenants(context) -> None:
        context.partition_keys = ["acme", "globex", "initech"]

    @p.asset(partition_def=tenants_def, registry=registry)
    def load(context, tenants) -> int:
        if context.partition_key == "globex":
            raise RuntimeError("tenant offline")
        return 1

    flow = p.Flow(["load"], registry=registry, store=url, record_partition_keys=True)
    flow.run()
    store = p.open_store(url)
    try:
        store.retire_partition("runtime:tenants", "initech")
    finally:
        store.close()

    status = p.partition_status(flow, "load")
    assert _states(status) == {"acme": "materialized", "globex": "failed"}
    assert status.scope.retired == 1 and "1 retired" in status.scope.description
    # The producer materialized what it discovered.
    assert _states(p.partition_status(flow, "tenants")) == {"acme": "materialized", "globex": "materialized"}


# -- bad input ---------------------------------------------------------------------------------------


def test_a_reversed_range_is_rejected_naming_the_field(sqlite_url):
    flow = _flow_of(p.DatePartitionDef(), sqlite_url)
    with pytest.raises(p.SelectionError, match="partition_range .*start is later than end"):
        p.partition_status(flow, "subject", {"partition_range": ("2026-08-10", "2026-08-01")})


def test_a_malformed_key_is_rejected_without_repeating_it(sqlite_url):
    flow = _flow_of(p.DatePartitionDef(), sqlite_url)
    with pytest.raises(p.SelectionError) as raised:
        p.partition_status(flow, "subject", {"partition_keys": ["2026-8-8x"]})
    assert "partition_keys[0]" in str(raised.value) and "2026-8-8x" not in str(raised.value)


def test_a_range_too_large_to_report_is_refused_before_it_is_expanded(sqlite_url):
    flow = _flow_of(p.HourlyPartitionDef(), sqlite_url)
    started = time.monotonic()
    with pytest.raises(p.SelectionError, match="at most 1,000,000 keys"):
        p.partition_status(flow, "subject", {"partition_range": ("0001-01-02T00", "9999-12-30T00")})
    assert time.monotonic() - started < 5.0  # 87 million hours were never built


def test_an_asset_without_a_bounded_default_needs_a_selection(sqlite_url):
    class Anything(p.PartitionDef):
        pass

    with pytest.raises(p.SelectionError, match="no bounded set of keys.*partition_keys"):
        p.partition_status(_flow_of(Anything(), sqlite_url), "subject")
    product = p.MultiPartitionDef({"day": p.DatePartitionDef(), "region": p.StaticPartitionDef("r", ["eu"])})
    with pytest.raises(p.SelectionError, match="no bounded set of keys"):
        p.partition_status(_flow_of(product, sqlite_url), "subject")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"empty_partitions": True}, "empty_partitions selects no keys"),
        ({"max_concurrency": 2}, "max_concurrency does not apply"),
        ({"partition_keys": ["2026-08-08"], "partition_range": ("2026-08-08", "2026-08-09")}, "cannot be combined"),
        ({"keys": ["2026-08-08"]}, "unknown config field"),
    ],
)
def test_a_selection_a_status_cannot_take_is_a_configuration_error(sqlite_url, config, message):
    with pytest.raises(p.ConfigurationError, match=message):
        p.partition_status(_flow_of(p.DatePartitionDef(), sqlite_url), "subject", config)


def test_a_selection_for_an_unpartitioned_asset_is_refused(sqlite_url):
    with pytest.raises(p.SelectionError, match="not partitioned"):
        p.partition_status(_flow_of(None, sqlite_url), "subject", {"partition_keys": ["a"]})


def test_an_asset_outside_the_flow_is_refused_naming_the_flows_assets(sqlite_url):
    with pytest.raises(p.ConfigurationError, match="'elsewhere' is not in the flow's assets \\(subject\\)"):
        p.partition_status(_flow_of(p.DatePartitionDef(), sqlite_url), "elsewhere")


def test_a_store_url_naming_no_store_is_a_missing_store_error_and_creates_nothing(tmp_path: Path):
    flow = _flow_of(p.DatePartitionDef(), f"sqlite:///{tmp_path}/absent.db")
    with pytest.raises(p.StoreError, match="no"):
        p.partition_status(flow, "subject", now=NOW)
    assert not (tmp_path / "absent.db").exists()


def test_a_flow_without_any_store_is_told_to_name_one(monkeypatch):
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    flow = _flow_of(p.DatePartitionDef(), False)  # type: ignore[arg-type]
    with pytest.raises(p.ConfigurationError, match="needs a store"):
        p.partition_status(flow, "subject", now=NOW)


def test_a_naive_now_is_refused(sqlite_url):
    with pytest.raises(p.ConfigurationError, match="timezone-aware"):
        p.partition_status(_flow_of(p.DatePartitionDef(), sqlite_url), "subject", now=dt.datetime(2026, 8, 20))
