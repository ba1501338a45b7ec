"""Whether a Flow may run a plan: the plan must match the Flow's configuration (SPEC §1.3, §4).

A plan fixes its targets, closure (each asset's body, dependencies,
partition definition, resource, retry policy, materialization, callbacks),
the registry its emissions are checked against, the resource policies and
partition groups that apply, and the Flow's ``max_concurrency``. A Flow configured otherwise would run something nobody
reviewed (or fail deep inside on a resource it lacks), so every difference is
reported by name before anything runs or is recorded. Comparison is by value:
a Flow rebuilt from the same entry, or a copy made with `Flow.with_store`, has
equal configuration and runs the plan. What a plan does not fix (store,
executor, clock, flow callbacks) is the running Flow's to choose.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from partita.definitions.assets import AssetDefinition
from partita.definitions.groups import PartitionGroup
from partita.definitions.policies import ResourcePolicy
from partita.definitions.registry import AssetRegistry
from partita.errors import DefinitionError, PlanningError
from partita.planning.equality import same_value
from partita.planning.graph import resolve_closure
from partita.planning.plan import FlowPlan

__all__ = ["check_plan_matches", "plan_differences"]

#: How a definition field is named in a difference (the rest by their own name).
_FIELD_LABELS = {"fn": "body", "is_async": "body", "inputs": "dependencies", "deps": "dependencies"}


def check_plan_matches(
    plan: FlowPlan,
    *,
    registry: AssetRegistry,
    targets: Sequence[str],
    resources: Mapping[str, ResourcePolicy],
    partition_groups: Sequence[PartitionGroup],
    max_concurrency: int | None,
) -> None:
    """Raise PlanningError listing every way the plan differs from this configuration."""
    differences = plan_differences(
        plan,
        registry=registry,
        targets=targets,
        resources=resources,
        partition_groups=partition_groups,
        max_concurrency=max_concurrency,
    )
    if differences:
        raise PlanningError(
            "the plan was built by another flow configured differently: "
            + "; ".join(differences)
            + "; plan again with this Flow, or run the plan with the Flow that made it"
        )


def plan_differences(
    plan: FlowPlan,
    *,
    registry: AssetRegistry,
    targets: Sequence[str],
    resources: Mapping[str, ResourcePolicy],
    partition_groups: Sequence[PartitionGroup],
    max_concurrency: int | None,
) -> tuple[str, ...]:
    """Each difference between the plan and a Flow's configuration, named by field."""
    if tuple(targets) != plan.targets:
        return (f"targets: the plan has {_names(plan.targets)}, the flow has {_names(targets)}",)
    try:
        closure = resolve_closure(registry, targets)
    except (DefinitionError, PlanningError) as exc:
        return (f"closure: the flow cannot resolve its targets ({exc})",)
    differences: list[str] = []
    planned = [task.name for task in plan.tasks]
    current = {definition.name: definition for definition in closure}
    if planned != [definition.name for definition in closure]:
        differences.append(f"closure: the plan has {_names(planned)}, the flow has {_names(current)}")
    for task in plan.tasks:
        definition = current.get(task.name)
        if definition is not None:
            differences.extend(_asset_differences(f"asset {task.name!r}", task.definition, definition))
    if plan.registry is not registry:
        differences.extend(_registry_differences(plan.registry, registry, current))
    differences.extend(_resource_differences(plan, resources))
    applying = tuple(group for group in partition_groups if any(name in current for name in group.assets))
    if not same_value(applying, plan.groups):
        differences.append(
            f"partition_groups: the plan has {_groups(plan.groups)}, the flow has {_groups(applying)}"
        )
    if plan.options.default_max_concurrency != max_concurrency:
        differences.append(
            f"max_concurrency: the plan was made with {_limit(plan.options.default_max_concurrency)}, "
            f"the flow has {_limit(max_concurrency)}"
        )
    return tuple(differences)


def _asset_differences(subject: str, planned: AssetDefinition, current: AssetDefinition) -> list[str]:
    if planned is current:
        return []
    labels: list[str] = []
    for field in dataclasses.fields(AssetDefinition):
        label = _FIELD_LABELS.get(field.name, field.name)
        if label in labels:
            continue
        if not same_value(getattr(planned, field.name), getattr(current, field.name)):
            labels.append(label)
    if not labels:
        return []
    return [f"{subject}: {', '.join(labels)} {'differs' if len(labels) == 1 else 'differ'}"]


def _registry_differences(
    planned: AssetRegistry, registry: AssetRegistry, closure: Mapping[str, AssetDefinition]
) -> list[str]:
    """Assets outside the closure still matter: emissions are checked against the plan's registry."""
    outside_plan = [name for name in planned if name not in closure]
    outside_flow = [name for name in registry if name not in closure]
    differences: list[str] = []
    only_plan = [name for name in outside_plan if name not in registry]
    only_flow = [name for name in outside_flow if name not in planned]
    if only_plan or only_flow:
        differences.append(
            f"registry: outside the closure, the plan's registry alone has {_names(only_plan)} "
            f"and the flow's alone has {_names(only_flow)}"
        )
    for name in outside_plan:
        current = registry.get(name)
        if current is not None:
            planned_definition = planned.get(name)
            assert planned_definition is not None
            differences.extend(_asset_differences(f"registry asset {name!r}", planned_definition, current))
    return differences


def _resource_differences(plan: FlowPlan, resources: Mapping[str, ResourcePolicy]) -> list[str]:
    differences: list[str] = []
    for resource in plan.resources:
        policy = resources.get(resource.name)
        if policy is None:
            differences.append(f"resources[{resource.name!r}]: the flow declares no such ResourcePolicy")
        elif not same_value(policy, resource.policy):
            differences.append(f"resources[{resource.name!r}]: the flow's ResourcePolicy differs from the plan's")
    return differences


def _names(names: Sequence[str] | Mapping[str, object]) -> str:
    return "[" + ", ".join(repr(name) for name in names) + "]"


def _groups(groups: Sequence[PartitionGroup]) -> str:
    if not groups:
        return "none"
    return ", ".join(f"{'>'.join(group.assets)} (max_active_keys={group.max_active_keys})" for group in groups)


def _limit(value: int | None) -> str:
    return "none" if value is None else str(value)
