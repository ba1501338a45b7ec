"""The dependency closure: unknown names, cycles and ordering (SPEC §2, §4, §14)."""

import pytest

from partita import AssetRegistry, DefinitionError, Flow, PlanningError, asset


def _register(registry, name, deps=(), calls=None):
    """Register an unpartitioned asset with ordering-only dependencies."""

    def body():
        if calls is not None:
            calls.append(name)
        return name

    asset(name=name, deps=list(deps), registry=registry)(body)


def _names(plan):
    return [task.name for task in plan.tasks]


# -- unknown names ----------------------------------------------------------


def test_unknown_target_is_a_planning_error_naming_it():
    registry = AssetRegistry()
    _register(registry, "known")
    flow = Flow(["known", "missing_target"], registry=registry)
    with pytest.raises(PlanningError, match="'missing_target'"):
        flow.plan()


def test_unknown_target_is_rejected_by_run_before_any_body_runs():
    calls = []
    registry = AssetRegistry()
    _register(registry, "known", calls=calls)
    with pytest.raises(PlanningError):
        Flow(["known", "missing_target"], registry=registry).run()
    assert calls == []


def test_parameter_naming_no_asset_is_a_definition_error_naming_asset_and_parameter():
    calls = []
    registry = AssetRegistry()

    @asset(registry=registry)
    def orders():
        calls.append("orders")
        return 1

    @asset(registry=registry)
    def report(orders, cusotmers):
        calls.append("report")
        return orders

    flow = Flow(["report"], registry=registry)
    with pytest.raises(DefinitionError) as info:
        flow.run()
    message = str(info.value)
    assert "'report'" in message
    assert "'cusotmers'" in message
    assert "parameter" in message
    assert calls == []


def test_deps_entry_naming_no_asset_is_a_definition_error_naming_asset_and_dependency():
    registry = AssetRegistry()
    _register(registry, "report", deps=["ghost"])
    with pytest.raises(DefinitionError, match=r"'report'.*'ghost'"):
        Flow(["report"], registry=registry).plan()


def test_unknown_dependency_upstream_of_the_target_is_found_at_planning():
    registry = AssetRegistry()
    _register(registry, "a", deps=["ghost"])
    _register(registry, "b", deps=["a"])
    _register(registry, "c", deps=["b"])
    with pytest.raises(DefinitionError, match=r"'a'.*'ghost'"):
        Flow(["c"], registry=registry).plan()


def test_dependency_registered_after_its_consumer_is_resolved_at_planning():
    registry = AssetRegistry()

    @asset(registry=registry)
    def report(orders):
        return orders + 1

    @asset(registry=registry)
    def orders():
        return 1

    assert Flow(["report"], registry=registry).run().output("report") == 2


# -- cycles -----------------------------------------------------------------


def test_cycle_is_a_definition_error_naming_every_asset_on_the_cycle():
    calls = []
    registry = AssetRegistry()

    @asset(registry=registry)
    def alpha(gamma):
        calls.append("alpha")

    @asset(registry=registry)
    def beta(alpha):
        calls.append("beta")

    @asset(registry=registry)
    def gamma(beta):
        calls.append("gamma")

    with pytest.raises(DefinitionError, match="cycle") as info:
        Flow(["gamma"], registry=registry).run()
    message = str(info.value)
    for name in ("alpha", "beta", "gamma"):
        assert name in message
    assert calls == []


def test_cycle_upstream_of_the_target_names_the_cycle_members():
    registry = AssetRegistry()
    _register(registry, "entry_point", deps=["loop_a"])
    _register(registry, "loop_a", deps=["loop_b"])
    _register(registry, "loop_b", deps=["loop_c"])
    _register(registry, "loop_c", deps=["loop_a"])
    with pytest.raises(DefinitionError, match="cycle") as info:
        Flow(["entry_point"], registry=registry).plan()
    message = str(info.value)
    for name in ("loop_a", "loop_b", "loop_c"):
        assert name in message
    assert "entry_point" not in message


def test_two_asset_cycle_through_deps_is_detected():
    registry = AssetRegistry()
    _register(registry, "ping", deps=["pong"])
    _register(registry, "pong", deps=["ping"])
    with pytest.raises(DefinitionError, match=r"ping.*pong|pong.*ping"):
        Flow(["ping"], registry=registry).plan()


def test_closure_reports_cycles_too():
    registry = AssetRegistry()
    _register(registry, "ping", deps=["pong"])
    _register(registry, "pong", deps=["ping"])
    with pytest.raises(DefinitionError, match="cycle"):
        Flow(["ping"], registry=registry).closure()


def test_cycle_outside_the_selected_closure_does_not_block_planning():
    registry = AssetRegistry()
    _register(registry, "ping", deps=["pong"])
    _register(registry, "pong", deps=["ping"])
    _register(registry, "fine")
    assert _names(Flow(["fine"], registry=registry).plan()) == ["fine"]


# -- order ------------------------------------------------------------------


def _assert_upstream_first(plan):
    position = {task.name: index for index, task in enumerate(plan.tasks)}
    for task in plan.tasks:
        for dep in task.deps:
            assert position[dep] < position[task.name], (dep, task.name)


def test_topological_order_puts_every_upstream_before_its_consumers():
    registry = AssetRegistry()
    _register(registry, "publish", deps=["left", "right"])
    _register(registry, "left", deps=["source"])
    _register(registry, "right", deps=["source", "lookup"])
    _register(registry, "source")
    _register(registry, "lookup")
    plan = Flow(["publish"], registry=registry).plan()
    assert set(_names(plan)) == {"publish", "left", "right", "source", "lookup"}
    assert _names(plan)[-1] == "publish"
    _assert_upstream_first(plan)


def test_topological_order_is_deterministic_across_plans_and_registration_orders():
    edges = {
        "publish": ["left", "right"],
        "left": ["source"],
        "right": ["source", "lookup"],
        "source": [],
        "lookup": [],
        "audit": ["publish", "lookup"],
    }
    orders = set()
    for registration in (list(edges), list(reversed(edges)), sorted(edges)):
        registry = AssetRegistry()
        for name in registration:
            _register(registry, name, deps=edges[name])
        flow = Flow(["audit"], registry=registry)
        orders.add(tuple(_names(flow.plan())))
        orders.add(tuple(_names(flow.plan())))
        orders.add(tuple(definition.name for definition in flow.closure()))
    assert len(orders) == 1
    assert orders.pop()[-1] == "audit"


def test_topological_order_follows_declared_dependency_order():
    registry = AssetRegistry()
    _register(registry, "source")
    _register(registry, "b", deps=["source"])
    _register(registry, "c", deps=["source"])
    _register(registry, "d_bc", deps=["b", "c"])
    _register(registry, "d_cb", deps=["c", "b"])
    assert _names(Flow(["d_bc"], registry=registry).plan()) == ["source", "b", "c", "d_bc"]
    assert _names(Flow(["d_cb"], registry=registry).plan()) == ["source", "c", "b", "d_cb"]


def test_multiple_targets_share_upstream_tasks_once():
    registry = AssetRegistry()
    _register(registry, "source")
    _register(registry, "first", deps=["source"])
    _register(registry, "second", deps=["source"])
    plan = Flow(["first", "second"], registry=registry).plan()
    assert _names(plan) == ["source", "first", "second"]
    assert plan.targets == ("first", "second")


def test_target_that_is_upstream_of_another_target_appears_once():
    registry = AssetRegistry()
    _register(registry, "source")
    _register(registry, "final", deps=["source"])
    plan = Flow(["final", "source"], registry=registry).plan()
    assert _names(plan) == ["source", "final"]


def test_assets_outside_the_closure_are_not_planned():
    registry = AssetRegistry()
    _register(registry, "source")
    _register(registry, "wanted", deps=["source"])
    _register(registry, "unrelated")
    _register(registry, "sibling", deps=["source"])
    assert _names(Flow(["wanted"], registry=registry).plan()) == ["source", "wanted"]


def test_execution_follows_the_planned_order_for_a_chain():
    calls = []
    registry = AssetRegistry()
    _register(registry, "one", calls=calls)
    _register(registry, "two", deps=["one"], calls=calls)
    _register(registry, "three", deps=["two"], calls=calls)
    result = Flow(["three"], registry=registry).run()
    assert result.succeeded
    assert calls == ["one", "two", "three"]


# -- scale ------------------------------------------------------------------


def test_long_linear_chain_plans_without_recursion_error():
    registry = AssetRegistry()
    length = 5000
    _register(registry, "link_0")
    for index in range(1, length):
        _register(registry, f"link_{index}", deps=[f"link_{index - 1}"])
    plan = Flow([f"link_{length - 1}"], registry=registry).plan()
    assert len(plan.tasks) == length
    assert _names(plan) == [f"link_{index}" for index in range(length)]
    assert plan.attempt_count == length
    assert len(plan.to_dict()["tasks"]) == length


def test_long_cycle_is_reported_without_recursion_error():
    registry = AssetRegistry()
    length = 5000
    for index in range(length):
        _register(registry, f"ring_{index}", deps=[f"ring_{(index + 1) % length}"])
    with pytest.raises(DefinitionError, match="cycle") as info:
        Flow(["ring_0"], registry=registry).plan()
    assert "ring_4999" in str(info.value)
    assert "ring_2500" in str(info.value)


# -- targets ----------------------------------------------------------------


@pytest.mark.parametrize("targets", [[], ()], ids=["list", "tuple"])
def test_flow_without_targets_is_rejected(targets):
    registry = AssetRegistry()
    _register(registry, "known")
    with pytest.raises(DefinitionError, match="at least one asset"):
        Flow(targets, registry=registry)


def test_flow_repeating_a_target_is_rejected():
    registry = AssetRegistry()
    _register(registry, "known")
    with pytest.raises(DefinitionError, match="must not repeat"):
        Flow(["known", "known"], registry=registry)


@pytest.mark.parametrize("targets", [5, None, b"known"], ids=["int", "none", "bytes"])
def test_flow_targets_of_the_wrong_type_are_rejected(targets):
    registry = AssetRegistry()
    _register(registry, "known")
    with pytest.raises(DefinitionError, match="Flow targets"):
        Flow(targets, registry=registry)


def test_single_target_name_is_accepted_as_a_string():
    registry = AssetRegistry()
    _register(registry, "known")
    assert Flow("known", registry=registry).plan().targets == ("known",)
