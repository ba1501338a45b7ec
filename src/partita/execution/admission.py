"""Admission control: who may start now, and who waits for what.

Three independent limits gate an invocation start: the run's global
``max_concurrency``, the resource policy of the asset (concurrency, rate
window, cooldown, circuit) and, before any of those, the partition group's
``max_active_keys``. A grouped key holds its group slot from admission of its
first member until every member's attempt is terminal, through retries,
cooldowns and waits for permits.
"""

from __future__ import annotations

import collections
import heapq
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from partita.definitions.groups import PartitionGroup
from partita.definitions.policies import ResourcePolicy
from partita.results.model import ResourceStatistics

if TYPE_CHECKING:
    from partita.execution.pools import PoolSlots

__all__ = ["GroupGate", "ResourceGate", "bind_gates"]


class ResourceGate:
    """The state of one resource policy during a run."""

    def __init__(self, name: str, policy: ResourcePolicy) -> None:
        self.name = name
        self.policy = policy
        #: Ready attempts waiting for this gate: a heap in the dispatcher's order (`partita.execution.dispatch`).
        self.queue: list[tuple[tuple[int, int], Any, int]] = []
        self.running = 0
        self.cooldown_until = 0.0
        self.circuit_open = False
        rate = policy.rate_limit
        self._window: collections.deque[float] | None = collections.deque() if rate is not None else None
        self._denied_since: dict[tuple[object, int], float] = {}
        self.wake_scheduled_for: float | None = None
        self.invocations = 0
        self.succeeded = 0
        self.failed = 0
        self.retries = 0
        self.wait_count = 0
        self.wait_duration = 0.0
        self.invocation_duration = 0.0
        #: The store-leased slots of a shared policy (`execution.pools`); None for a local one.
        self.pool: PoolSlots | None = None

    def earliest_start(self, now: float) -> float | None:
        """``None`` when a start is allowed now, else when it might be.

        Returns ``inf`` when only a finishing invocation can free a slot.
        """
        if self.policy.max_concurrency is not None and self.running >= self.policy.max_concurrency:
            return float("inf")
        later = self.cooldown_until if self.cooldown_until > now else None
        rate = self.policy.rate_limit
        if rate is not None and self._window is not None:
            window = self._window
            # Same expression as the reopening time below: under float
            # rounding "now - start >= window" could disagree with it.
            while window and now >= window[0] + rate.per_seconds:
                window.popleft()
            if len(window) >= rate.requests:
                opens = window[0] + rate.per_seconds
                later = opens if later is None else max(later, opens)
        return later

    def note_denied(self, token: tuple[object, int], now: float) -> None:
        self._denied_since.setdefault(token, now)

    def note_started(self, token: tuple[object, int], now: float) -> None:
        self.running += 1
        self.invocations += 1
        if self._window is not None:
            self._window.append(now)
        denied = self._denied_since.pop(token, None)
        if denied is not None:
            self.wait_count += 1
            self.wait_duration += now - denied

    def note_finished(self, succeeded: bool, duration: float) -> None:
        self.running -= 1
        self.invocation_duration += duration
        if succeeded:
            self.succeeded += 1
        else:
            self.failed += 1

    def note_operation(self, succeeded: bool, duration: float) -> None:
        """A storage operation (a commit) for an asset on this resource."""
        self.invocations += 1
        self.invocation_duration += duration
        if succeeded:
            self.succeeded += 1
        else:
            self.failed += 1

    def forget(self, token: tuple[object, int]) -> None:
        self._denied_since.pop(token, None)

    def statistics(self) -> ResourceStatistics:
        return ResourceStatistics(
            name=self.name,
            invocations=self.invocations,
            succeeded=self.succeeded,
            failed=self.failed,
            retries=self.retries,
            wait_count=self.wait_count,
            wait_duration=self.wait_duration,
            invocation_duration=self.invocation_duration,
        )


class GroupGate:
    """Admits keys into a partition group, lowest selected position first."""

    def __init__(self, group: PartitionGroup, first: Any) -> None:
        self.group = group
        #: The run-time state of the group's first member (where keys enter).
        self.first = first
        # Re-entrancy guard for the engine's admission loop.
        self.admitting = False
        self.readmit = False
        self.members = len(group.assets)
        self.active = 0
        self._waiting: list[int] = []
        self._remaining: dict[int, int] = {}

    def request(self, key_index: int) -> None:
        heapq.heappush(self._waiting, key_index)

    def admit(self) -> list[int]:
        """Key positions that may start their first member now."""
        admitted = []
        while self._waiting and self.active < self.group.max_active_keys:
            key_index = heapq.heappop(self._waiting)
            self.active += 1
            self._remaining[key_index] = self.members
            admitted.append(key_index)
        return admitted

    def member_finished(self, key_index: int) -> bool:
        """Count one terminal member attempt; True when the key left the group."""
        remaining = self._remaining.get(key_index)
        if remaining is None:
            return False  # never admitted: skipped before its first member ran
        if remaining == 1:
            del self._remaining[key_index]
            self.active -= 1
            return True
        self._remaining[key_index] = remaining - 1
        return False


def bind_gates(
    tasks: Sequence[Any], groups: Sequence[PartitionGroup], resources: Mapping[str, ResourcePolicy]
) -> tuple[dict[str, ResourceGate], list[GroupGate]]:
    """One gate per resource and per partition group the tasks use, set on each task that uses it."""
    gates: dict[str, ResourceGate] = {}
    for task in tasks:
        name = task.definition.resource
        if name is not None:
            gate = gates.get(name)
            if gate is None:
                gate = gates[name] = ResourceGate(name, resources[name])
            task.gate = gate
    group_gates: list[GroupGate] = []
    by_name = {task.name: task for task in tasks}
    for group in groups:
        group_gate = GroupGate(group, first=by_name[group.assets[0]])
        group_gates.append(group_gate)
        for position, member in enumerate(group.assets):
            by_name[member].group = group_gate
            by_name[member].group_position = position
    return gates, group_gates
