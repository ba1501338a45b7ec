"""Planning rules for partition groups (SPEC §4, seed 003).

Groups are explicit, disjoint, ordered linear chains of partitioned assets:
each member after the first directly depends on its predecessor, the group is
wholly present in the plan, and no dependency path leaves the group and comes
back into it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from partita.definitions.assets import AssetDefinition
from partita.definitions.groups import PartitionGroup
from partita.errors import PlanningError

__all__ = ["check_group_keys", "plan_groups"]


def plan_groups(
    groups: Sequence[PartitionGroup], closure: Mapping[str, AssetDefinition]
) -> tuple[PartitionGroup, ...]:
    """Return the groups that apply to the closure, or raise PlanningError.

    A group with no member in the closure does not apply; a group with some
    but not all members present is a partial selection and fails.
    """
    owner: dict[str, int] = {}
    planned: list[PartitionGroup] = []
    for index, group in enumerate(groups):
        label = f"partition_groups[{index}]"
        for name in group.assets:
            if name in owner:
                raise PlanningError(f"{label}: asset {name!r} already belongs to partition_groups[{owner[name]}]; groups must be disjoint")
            owner[name] = index
        present = [name for name in group.assets if name in closure]
        if not present:
            continue
        missing = [name for name in group.assets if name not in closure]
        if missing:
            raise PlanningError(
                f"{label}: members {', '.join(map(repr, missing))} are not in the planned closure; "
                "a group must be wholly selected (add its last member to the targets)"
            )
        _check_chain(label, group, closure)
        planned.append(group)
    for group in planned:
        _check_no_reentry(group, closure)
    return tuple(planned)


def _check_chain(label: str, group: PartitionGroup, closure: Mapping[str, AssetDefinition]) -> None:
    domain = None
    for position, name in enumerate(group.assets):
        definition = closure[name]
        if definition.partition_def is None:
            raise PlanningError(f"{label}: member {name!r} is not partitioned; groups chain partitioned assets")
        if domain is None:
            domain = definition.partition_def.domain
        elif definition.partition_def.domain != domain:
            raise PlanningError(f"{label}: member {name!r} is in another partition domain than the first member")
        if position and group.assets[position - 1] not in definition.deps:
            raise PlanningError(
                f"{label}: member {name!r} does not directly depend on its predecessor "
                f"{group.assets[position - 1]!r}; groups are ordered linear chains"
            )


def _check_no_reentry(group: PartitionGroup, closure: Mapping[str, AssetDefinition]) -> None:
    members = set(group.assets)
    consumers: dict[str, list[str]] = {}
    for definition in closure.values():
        for dep in definition.deps:
            consumers.setdefault(dep, []).append(definition.name)
    # Walk outward from the group through non-members only; reaching a member
    # again means a path left the group and re-entered it.
    frontier = [c for m in group.assets for c in consumers.get(m, ()) if c not in members]
    seen = set(frontier)
    while frontier:
        name = frontier.pop()
        for consumer in consumers.get(name, ()):
            if consumer in members:
                raise PlanningError(
                    f"partition group {group.assets[0]!r}..{group.assets[-1]!r}: a dependency path leaves the "
                    f"group and re-enters it at {consumer!r} (through {name!r}); groups must be contiguous"
                )
            if consumer not in seen:
                seen.add(consumer)
                frontier.append(consumer)


def check_group_keys(groups: Sequence[PartitionGroup], tasks: Mapping[str, Any]) -> None:
    """In a run that spans domains, a group's members plan the same keys and read each other key by key.

    A group slot is one key of every member; a member that plans other keys
    (because a mapped consumer needs more of them) or reads its predecessor
    through a mapper has no such slot.
    """
    for group in groups:
        first = tasks[group.assets[0]]
        for name in group.assets[1:]:
            task = tasks[name]
            if any(edge.upstream in group.assets for edge in task.mapped) or task.keys is not first.keys:
                raise PlanningError(
                    f"partition group {group.assets[0]!r}..{group.assets[-1]!r}: member {name!r} plans other keys "
                    "than the first member, or reads its predecessor through a mapper; group members must plan the "
                    "same keys and depend on each other key by key"
                )
