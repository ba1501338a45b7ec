"""Planning rules for partition groups (SPEC §4; seed 003 "Bound progress through a partition chain")."""

import pytest

from partita import (
    AssetRegistry,
    DatePartitionDef,
    Flow,
    PartitionGroup,
    PlanningError,
    StaticPartitionDef,
    asset,
)

KEYS = {"partition_keys": ["2026-08-08", "2026-08-09"]}


def _register(registry, name, deps=(), partitioned=True, calls=None, partition_def=None):
    def body():
        if calls is not None:
            calls.append(name)
        return name

    if partition_def is None and partitioned:
        partition_def = DatePartitionDef()
    asset(name=name, deps=list(deps), partition_def=partition_def, registry=registry)(body)


def _chain(calls=None):
    """extract -> transform -> publish, all date-partitioned."""
    registry = AssetRegistry()
    _register(registry, "extract", calls=calls)
    _register(registry, "transform", deps=["extract"], calls=calls)
    _register(registry, "publish", deps=["transform"], calls=calls)
    return registry


# -- a valid group ----------------------------------------------------------


def test_valid_group_appears_in_the_plan_document_and_task_group_index():
    registry = _chain()
    group = PartitionGroup(("extract", "transform", "publish"), max_active_keys=2)
    plan = Flow(["publish"], registry=registry, partition_groups=[group]).plan(KEYS)
    assert plan.groups == (group,)
    document = plan.to_dict()
    assert document["groups"] == [{"assets": ["extract", "transform", "publish"], "max_active_keys": 2}]
    assert [(task["name"], task["group"]) for task in document["tasks"]] == [
        ("extract", 0),
        ("transform", 0),
        ("publish", 0),
    ]
    assert [task.group for task in plan.tasks] == [0, 0, 0]


def test_seed_example_group_plans_with_default_single_active_key():
    registry = _chain()
    flow = Flow(
        ["publish"],
        registry=registry,
        partition_groups=[PartitionGroup(("extract", "transform", "publish"))],
    )
    plan = flow.plan(KEYS)
    assert plan.to_dict()["groups"] == [{"assets": ["extract", "transform", "publish"], "max_active_keys": 1}]


def test_ungrouped_tasks_have_no_group_index():
    registry = _chain()
    _register(registry, "lookup", partitioned=False)
    _register(registry, "final", deps=["publish", "lookup"])
    flow = Flow(["final"], registry=registry, partition_groups=[PartitionGroup(["extract", "transform"])])
    plan = flow.plan(KEYS)
    groups = {task["name"]: task["group"] for task in plan.to_dict()["tasks"]}
    assert groups == {"extract": 0, "transform": 0, "publish": None, "lookup": None, "final": None}


def test_task_group_index_refers_to_the_planned_groups_list():
    registry = _chain()
    _register(registry, "other_a")
    _register(registry, "other_b", deps=["other_a"])
    flow = Flow(
        ["publish"],
        registry=registry,
        partition_groups=[PartitionGroup(["other_a", "other_b"]), PartitionGroup(["transform", "publish"])],
    )
    plan = flow.plan(KEYS)
    document = plan.to_dict()
    assert document["groups"] == [{"assets": ["transform", "publish"], "max_active_keys": 1}]
    for task in document["tasks"]:
        if task["group"] is not None:
            assert task["name"] in document["groups"][task["group"]]["assets"]
    assert plan.task("transform").group == 0
    assert plan.task("extract").group is None


def test_two_disjoint_groups_in_one_plan_are_both_planned():
    registry = _chain()
    _register(registry, "finalize", deps=["publish"])
    flow = Flow(
        ["finalize"],
        registry=registry,
        partition_groups=[PartitionGroup(["extract", "transform"]), PartitionGroup(["publish", "finalize"])],
    )
    plan = flow.plan(KEYS)
    assert [task.group for task in plan.tasks] == [0, 0, 1, 1]


def test_group_wholly_outside_the_closure_is_ignored():
    registry = _chain()
    _register(registry, "side_a")
    _register(registry, "side_b", deps=["side_a"])
    flow = Flow(["publish"], registry=registry, partition_groups=[PartitionGroup(["side_a", "side_b"])])
    plan = flow.plan(KEYS)
    assert plan.groups == ()
    assert plan.to_dict()["groups"] == []
    assert all(task.group is None for task in plan.tasks)


def test_group_of_unregistered_names_outside_the_closure_is_ignored():
    registry = _chain()
    flow = Flow(["publish"], registry=registry, partition_groups=[PartitionGroup(["nowhere_a", "nowhere_b"])])
    assert flow.plan(KEYS).groups == ()


def test_grouped_flow_runs_every_selected_key_through_every_member():
    calls = []
    registry = _chain(calls)
    flow = Flow(["publish"], registry=registry, partition_groups=[PartitionGroup(("extract", "transform", "publish"))])
    result = flow.run(KEYS)
    assert result.succeeded
    assert sorted(calls) == sorted(["extract", "transform", "publish"] * 2)


def test_consumers_downstream_of_a_group_and_shared_upstreams_are_allowed():
    registry = AssetRegistry()
    _register(registry, "lookup", partitioned=False)
    _register(registry, "raw")
    _register(registry, "a", deps=["raw", "lookup"])
    _register(registry, "b", deps=["a", "lookup", "raw"])
    _register(registry, "after", deps=["b", "a"])
    flow = Flow(["after"], registry=registry, partition_groups=[PartitionGroup(["a", "b"])])
    assert flow.plan(KEYS).groups == (PartitionGroup(["a", "b"]),)


def test_member_depending_on_an_earlier_member_besides_its_predecessor_is_allowed():
    registry = _chain()
    _register(registry, "extra", deps=["publish", "extract"])
    flow = Flow(
        ["extra"], registry=registry, partition_groups=[PartitionGroup(["extract", "transform", "publish", "extra"])]
    )
    assert len(flow.plan(KEYS).groups) == 1


# -- rejected groups --------------------------------------------------------


def test_member_not_depending_directly_on_its_predecessor_is_rejected_before_any_body_runs():
    calls = []
    registry = AssetRegistry()
    _register(registry, "extract", calls=calls)
    _register(registry, "transform", deps=["extract"], calls=calls)
    # publish depends on extract, skipping its declared predecessor transform.
    _register(registry, "publish", deps=["extract"], calls=calls)
    flow = Flow(
        ["publish", "transform"],
        registry=registry,
        partition_groups=[PartitionGroup(["extract", "transform", "publish"])],
    )
    with pytest.raises(PlanningError, match=r"'publish'.*'transform'") as info:
        flow.run(KEYS)
    assert "linear" in str(info.value)
    assert calls == []


def test_group_listed_in_reverse_dependency_order_is_rejected():
    registry = _chain()
    flow = Flow(["publish"], registry=registry, partition_groups=[PartitionGroup(["publish", "transform", "extract"])])
    with pytest.raises(PlanningError, match="predecessor"):
        flow.plan(KEYS)


def test_member_depending_only_indirectly_on_its_predecessor_is_rejected():
    registry = _chain()
    flow = Flow(["publish"], registry=registry, partition_groups=[PartitionGroup(["extract", "publish"])])
    with pytest.raises(PlanningError, match=r"'publish'.*'extract'"):
        flow.plan(KEYS)


def test_partial_selection_of_a_group_is_rejected_naming_the_missing_members():
    calls = []
    registry = _chain(calls)
    flow = Flow(
        ["transform"],
        registry=registry,
        partition_groups=[PartitionGroup(("extract", "transform", "publish"))],
    )
    with pytest.raises(PlanningError, match="'publish'") as info:
        flow.run(KEYS)
    assert "wholly" in str(info.value)
    assert calls == []


def test_partial_selection_with_only_the_first_member_planned_is_rejected():
    registry = _chain()
    flow = Flow(["extract"], registry=registry, partition_groups=[PartitionGroup(("extract", "transform", "publish"))])
    with pytest.raises(PlanningError, match=r"'transform'.*'publish'"):
        flow.plan(KEYS)


def test_unpartitioned_member_is_rejected():
    calls = []
    registry = AssetRegistry()
    _register(registry, "extract", calls=calls)
    _register(registry, "summarize", deps=["extract"], partitioned=False, calls=calls)
    flow = Flow(["summarize"], registry=registry, partition_groups=[PartitionGroup(["extract", "summarize"])])
    with pytest.raises(PlanningError, match=r"'summarize'.*not partitioned"):
        flow.run(KEYS)
    assert calls == []


def test_group_of_only_unpartitioned_assets_is_rejected():
    registry = AssetRegistry()
    _register(registry, "one", partitioned=False)
    _register(registry, "two", deps=["one"], partitioned=False)
    flow = Flow(["two"], registry=registry, partition_groups=[PartitionGroup(["one", "two"])])
    with pytest.raises(PlanningError, match="not partitioned"):
        flow.plan()


def test_overlapping_groups_are_rejected_naming_the_shared_asset():
    registry = _chain()
    flow = Flow(
        ["publish"],
        registry=registry,
        partition_groups=[PartitionGroup(["extract", "transform"]), PartitionGroup(["transform", "publish"])],
    )
    with pytest.raises(PlanningError, match=r"'transform'.*disjoint"):
        flow.plan(KEYS)


def test_the_same_group_listed_twice_is_rejected_as_overlapping():
    registry = _chain()
    group = PartitionGroup(["extract", "transform"])
    flow = Flow(["publish"], registry=registry, partition_groups=[group, group])
    with pytest.raises(PlanningError, match="disjoint"):
        flow.plan(KEYS)


def test_dependency_path_that_leaves_the_group_and_re_enters_is_rejected():
    calls = []
    registry = AssetRegistry()
    _register(registry, "extract", calls=calls)
    _register(registry, "side", deps=["extract"], calls=calls)
    _register(registry, "transform", deps=["extract"], calls=calls)
    # publish depends on its predecessor, and on extract through 'side' (outside the group).
    _register(registry, "publish", deps=["transform", "side"], calls=calls)
    flow = Flow(["publish"], registry=registry, partition_groups=[PartitionGroup(["extract", "transform", "publish"])])
    with pytest.raises(PlanningError, match=r"re-enters.*'publish'.*'side'") as info:
        flow.run(KEYS)
    assert "leaves" in str(info.value)
    assert calls == []


def test_long_detour_outside_the_group_that_re_enters_is_rejected():
    registry = AssetRegistry()
    _register(registry, "a")
    _register(registry, "b", deps=["a"])
    _register(registry, "out1", deps=["a"])
    _register(registry, "out2", deps=["out1"])
    _register(registry, "out3", deps=["out2"], partitioned=False)
    _register(registry, "c", deps=["b", "out3"])
    flow = Flow(["c"], registry=registry, partition_groups=[PartitionGroup(["a", "b", "c"])])
    with pytest.raises(PlanningError, match="re-enters"):
        flow.plan(KEYS)


def test_group_rules_apply_to_empty_selections_too():
    registry = _chain()
    flow = Flow(["transform"], registry=registry, partition_groups=[PartitionGroup(("extract", "transform", "publish"))])
    with pytest.raises(PlanningError):
        flow.plan({"empty_partitions": True})


def test_group_of_static_partitioned_chain_plans():
    registry = AssetRegistry()
    regions = StaticPartitionDef("region", ["eu", "us"])
    _register(registry, "load", partition_def=regions)
    _register(registry, "score", deps=["load"], partition_def=regions)
    flow = Flow(["score"], registry=registry, partition_groups=[PartitionGroup(["load", "score"])])
    plan = flow.plan({"partition_keys": ["eu", "us"]})
    assert plan.domain == "static:region"
    assert [task.group for task in plan.tasks] == [0, 0]
