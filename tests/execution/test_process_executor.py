"""The process executor runs asset bodies in worker processes (SPEC §5, §11).

Bodies, inputs and outputs cross the process boundary by pickling, so the
assets here are defined at module level in a module-level registry: forked
workers find them by module and name. Failures that come from the process
boundary (unpicklable bodies or outputs, a dying worker) fail the attempt
with a clear error naming the asset, and the run still completes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import threading

import pytest

import partita as p

DAYS = p.DatePartitionDef()
KEYS = ["2026-08-08", "2026-08-09", "2026-08-10"]
LETTERS = p.StaticPartitionDef("letters", ["a", "b", "c", "d"])

REGISTRY = p.AssetRegistry()


@p.asset(registry=REGISTRY)
def worker_pid():
    return os.getpid()


@p.asset(partition_def=DAYS, registry=REGISTRY)
def extract(context):
    return {"day": context.partition_key.day, "pid": os.getpid()}


@p.asset(partition_def=DAYS, registry=REGISTRY)
def publish(context, extract):
    return (context.partition_key.isoformat(), extract["day"] * 10, os.getpid())


@p.asset(partition_def=DAYS, registry=REGISTRY)
async def async_extract(context):
    await asyncio.sleep(0)
    return (context.partition_key.day, os.getpid())


@p.asset(registry=REGISTRY)
def returns_a_lock():
    return threading.Lock()


class _UnpicklableError(Exception):
    def __init__(self) -> None:
        super().__init__("the body failed while holding a lock")
        self.lock = threading.Lock()


@p.asset(registry=REGISTRY)
def raises_unpicklable():
    raise _UnpicklableError()


@p.asset(registry=REGISTRY)
def raises_value_error():
    raise ValueError("bad input in the worker")


@p.asset(registry=REGISTRY)
def worker_dies():
    os._exit(1)


@p.asset(partition_def=LETTERS, registry=REGISTRY)
def dies_for_a(context):
    if context.partition_key == "a":
        os._exit(1)
    return (context.partition_key, os.getpid())


@p.asset(partition_def=LETTERS, registry=REGISTRY)
def letter_pid(context):
    return (context.partition_key, os.getpid())


def _flow(targets, **options):
    return p.Flow(targets, registry=REGISTRY, **options)


def _only_attempt(result, asset_name):
    (attempt,) = result.tasks[asset_name].attempts
    return attempt


def test_sync_body_runs_in_another_process():
    result = _flow(["worker_pid"], executor="process").run()

    assert result.status is p.RunStatus.SUCCESS
    attempt = _only_attempt(result, "worker_pid")
    assert attempt.status is p.AttemptStatus.SUCCESS
    assert isinstance(attempt.output, int)
    assert attempt.output != os.getpid()


def test_partitioned_bodies_receive_their_own_keys_upstream_output_across_processes():
    result = _flow(["publish"], executor="process").run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS
    outputs = [attempt.output for attempt in result.tasks["publish"].attempts]
    assert [(key, value) for key, value, _ in outputs] == [
        ("2026-08-08", 80),
        ("2026-08-09", 90),
        ("2026-08-10", 100),
    ]
    assert all(pid != os.getpid() for _, _, pid in outputs)
    extract_outputs = [attempt.output for attempt in result.tasks["extract"].attempts]
    assert [output["day"] for output in extract_outputs] == [8, 9, 10]
    assert all(output["pid"] != os.getpid() for output in extract_outputs)
    assert [attempt.partition_key for attempt in result.tasks["publish"].attempts] == [
        dt.date(2026, 8, 8),
        dt.date(2026, 8, 9),
        dt.date(2026, 8, 10),
    ]


def test_async_bodies_run_in_the_worker_process_too():
    result = _flow(["async_extract"], executor="process").run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS
    outputs = [attempt.output for attempt in result.tasks["async_extract"].attempts]
    assert [day for day, _ in outputs] == [8, 9, 10]
    assert all(pid != os.getpid() for _, pid in outputs)


def test_a_body_that_raises_in_the_worker_fails_with_its_own_exception():
    result = _flow(["raises_value_error"], executor="process").run()

    assert result.status is p.RunStatus.FAILED
    attempt = _only_attempt(result, "raises_value_error")
    assert attempt.status is p.AttemptStatus.FAILED
    assert isinstance(attempt.exception, ValueError)
    assert "bad input in the worker" in str(attempt.exception)
    assert attempt.failure is not None
    assert "bad input in the worker" in attempt.failure.message


def test_a_locally_defined_body_fails_with_an_error_naming_the_asset_and_the_run_completes():
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def local_body():
        return 1

    result = p.Flow(["local_body"], registry=registry, executor="process").run()

    assert result.status is p.RunStatus.FAILED
    attempt = _only_attempt(result, "local_body")
    assert attempt.status is p.AttemptStatus.FAILED
    assert isinstance(attempt.exception, p.ExecutionError)
    assert "local_body" in str(attempt.exception)
    assert attempt.failure is not None
    assert "local_body" in attempt.failure.message


def test_a_local_body_failure_skips_its_downstream_and_the_run_completes():
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    def local_source(context):
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def local_consumer(local_source):
        return local_source + 1

    result = p.Flow(["local_consumer"], registry=registry, executor="process").run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.FAILED
    assert all(attempt.status is p.AttemptStatus.FAILED for attempt in result.tasks["local_source"].attempts)
    consumers = result.tasks["local_consumer"].attempts
    assert len(consumers) == 3
    assert all(attempt.status is p.AttemptStatus.SKIPPED for attempt in consumers)
    assert all(attempt.reason is p.SkipReason.DEPENDENCY_FAILED for attempt in consumers)


def test_an_unpicklable_output_fails_with_an_error_naming_the_asset():
    result = _flow(["returns_a_lock"], executor="process").run()

    assert result.status is p.RunStatus.FAILED
    attempt = _only_attempt(result, "returns_a_lock")
    assert attempt.status is p.AttemptStatus.FAILED
    assert isinstance(attempt.exception, p.ExecutionError)
    assert "returns_a_lock" in str(attempt.exception)
    assert "output" in str(attempt.exception)


def test_an_unpicklable_exception_fails_with_an_error_naming_the_asset_and_the_original_error():
    result = _flow(["raises_unpicklable"], executor="process").run()

    attempt = _only_attempt(result, "raises_unpicklable")
    assert attempt.status is p.AttemptStatus.FAILED
    assert isinstance(attempt.exception, p.ExecutionError)
    message = str(attempt.exception)
    assert "raises_unpicklable" in message
    assert "_UnpicklableError" in message


def test_a_worker_that_dies_fails_its_attempt_with_an_error_naming_the_asset():
    result = _flow(["worker_dies"], executor="process").run()

    assert result.status is p.RunStatus.FAILED
    attempt = _only_attempt(result, "worker_dies")
    assert attempt.status is p.AttemptStatus.FAILED
    assert isinstance(attempt.exception, p.ExecutionError)
    assert "worker_dies" in str(attempt.exception)


def test_a_worker_that_dies_fails_only_its_own_attempt():
    result = _flow(["dies_for_a"], executor="process", max_concurrency=1).run({"partition_keys": ["a", "b", "c"]})

    statuses = {attempt.partition_key: attempt.status for attempt in result.tasks["dies_for_a"].attempts}
    assert statuses["a"] is p.AttemptStatus.FAILED
    assert statuses["b"] is p.AttemptStatus.SUCCESS
    assert statuses["c"] is p.AttemptStatus.SUCCESS


def test_a_process_executor_instance_bounds_the_worker_processes():
    executor = p.ProcessExecutor(max_workers=2)
    flow = _flow(["letter_pid"], executor=executor, max_concurrency=4)

    result = flow.run({"partition_keys": ["a", "b", "c", "d"]})

    assert result.status is p.RunStatus.SUCCESS
    outputs = [attempt.output for attempt in result.tasks["letter_pid"].attempts]
    assert [key for key, _ in outputs] == ["a", "b", "c", "d"]
    pids = {pid for _, pid in outputs}
    assert os.getpid() not in pids
    assert 1 <= len(pids) <= 2


def test_a_process_executor_instance_serves_consecutive_runs():
    flow = _flow(["letter_pid"], executor=p.ProcessExecutor(max_workers=2))

    first = flow.run({"partition_keys": ["a", "b"]})
    second = flow.run({"partition_keys": ["c", "d"]})

    assert first.status is p.RunStatus.SUCCESS
    assert second.status is p.RunStatus.SUCCESS
    assert [attempt.output[0] for attempt in second.tasks["letter_pid"].attempts] == ["c", "d"]


def test_the_process_executor_class_is_accepted_as_an_executor_option():
    result = _flow(["worker_pid"], executor=p.ProcessExecutor).run()

    assert _only_attempt(result, "worker_pid").output != os.getpid()


def test_an_unknown_executor_name_is_rejected_when_the_flow_is_built():
    with pytest.raises((p.ConfigurationError, p.DefinitionError)) as caught:
        p.Flow(["worker_pid"], registry=REGISTRY, executor="bogus")
    assert "executor" in str(caught.value)


@pytest.mark.parametrize("max_workers", [0, -1, True, 1.5, "2"])
def test_process_executor_rejects_a_bad_worker_count(max_workers):
    with pytest.raises(p.ConfigurationError):
        p.ProcessExecutor(max_workers=max_workers)
