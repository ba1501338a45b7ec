"""Dependency closure of the targets in a deterministic topological order."""

from __future__ import annotations

from collections.abc import Sequence

from partita.definitions.assets import AssetDefinition
from partita.definitions.registry import AssetRegistry
from partita.errors import DefinitionError, PlanningError

__all__ = ["resolve_closure"]


def resolve_closure(registry: AssetRegistry, targets: Sequence[str]) -> tuple[AssetDefinition, ...]:
    """Return the targets and everything they depend on, upstream first.

    The order is a depth-first post-order over targets and dependencies as
    declared, so the same definitions always plan the same way. Unknown
    targets are planning errors; unknown dependencies and cycles are
    definition errors naming the assets involved.
    """
    for target in targets:
        if target not in registry:
            raise PlanningError(f"unknown target {target!r}: no asset of that name is registered")
    order: list[AssetDefinition] = []
    done: set[str] = set()
    on_path: dict[str, int] = {}
    for target in targets:
        if target in done:
            continue
        # Iterative DFS: long chains must not hit the recursion limit.
        path: list[str] = [target]
        on_path[target] = 0
        stack = [(registry[target], iter(registry[target].deps))]
        while stack:
            definition, pending = stack[-1]
            for dep in pending:
                if dep in done:
                    continue
                if dep in on_path:
                    cycle = path[on_path[dep]:] + [dep]
                    raise DefinitionError(f"dependency cycle: {' -> '.join(cycle)}")
                upstream = registry.get(dep)
                if upstream is None:
                    raise DefinitionError(_unknown_dependency(definition, dep))
                on_path[dep] = len(path)
                path.append(dep)
                stack.append((upstream, iter(upstream.deps)))
                break
            else:
                stack.pop()
                path.pop()
                del on_path[definition.name]
                done.add(definition.name)
                order.append(definition)
    return tuple(order)


def _unknown_dependency(definition: AssetDefinition, dep: str) -> str:
    if any(upstream == dep for _, upstream in definition.inputs):
        return (
            f"asset {definition.name!r}: parameter {dep!r} names no registered asset; "
            "rename it to an upstream asset, or call it 'context' to receive the run context"
        )
    return f"asset {definition.name!r}: dependency {dep!r} names no registered asset"
