"""Materialized attempts: resolve and load before the body, commit after it.

For each key of a materialized asset the engine asks the adapter to resolve
the exact identity (asset, version, domain, typed key, ordered input
materialization ids). A committed record is loaded and passed downstream
(resolution ``materialized``) without invoking the body; otherwise the body
runs and its output is released downstream only after the adapter commits it
(resolution ``executed``). Resolve, load and commit failures fail the
attempt; a failed load never falls back to running the body. Sync adapter
methods run on storage threads, async ones on the loop; a call in progress
cannot be interrupted by cancellation.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from partita.errors import MaterializationError
from partita.execution.graph import TaskState
from partita.execution.workers import Completion, ThreadWorkers
from partita.materialization.protocol import MaterializationContext, MaterializationRecord
from partita.results.model import FailureInfo, Invocation

__all__ = ["OutputReuse", "ReuseHost"]


class ReuseHost(Protocol):
    """What output reuse needs of the run it serves: its tasks, and the steps that settle an attempt."""

    tasks: Sequence[TaskState]
    max_concurrency: int
    finished: bool

    def enqueue_after_preparation(self, task: TaskState, key_index: int) -> None: ...

    def dispatch(self) -> None: ...

    def settle_executed(
        self,
        task: TaskState,
        key_index: int,
        output: Any,
        invocations: tuple[Invocation, ...],
        materialization_id: str | None,
    ) -> None: ...

    def settle_materialized(self, task: TaskState, key_index: int, output: Any, materialization_id: str) -> None: ...

    def fail_attempt(
        self,
        task: TaskState,
        key_index: int,
        exc: BaseException,
        invocations: tuple[Invocation, ...],
        failure: FailureInfo | None = None,
    ) -> None: ...


def _check_record(record: Any, context: MaterializationContext, method: str) -> MaterializationRecord:
    if not isinstance(record, MaterializationRecord):
        raise MaterializationError(f"asset {context.asset_name!r}: {method}() returned {type(record).__name__}, not a MaterializationRecord")
    if not record.matches(context):
        raise MaterializationError(f"asset {context.asset_name!r}: {method}() returned a record for another identity")
    return record


def _resolve_and_load(adapter: Any, context: MaterializationContext) -> tuple[MaterializationRecord, Any] | None:
    record = adapter.resolve(context)
    if record is None:
        return None
    record = _check_record(record, context, "resolve")
    return record, adapter.load(context, record)


async def _resolve_and_load_async(adapter: Any, context: MaterializationContext) -> tuple[MaterializationRecord, Any] | None:
    record = adapter.resolve(context)
    if inspect.isawaitable(record):
        record = await record
    if record is None:
        return None
    record = _check_record(record, context, "resolve")
    output = adapter.load(context, record)
    if inspect.isawaitable(output):
        output = await output
    return record, output


def _commit(adapter: Any, context: MaterializationContext, output: Any) -> MaterializationRecord:
    return _check_record(adapter.commit(context, output), context, "commit")


async def _commit_async(adapter: Any, context: MaterializationContext, output: Any) -> MaterializationRecord:
    record = adapter.commit(context, output)
    if inspect.isawaitable(record):
        record = await record
    return _check_record(record, context, "commit")


def _is_async(adapter: Any, *methods: str) -> bool:
    return any(inspect.iscoroutinefunction(getattr(adapter, method, None)) for method in methods)


def _positions(task: TaskState, upstream: TaskState, key_index: int) -> tuple[int, ...]:
    """The upstream key positions whose materialization ids are part of this attempt's identity."""
    link = task.links.get(upstream) if task.links else None
    return (key_index,) if link is None else link.needs[key_index]


class OutputReuse:
    """Drives the materialized tasks of one run."""

    def __init__(self, run: ReuseHost) -> None:
        self._run = run
        self._workers: ThreadWorkers | None = None
        self._contexts: dict[tuple[TaskState, int], MaterializationContext] = {}
        self._pending: dict[tuple[TaskState, int], tuple[Any, tuple[Invocation, ...]]] = {}
        by_name = {task.name: task for task in run.tasks}
        self._upstreams = {
            task: [by_name[dep] for dep in task.definition.deps] + ([task] if task.definition.self_mapper else [])
            for task in run.tasks
            if task.definition.materialization is not None
        }
        for task in self._upstreams:
            task.materialization_ids = [None] * task.size

    def _context(self, task: TaskState, key_index: int) -> MaterializationContext:
        definition = task.definition
        partition_def = definition.partition_def
        assert partition_def is not None and definition.version is not None
        key = task.keys[key_index]
        inputs = tuple(
            upstream.materialization_ids[position]  # type: ignore[index]
            for upstream in self._upstreams[task]
            for position in _positions(task, upstream, key_index)
        )
        return MaterializationContext(
            asset_name=task.name,
            version=definition.version,
            partition_domain=partition_def.domain,
            partition_key=key,
            partition_key_text=partition_def.format_key(key),
            partition_key_present=True,
            input_materialization_ids=inputs,  # type: ignore[arg-type]
        )

    def _call(self, token: tuple[Any, ...], sync: Callable[..., Any], is_async: bool, run_async: Callable[..., Any], *args: Any) -> None:
        if is_async:
            asyncio.get_running_loop().create_task(self._await(token, run_async, *args))
            return
        if self._workers is None:
            loop = asyncio.get_running_loop()
            self._workers = ThreadWorkers(loop, self._finished, self._run.max_concurrency, "partita-storage")
        self._workers.submit(token, functools.partial(sync, *args), {})

    async def _await(self, token: tuple[Any, ...], run_async: Callable[..., Any], *args: Any) -> None:
        started = time.time()
        try:
            completion: Completion = (token, True, await run_async(*args), started, time.time())
        except BaseException as exc:  # noqa: BLE001 - recorded as the attempt's failure
            completion = (token, False, exc, started, time.time())
        self._finished([completion])

    def prepare(self, task: TaskState, key_index: int) -> None:
        """Resolve (and load) the attempt's identity before any body runs."""
        try:
            context = self._context(task, key_index)
        except ValueError as exc:
            self._run.fail_attempt(task, key_index, MaterializationError(f"asset {task.name!r}: {exc}"), ())
            return
        adapter = task.definition.materialization
        self._call(
            ("prepare", task, key_index, context),
            _resolve_and_load,
            _is_async(adapter, "resolve", "load"),
            _resolve_and_load_async,
            adapter,
            context,
        )

    def commit(self, task: TaskState, key_index: int, output: Any, invocations: tuple[Invocation, ...]) -> None:
        """Commit the body's output; downstream sees it only once committed."""
        context = self._contexts.pop((task, key_index))
        self._pending[(task, key_index)] = (output, invocations)
        adapter = task.definition.materialization
        self._call(
            ("commit", task, key_index, context),
            _commit,
            _is_async(adapter, "commit"),
            _commit_async,
            adapter,
            context,
            output,
        )

    def _finished(self, batch: list[Completion]) -> None:
        run = self._run
        if run.finished:
            return
        for (kind, task, key_index, context), succeeded, value, started, finished in batch:
            if kind == "prepare":
                if not succeeded:
                    run.fail_attempt(task, key_index, value, ())
                elif value is None:
                    self._contexts[(task, key_index)] = context
                    run.enqueue_after_preparation(task, key_index)
                else:
                    record, output = value
                    task.materialization_ids[key_index] = record.materialization_id  # type: ignore[index]
                    run.settle_materialized(task, key_index, output, record.materialization_id)
            else:
                output, invocations = self._pending.pop((task, key_index))
                if task.gate is not None:
                    task.gate.note_operation(succeeded, finished - started)
                if not succeeded:
                    run.fail_attempt(task, key_index, value, invocations)
                else:
                    task.materialization_ids[key_index] = value.materialization_id  # type: ignore[index]
                    run.settle_executed(task, key_index, output, invocations, value.materialization_id)
        run.dispatch()

    def shutdown(self) -> None:
        if self._workers is not None:
            self._workers.shutdown(wait=0)
