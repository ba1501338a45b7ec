"""The scheduler: readiness per (asset, key) and admission of ready work.

Every operation is proportional to the edges it touches: finishing an attempt
updates only its direct consumers' pending counts, so a run's cost grows
linearly with its attempts, never with a scan over all of them per step.
Outputs are passed per key; dependencies are all-or-nothing per key.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import enum
import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from partita.definitions.assets import AssetDefinition
from partita.execution.context import AssetContext
from partita.execution.workers import Completion, ThreadWorkers
from partita.planning.plan import FlowPlan
from partita.planning.selection import SelectionKind
from partita.results.model import (
    AttemptResult,
    AttemptStatus,
    FailureInfo,
    Invocation,
    Resolution,
    RunResult,
    RunStatus,
    SkipReason,
    TaskResult,
)

__all__ = ["DEFAULT_MAX_CONCURRENCY", "execute_plan"]

#: Invocation limit when neither the flow nor the run sets one.
DEFAULT_MAX_CONCURRENCY = min(32, (os.cpu_count() or 1) + 4)


class _Edge(enum.Enum):
    SAME_KEY = 1  # partitioned -> partitioned: key k feeds key k
    FAN_OUT = 2  # unpartitioned -> partitioned: the one output feeds every key
    GATHER = 3  # partitioned -> unpartitioned: every key feeds the one attempt
    SINGLE = 4  # unpartitioned -> unpartitioned


@dataclass(slots=True, eq=False)
class _Task:
    index: int
    definition: AssetDefinition
    partitioned: bool
    size: int
    keys: tuple[Any, ...]
    pending: list[int]
    outputs: list[Any]
    results: list[AttemptResult | None]
    blockers: dict[int, list[AttemptResult]] = field(default_factory=dict)
    consumers: list[tuple[_Task, _Edge]] = field(default_factory=list)
    # (parameter, upstream task, edge) for every body input.
    inputs: list[tuple[str, _Task, _Edge]] = field(default_factory=list)
    skip_when_ready: SkipReason | None = None
    logger: logging.Logger | None = None


class _Run:
    """State of one executing plan; lives on the event loop thread."""

    def __init__(self, plan: FlowPlan, run_id: str) -> None:
        self.plan = plan
        self.run_id = run_id
        self.max_concurrency = plan.options.max_concurrency or DEFAULT_MAX_CONCURRENCY
        keys = plan.selection.keys
        self.tasks: list[_Task] = []
        by_name: dict[str, _Task] = {}
        for index, task_plan in enumerate(plan.tasks):
            size = len(keys) if task_plan.partitioned else 1
            task = _Task(
                index=index,
                definition=task_plan.definition,
                partitioned=task_plan.partitioned,
                size=size,
                keys=keys if task_plan.partitioned else (None,),
                pending=[0] * size,
                outputs=[None] * size,
                results=[None] * size,
            )
            self.tasks.append(task)
            by_name[task.definition.name] = task
        self._link(by_name)
        self.ready: collections.deque[tuple[_Task, int]] = collections.deque()
        self.remaining = sum(task.size for task in self.tasks)
        self.running = 0
        self.done: asyncio.Future[None] | None = None
        self.async_tasks: set[asyncio.Task[None]] = set()
        self.workers: ThreadWorkers | None = None

    def _link(self, by_name: dict[str, _Task]) -> None:
        empty = self.plan.selection.kind is SelectionKind.EMPTY
        for task in self.tasks:
            params = {upstream: param for param, upstream in task.definition.inputs}
            for dep in task.definition.deps:
                upstream = by_name[dep]
                if upstream.partitioned:
                    edge = _Edge.SAME_KEY if task.partitioned else _Edge.GATHER
                else:
                    edge = _Edge.FAN_OUT if task.partitioned else _Edge.SINGLE
                upstream.consumers.append((task, edge))
                if dep in params:
                    task.inputs.append((params[dep], upstream, edge))
                weight = upstream.size if edge is _Edge.GATHER else 1
                for key_index in range(task.size):
                    task.pending[key_index] += weight
                if empty and edge is _Edge.GATHER:
                    task.skip_when_ready = SkipReason.NO_PARTITION_KEYS

    # -- running ---------------------------------------------------------

    async def execute(self) -> None:
        loop = asyncio.get_running_loop()
        self.done = loop.create_future()
        self.workers = ThreadWorkers(loop, self._on_completions, self.max_concurrency)
        try:
            # Collect roots first: settling one root can cascade skips into
            # attempts that must not be visited a second time here.
            roots = [(task, k) for task in self.tasks for k in range(task.size) if task.pending[k] == 0]
            for task, key_index in roots:
                self._became_ready(task, key_index)
            self._dispatch()
            if self.remaining:
                await self.done
        except asyncio.CancelledError:
            self._cancel_everything()
            raise
        finally:
            self.workers.shutdown(wait=0)

    def _became_ready(self, task: _Task, key_index: int) -> None:
        blockers = task.blockers.pop(key_index, None)
        if blockers:
            self._finish_skipped(task, key_index, SkipReason.DEPENDENCY_FAILED, tuple(blockers))
        elif task.skip_when_ready is not None:
            self._finish_skipped(task, key_index, task.skip_when_ready, ())
        else:
            self.ready.append((task, key_index))

    def _dispatch(self) -> None:
        ready, limit = self.ready, self.max_concurrency
        while ready and self.running < limit:
            task, key_index = ready.popleft()
            self.running += 1
            self._start(task, key_index)

    def _start(self, task: _Task, key_index: int) -> None:
        definition = task.definition
        kwargs = self._inputs_for(task, key_index)
        if definition.context_parameter is not None:
            kwargs[definition.context_parameter] = self._context(task, key_index, 1)
        if definition.is_async:
            coroutine_task = asyncio.get_running_loop().create_task(
                self._run_async(task, key_index, definition.fn, kwargs)
            )
            self.async_tasks.add(coroutine_task)
            coroutine_task.add_done_callback(self.async_tasks.discard)
        else:
            assert self.workers is not None
            self.workers.submit((task, key_index), definition.fn, kwargs)

    def _inputs_for(self, task: _Task, key_index: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        for param, upstream, edge in task.inputs:
            if edge is _Edge.SAME_KEY:
                kwargs[param] = upstream.outputs[key_index]
            elif edge is _Edge.GATHER:
                kwargs[param] = dict(zip(upstream.keys, upstream.outputs, strict=True))
            else:
                kwargs[param] = upstream.outputs[0]
        return kwargs

    def _context(self, task: _Task, key_index: int, invocation: int) -> AssetContext:
        if task.logger is None:
            task.logger = logging.getLogger(f"partita.asset.{task.definition.name}")
        return AssetContext(
            asset_name=task.definition.name,
            run_id=self.run_id,
            partition_key=task.keys[key_index],
            partition_key_present=task.partitioned,
            invocation_number=invocation,
            logger=task.logger,
        )

    async def _run_async(self, task: _Task, key_index: int, fn: Callable[..., Any], kwargs: dict[str, Any]) -> None:
        started = time.time()
        try:
            value = await fn(**kwargs)
            completion: Completion = ((task, key_index), True, value, started, time.time())
        except asyncio.CancelledError:
            if self.done is not None and self.done.cancelled():
                raise
            completion = ((task, key_index), False, asyncio.CancelledError("asset body was cancelled"), started, time.time())
        except Exception as exc:  # noqa: BLE001 - recorded as the attempt's failure
            completion = ((task, key_index), False, exc, started, time.time())
        self._on_completions([completion])

    def _on_completions(self, batch: list[Completion]) -> None:
        try:
            for (task, key_index), succeeded, value, started, finished in batch:
                self.running -= 1
                if succeeded:
                    self._finish_success(task, key_index, value, Invocation(1, started, finished, True))
                else:
                    failure = FailureInfo.from_exception(value)
                    self._finish_failed(task, key_index, value, Invocation(1, started, finished, False, failure))
            self._dispatch()
        except BaseException as exc:
            # A scheduler fault must end the run loudly, never leave it waiting.
            if self.done is not None and not self.done.done():
                self.done.set_exception(exc)
            raise

    # -- terminal outcomes -----------------------------------------------

    def _finish_success(self, task: _Task, key_index: int, output: Any, invocation: Invocation) -> None:
        task.outputs[key_index] = output
        task.results[key_index] = AttemptResult(
            asset_name=task.definition.name,
            partition_key=task.keys[key_index],
            partition_key_present=task.partitioned,
            status=AttemptStatus.SUCCESS,
            output=output,
            invocations=(invocation,),
            resolution=Resolution.EXECUTED,
        )
        self._release(task, key_index, None)

    def _finish_failed(self, task: _Task, key_index: int, exc: BaseException, invocation: Invocation) -> None:
        result = AttemptResult(
            asset_name=task.definition.name,
            partition_key=task.keys[key_index],
            partition_key_present=task.partitioned,
            status=AttemptStatus.FAILED,
            exception=exc,
            failure=invocation.failure,
            invocations=(invocation,),
        )
        task.results[key_index] = result
        self._release(task, key_index, result)

    def _finish_skipped(
        self, task: _Task, key_index: int, reason: SkipReason, blocked_by: tuple[AttemptResult, ...]
    ) -> None:
        result = AttemptResult(
            asset_name=task.definition.name,
            partition_key=task.keys[key_index],
            partition_key_present=task.partitioned,
            status=AttemptStatus.SKIPPED,
            reason=reason,
            blocked_by=blocked_by,
        )
        task.results[key_index] = result
        self._release(task, key_index, result)

    def _release(self, task: _Task, key_index: int, blocker: AttemptResult | None) -> None:
        """Count this terminal attempt against its consumers' pending inputs."""
        self.remaining -= 1
        for consumer, edge in task.consumers:
            if edge is _Edge.SAME_KEY:
                self._decrement(consumer, key_index, blocker)
            elif edge is _Edge.FAN_OUT:
                for consumer_key in range(consumer.size):
                    self._decrement(consumer, consumer_key, blocker)
            else:
                self._decrement(consumer, 0, blocker)
        if self.remaining == 0 and self.done is not None and not self.done.done():
            self.done.set_result(None)

    def _decrement(self, consumer: _Task, key_index: int, blocker: AttemptResult | None) -> None:
        if blocker is not None:
            consumer.blockers.setdefault(key_index, []).append(blocker)
        consumer.pending[key_index] -= 1
        if consumer.pending[key_index] == 0:
            self._became_ready(consumer, key_index)

    def _cancel_everything(self) -> None:
        for coroutine_task in list(self.async_tasks):
            coroutine_task.cancel()
        for task in self.tasks:
            for key_index in range(task.size):
                if task.results[key_index] is None:
                    task.results[key_index] = AttemptResult(
                        asset_name=task.definition.name,
                        partition_key=task.keys[key_index],
                        partition_key_present=task.partitioned,
                        status=AttemptStatus.CANCELLED,
                        reason=SkipReason.CANCELLED,
                    )

    # -- result ----------------------------------------------------------

    def result(self, started_at: dt.datetime, finished_at: dt.datetime) -> RunResult:
        tasks: dict[str, TaskResult] = {}
        any_failed = any_cancelled = False
        for task in self.tasks:
            attempts = tuple(result for result in task.results if result is not None)
            for attempt in attempts:
                if attempt.status is AttemptStatus.FAILED:
                    any_failed = True
                elif attempt.status is AttemptStatus.CANCELLED:
                    any_cancelled = True
            empty_reason = SkipReason.NO_PARTITION_KEYS if task.partitioned and task.size == 0 else None
            tasks[task.definition.name] = TaskResult(task.definition.name, task.partitioned, attempts, empty_reason)
        status = RunStatus.CANCELLED if any_cancelled else RunStatus.FAILED if any_failed else RunStatus.SUCCESS
        return RunResult(
            run_id=self.run_id,
            status=status,
            started_at=started_at,
            finished_at=finished_at,
            tasks=tasks,
            plan=self.plan,
        )


def new_run_id() -> str:
    return uuid.uuid4().hex


async def execute_plan(plan: FlowPlan, *, run_id: str | None = None) -> RunResult:
    """Run every planned attempt to a terminal status and return the result."""
    run = _Run(plan, run_id or new_run_id())
    started_at = dt.datetime.now(dt.UTC)
    await run.execute()
    return run.result(started_at, dt.datetime.now(dt.UTC))
