"""Planning runtime domains (SPEC §4, §9, §14).

No selector means "discover" when the closure's partitioned assets form one
runtime domain whose producer is in the closure: the plan reports the domain,
the producer, a key count known only at run time (and the ``max_keys``
bound). Explicit ``partition_keys`` narrow a run: the producer still runs
and discovers, downstream attempts run only for the selected keys, and a
selected key that was not discovered is skipped with
``partition_not_discovered``.
"""

from __future__ import annotations

import json

import pytest

import partita as p

SECRET = "tenant-secret-c41d22"


def pipeline(*, discovered=("acme", "globex", "initech"), allowed=None, max_keys=None, calls=None):
    """tenants (producer, returns key -> 'out-<key>') -> load -> publish -> summary."""
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants", allowed=allowed, max_keys=max_keys)
    calls = [] if calls is None else calls

    @p.asset(partition_def=domain, registry=registry)
    def tenants(context):
        calls.append(("tenants", None))
        context.partition_keys = list(discovered)
        return {key: f"out-{key}" for key in discovered}

    @p.asset(partition_def=domain, registry=registry)
    def load(context, tenants):
        calls.append(("load", context.partition_key))
        return (context.partition_key, tenants)

    @p.asset(partition_def=domain, registry=registry)
    def publish(context, load):
        calls.append(("publish", context.partition_key))
        return load

    @p.asset(registry=registry)
    def summary(publish):
        calls.append(("summary", None))
        return dict(publish)

    return registry


def flow(registry, targets=("summary",), **options):
    options.setdefault("store", False)
    return p.Flow(list(targets), registry=registry, **options)


def task_doc(document, name):
    (task,) = [task for task in document["tasks"] if task["name"] == name]
    return task


def statuses(result, asset_name):
    return [(a.partition_key, a.status, a.reason) for a in result.tasks[asset_name].attempts]


# -- the discover plan ------------------------------------------------------------------------------


def test_no_selector_plans_a_discovery_and_invokes_no_body():
    calls = []
    plan = flow(pipeline(max_keys=50, calls=calls)).plan()

    assert calls == []
    assert plan.selection_kind is p.SelectionKind.DISCOVER
    assert plan.domain == "runtime:tenants"
    assert plan.key_count is None
    assert plan.attempt_count is None
    assert plan.task("tenants").discovers is True
    assert plan.task("tenants").attempt_count == 1
    assert plan.task("load").attempt_count is None
    assert plan.task("publish").attempt_count is None
    assert plan.task("summary").attempt_count == 1


def test_the_plan_document_reports_domain_producer_run_time_key_count_and_max_keys():
    document = flow(pipeline(max_keys=50)).plan().to_dict()

    assert document["schema"] == "partita.plan"
    assert document["version"] == 1
    selection = document["selection"]
    assert selection["kind"] == "discover"
    assert selection["domain"] == "runtime:tenants"
    assert selection["key_count"] is None
    assert selection["runtime"]["producer"] == "tenants"
    assert selection["runtime"]["max_keys"] == 50
    assert selection["runtime"]["keys_known_at"] == "run time"
    assert document["attempt_count"] is None
    producer = task_doc(document, "tenants")
    assert producer["discovers"] is True
    assert producer["attempt_count"] == 1
    assert producer["partition"]["kind"] == "runtime"
    assert producer["partition"]["max_keys"] == 50
    for name in ("load", "publish"):
        assert task_doc(document, name)["attempt_count"] is None
        assert not task_doc(document, name).get("discovers", False)
    assert task_doc(document, "summary")["attempt_count"] == 1
    # The JSON text is the same document.
    assert json.loads(flow(pipeline(max_keys=50)).plan().to_json())["selection"] == selection


def test_without_max_keys_the_plan_reports_no_bound():
    document = flow(pipeline()).plan().to_dict()

    assert document["selection"]["runtime"]["max_keys"] is None


def test_a_plan_of_the_producer_alone_discovers():
    plan = flow(pipeline(), targets=["tenants"]).plan()

    assert plan.selection_kind is p.SelectionKind.DISCOVER
    assert [task.name for task in plan.tasks] == ["tenants"]
    assert plan.attempt_count == 1


def test_an_unpartitioned_upstream_of_the_producer_keeps_one_attempt():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")

    @p.asset(registry=registry)
    def settings():
        return {}

    @p.asset(partition_def=domain, registry=registry)
    def tenants(context, settings):
        context.partition_keys = ["a"]

    @p.asset(partition_def=domain, registry=registry)
    def load(tenants):
        return 1

    plan = flow(registry, targets=["load"]).plan()

    assert plan.task("settings").attempt_count == 1
    assert plan.task("tenants").discovers is True
    assert plan.selection.producer == "tenants"


def test_the_plan_is_approved_and_run_as_planned():
    registry = pipeline()
    runtime_flow = flow(registry)
    plan = runtime_flow.plan()

    result = runtime_flow.run(plan)

    assert result.status is p.RunStatus.SUCCESS
    assert [a.partition_key for a in result.tasks["publish"].attempts] == ["acme", "globex", "initech"]


# -- planning errors ------------------------------------------------------------------------------------


def test_two_producers_in_one_runtime_domain_are_a_planning_error_naming_them():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")

    @p.asset(partition_def=domain, registry=registry)
    def billing_tenants(context):
        context.partition_keys = ["a"]

    @p.asset(partition_def=p.PartitionAtRuntime("tenants"), registry=registry)
    def crm_tenants(context):
        context.partition_keys = ["b"]

    @p.asset(partition_def=domain, registry=registry)
    def merged(billing_tenants, crm_tenants):
        return 1

    for targets in (["billing_tenants", "crm_tenants"], ["merged"]):
        with pytest.raises(p.PlanningError) as caught:
            flow(registry, targets=targets).plan()
        message = str(caught.value)
        assert "billing_tenants" in message and "crm_tenants" in message
        assert "runtime:tenants" in message
        with pytest.raises(p.PlanningError):
            flow(registry, targets=targets).run()


def test_a_runtime_domain_with_a_static_domain_in_one_closure_is_a_planning_error_naming_assets():
    registry = p.AssetRegistry()
    ran = []

    @p.asset(partition_def=p.PartitionAtRuntime("tenants"), registry=registry)
    def tenants(context):
        ran.append("tenants")
        context.partition_keys = ["a"]

    @p.asset(partition_def=p.StaticPartitionDef("regions", ["eu", "us"]), registry=registry)
    def regions(context):
        ran.append("regions")
        return 1

    @p.asset(registry=registry)
    def report(tenants, regions):
        return 1

    for config in (None, {"partition_keys": ["eu"]}):
        with pytest.raises(p.PlanningError) as caught:
            flow(registry, targets=["report"]).plan(config)
        message = str(caught.value)
        assert "tenants" in message and "regions" in message
        assert "runtime:tenants" in message and "static:regions" in message
        with pytest.raises(p.PlanningError):
            flow(registry, targets=["report"]).run(config)
    assert ran == []


def test_a_runtime_domain_with_a_date_domain_in_one_closure_is_a_planning_error():
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.PartitionAtRuntime("tenants"), registry=registry)
    def tenants(context):
        context.partition_keys = ["a"]

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def daily(context):
        return 1

    with pytest.raises(p.PlanningError) as caught:
        flow(registry, targets=["tenants", "daily"]).plan({"partition_keys": ["2026-01-01"]})
    assert "tenants" in str(caught.value) and "daily" in str(caught.value)


def test_two_runtime_domains_in_one_closure_are_a_planning_error():
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.PartitionAtRuntime("tenants"), registry=registry)
    def tenants(context):
        context.partition_keys = ["a"]

    @p.asset(partition_def=p.PartitionAtRuntime("regions"), registry=registry)
    def regions(context):
        context.partition_keys = ["eu"]

    with pytest.raises(p.PlanningError) as caught:
        flow(registry, targets=["tenants", "regions"]).plan()
    assert "runtime:tenants" in str(caught.value) and "runtime:regions" in str(caught.value)


def test_partition_range_on_a_runtime_domain_is_a_selection_error():
    calls = []
    registry = pipeline(calls=calls)

    with pytest.raises(p.SelectionError) as caught:
        flow(registry).plan({"partition_range": ("acme", "globex")})
    assert "partition_range" in str(caught.value)
    with pytest.raises(p.SelectionError):
        flow(registry).run({"partition_range": ("acme", "globex")})
    assert calls == []


def test_selection_forms_cannot_be_combined_on_a_runtime_domain():
    with pytest.raises(p.SelectionError):
        flow(pipeline()).plan({"partition_keys": ["acme"], "empty_partitions": True})


def test_a_selector_without_any_partitioned_asset_stays_an_error():
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def plain():
        return 1

    with pytest.raises(p.SelectionError):
        flow(registry, targets=["plain"]).plan({"partition_keys": ["acme"]})


# -- explicit keys narrow the run --------------------------------------------------------------------------


def test_explicit_keys_plan_the_producer_as_discovering_and_the_domain_per_selected_key():
    calls = []
    plan = flow(pipeline(calls=calls)).plan({"partition_keys": ["globex", "acme"]})

    assert calls == []
    assert plan.selection_kind is p.SelectionKind.KEYS
    assert plan.key_count == 2
    assert plan.partition_keys == ("globex", "acme")
    assert plan.task("tenants").discovers is True
    assert plan.task("tenants").attempt_count == 1
    assert plan.task("load").attempt_count == 2
    assert plan.task("publish").attempt_count == 2
    assert plan.attempt_count == 1 + 2 + 2 + 1
    document = plan.to_dict()
    assert document["selection"]["kind"] == "keys"
    assert document["selection"]["key_count"] == 2
    assert document["selection"]["runtime"]["producer"] == "tenants"
    assert "globex" not in json.dumps(document)


def test_explicit_keys_run_the_producer_and_fan_out_only_the_selected_keys():
    calls = []
    registry = pipeline(calls=calls)

    result = flow(registry).run({"partition_keys": ["initech", "acme"]})

    assert result.status is p.RunStatus.SUCCESS
    assert calls.count(("tenants", None)) == 1
    assert result.discovered_partition_keys("tenants") == ("acme", "globex", "initech")
    assert [a.partition_key for a in result.tasks["load"].attempts] == ["initech", "acme"]
    assert [a.output for a in result.tasks["load"].attempts] == [("initech", "out-initech"), ("acme", "out-acme")]
    assert ("load", "globex") not in calls and ("publish", "globex") not in calls
    assert result.output("summary") == {"initech": ("initech", "out-initech"), "acme": ("acme", "out-acme")}


def test_a_selected_key_that_was_not_discovered_is_skipped_and_its_downstream_blocked():
    calls = []
    registry = pipeline(discovered=("acme", "globex"), calls=calls)

    result = flow(registry).run({"partition_keys": ["acme", "umbrella"]})

    assert statuses(result, "load") == [
        ("acme", p.AttemptStatus.SUCCESS, None),
        ("umbrella", p.AttemptStatus.SKIPPED, p.SkipReason.PARTITION_NOT_DISCOVERED),
    ]
    assert statuses(result, "publish") == [
        ("acme", p.AttemptStatus.SUCCESS, None),
        ("umbrella", p.AttemptStatus.SKIPPED, p.SkipReason.DEPENDENCY_FAILED),
    ]
    skipped_load = result.tasks["load"].attempts[1]
    blocked_publish = result.tasks["publish"].attempts[1]
    assert blocked_publish.blocked_by == (skipped_load,)
    (summary,) = result.tasks["summary"].attempts
    assert summary.status is p.AttemptStatus.SKIPPED
    assert summary.reason is p.SkipReason.DEPENDENCY_FAILED
    assert ("load", "umbrella") not in calls
    assert ("publish", "umbrella") not in calls
    # Nothing failed: an undiscovered key is a skip, not a failure.
    assert result.status is not p.RunStatus.FAILED
    assert result.failed_partition_keys("load") == ()


def test_partition_not_discovered_is_a_skip_reason():
    assert p.SkipReason.PARTITION_NOT_DISCOVERED.value == "partition_not_discovered"


def test_explicit_keys_when_the_producer_fails_block_every_selected_key():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants", max_keys=1)

    @p.asset(partition_def=domain, registry=registry)
    def tenants(context):
        context.partition_keys = ["acme", "globex"]

    @p.asset(partition_def=domain, registry=registry)
    def load(tenants):
        return 1

    result = flow(registry, targets=["load"]).run({"partition_keys": ["acme"]})

    assert result.status is p.RunStatus.FAILED
    assert isinstance(result.tasks["tenants"].attempts[0].exception, p.DiscoveryError)
    assert statuses(result, "load") == [("acme", p.AttemptStatus.SKIPPED, p.SkipReason.DEPENDENCY_FAILED)]


def test_explicit_keys_are_duplicates_selected_once():
    plan = flow(pipeline()).plan({"partition_keys": ["acme", "acme", "globex"]})

    assert plan.partition_keys == ("acme", "globex")


@pytest.mark.parametrize(
    "allowed",
    [["acme", "globex"], lambda key: key in {"acme", "globex"}],
    ids=["collection", "predicate"],
)
def test_selected_keys_rejected_by_allowed_fail_planning_without_repeating_them(allowed):
    calls = []
    registry = pipeline(allowed=allowed, calls=calls)

    with pytest.raises(p.SelectionError) as caught:
        flow(registry).plan({"partition_keys": ["acme", SECRET]})
    assert SECRET not in str(caught.value)
    assert "partition_keys[1]" in str(caught.value)
    with pytest.raises(p.SelectionError):
        flow(registry).run({"partition_keys": [SECRET]})
    assert calls == []


@pytest.mark.parametrize("key", ["", "x" * 1000, 42, None])
def test_malformed_selected_keys_fail_planning(key):
    with pytest.raises(p.SelectionError):
        flow(pipeline()).plan({"partition_keys": [key]})


def test_selected_keys_as_cli_text_are_accepted():
    plan = flow(pipeline()).plan_from_text({"partition_keys": ["acme"]})

    assert plan.partition_keys == ("acme",)
    assert plan.task("tenants").discovers is True


# -- empty partitions ------------------------------------------------------------------------------------------


def test_empty_partitions_plans_no_discovery_and_skips_everything():
    calls = []
    registry = pipeline(calls=calls)
    runtime_flow = flow(registry)

    plan = runtime_flow.plan({"empty_partitions": True})
    assert plan.selection_kind is p.SelectionKind.EMPTY
    assert plan.key_count == 0
    assert plan.task("tenants").discovers is False
    assert plan.task("tenants").attempt_count == 0
    assert plan.task("load").attempt_count == 0
    assert plan.to_dict()["selection"]["kind"] == "empty"

    result = runtime_flow.run({"empty_partitions": True})

    assert calls == []
    assert result.tasks["tenants"].attempts == ()
    assert result.tasks["load"].attempts == ()
    assert result.tasks["publish"].attempts == ()
    assert result.tasks["tenants"].reason is p.SkipReason.NO_PARTITION_KEYS
    (summary,) = result.tasks["summary"].attempts
    assert summary.status is p.AttemptStatus.SKIPPED
    assert summary.reason is p.SkipReason.NO_PARTITION_KEYS
    with pytest.raises(ValueError):
        result.discovered_partition_keys("tenants")
