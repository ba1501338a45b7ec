"""Readiness: recording a terminal attempt and releasing the attempts that waited on it.

Apart from settlement (which decides how an attempt ends) and the dispatcher
(which decides when a ready one starts): this is the edge walk whose cost is
proportional to the consumers an attempt has, plus group admission and skip
propagation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from partita.events.emission import EventLog
from partita.execution.admission import GroupGate
from partita.execution.discovery import FanOut, discovery_event
from partita.execution.events import ObserverFanout
from partita.execution.graph import Edge, TaskState, Token
from partita.execution.inputs import OutputRelease
from partita.execution.reuse import OutputReuse
from partita.planning.plan import FlowPlan
from partita.results.model import AttemptResult, AttemptStatus, Invocation, SkipReason

__all__ = ["Readiness", "attempt_result", "call_now"]


def call_now(fn: Callable[..., Any], *args: Any) -> None:
    """Run a call on the loop's thread when the caller is on it already (see `Readiness.on_loop`)."""
    fn(*args)


def attempt_result(task: TaskState, key_index: int, status: AttemptStatus, **fields: Any) -> AttemptResult:
    """An attempt result of this task and key position (the identity fields are always the same)."""
    return AttemptResult(
        asset_name=task.name,
        index=key_index,
        partition_key=task.keys[key_index],
        partition_key_present=task.partitioned,
        status=status,
        **fields,
    )


class Readiness:
    """Pending-input counts per attempt: settles terminal attempts and admits the ones they release.

    ``done`` resolves when ``remaining`` reaches zero (every attempt settled),
    or fails with the scheduler fault that ended the run.
    """

    __slots__ = (
        "tasks",
        "plan",
        "remaining",
        "done",
        "fan_out",
        "_run_id",
        "_observers",
        "_event_log",
        "_enqueue",
        "_enqueue_block",
        "_reuse",
        "_retry_history",
        "release",
        "on_loop",
    )

    def __init__(
        self,
        plan: FlowPlan,
        tasks: Sequence[TaskState],
        run_id: str,
        *,
        observers: ObserverFanout,
        event_log: EventLog,
        enqueue: Callable[[TaskState, int], None],
        enqueue_block: Callable[[TaskState, int, int], None],
        reuse: OutputReuse | None,
        retry_history: dict[Token, list[Invocation]],
    ) -> None:
        self.plan = plan
        self.tasks = tasks
        self.remaining = sum(task.size for task in tasks)
        self.done: asyncio.Future[None] | None = None
        self._run_id = run_id
        self._observers = observers
        self._event_log = event_log
        self._enqueue = enqueue
        self._enqueue_block = enqueue_block
        self._reuse = reuse
        self._retry_history = retry_history
        #: Set when the executor keeps outputs elsewhere: each is released once its readers are terminal.
        self.release: OutputRelease | None = None
        self.fan_out: FanOut | None = FanOut(self) if any(task.discovers for task in tasks) else None
        #: Runs a call on the loop's thread: at once, unless attempts settle on worker threads too.
        self.on_loop: Callable[..., Any] = call_now

    def release_roots(self) -> None:
        """Release the attempts that wait on nothing."""
        # Collect roots first: settling one root can cascade skips into
        # attempts that must not be visited a second time here.
        # A block only joins the queue: it settles nothing, so it may go in while roots are collected.
        roots: list[tuple[TaskState, int]] = []
        for task in self.tasks:
            if self._plain_roots(task):
                self._enqueue_block(task, 0, task.size)
            else:
                roots.extend((task, k) for k in range(task.size) if task.pending[k] == 0)
        for task, key_index in roots:
            self.became_ready(task, key_index)

    def _plain_roots(self, task: TaskState) -> bool:
        """Whether every key of ``task`` waits on nothing and would go straight to the free queue."""
        return (
            task.size > 1
            and task.gate is None
            and task.group is None
            and task.skip_when_ready is None
            and not task.undiscovered
            and not task.blockers
            and (self._reuse is None or task.definition.materialization is None)
            and not any(task.pending)
        )

    def fault(self, exc: BaseException) -> None:
        """A scheduler fault ends the run loudly, never leaves it waiting."""
        self.on_loop(self._failed, exc)

    def _failed(self, exc: BaseException) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(exc)

    def _all_settled(self) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    def became_ready(self, task: TaskState, key_index: int) -> None:
        blockers = task.blockers.pop(key_index, None)
        if blockers:
            self.skip(task, key_index, SkipReason.DEPENDENCY_FAILED, tuple(blockers))
        elif task.undiscovered and key_index in task.undiscovered:
            self.skip(task, key_index, SkipReason.PARTITION_NOT_DISCOVERED, ())
        elif task.skip_when_ready is not None:
            self.skip(task, key_index, task.skip_when_ready, ())
        elif task.group is not None and task.group_position == 0:
            task.group.request(key_index)
            self.admit_group(task.group)
        else:
            self.admitted(task, key_index)

    def admitted(self, task: TaskState, key_index: int) -> None:
        """Past dependencies and group admission: prepare reuse, or queue the body."""
        if self._reuse is not None and task.definition.materialization is not None:
            self._reuse.prepare(task, key_index)
        else:
            self._enqueue(task, key_index)

    def admit_group(self, group: GroupGate) -> None:
        # Admitting can settle attempts at once (an open circuit skips them),
        # which frees the slot again: loop here instead of recursing per key.
        if group.admitting:
            group.readmit = True
            return
        group.admitting = True
        try:
            while True:
                group.readmit = False
                for key_index in group.admit():
                    self.admitted(group.first, key_index)
                if not group.readmit:
                    return
        finally:
            group.admitting = False

    def settle(self, task: TaskState, key_index: int, result: AttemptResult, blocker: AttemptResult | None) -> None:
        """Record a terminal attempt and count it against its consumers."""
        task.results[key_index] = result
        self.remaining -= 1
        if self._observers.active:
            self._observers.attempt_finished(self._run_id, result)
        if self.release is not None:
            self.release.settled(task, key_index, result)
        group = task.group
        if group is not None and group.member_finished(key_index):
            self.admit_group(group)
        for consumer, edge in task.consumers:
            if edge is Edge.SAME_KEY:
                self.decrement(consumer, key_index, blocker)
            elif edge is Edge.FAN_OUT:
                for consumer_key in range(consumer.size):
                    self.decrement(consumer, consumer_key, blocker)
            elif edge is Edge.MAPPED:
                link = consumer.links[task]  # type: ignore[index]
                feed_keys = link.feed_keys
                for feed in range(link.feed_offsets[key_index], link.feed_offsets[key_index + 1]):
                    consumer_key = feed_keys[feed]
                    self.decrement(consumer, consumer_key, blocker if blocker is None or link.blocks(consumer_key) else None)
            elif edge is not Edge.DISCOVERY:
                self.decrement(consumer, 0, blocker)
        if task.discovers:
            assert self.fan_out is not None
            self.fan_out.after_producer(task, result)
        if self.remaining == 0:
            self.on_loop(self._all_settled)

    def decrement(self, consumer: TaskState, key_index: int, blocker: AttemptResult | None) -> None:
        if blocker is not None:
            consumer.blockers.setdefault(key_index, []).append(blocker)
        consumer.pending[key_index] -= 1
        if consumer.pending[key_index] == 0:
            self.became_ready(consumer, key_index)

    def skip(self, task: TaskState, key_index: int, reason: SkipReason, blocked_by: tuple[AttemptResult, ...]) -> None:
        """Settle the attempt skipped, with the invocations it had before (if it retried)."""
        earlier = self._retry_history.pop((task, key_index), None) if self._retry_history else None
        result = attempt_result(
            task,
            key_index,
            AttemptStatus.SKIPPED,
            reason=reason,
            blocked_by=blocked_by,
            invocations=tuple(earlier or ()),
        )
        self.settle(task, key_index, result, result)

    def record_discovery(self, task: TaskState, domain: str, declared: tuple[Any, ...], invocation: int) -> None:
        """Publish one discovery event per key (with its extra) and update the partition registry."""
        drafts = [discovery_event(self._run_id, task.name, key, invocation) for key in declared]
        self._event_log.record_discovery(domain, self._run_id, drafts)
