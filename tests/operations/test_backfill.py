"""Plan-first backfills from Python: `plan_missing` and `plan_failed_from` on SQLite and PostgreSQL.

A backfill plan is an ordinary `FlowPlan` whose keys a store query chose:
the keys of a bounded selection for which a target has no outlet event, or
the keys a run of the same flow failed or dependency-skipped. Running it
runs exactly those keys (bodies record what they ran), and the run is
recorded as launched by ``backfill`` with tags naming its source.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import partita as p
from partita.store import StoredRun
from partita.store.protocol import RunFilter


class Pipeline:
    """extract -> publish over ``partition_def``; ``failing`` keys make extract raise; ``ran`` records bodies."""

    def __init__(self, partition_def: p.PartitionDef, store_url: str, *, record_keys: bool = True) -> None:
        self.registry = p.AssetRegistry()
        self.failing: set[str] = set()
        self.ran: list[tuple[str, str | None]] = []
        self.definition = partition_def
        registry, pipeline = self.registry, self

        @p.asset(partition_def=partition_def, registry=registry)
        def extract(context):
            text = partition_def.format_key(context.partition_key)
            pipeline.ran.append(("extract", text))
            if text in pipeline.failing:
                raise RuntimeError("the source is not there yet")
            return 1

        @p.asset(partition_def=partition_def, registry=registry)
        def publish(context, extract):
            pipeline.ran.append(("publish", partition_def.format_key(context.partition_key)))
            return extract + 1

        self.flow = p.Flow(["publish"], registry=registry, store=store_url, record_partition_keys=record_keys, name="daily")

    def run(self, config: Any) -> p.RunResult:
        self.ran.clear()
        return self.flow.run(config)

    def keys_ran(self, asset: str) -> list[str | None]:
        return [key for name, key in self.ran if name == asset]


def _stored(store_url: str, run_id: str) -> StoredRun:
    store = p.open_store(store_url)
    try:
        return store.get_run(run_id)
    finally:
        store.close()


def test_a_range_with_some_keys_materialized_runs_only_the_others_and_then_nothing_is_missing(store_url: str) -> None:
    pipeline = Pipeline(p.DatePartitionDef(), store_url)
    pipeline.run({"partition_keys": ["2026-03-01", "2026-03-03"]})
    plan = p.plan_missing(pipeline.flow, {"partition_range": ("2026-03-01", "2026-03-05")}, store=store_url)
    assert [key.isoformat() for key in plan.partition_keys] == ["2026-03-02", "2026-03-04", "2026-03-05"]
    assert plan.attempt_count == 6
    origin = plan.backfill
    assert origin is not None and origin.kind is p.BackfillKind.MISSING
    assert (origin.targets, origin.considered, origin.selected, origin.empty) == (("publish",), 5, 3, False)
    result = pipeline.run(plan)
    assert result.status is p.RunStatus.SUCCESS
    assert pipeline.keys_ran("publish") == ["2026-03-02", "2026-03-04", "2026-03-05"]
    again = p.plan_missing(pipeline.flow, {"partition_range": ("2026-03-01", "2026-03-05")}, store=store_url)
    assert again.backfill is not None and again.backfill.empty and again.backfill.selected == 0
    assert again.attempt_count == 0 and again.selection_kind is p.SelectionKind.EMPTY


def test_a_backfill_run_is_recorded_as_launched_by_backfill_with_its_kind_and_source_as_tags(store_url: str) -> None:
    pipeline = Pipeline(p.DatePartitionDef(), store_url)
    pipeline.flow = pipeline.flow.with_tags({"team": "data"})
    pipeline.failing = {"2026-03-02"}
    failed = pipeline.run({"partition_range": ("2026-03-01", "2026-03-02")})
    pipeline.failing = set()
    missing_run = pipeline.run(p.plan_missing(pipeline.flow, {"partition_keys": ["2026-03-02"]}, store=store_url))
    rerun = pipeline.run(p.plan_failed_from(pipeline.flow, failed.run_id, store=store_url))
    missing = _stored(store_url, missing_run.run_id)
    assert (missing.launched_by, missing.flow_name) == ("backfill", "daily")
    assert dict(missing.tags) == {"partita.backfill": "missing", "team": "data"}
    stored = _stored(store_url, rerun.run_id)
    assert stored.launched_by == "backfill"
    assert dict(stored.tags) == {"partita.backfill": "failed-from", "partita.failed_from": failed.run_id, "team": "data"}
    store = p.open_store(store_url)
    try:
        found = store.list_runs(where=RunFilter(tags=(("partita.failed_from", failed.run_id),)))
    finally:
        store.close()
    assert [run.run_id for run in found] == [rerun.run_id]
    assert _stored(store_url, failed.run_id).launched_by == "python"


def test_a_key_is_missing_when_any_target_lacks_a_success(store_url: str) -> None:
    pipeline = Pipeline(p.DatePartitionDef(), store_url)
    both = pipeline.flow.with_targets(["extract", "publish"])
    pipeline.flow.with_targets(["extract"]).run({"partition_keys": ["2026-03-01", "2026-03-02"]})
    both.run({"partition_keys": ["2026-03-02"]})
    plan = p.plan_missing(both, {"partition_range": ("2026-03-01", "2026-03-03")}, store=store_url)
    assert [key.isoformat() for key in plan.partition_keys] == ["2026-03-01", "2026-03-03"]
    assert plan.backfill is not None and plan.backfill.targets == ("extract", "publish")
    only_extract = p.plan_missing(
        pipeline.flow.with_targets(["extract"]), {"partition_range": ("2026-03-01", "2026-03-03")}, store=store_url
    )
    assert [key.isoformat() for key in only_extract.partition_keys] == ["2026-03-03"]


TZ_BERLIN = p.HourlyPartitionDef(timezone="Europe/Berlin")
TENANTS = p.StaticPartitionDef("tenants", ["acme", "globex", "initech"])
REGIONS = p.StaticPartitionDef("regions", ["eu", "us"])


@pytest.mark.parametrize(
    ("definition", "done", "backfill", "expected"),
    [
        pytest.param(
            p.DatePartitionDef(), ["2026-10-24"], {"partition_range": ("2026-10-24", "2026-10-26")},
            ["2026-10-25", "2026-10-26"], id="daily",
        ),
        pytest.param(
            # The night clocks go back in Berlin: 02:00 happens twice, each hour its own canonical key.
            TZ_BERLIN, ["2026-10-25T01", "2026-10-25T02+01:00"],
            {"partition_range": ("2026-10-25T01", "2026-10-25T03")},
            ["2026-10-25T02", "2026-10-25T03"], id="hourly-dst",
        ),
        pytest.param(
            p.MonthlyPartitionDef(), ["2026-02"], {"partition_range": ("2026-01", "2026-03")},
            ["2026-01", "2026-03"], id="monthly",
        ),
        pytest.param(TENANTS, ["globex"], {"partition_keys": ["acme", "globex", "initech"]}, ["acme", "initech"], id="static"),
        pytest.param(
            p.MultiPartitionDef({"day": p.DatePartitionDef(), "region": REGIONS}), ["2026-03-01|us"],
            {"partition_keys": ["2026-03-01|eu", "2026-03-01|us", "2026-03-02|eu"]},
            ["2026-03-01|eu", "2026-03-02|eu"], id="multi",
        ),
    ],
)
def test_missing_keys_are_compared_as_canonical_text_for_every_partition_kind(
    store_url: str, definition: p.PartitionDef, done: list[str], backfill: dict[str, Any], expected: list[str]
) -> None:
    pipeline = Pipeline(definition, store_url)
    pipeline.run(pipeline.flow.plan_from_text({"partition_keys": done}))
    text_config = {name: list(value) if name == "partition_keys" else value for name, value in backfill.items()}
    plan = p.plan_missing(pipeline.flow, text_config, store=store_url, keys_as_text=True)
    assert [definition.format_key(key) for key in plan.partition_keys] == expected
    pipeline.run(plan)
    assert pipeline.keys_ran("publish") == expected
    assert p.plan_missing(pipeline.flow, text_config, store=store_url, keys_as_text=True).backfill.empty


def test_python_keys_select_as_their_canonical_text_does(store_url: str) -> None:
    pipeline = Pipeline(TZ_BERLIN, store_url)
    pipeline.run({"partition_keys": [dt.datetime(2026, 10, 25, 0, 0, tzinfo=dt.UTC)]})  # 02:00+02:00 in Berlin
    start = dt.datetime(2026, 10, 24, 23, 0, tzinfo=dt.UTC)
    plan = p.plan_missing(pipeline.flow, {"partition_range": (start, start + dt.timedelta(hours=2))}, store=store_url)
    assert [TZ_BERLIN.format_key(key) for key in plan.partition_keys] == ["2026-10-25T01", "2026-10-25T02+01:00"]


def _tenant_flow(store_url: str, discovered: list[str], ran: list[str], failing: set[str]) -> p.Flow:
    registry = p.AssetRegistry()
    tenants = p.PartitionAtRuntime("backfill_tenants")

    @p.asset(partition_def=tenants, registry=registry)
    def tenant_list(context):
        for key in discovered:
            context.add_partition(key)

    @p.asset(partition_def=tenants, registry=registry)
    def tenant_report(context, tenant_list):
        ran.append(context.partition_key)
        if context.partition_key in failing:
            raise RuntimeError("report refused")
        return 1

    return p.Flow(["tenant_report"], registry=registry, store=store_url, record_partition_keys=True)


def test_a_runtime_domain_without_a_selection_compares_the_keys_its_registry_knows(store_url: str) -> None:
    discovered, ran, failing = ["acme", "globex", "initech"], [], {"globex"}
    flow = _tenant_flow(store_url, discovered, ran, failing)
    first = flow.run()
    assert first.status is p.RunStatus.FAILED
    plan = p.plan_missing(flow, None, store=store_url)
    assert plan.partition_keys == ("globex",)
    assert plan.backfill is not None and plan.backfill.considered == 3
    failing.clear()
    ran.clear()
    flow.run(plan)
    assert ran == ["globex"]
    assert p.plan_missing(flow, None, store=store_url).backfill.empty
    ran.clear()
    failing.add("initech")
    second = flow.run()
    failing.clear()
    ran.clear()
    rerun = p.plan_failed_from(flow, second.run_id, store=store_url)
    assert rerun.partition_keys == ("initech",)
    flow.run(rerun)
    assert ran == ["initech"]


def test_a_failed_runs_failed_and_skipped_keys_rerun_exactly(store_url: str) -> None:
    pipeline = Pipeline(p.DatePartitionDef(), store_url)
    pipeline.failing = {"2026-03-02", "2026-03-04"}
    failed = pipeline.run({"partition_range": ("2026-03-01", "2026-03-05")})
    assert failed.status is p.RunStatus.FAILED
    plan = p.plan_failed_from(pipeline.flow, failed.run_id[:8], store=store_url)
    assert [key.isoformat() for key in plan.partition_keys] == ["2026-03-02", "2026-03-04"]
    origin = plan.backfill
    assert origin is not None and origin.kind is p.BackfillKind.FAILED_FROM
    assert (origin.source_run_id, origin.considered, origin.selected) == (failed.run_id, 4, 2)
    pipeline.failing = set()
    pipeline.run(plan)
    assert pipeline.keys_ran("extract") == ["2026-03-02", "2026-03-04"]
    assert pipeline.keys_ran("publish") == ["2026-03-02", "2026-03-04"]
    assert p.plan_missing(pipeline.flow, {"partition_range": ("2026-03-01", "2026-03-05")}, store=store_url).backfill.empty


def test_failed_from_narrowed_to_a_target_reruns_only_that_assets_closure(store_url: str) -> None:
    pipeline = Pipeline(p.DatePartitionDef(), store_url)
    pipeline.failing = {"2026-03-02"}
    failed = pipeline.run({"partition_range": ("2026-03-01", "2026-03-02")})
    plan = p.plan_failed_from(pipeline.flow, failed.run_id, store=store_url, targets=["extract"])
    assert plan.targets == ("extract",)
    assert [task.name for task in plan.tasks] == ["extract"]
    assert plan.backfill is not None and plan.backfill.considered == 1
    pipeline.failing = set()
    pipeline.ran.clear()
    with pytest.raises(p.ConfigurationError, match="targets: the plan has"):
        pipeline.flow.run(plan)  # the flow's targets differ from the narrowed plan's
    pipeline.flow.with_targets(plan.targets).run(plan)
    assert pipeline.ran == [("extract", "2026-03-02")]
    with pytest.raises(p.ConfigurationError, match="target\\(s\\) elsewhere were not part of that run's plan"):
        p.plan_failed_from(pipeline.flow, failed.run_id, store=store_url, targets=["elsewhere"])


def test_a_failed_unpartitioned_consumer_reruns_every_key_the_run_attempted(store_url: str) -> None:
    registry = p.AssetRegistry()
    attempts = {"summary": 0}

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def day(context):
        return 1

    @p.asset(registry=registry)
    def summary(day):
        attempts["summary"] += 1
        if attempts["summary"] == 1:
            raise RuntimeError("warehouse offline")
        return sum(day.values())

    flow = p.Flow(["summary"], registry=registry, store=store_url, record_partition_keys=True)
    failed = flow.run({"partition_range": ("2026-03-01", "2026-03-03")})
    plan = p.plan_failed_from(flow, failed.run_id, store=store_url)
    assert [key.isoformat() for key in plan.partition_keys] == ["2026-03-01", "2026-03-02", "2026-03-03"]
    assert flow.run(plan).tasks["summary"].attempts[0].output == 3


def test_failed_from_a_run_without_recorded_keys_says_so_and_how_to_record_them(store_url: str) -> None:
    pipeline = Pipeline(p.DatePartitionDef(), store_url, record_keys=False)
    pipeline.failing = {"2026-03-02"}
    failed = pipeline.run({"partition_range": ("2026-03-01", "2026-03-02")})
    with pytest.raises(p.ConfigurationError) as caught:
        p.plan_failed_from(pipeline.flow, failed.run_id, store=store_url)
    message = str(caught.value)
    assert "did not record partition keys" in message
    assert "--record-partition-keys" in message and "record_partition_keys = true" in message
    assert "2026-03" not in message


def test_failed_from_a_run_that_failed_nothing_plans_nothing_even_without_recorded_keys(store_url: str) -> None:
    pipeline = Pipeline(p.DatePartitionDef(), store_url, record_keys=False)
    done = pipeline.run({"partition_range": ("2026-03-01", "2026-03-02")})
    plan = p.plan_failed_from(pipeline.flow, done.run_id, store=store_url)
    assert plan.backfill is not None and plan.backfill.empty and plan.backfill.considered == 0
    assert plan.attempt_count == 0


def test_failed_from_an_unknown_run_or_a_run_of_another_flow_is_refused(store_url: str) -> None:
    pipeline = Pipeline(p.DatePartitionDef(), store_url)
    other = p.Flow(["extract"], registry=pipeline.registry, store=store_url, name="extract-only", record_partition_keys=True)
    theirs = other.run({"partition_keys": ["2026-03-01"]})
    with pytest.raises(p.UnknownRunError, match="no run with id 'ffffffff'"):
        p.plan_failed_from(pipeline.flow, "ffffffff", store=store_url)
    with pytest.raises(p.ConfigurationError) as caught:
        p.plan_failed_from(pipeline.flow, theirs.run_id, store=store_url)
    assert "a run of flow extract-only (targets extract)" in str(caught.value)
    assert "not of flow daily (targets publish)" in str(caught.value)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (None, "plan_missing needs a bounded selection to compare: give partition_range or partition_keys"),
        ({"empty_partitions": True}, "plan_missing cannot be combined with empty_partitions"),
        ({"partition_range": ("2026-03-05", "2026-03-01")}, "partition_range is rejected"),
    ],
)
def test_missing_without_a_bounded_selection_is_refused_before_the_store_is_read(
    store_url: str, config: Any, message: str
) -> None:
    pipeline = Pipeline(p.DatePartitionDef(), store_url)
    with pytest.raises(p.ConfigurationError, match=message):
        p.plan_missing(pipeline.flow, config, store="sqlite:///does/not/exist.db")


def test_a_store_url_that_does_not_exist_is_a_store_error_and_is_not_created(tmp_path) -> None:
    pipeline = Pipeline(p.DatePartitionDef(), f"sqlite:///{tmp_path}/history.db")
    absent = tmp_path / "typo.db"
    with pytest.raises(p.StoreError):
        p.plan_missing(pipeline.flow, {"partition_keys": ["2026-03-01"]}, store=f"sqlite:///{absent}")
    assert not absent.exists()


def test_a_backfill_that_fails_on_a_key_leaves_only_that_key_missing(store_url: str) -> None:
    pipeline = Pipeline(p.DatePartitionDef(), store_url)
    pipeline.failing = {"2026-03-03"}
    window = {"partition_range": ("2026-03-01", "2026-03-04")}
    p.open_store(store_url).close()  # plan_missing reads a store, it never creates one
    result = pipeline.run(p.plan_missing(pipeline.flow, window, store=store_url))
    assert result.status is p.RunStatus.FAILED
    pipeline.failing = set()
    plan = p.plan_missing(pipeline.flow, window, store=store_url)
    assert [key.isoformat() for key in plan.partition_keys] == ["2026-03-03"]
