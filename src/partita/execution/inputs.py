"""What bodies receive from their upstreams, and how long an upstream's output is kept for them.

`PartitionedOutputs` is what an unpartitioned consumer receives from a
partitioned upstream. `OutputRelease` counts, per output, the consumer
attempts that may still read it, so an executor that keeps outputs on a
cluster can drop each one as soon as nothing of the run needs it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any

from partita.execution.graph import Edge, MappedLink, TaskState
from partita.partitions.base import PartitionDef
from partita.results.attempts import AttemptResult, AttemptStatus
from partita.results.deferred import DeferredOutput

__all__ = ["OutputRelease", "PartitionedOutputs", "mapped_input"]


class PartitionedOutputs(Mapping[Any, Any]):
    """A read-only mapping of selected key to that key's output, in selection order.

    Lookups use the partition definition's key identity, not ``==``: keys
    that Python considers equal but that are distinct partitions (``0`` and
    ``False`` of a custom definition, the two occurrences of a repeated
    daylight-saving hour) keep their own outputs.
    """

    __slots__ = ("_definition", "_keys", "_outputs", "_index")

    def __init__(self, definition: PartitionDef, keys: tuple[Any, ...], outputs: list[Any]) -> None:
        self._definition = definition
        self._keys = keys
        self._outputs = tuple(outputs)
        self._index: dict[Hashable, int] | None = None

    def _position(self, key: Any) -> int:
        if self._index is None:
            identity = self._definition.key_identity
            self._index = {identity(k): position for position, k in enumerate(self._keys)}
        try:
            return self._index[self._definition.key_identity(key)]
        except (ValueError, TypeError):
            raise KeyError(key) from None

    def __getitem__(self, key: Any) -> Any:
        try:
            return self._outputs[self._position(key)]
        except KeyError:
            raise KeyError(key) from None

    def __contains__(self, key: object) -> bool:
        try:
            self._position(key)
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[Any]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def items(self) -> Any:  # type: ignore[override]
        """Pairs in selection order, without identity lookups."""
        return zip(self._keys, self._outputs, strict=True)

    def values(self) -> Any:  # type: ignore[override]
        return iter(self._outputs)

    @property
    def definition(self) -> PartitionDef:
        return self._definition

    @property
    def keys_in_order(self) -> tuple[Any, ...]:
        return self._keys

    def __repr__(self) -> str:
        return f"PartitionedOutputs(<{len(self._keys)} keys>)"


def mapped_input(link: MappedLink, upstream: TaskState, key_index: int) -> Any:
    """What a consumer key receives through a mapper: the one output, or a mapping of the succeeded keys it needs.

    A roll-up that tolerates missing keys runs with the keys that succeeded;
    the mapping lists them in the upstream's planned order.
    """
    positions = link.needs[key_index]
    if link.edge.one_key:
        return upstream.outputs[positions[0]] if positions else None
    if link.missing is not None and link.missing[key_index]:
        results = upstream.results
        positions = tuple(p for p in positions if (r := results[p]) is not None and r.status is AttemptStatus.SUCCESS)
    definition = upstream.definition.partition_def
    assert definition is not None
    keys, outputs = upstream.keys, upstream.outputs
    return PartitionedOutputs(definition, tuple(keys[p] for p in positions), [outputs[p] for p in positions])


class OutputRelease:
    """Per output, the consumer attempts of this run that may still read it; a deferred output is released at zero.

    A consumer attempt reads its inputs again when it retries, so its use
    ends only when it is terminal (succeeded, failed or skipped). Outputs of
    discovering producers and of tasks sized by discovery are not counted
    (their consumers are not known when the run starts): they stay until the
    run ends. Nor is an asset's read of its own earlier keys: those outputs
    count as unread (they are the asset's results). An output nothing reads is released as soon as it exists
    unless ``keep_unread`` (then `RunResult.output` can still fetch it).
    """

    __slots__ = ("_uses", "_keep_unread")

    def __init__(self, tasks: Sequence[TaskState], *, keep_unread: bool) -> None:
        self._keep_unread = keep_unread
        self._uses: dict[TaskState, list[int]] = {}
        for task in tasks:
            uses = self._initial_uses(task)
            if uses is not None:
                self._uses[task] = uses

    @staticmethod
    def _initial_uses(task: TaskState) -> list[int] | None:
        if task.deferred or task.discovers:
            return None
        uses = [0] * task.size
        for consumer, edge in task.consumers:
            if consumer is task or not any(upstream is task for _, upstream, _ in consumer.inputs):
                continue  # ordered after this task but never reads its output, or its own later key reads it
            if consumer.deferred or edge is Edge.DISCOVERY:
                return None
            if edge is Edge.MAPPED:
                for needs in consumer.links[task].needs:  # type: ignore[index]
                    for position in needs:
                        uses[position] += 1
            elif edge is Edge.SAME_KEY or edge is Edge.GATHER:
                uses = [count + 1 for count in uses]
            elif edge is Edge.FAN_OUT:
                uses[0] += consumer.size
            else:
                uses[0] += 1
        return uses

    def settled(self, task: TaskState, key_index: int, result: AttemptResult) -> None:
        """An attempt is terminal: its inputs have one reader less; an unread output goes at once."""
        uses = self._uses.get(task)
        if (
            uses is not None
            and not self._keep_unread
            and uses[key_index] == 0
            and result.status is AttemptStatus.SUCCESS
        ):
            _release(task, key_index)
        for _, upstream, edge in task.inputs:
            counts = self._uses.get(upstream)
            if counts is None or upstream is task:
                continue
            if edge is Edge.SAME_KEY:
                self._used(upstream, counts, key_index)
            elif edge is Edge.MAPPED:
                for position in task.links[upstream].needs[key_index]:  # type: ignore[index]
                    self._used(upstream, counts, position)
            elif edge is Edge.GATHER:
                for upstream_key in range(upstream.size):
                    self._used(upstream, counts, upstream_key)
            else:
                self._used(upstream, counts, 0)

    def _used(self, task: TaskState, counts: list[int], key_index: int) -> None:
        counts[key_index] -= 1
        if counts[key_index] == 0:
            _release(task, key_index)


def _release(task: TaskState, key_index: int) -> None:
    output = task.outputs[key_index]
    if isinstance(output, DeferredOutput):
        output.release()
