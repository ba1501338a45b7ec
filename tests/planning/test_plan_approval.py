"""`Flow.run(plan)` runs a plan only on a Flow configured as the one that made it (SPEC §1.3, §4).

A plan carries its targets, closure, partition definitions, resources,
groups, materialization and run options. A Flow configured otherwise gets a
`PlanningError` that names each difference, before any body runs and before
anything is recorded. Equality is by value: a Flow rebuilt from the same entry
(new objects, equal configuration) runs the plan.
"""

from __future__ import annotations

import asyncio
import textwrap

import pytest

from partita import (
    AssetRegistry,
    DatePartitionDef,
    FileMaterialization,
    Flow,
    PartitionGroup,
    PlanningError,
    RateLimit,
    ResourcePolicy,
    RetryPolicy,
    RunStatus,
    asset,
    open_store,
)
from partita.entry import load_entry

KEYS = {"partition_keys": ["2026-08-08"]}


def _registry(calls, *, resource=None, partition_def=None, version=None, root=None, retry=None, body_factor=1):
    """extract -> publish, both by date; options change one definition at a time."""
    registry = AssetRegistry()
    materialization = None if root is None else FileMaterialization(root)

    @asset(
        partition_def=partition_def or DatePartitionDef(),
        resource=resource,
        materialization=materialization,
        version=version,
        retry=retry,
        registry=registry,
    )
    def extract(context):
        calls.append(("extract", context.partition_key))
        return body_factor

    @asset(partition_def=DatePartitionDef(), materialization=materialization, version=version, registry=registry)
    def publish(extract, context):
        calls.append(("publish", context.partition_key))
        return extract * 10

    return registry


def _rejected(flow, plan, calls):
    with pytest.raises(PlanningError) as caught:
        flow.run(plan)
    with pytest.raises(PlanningError):
        asyncio.run(flow.run_async(plan))
    assert calls == []
    return str(caught.value)


def test_a_plan_needing_a_resource_the_running_flow_lacks_is_a_planning_error_naming_it(tmp_path):
    calls = []
    registry = _registry(calls, resource="api")
    planner = Flow(["publish"], registry=registry, resources={"api": ResourcePolicy(max_concurrency=1)})
    plan = planner.plan(KEYS)
    url = f"sqlite:///{tmp_path / 'history.db'}"
    runner = Flow(["publish"], registry=registry, store=url)
    message = _rejected(runner, plan, calls)
    assert "another flow" in message
    assert "resources['api']" in message
    store = open_store(url)
    try:
        assert store.list_runs() == []  # nothing was recorded
    finally:
        store.close()


def test_a_plan_whose_resource_policy_differs_is_rejected_naming_the_resource():
    calls = []
    registry = _registry(calls, resource="api")
    plan = Flow(["publish"], registry=registry, resources={"api": ResourcePolicy(max_concurrency=1)}).plan(KEYS)
    limited = ResourcePolicy(max_concurrency=1, rate_limit=RateLimit(5, 1.0))
    runner = Flow(["publish"], registry=registry, resources={"api": limited})
    assert "resources['api']" in _rejected(runner, plan, calls)


def test_an_unused_resource_policy_of_the_running_flow_is_no_difference():
    calls = []
    registry = _registry(calls)
    plan = Flow(["publish"], registry=registry).plan(KEYS)
    runner = Flow(["publish"], registry=registry, resources={"spare": ResourcePolicy(max_concurrency=1)})
    assert runner.run(plan).status is RunStatus.SUCCESS


def test_a_plan_with_other_targets_is_rejected_naming_the_targets():
    calls = []
    registry = _registry(calls)
    plan = Flow(["extract"], registry=registry).plan(KEYS)
    message = _rejected(Flow(["publish"], registry=registry), plan, calls)
    assert "targets" in message
    assert "'extract'" in message and "'publish'" in message


def test_a_plan_with_other_partition_groups_is_rejected_naming_the_groups():
    calls = []
    registry = _registry(calls)
    plan = Flow(["publish"], registry=registry, partition_groups=[PartitionGroup(["extract", "publish"])]).plan(KEYS)
    assert "partition_groups" in _rejected(Flow(["publish"], registry=registry), plan, calls)
    runner = Flow(["publish"], registry=registry, partition_groups=[PartitionGroup(["extract", "publish"], 2)])
    assert "partition_groups" in _rejected(runner, plan, calls)


def test_a_plan_with_another_default_max_concurrency_is_rejected_naming_it():
    calls = []
    registry = _registry(calls)
    plan = Flow(["publish"], registry=registry, max_concurrency=2).plan(KEYS)
    message = _rejected(Flow(["publish"], registry=registry, max_concurrency=8), plan, calls)
    assert "max_concurrency" in message


def test_a_run_config_max_concurrency_in_the_plan_is_no_difference():
    calls = []
    flow = Flow(["publish"], registry=_registry(calls), max_concurrency=2)
    plan = flow.plan({**KEYS, "max_concurrency": 1})
    assert flow.run(plan).status is RunStatus.SUCCESS
    assert plan.options.max_concurrency == 1


def test_a_plan_from_another_registry_with_another_partition_definition_is_rejected_naming_the_asset():
    calls = []
    plan = Flow(["publish"], registry=_registry(calls)).plan(KEYS)
    other = _registry(calls, partition_def=DatePartitionDef(start="2026-01-01"))
    message = _rejected(Flow(["publish"], registry=other), plan, calls)
    assert "asset 'extract'" in message and "partition_def" in message
    assert "2026-08-08" not in message


def test_a_plan_from_another_registry_with_another_body_is_rejected_naming_the_asset():
    calls = []
    plan = Flow(["publish"], registry=_registry(calls)).plan(KEYS)
    other = _registry(calls, body_factor=2)
    message = _rejected(Flow(["publish"], registry=other), plan, calls)
    assert "asset 'extract'" in message and "body" in message


def test_a_plan_from_another_registry_with_another_retry_policy_is_rejected_naming_the_asset():
    calls = []
    plan = Flow(["publish"], registry=_registry(calls, retry=RetryPolicy(max_attempts=2))).plan(KEYS)
    other = _registry(calls, retry=RetryPolicy(max_attempts=3))
    message = _rejected(Flow(["publish"], registry=other), plan, calls)
    assert "asset 'extract'" in message and "retry" in message


def test_a_plan_with_another_materialization_is_rejected_naming_the_assets(tmp_path):
    calls = []
    plan = Flow(["publish"], registry=_registry(calls, root=tmp_path / "a", version="1")).plan(KEYS)
    other_version = _registry(calls, root=tmp_path / "a", version="2")
    message = _rejected(Flow(["publish"], registry=other_version), plan, calls)
    assert "asset 'extract'" in message and "asset 'publish'" in message and "version" in message
    other_root = _registry(calls, root=tmp_path / "b", version="1")
    assert "materialization" in _rejected(Flow(["publish"], registry=other_root), plan, calls)


def test_an_equal_materialization_from_another_registry_runs_the_plan(tmp_path):
    calls = []
    plan = Flow(["publish"], registry=_registry(calls, root=tmp_path / "a", version="1")).plan(KEYS)
    runner = Flow(["publish"], registry=_registry(calls, root=tmp_path / "a", version="1"))
    assert runner.run(plan).status is RunStatus.SUCCESS


def test_a_plan_whose_registry_has_other_assets_outside_the_closure_is_rejected_naming_them():
    calls = []
    registry = _registry(calls)
    plan = Flow(["publish"], registry=registry).plan(KEYS)
    other = _registry(calls)

    @asset(registry=other)
    def audit():
        return None

    message = _rejected(Flow(["publish"], registry=other), plan, calls)
    assert "registry" in message and "'audit'" in message


def test_every_difference_is_listed():
    calls = []
    registry = _registry(calls, resource="api")
    planner = Flow(
        ["publish"],
        registry=registry,
        resources={"api": ResourcePolicy(max_concurrency=1)},
        partition_groups=[PartitionGroup(["extract", "publish"])],
        max_concurrency=3,
    )
    plan = planner.plan(KEYS)
    message = _rejected(Flow(["publish"], registry=registry), plan, calls)
    for field in ("resources['api']", "partition_groups", "max_concurrency"):
        assert field in message


def test_a_flow_with_equal_configuration_built_from_another_registry_runs_the_plan():
    calls = []
    policy = {"api": ResourcePolicy(max_concurrency=1)}
    plan = Flow(["publish"], registry=_registry(calls, resource="api"), resources=policy).plan(KEYS)
    equal_policy = {"api": ResourcePolicy(max_concurrency=1)}
    runner = Flow(["publish"], registry=_registry(calls, resource="api"), resources=equal_policy)
    result = runner.run(plan)
    assert result.status is RunStatus.SUCCESS
    assert result.tasks["publish"].attempts[0].output == 10


def test_a_copy_of_the_flow_with_another_store_runs_the_plan(tmp_path):
    calls = []
    flow = Flow(["publish"], registry=_registry(calls), store=False)
    plan = flow.plan(KEYS)
    recorded = flow.with_store(f"sqlite:///{tmp_path / 'history.db'}")
    assert recorded.run(plan).status is RunStatus.SUCCESS


ENTRY = """\
import abc
from dataclasses import dataclass

from partita import (
    DatePartitionDef, Fail, Flow, PartitionAtRuntime, PartitionDef, PartitionGroup, ResourcePolicy, Retry,
    RetryPolicy, asset,
)


@dataclass(frozen=True)
class Shards(PartitionDef):
    count: int = 4

    @property
    def domain(self):
        return "shards"


class Checked(abc.ABC):
    @abc.abstractmethod
    def check(self): ...


class Prefixed(PartitionDef, Checked):
    __slots__ = ("prefix",)

    def __init__(self, prefix):
        self.prefix = prefix

    def check(self):
        return True

    @property
    def domain(self):
        return "prefixed"


@asset(partition_def=Shards())
def shard(context):
    return context.partition_key


@asset(partition_def=Prefixed("p-"))
def prefixed(context):
    return context.partition_key


def classify(exc):
    return Retry() if isinstance(exc, TimeoutError) else Fail()


def allowed(key):
    return key.startswith("t-")


class Tenants(PartitionAtRuntime):
    # A custom definition defined in the entry: a new class on every load.

    def normalize_key(self, key):
        return super().normalize_key(key.strip() if isinstance(key, str) else key)


@asset(partition_def=DatePartitionDef(start="2026-01-01"), resource="api", retry=RetryPolicy(max_attempts=2))
def extract(context):
    return 1


@asset(partition_def=DatePartitionDef())
def publish(extract, context):
    return extract + 1


@asset(partition_def=Tenants("tenants", allowed=allowed, max_keys=5))
def tenants(context):
    context.add_partition("t-1")


flow = Flow(
    ["publish"],
    resources={"api": ResourcePolicy(max_concurrency=2, classify_failure=classify)},
    partition_groups=[PartitionGroup(["extract", "publish"])],
    max_concurrency=4,
    store=False,
)
tenant_flow = Flow(["tenants"], store=False)
shard_flow = Flow(["shard"], store=False)
prefixed_flow = Flow(["prefixed"], store=False)
"""


def test_a_flow_rebuilt_from_the_same_entry_file_runs_the_plan(tmp_path):
    entry = tmp_path / "pipeline.py"
    entry.write_text(textwrap.dedent(ENTRY))
    plan = load_entry(str(entry)).plan(KEYS)
    rebuilt = load_entry(str(entry))
    assert rebuilt.registry is not plan.registry
    result = rebuilt.run(plan)
    assert result.status is RunStatus.SUCCESS
    assert result.tasks["publish"].attempts[0].output == 2
    tenants_plan = load_entry(f"{entry}:tenant_flow").plan()
    assert load_entry(f"{entry}:tenant_flow").run(tenants_plan).status is RunStatus.SUCCESS
    for name in ("shard_flow", "prefixed_flow"):
        custom_plan = load_entry(f"{entry}:{name}").plan({"partition_keys": [1]})
        assert load_entry(f"{entry}:{name}").run(custom_plan).status is RunStatus.SUCCESS


FACTORY_ENTRY = """\
from partita import AssetRegistry, DatePartitionDef, Flow, asset


def make(scale):
    registry = AssetRegistry()

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def scaled(context):
        return scale

    return Flow(["scaled"], registry=registry, store=False)


def small():
    return make(1)


def large():
    return make(1000)
"""


def test_a_flow_from_a_factory_runs_the_plan_of_an_equal_one_and_rejects_one_built_with_other_values(tmp_path):
    entry = tmp_path / "factory.py"
    entry.write_text(FACTORY_ENTRY)
    plan = load_entry(f"{entry}:small").plan(KEYS)
    assert load_entry(f"{entry}:small").run(plan).tasks["scaled"].attempts[0].output == 1
    with pytest.raises(PlanningError, match="asset 'scaled': body differ"):
        load_entry(f"{entry}:large").run(plan)
