"""The FlowPlan value and its portable document (SPEC §1, §4, §14; seed 003 "Plan first")."""

import asyncio
import dataclasses
import datetime as dt
import json

import pytest

from partita import (
    AssetRegistry,
    AttemptStatus,
    ConfigurationError,
    DatePartitionDef,
    Flow,
    FlowPlan,
    PartitionGroup,
    PlanningError,
    SelectionKind,
    StaticPartitionDef,
    asset,
)

SECRET_KEYS = ["tenant-secret-123", "tenant-secret-456"]


def _pipeline(calls, *, start=None):
    """lookup (unpartitioned) -> extract (date, from ``start``) -> publish (date, async)."""
    registry = AssetRegistry()

    @asset(registry=registry)
    def lookup():
        calls.append(("lookup", None))
        return {"rate": 2}

    @asset(partition_def=DatePartitionDef(start=start), registry=registry)
    def extract(lookup, context):
        calls.append(("extract", context.partition_key))
        return lookup["rate"]

    @asset(partition_def=DatePartitionDef(), deps=["lookup"], registry=registry)
    async def publish(extract, context):
        calls.append(("publish", context.partition_key))
        return extract * 10

    return registry


def _tenants(calls):
    registry = AssetRegistry()
    tenants = StaticPartitionDef("tenant", [*SECRET_KEYS, "tenant-public"])

    @asset(partition_def=tenants, registry=registry)
    def ingest(context):
        calls.append(("ingest", context.partition_key))
        return context.partition_key

    @asset(partition_def=tenants, registry=registry)
    def bill(ingest, context):
        calls.append(("bill", context.partition_key))
        return ingest

    return registry


# -- structure --------------------------------------------------------------


def test_plan_is_a_flow_plan_describing_targets_tasks_and_selection():
    calls = []
    flow = Flow(["publish"], registry=_pipeline(calls))
    plan = flow.plan({"partition_keys": ["2026-08-08", "2026-08-09"]})
    assert isinstance(plan, FlowPlan)
    assert plan.targets == ("publish",)
    assert [task.name for task in plan.tasks] == ["lookup", "extract", "publish"]
    assert plan.task("extract").deps == ("lookup",)
    assert plan.task("publish").deps == ("extract", "lookup")
    assert [task.partitioned for task in plan.tasks] == [False, True, True]
    assert [task.attempt_count for task in plan.tasks] == [1, 2, 2]
    assert plan.selection_kind is SelectionKind.KEYS
    assert plan.domain == "date"
    assert plan.key_count == 2
    assert plan.attempt_count == 5


def test_plan_task_lookup_of_an_unplanned_asset_raises_key_error():
    flow = Flow(["publish"], registry=_pipeline([]))
    plan = flow.plan({"empty_partitions": True})
    with pytest.raises(KeyError):
        plan.task("nope")


def test_plan_is_immutable():
    flow = Flow(["publish"], registry=_pipeline([]))
    plan = flow.plan({"partition_keys": ["2026-08-08"]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.targets = ("other",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.tasks = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.selection = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.tasks[0].attempt_count = 99
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.selection.keys = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.options.max_concurrency = 1
    assert isinstance(plan.tasks, tuple)
    assert isinstance(plan.partition_keys, tuple)
    assert isinstance(plan.tasks[0].deps, tuple)


def test_plan_document_is_versioned_and_complete():
    flow = Flow(
        ["publish"],
        registry=_pipeline([]),
        partition_groups=[PartitionGroup(["extract", "publish"], max_active_keys=2)],
        max_concurrency=3,
    )
    plan = flow.plan({"partition_range": ("2026-08-08", "2026-08-10")})
    document = plan.to_dict()
    assert document["schema"] == "partita.plan"
    assert document["version"] == 1
    assert document["targets"] == ["publish"]
    assert document["selection"] == {"kind": "range", "domain": "date", "key_count": 3}
    assert document["attempt_count"] == 7
    assert document["options"] == {"max_concurrency": 3}
    assert document["groups"] == [{"assets": ["extract", "publish"], "max_active_keys": 2}]
    assert [task["name"] for task in document["tasks"]] == ["lookup", "extract", "publish"]
    lookup, extract, publish = document["tasks"]
    assert lookup["deps"] == []
    assert lookup["partitioned"] is False
    assert lookup["partition"] is None
    assert lookup["attempt_count"] == 1
    assert lookup["group"] is None
    assert extract["deps"] == ["lookup"]
    assert extract["partition"]["kind"] == "date"
    assert extract["partition"]["domain"] == "date"
    assert extract["partition"]["key_format"] == "YYYY-MM-DD"
    assert extract["partition"]["supports_range"] is True
    assert extract["attempt_count"] == 3
    assert extract["group"] == 0
    assert publish["deps"] == ["extract", "lookup"]
    assert publish["async"] is True
    assert extract["async"] is False


@pytest.mark.parametrize(
    ("config", "kind", "key_count", "attempts"),
    [
        ({"partition_keys": ["2026-08-08"]}, "keys", 1, 3),
        ({"partition_range": ("2026-08-08", "2026-08-09")}, "range", 2, 5),
        ({"empty_partitions": True}, "empty", 0, 1),
    ],
    ids=["keys", "range", "empty"],
)
def test_plan_document_reports_selection_kind_domain_and_counts(config, kind, key_count, attempts):
    plan = Flow(["publish"], registry=_pipeline([])).plan(config)
    document = plan.to_dict()
    assert document["selection"] == {"kind": kind, "domain": "date", "key_count": key_count}
    assert document["attempt_count"] == attempts


def test_plan_document_of_an_unpartitioned_flow_has_no_domain():
    plan = Flow(["lookup"], registry=_pipeline([])).plan()
    assert plan.to_dict()["selection"] == {"kind": "unpartitioned", "domain": None, "key_count": 0}
    assert plan.to_dict()["options"] == {"max_concurrency": None}


def test_to_json_is_the_same_document_as_to_dict():
    plan = Flow(["publish"], registry=_pipeline([])).plan({"partition_keys": ["2026-08-08"]})
    assert json.loads(plan.to_json()) == plan.to_dict()
    assert json.loads(plan.to_json(indent=None)) == plan.to_dict()


def test_plan_document_is_deterministic():
    flow = Flow(["publish"], registry=_pipeline([]))
    config = {"partition_keys": ["2026-08-08", "2026-08-09"]}
    assert flow.plan(config).to_json() == flow.plan(config).to_json()


# -- privacy ----------------------------------------------------------------


def test_to_json_contains_no_raw_selected_keys():
    calls = []
    plan = Flow(["bill"], registry=_tenants(calls)).plan({"partition_keys": SECRET_KEYS})
    text = plan.to_json()
    for secret in SECRET_KEYS:
        assert secret not in text
    assert "tenant-secret" not in text
    assert json.loads(text)["selection"] == {"kind": "keys", "domain": "static:tenant", "key_count": 2}
    # In memory, the plan keeps the keys the approved run will use.
    assert plan.partition_keys == tuple(SECRET_KEYS)


def test_to_json_contains_no_raw_selected_dates():
    plan = Flow(["publish"], registry=_pipeline([])).plan({"partition_keys": ["1987-03-14", dt.date(1987, 3, 15)]})
    text = plan.to_json()
    assert "1987" not in text


def test_plan_repr_contains_no_raw_selected_keys():
    plan = Flow(["bill"], registry=_tenants([])).plan({"partition_keys": SECRET_KEYS})
    assert "tenant-secret" not in repr(plan)
    assert "tenant-secret" not in repr(plan.selection)


# -- plan first -------------------------------------------------------------


def test_building_a_plan_invokes_no_asset_body():
    calls = []
    flow = Flow(["publish"], registry=_pipeline(calls))
    flow.plan({"partition_keys": ["2026-08-08", "2026-08-09"]})
    flow.plan({"partition_range": ("2026-08-08", "2026-08-10")})
    flow.plan({"empty_partitions": True})
    flow.plan_from_text({"partition_keys": ["2026-08-08"]})
    flow.plan({"partition_keys": ["2026-08-08"]}).to_json()
    assert calls == []


def test_run_of_a_plan_runs_exactly_the_planned_keys():
    calls = []
    flow = Flow(["publish"], registry=_pipeline(calls))
    plan = flow.plan({"partition_keys": ["2026-08-09", "2026-08-08", "2026-08-09"]})
    result = flow.run(plan)
    assert result.succeeded
    assert result.plan is plan
    planned = {dt.date(2026, 8, 9), dt.date(2026, 8, 8)}
    assert sorted(calls, key=repr) == sorted(
        [("lookup", None)] + [(name, key) for name in ("extract", "publish") for key in planned], key=repr
    )
    for name in ("extract", "publish"):
        attempts = result.tasks[name].attempts
        assert [attempt.partition_key for attempt in attempts] == list(plan.partition_keys)
        assert all(attempt.status is AttemptStatus.SUCCESS for attempt in attempts)
    assert result.output("publish", dt.date(2026, 8, 8)) == 20


def test_run_of_a_plan_with_private_keys_uses_the_in_memory_keys():
    calls = []
    flow = Flow(["bill"], registry=_tenants(calls))
    plan = flow.plan({"partition_keys": ["tenant-secret-456"]})
    result = flow.run(plan)
    assert sorted(calls) == [("bill", "tenant-secret-456"), ("ingest", "tenant-secret-456")]
    assert [attempt.partition_key for attempt in result.tasks["bill"].attempts] == ["tenant-secret-456"]


def test_run_async_of_a_plan_runs_exactly_the_planned_keys():
    calls = []
    flow = Flow(["publish"], registry=_pipeline(calls))
    plan = flow.plan({"partition_keys": ["2026-08-08"]})
    result = asyncio.run(flow.run_async(plan))
    assert result.plan is plan
    assert sorted(calls, key=repr) == sorted(
        [("lookup", None), ("extract", dt.date(2026, 8, 8)), ("publish", dt.date(2026, 8, 8))], key=repr
    )


def test_run_of_an_empty_plan_runs_only_unpartitioned_work():
    calls = []
    flow = Flow(["publish"], registry=_pipeline(calls))
    result = flow.run(flow.plan({"empty_partitions": True}))
    assert calls == [("lookup", None)]
    assert result.tasks["publish"].attempts == ()


def test_plan_from_a_flow_whose_registry_defines_the_assets_otherwise_is_rejected_by_run():
    calls = []
    first = Flow(["publish"], registry=_pipeline(calls))
    second = Flow(["publish"], registry=_pipeline(calls, start="2026-01-01"))
    plan = first.plan({"partition_keys": ["2026-08-08"]})
    with pytest.raises(PlanningError, match="another flow"):
        second.run(plan)
    with pytest.raises(PlanningError, match="another flow"):
        asyncio.run(second.run_async(plan))
    assert calls == []


def test_plan_from_a_flow_with_other_targets_is_rejected_by_run():
    calls = []
    registry = _pipeline(calls)
    plan = Flow(["extract"], registry=registry).plan({"partition_keys": ["2026-08-08"]})
    with pytest.raises(PlanningError, match="another flow"):
        Flow(["publish"], registry=registry).run(plan)
    assert calls == []


def test_run_inside_a_running_event_loop_is_rejected_before_any_body_runs():
    calls = []
    flow = Flow(["publish"], registry=_pipeline(calls))
    plan = flow.plan({"partition_keys": ["2026-08-08"]})

    async def call_run_inside_loop():
        flow.run(plan)

    with pytest.raises(ConfigurationError, match="run_async"):
        asyncio.run(call_run_inside_loop())
    assert calls == []
