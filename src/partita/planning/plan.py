"""`FlowPlan`: the immutable, reviewable description of one run (SPEC §4).

Building a plan resolves the closure, validates selection and groups, and
counts attempts. It never invokes an asset body or contacts a store. The
portable document (`to_dict`/`to_json`) carries kinds and counts, never raw
partition keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from partita.definitions.assets import AssetDefinition
from partita.definitions.config import RunConfig
from partita.definitions.groups import PartitionGroup
from partita.definitions.policies import ResourcePolicy
from partita.definitions.registry import AssetRegistry
from partita.errors import PlanningError
from partita.planning.backfill import BackfillOrigin
from partita.planning.graph import resolve_closure
from partita.planning.groups import check_group_keys, plan_groups
from partita.planning.mapped_keys import (
    KeyPlan,
    MappedEdge,
    check_domains,
    check_edges,
    plan_mapped_keys,
    spans_domains,
)
from partita.planning.materialization import check_materialization
from partita.planning.selection import (
    CONFIG_FIELDS,
    KeySource,
    Selection,
    SelectionFields,
    SelectionKind,
    select_partitions,
)

__all__ = ["FlowPlan", "PlanOptions", "ResourcePlan", "TaskPlan", "build_plan", "describe_asset"]

PLAN_SCHEMA = "partita.plan"
PLAN_VERSION = 1


def describe_asset(definition: AssetDefinition) -> dict[str, Any]:
    """JSON-safe description of one asset definition (no keys, no outputs)."""
    partition_def = definition.partition_def
    retry = definition.retry
    return {
        "name": definition.name,
        "deps": list(definition.deps),
        "partitioned": partition_def is not None,
        "partition": None if partition_def is None else partition_def.describe(),
        "async": definition.is_async,
        "resource": definition.resource,
        "materialization": None
        if definition.materialization is None
        else {"adapter": type(definition.materialization).__name__, "version": definition.version},
        "retry": None if retry is None else {
            "max_attempts": retry.max_attempts,
            "delay": retry.delay,
            "backoff": retry.backoff,
            "max_delay": retry.max_delay,
            "jitter": retry.jitter,
        },
    }


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """One asset of the closure: its dependencies, partitioning and attempts."""

    name: str
    deps: tuple[str, ...]
    partitioned: bool
    #: None for assets fanned out from keys discovered at run time.
    attempt_count: int | None
    group: int | None
    definition: AssetDefinition = field(repr=False, compare=False)
    #: True for the discovering producer of a runtime domain (one attempt, no key).
    discovers: bool = False
    #: This asset's own keys when they are not the selection's (a run that spans domains), in memory only.
    keys: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)
    #: Its dependencies whose keys are not its own, key by key.
    mapped: tuple[MappedEdge, ...] = field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        document = {**describe_asset(self.definition), "attempt_count": self.attempt_count, "group": self.group}
        if self.discovers:
            document["discovers"] = True
        if self.definition.mappers:
            document["mappers"] = {dep: mapper.describe() for dep, mapper in self.definition.mappers.items()}
        return document


@dataclass(frozen=True, slots=True)
class ResourcePlan:
    """A resource policy the run will enforce, and the assets that use it."""

    name: str
    policy: ResourcePolicy = field(repr=False)
    assets: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        policy = self.policy
        rate = policy.rate_limit
        document: dict[str, Any] = {
            "name": self.name,
            "assets": list(self.assets),
            "max_concurrency": policy.max_concurrency,
            "rate_limit": None if rate is None else {"requests": rate.requests, "per_seconds": rate.per_seconds},
            "max_attempts": policy.max_attempts,
            "classifies_failures": policy.classify_failure is not None,
        }
        pool = policy.pool_name(self.name)
        if pool is not None:  # only then: plans of local policies keep their document unchanged
            document["shared_pool"] = pool
        return document


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """Run options fixed by the plan."""

    max_concurrency: int | None
    #: The Flow's own max_concurrency (a run config may override it above); a Flow
    #: with another one does not run this plan.
    default_max_concurrency: int | None = None


@dataclass(frozen=True, slots=True)
class FlowPlan:
    """What a run will do, decided before anything runs.

    ``tasks`` is the closure upstream-first; ``selection`` holds the
    normalized keys the approved run will use (kept in memory only).
    """

    targets: tuple[str, ...]
    tasks: tuple[TaskPlan, ...]
    selection: Selection
    groups: tuple[PartitionGroup, ...]
    resources: tuple[ResourcePlan, ...]
    options: PlanOptions
    registry: AssetRegistry = field(repr=False, compare=False)
    #: Set when a store query chose the keys (``--missing``, ``--failed-from``); recorded with the run.
    backfill: BackfillOrigin | None = None

    @property
    def attempt_count(self) -> int | None:
        """Planned attempts; None when a runtime domain's keys are discovered while running."""
        counts = [task.attempt_count for task in self.tasks]
        return None if any(count is None for count in counts) else sum(counts)  # type: ignore[misc]

    @property
    def known_attempt_count(self) -> int:
        """Attempts known before running (the discovering producer's, for a runtime domain)."""
        return sum(task.attempt_count or 0 for task in self.tasks)

    @property
    def selection_kind(self) -> SelectionKind:
        return self.selection.kind

    @property
    def domain(self) -> str | None:
        return self.selection.domain

    @property
    def key_count(self) -> int | None:
        return self.selection.key_count

    @property
    def partition_keys(self) -> tuple[Any, ...]:
        """The normalized selected keys, in selection order (in memory only)."""
        return self.selection.keys

    def task(self, name: str) -> TaskPlan:
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The portable plan document: versioned, with no raw partition keys."""
        document: dict[str, Any] = {
            "schema": PLAN_SCHEMA,
            "version": PLAN_VERSION,
            "targets": list(self.targets),
            "selection": self._selection_document(),
            "attempt_count": self.attempt_count,
            "tasks": [task.to_dict() for task in self.tasks],
            "groups": [
                {"assets": list(group.assets), "max_active_keys": group.max_active_keys} for group in self.groups
            ],
            "resources": [resource.to_dict() for resource in self.resources],
            "options": {"max_concurrency": self.options.max_concurrency},
        }
        if self.backfill is not None:
            document["backfill"] = self.backfill.to_dict()
        if any(task.keys is not None for task in self.tasks):
            document["domains"] = self.domain_counts()
        return document

    def domain_counts(self) -> list[dict[str, Any]]:
        """Per partition domain of the run: its assets, its distinct keys and its attempts."""
        counts: dict[str, dict[str, Any]] = {}
        for task in self.tasks:
            partition_def = task.definition.partition_def
            if partition_def is None or not task.partitioned:
                continue
            entry = counts.setdefault(partition_def.domain, {"domain": partition_def.domain, "assets": [], "attempt_count": 0, "_keys": set()})
            entry["assets"].append(task.name)
            entry["attempt_count"] += task.attempt_count or 0
            keys = self.selection.keys if task.keys is None else task.keys
            entry["_keys"].update(map(partition_def.key_identity, keys))
        return [
            {"domain": entry["domain"], "assets": entry["assets"], "key_count": len(entry.pop("_keys")), "attempt_count": entry["attempt_count"]}
            for entry in counts.values()
        ]

    def _selection_document(self) -> dict[str, Any]:
        selection = self.selection
        document: dict[str, Any] = {
            "kind": selection.kind.value,
            "domain": selection.domain,
            "key_count": selection.key_count,
        }
        if selection.producer is not None:
            definition = selection.definition
            document["runtime"] = {
                "producer": selection.producer,
                "keys_known_at": "run time" if selection.kind is SelectionKind.DISCOVER else "plan time",
                "max_keys": getattr(definition, "max_keys", None),
            }
        return document

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)


def _plan_resources(
    closure: tuple[AssetDefinition, ...], resources: Mapping[str, ResourcePolicy]
) -> tuple[ResourcePlan, ...]:
    users: dict[str, list[str]] = {}
    for definition in closure:
        if definition.resource is None:
            continue
        if definition.resource not in resources:
            declared = ", ".join(sorted(resources)) or "none"
            raise PlanningError(
                f"asset {definition.name!r} names resource {definition.resource!r}, but the flow declares no such "
                f"ResourcePolicy (declared: {declared}); add it to Flow(resources=...)"
            )
        users.setdefault(definition.resource, []).append(definition.name)
    return tuple(ResourcePlan(name, resources[name], tuple(assets)) for name, assets in users.items())


def _task_plan(definition: AssetDefinition, selection: Selection, group: int | None, key_plan: KeyPlan | None) -> TaskPlan:
    # The runtime producer discovers unless the run deliberately selects no partitions;
    # a discovering producer runs once per run, without a key.
    discovers = definition.name == selection.producer and selection.kind is not SelectionKind.EMPTY
    partitioned = definition.partitioned and not discovers
    keys = None if key_plan is None or not partitioned else key_plan.keys[definition.name]
    return TaskPlan(
        name=definition.name,
        deps=definition.deps,
        partitioned=partitioned,
        attempt_count=(selection.key_count if keys is None else len(keys)) if partitioned else 1,
        group=group,
        definition=definition,
        discovers=discovers,
        keys=None if keys is selection.keys else keys,
        mapped=() if key_plan is None else key_plan.edges.get(definition.name, ()),
    )


def build_plan(
    registry: AssetRegistry,
    targets: Sequence[str],
    config: RunConfig,
    *,
    partition_groups: Sequence[PartitionGroup] = (),
    resources: Mapping[str, ResourcePolicy] | None = None,
    default_max_concurrency: int | None = None,
    key_source: KeySource = KeySource.PYTHON,
    fields: SelectionFields = CONFIG_FIELDS,
) -> FlowPlan:
    closure = resolve_closure(registry, targets)
    planned_resources = _plan_resources(closure, resources or {})
    by_name = {definition.name: definition for definition in closure}
    check_materialization(by_name)
    key_plan = None
    if spans_domains(closure):
        selected = check_domains(closure, targets)
        chosen = set(map(id, selected))
        selection = select_partitions(
            tuple(d for d in closure if d.partition_def is None or id(d) in chosen), config, key_source, fields
        )
        key_plan = plan_mapped_keys(closure, selected, selection.keys, targets)
    else:
        check_edges(closure)
        selection = select_partitions(closure, config, key_source, fields)
    groups = plan_groups(partition_groups, by_name)
    group_of = {name: index for index, group in enumerate(groups) for name in group.assets}
    tasks = tuple(_task_plan(definition, selection, group_of.get(definition.name), key_plan) for definition in closure)
    if key_plan is not None:
        check_group_keys(groups, {task.name: task for task in tasks})
    max_concurrency = config.max_concurrency if config.max_concurrency is not None else default_max_concurrency
    return FlowPlan(
        targets=tuple(targets),
        tasks=tasks,
        selection=selection,
        groups=groups,
        resources=planned_resources,
        options=PlanOptions(max_concurrency=max_concurrency, default_max_concurrency=default_max_concurrency),
        registry=registry,
    )
