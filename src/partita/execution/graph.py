"""The attempt graph: one node per (asset, key), pending-input counts per node.

Edges are kept per task, not per attempt: a partitioned consumer of a
partitioned upstream reads key k from key k, so memory stays a few slots per
attempt however many keys are selected.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import Any

from partita.definitions.assets import AssetDefinition
from partita.planning.mapped_keys import MappedEdge
from partita.planning.plan import FlowPlan
from partita.planning.selection import SelectionKind
from partita.results.model import AttemptResult, SkipReason

__all__ = ["Edge", "TaskState", "Token", "build_graph"]


class Edge(enum.Enum):
    SAME_KEY = 1  # partitioned -> partitioned: key k feeds key k
    FAN_OUT = 2  # unpartitioned -> partitioned: the one output feeds every key
    GATHER = 3  # partitioned -> unpartitioned: every key feeds the one attempt
    SINGLE = 4  # unpartitioned -> unpartitioned
    DISCOVERY = 5  # discovering producer -> its domain: key k receives the producer's output for k
    MAPPED = 6  # partitioned -> partitioned through a mapper: key k reads the upstream positions its link lists


@dataclass(slots=True, eq=False)
class MappedLink:
    """One mapped edge at run time: what each consumer key reads, and which consumer keys each upstream key feeds."""

    edge: MappedEdge
    #: The consumer key positions each upstream key feeds, flat: those of upstream position p are
    #: ``feed_keys[feed_offsets[p]:feed_offsets[p + 1]]``. Two lists of ints instead of a list per
    #: upstream key, so a year of hours adds no objects for the garbage collector to walk.
    feed_offsets: list[int]
    feed_keys: list[int]
    #: Per consumer key position: upstream attempts that did not succeed (tolerated up to a limit).
    missing: list[int] | None

    @property
    def needs(self) -> tuple[tuple[int, ...], ...]:
        return self.edge.needs

    def blocks(self, consumer_key: int) -> bool:
        """Count one unsuccessful upstream attempt; True once the consumer key cannot have enough."""
        if self.missing is None:
            return True
        self.missing[consumer_key] += 1
        assert self.edge.needed is not None
        return len(self.edge.needs[consumer_key]) - self.missing[consumer_key] < self.edge.needed[consumer_key]


@dataclass(slots=True, eq=False)
class TaskState:
    """Run-time state of one asset's attempts, indexed by key position."""

    index: int
    definition: AssetDefinition
    partitioned: bool
    size: int
    keys: tuple[Any, ...]
    pending: list[int]
    outputs: list[Any]
    results: list[AttemptResult | None]
    blockers: dict[int, list[AttemptResult]] = field(default_factory=dict)
    consumers: list[tuple[TaskState, Edge]] = field(default_factory=list)
    # (parameter, upstream task, edge) for every body input.
    inputs: list[tuple[str, TaskState, Edge]] = field(default_factory=list)
    skip_when_ready: SkipReason | None = None
    logger: logging.Logger | None = None
    # Set by admission: the resource gate and partition group this task uses.
    gate: Any = None
    group: Any = None
    group_position: int = -1
    # Materialized tasks: each key's committed or loaded materialization id.
    materialization_ids: list[str | None] | None = None
    # Runtime domains: the producer discovers; deferred tasks get their keys from it.
    discovers: bool = False
    deferred: bool = False
    upstreams: list[tuple[TaskState, Edge]] = field(default_factory=list)
    # The producer's output for each key position of its domain's tasks.
    discovered_outputs: list[Any] | None = None
    # Selected keys the producer did not discover (skipped, not run).
    undiscovered: set[int] = field(default_factory=set)
    # Why a partitioned task without attempts was skipped (default: nothing selected).
    empty_reason: SkipReason | None = None
    # Mapped edges, by upstream task (a run that spans domains, or a dependency on its own earlier keys).
    links: dict[TaskState, MappedLink] | None = None
    # The asset's name: read on every attempt's settling, so a slot, not a property.
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.definition.name


#: One attempt: its task and key position (also the executor's completion token).
Token = tuple[TaskState, int]


def build_graph(plan: FlowPlan) -> list[TaskState]:
    """Task states in plan order with edges and initial pending counts."""
    selected = plan.selection.keys
    discovering = plan.selection.kind is SelectionKind.DISCOVER
    tasks: list[TaskState] = []
    by_name: dict[str, TaskState] = {}
    for index, task_plan in enumerate(plan.tasks):
        deferred = discovering and task_plan.partitioned
        keys = selected if task_plan.keys is None else task_plan.keys
        size = 0 if deferred else len(keys) if task_plan.partitioned else 1
        task = TaskState(
            index=index,
            definition=task_plan.definition,
            partitioned=task_plan.partitioned,
            size=size,
            keys=keys if task_plan.partitioned else (None,),
            pending=[0] * size,
            outputs=[None] * size,
            results=[None] * size,
            discovers=task_plan.discovers,
            deferred=deferred,
        )
        tasks.append(task)
        by_name[task.name] = task
    empty = plan.selection.kind is SelectionKind.EMPTY
    for task, task_plan in zip(tasks, plan.tasks, strict=True):
        params = {upstream: param for param, upstream in task.definition.inputs}
        mapped = {edge.upstream: edge for edge in task_plan.mapped}
        for dep in _deps_with_self(task.definition, mapped):
            upstream = by_name[dep]
            if dep in mapped:
                _link(task, upstream, mapped[dep], params.get(dep))
                continue
            if upstream.discovers and task.partitioned:
                edge = Edge.DISCOVERY
            elif upstream.partitioned:
                edge = Edge.SAME_KEY if task.partitioned else Edge.GATHER
            else:
                edge = Edge.FAN_OUT if task.partitioned else Edge.SINGLE
            upstream.consumers.append((task, edge))
            task.upstreams.append((upstream, edge))
            if dep in params:
                task.inputs.append((params[dep], upstream, edge))
            # Until discovery, a deferred upstream counts as one pending input.
            weight = (1 if upstream.deferred else upstream.size) if edge is Edge.GATHER else 1
            for key_index in range(task.size):
                task.pending[key_index] += weight
            if empty and edge is Edge.GATHER:
                # Nothing was selected upstream: skip rather than run on an
                # empty mapping, matching the partitioned tasks' own skip.
                task.skip_when_ready = SkipReason.NO_PARTITION_KEYS
    return tasks


def _deps_with_self(definition: AssetDefinition, mapped: dict[str, MappedEdge]) -> tuple[str, ...]:
    """The dependencies, then the asset itself when it reads its own earlier keys."""
    return (*definition.deps, definition.name) if definition.name in mapped else definition.deps


def _link(task: TaskState, upstream: TaskState, edge: MappedEdge, param: str | None) -> None:
    """A mapped edge: each consumer key waits on the upstream positions it needs."""
    offsets = [0] * (upstream.size + 1)
    pending = task.pending
    for key_index, needs in enumerate(edge.needs):
        pending[key_index] += len(needs)
        for position in needs:
            offsets[position + 1] += 1
    for position in range(upstream.size):
        offsets[position + 1] += offsets[position]
    cursor = offsets[:-1]
    feed_keys = [0] * offsets[-1]
    for key_index, needs in enumerate(edge.needs):
        for position in needs:
            feed_keys[cursor[position]] = key_index
            cursor[position] += 1
    link = MappedLink(edge, offsets, feed_keys, None if edge.needed is None else [0] * task.size)
    if task.links is None:
        task.links = {}
    task.links[upstream] = link
    upstream.consumers.append((task, Edge.MAPPED))
    if upstream is not task:
        task.upstreams.append((upstream, Edge.MAPPED))
    if param is not None:
        task.inputs.append((param, upstream, Edge.MAPPED))
