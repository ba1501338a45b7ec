"""Discovering producers: collecting the keys a runtime domain finds while running (SPEC §9).

The producer declares keys with ``context.add_partition(key, extra=None)``
(repeatable) or one ``context.partition_keys = [...]`` assignment. Each key
is validated when declared (type, length, ``allowed``, ``extra``) and
``max_keys`` is enforced as keys arrive, so a violation fails the producer
inside its body. An assignment is validated whole before any of it is
declared: a rejected list declares nothing and leaves the assignment unused,
so a body that catches the error can assign a corrected list. A key declared
twice counts once (its first ``extra`` wins). The body may
return a mapping of declared key to output; each fanned-out attempt receives
its key's output.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from partita.errors import DiscoveryError
from partita.events.emission import MAX_EXTRA_BYTES, encoded_extra_size
from partita.events.model import EventDraft, EventSource, SourceKind, now
from partita.execution.worker_async import run_coroutine
from partita.partitions.runtime import PartitionAtRuntime, PartitionKey

__all__ = [
    "DiscoveryCollector",
    "DiscoveryHost",
    "DiscoveryOutcome",
    "FanOut",
    "discovered_outputs",
    "discovery_event",
    "run_discovering_body",
    "run_discovering_body_async",
]



def _position(index: int | None) -> str:
    """How a rejection names the key: its place in an assigned list, or "a key"."""
    return "a key" if index is None else f"partition_keys[{index}]"

class DiscoveryCollector:
    """The keys one producer invocation declares, in declaration order."""

    def __init__(self, definition: PartitionAtRuntime, asset_name: str) -> None:
        self._definition = definition
        self._asset_name = asset_name
        self._keys: dict[str, Mapping[str, Any] | None] = {}
        self._assigned = False
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"definition": self._definition, "asset_name": self._asset_name, "keys": self._keys, "assigned": self._assigned}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["definition"], state["asset_name"])  # type: ignore[misc]
        self._keys = dict(state["keys"])
        self._assigned = state["assigned"]

    def _validated(self, key: Any, extra: Any, index: int | None) -> tuple[str, Mapping[str, Any] | None]:
        """The normalized key and its extra, or DiscoveryError; declares nothing.

        ``index`` is the key's place in an assigned list (None for `add_partition`);
        the message naming it is built only when the key is rejected.
        """
        if isinstance(key, PartitionKey):
            key, extra = key.key, key.extra if extra is None else extra
        try:
            key = self._definition.normalize_key(key)
        except ValueError as exc:
            raise DiscoveryError(
                f"asset {self._asset_name!r} declared {_position(index)} that {self._definition.domain} rejects: {exc}"
            ) from None
        if extra is None:
            return key, None
        if not isinstance(extra, Mapping):
            raise DiscoveryError(f"asset {self._asset_name!r}: the extra of {_position(index)} must be a JSON object (a dict)")
        extra = dict(extra)
        try:
            size = encoded_extra_size(extra)
        except ValueError as exc:
            raise DiscoveryError(
                f"asset {self._asset_name!r}: the extra of {_position(index)} is not strict JSON: {exc}"
            ) from None
        if size > MAX_EXTRA_BYTES:
            raise DiscoveryError(
                f"asset {self._asset_name!r}: the extra of {_position(index)} is {size} bytes of JSON; "
                f"the limit is {MAX_EXTRA_BYTES}"
            )
        return key, extra

    def _check_limit(self, count: int) -> None:
        limit = self._definition.max_keys
        if limit is not None and count > limit:
            raise DiscoveryError(
                f"asset {self._asset_name!r} declared more than max_keys={limit} keys for {self._definition.domain}"
            )

    def add(self, key: Any, extra: Any = None) -> None:
        self._check_can_add()
        # Validation runs user code (an allowed predicate): outside the lock.
        key, extra = self._validated(key, extra, None)
        with self._lock:
            self._check_can_add()
            if key in self._keys:
                return  # declared twice: one key, the first extra wins
            self._check_limit(len(self._keys) + 1)
            self._keys[key] = extra

    def _check_can_add(self) -> None:
        if self._assigned:
            raise DiscoveryError(
                f"asset {self._asset_name!r} assigned partition_keys already; declare keys one way, not both"
            )

    def assign(self, keys: Iterable[Any]) -> None:
        """Declare the whole list, or nothing: a rejected list leaves the assignment unused."""
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
            raise DiscoveryError(f"asset {self._asset_name!r}: partition_keys must be a list of keys or PartitionKey values")
        self._check_can_assign()
        # Collected apart from the declared keys and committed only when every element
        # passed; max_keys is checked as keys arrive, so an endless generator stops too.
        accepted: dict[str, Mapping[str, Any] | None] = {}
        try:
            for index, candidate in enumerate(keys):
                key, extra = self._validated(candidate, None, index)
                if key not in accepted:  # duplicates collapse: the first extra wins
                    accepted[key] = extra
                    self._check_limit(len(accepted))
        except DiscoveryError as exc:
            raise DiscoveryError(f"{exc}; nothing was declared") from None
        with self._lock:
            self._check_can_assign()
            self._assigned = True
            self._keys.update(accepted)

    def _check_can_assign(self) -> None:
        if self._assigned:
            raise DiscoveryError(f"asset {self._asset_name!r} assigned partition_keys twice; assign it once")
        if self._keys:
            raise DiscoveryError(
                f"asset {self._asset_name!r} called add_partition already; declare keys one way, not both"
            )

    def declared(self) -> tuple[PartitionKey, ...]:
        with self._lock:
            return tuple(PartitionKey(key, extra) for key, extra in self._keys.items())


@dataclass(frozen=True, slots=True)
class DiscoveryOutcome:
    """What a producer body left behind: its return value and the keys it declared."""

    output: Any
    declared: tuple[PartitionKey, ...]


def run_discovering_body(fn: Callable[..., Any], collector: DiscoveryCollector, **kwargs: Any) -> Any:
    """Call a producer body (sync, or async on its own loop in a worker process) and keep its declarations."""
    output = fn(**kwargs)
    if inspect.iscoroutine(output):
        output = run_coroutine(output)
    return DiscoveryOutcome(output, collector.declared())


async def run_discovering_body_async(fn: Callable[..., Any], collector: DiscoveryCollector, **kwargs: Any) -> Any:
    return DiscoveryOutcome(await fn(**kwargs), collector.declared())


def discovered_outputs(asset_name: str, keys: tuple[str, ...], output: Any) -> list[Any]:
    """Per-key outputs from the producer's return value (None, or a mapping over declared keys)."""
    if output is None:
        return [None] * len(keys)
    if not isinstance(output, Mapping):
        raise DiscoveryError(
            f"asset {asset_name!r} discovers partitions, so it returns None or a mapping of discovered key to "
            f"output, not {type(output).__name__}"
        )
    position = {key: index for index, key in enumerate(keys)}
    outputs: list[Any] = [None] * len(keys)
    for raw_key, value in output.items():
        key = raw_key.key if isinstance(raw_key, PartitionKey) else raw_key
        index = position.get(key) if isinstance(key, str) else None
        if index is None:
            raise DiscoveryError(
                f"asset {asset_name!r} returned an output for a key it did not declare; declare every key with "
                "add_partition or partition_keys"
            )
        outputs[index] = value
    return outputs


class DiscoveryHost(Protocol):
    """What fan-out needs of the run: its tasks and plan, the attempt count, and the readiness steps."""

    tasks: Sequence[Any]
    plan: Any
    remaining: int

    def decrement(self, consumer: Any, key_index: int, blocker: Any) -> None: ...

    def became_ready(self, task: Any, key_index: int) -> None: ...

    def record_discovery(self, task: Any, domain: str, declared: tuple[Any, ...], invocation: int) -> None: ...


class FanOut:
    """Turns a producer's discovered keys into attempts of its domain, in the same run."""

    def __init__(self, run: DiscoveryHost) -> None:
        self._run = run
        self.discoveries: dict[str, tuple[PartitionKey, ...]] = {}

    def collector_for(self, task: Any) -> DiscoveryCollector:
        definition = task.definition.partition_def
        assert isinstance(definition, PartitionAtRuntime)
        return DiscoveryCollector(definition, task.name)

    def accept(self, task: Any, outcome: DiscoveryOutcome, invocation: int) -> Any:
        """Validate the declarations, record the discovery, and return the producer's own output.

        Raises DiscoveryError (the producer fails; no downstream work starts)
        or a store error.
        """
        definition = task.definition.partition_def
        keys = tuple(declared.key for declared in outcome.declared)
        task.discovered_outputs = discovered_outputs(task.name, keys, outcome.output)
        self._run.record_discovery(task, definition.domain, outcome.declared, invocation)
        self.discoveries[task.name] = outcome.declared
        return outcome.output

    def after_producer(self, producer: Any, result: Any) -> None:
        """Size the domain's attempts from the discovery, or release everything waiting on it."""
        from partita.execution.graph import Edge
        from partita.results.model import AttemptStatus, SkipReason

        run = self._run
        blocker = None
        if result.status is not AttemptStatus.SUCCESS:
            blocker = result
            for task in run.tasks:
                if task.deferred:
                    task.empty_reason = SkipReason.DEPENDENCY_FAILED
                    for consumer, edge in task.consumers:
                        if edge is Edge.GATHER:
                            run.decrement(consumer, 0, result)
        else:
            keys = tuple(declared.key for declared in self.discoveries[producer.name])
            outputs = producer.discovered_outputs
            if any(task.deferred for task in run.tasks):
                for task in run.tasks:
                    if task.deferred:
                        self._size(task, keys)
            else:
                # Explicit keys narrow the run: attempts exist per selected key;
                # a selected key the producer did not discover is skipped.
                position = {key: index for index, key in enumerate(keys)}
                selected = run.plan.selection.keys
                producer.discovered_outputs = [outputs[position[key]] if key in position else None for key in selected]
                for consumer, edge in producer.consumers:
                    if edge is Edge.DISCOVERY:
                        consumer.undiscovered = {index for index, key in enumerate(selected) if key not in position}
        for consumer, edge in producer.consumers:
            if edge is Edge.DISCOVERY:
                for key_index in range(consumer.size):
                    run.decrement(consumer, key_index, blocker)

    def _size(self, task: Any, keys: tuple[str, ...]) -> None:
        from partita.execution.graph import Edge
        from partita.results.model import AttemptStatus, SkipReason

        run = self._run
        size = len(keys)
        task.size, task.keys = size, keys
        if size == 0:
            task.empty_reason = SkipReason.NO_PARTITION_KEYS  # the discovery finished: it found none
        task.outputs = [None] * size
        task.results = [None] * size
        if task.materialization_ids is not None:
            task.materialization_ids = [None] * size
        waiting = 0  # every key waits on the same inputs
        for upstream, edge in task.upstreams:
            if edge in (Edge.DISCOVERY, Edge.SAME_KEY):
                waiting += 1
            elif edge is Edge.FAN_OUT:
                finished = upstream.results[0]
                if finished is None:
                    waiting += 1
                elif finished.status is not AttemptStatus.SUCCESS:
                    for key_index in range(size):
                        task.blockers.setdefault(key_index, []).append(finished)
        task.pending = [waiting] * size
        run.remaining += size
        for consumer, edge in task.consumers:
            if edge is Edge.GATHER:
                # The placeholder input becomes one input per discovered key.
                if size == 0:
                    consumer.skip_when_ready = SkipReason.NO_PARTITION_KEYS
                consumer.pending[0] += size - 1
                if consumer.pending[0] == 0:
                    run.became_ready(consumer, 0)


def discovery_event(run_id: str, asset: str, declared: PartitionKey, invocation: int) -> EventDraft:
    """The event announcing one discovered key on the producer's asset (with its extra)."""
    extra = dict(declared.extra) if declared.extra else {}
    return EventDraft(
        asset,
        declared.key,
        None,
        extra,
        EventSource(SourceKind.DISCOVERY, run_id, asset, False, invocation),
        # Written exactly once, with the producer's success: no dedupe identity.
        None,
        None,
        now(),
    )
