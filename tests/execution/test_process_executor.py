"""The process executor runs asset bodies in worker processes (SPEC §5, §11).

Bodies, inputs and outputs cross the process boundary by pickling, so the
assets here are defined at module level in a module-level registry: forked
workers find them by module and name. Failures that come from the process
boundary (unpicklable bodies or outputs, a dying worker) fail the attempt
with a clear error naming the asset, and the run still completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import partita as p

DAYS = p.DatePartitionDef()
KEYS = ["2026-08-08", "2026-08-09", "2026-08-10"]
LETTERS = p.StaticPartitionDef("letters", ["a", "b", "c", "d"])

REGISTRY = p.AssetRegistry()
PARTITA = Path(sys.executable).with_name("partita")


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


SIX = p.StaticPartitionDef("six", ["k1", "k2", "k3", "k4", "k5", "k6"])
#: Where bodies leave marks; set by the tests (forked workers inherit the environment).
MARKS = "PARTITA_TEST_MARKS"


def _wait_for_mark(name: str) -> None:
    """Block a body until another body left ``name``; fail it after a deadline rather than hang."""
    path = Path(os.environ[MARKS]) / name
    deadline = time.monotonic() + 30
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {name} mark")
        time.sleep(0.005)


@p.asset(partition_def=SIX, registry=REGISTRY)
def exits_for_one_key(context):
    if context.partition_key == "k1":
        (Path(os.environ[MARKS]) / "dying").write_text(str(os.getpid()))
        os._exit(3)
    _wait_for_mark("dying")  # so the others are in flight or queued when the worker dies
    return (context.partition_key, os.getpid())


@p.asset(registry=REGISTRY)
def killed_by_a_signal():
    os.kill(os.getpid(), signal.SIGKILL)


@p.asset(registry=REGISTRY, retry=p.RetryPolicy(max_attempts=2))
def dies_on_its_first_invocation(context):
    if context.invocation_number == 1:
        os._exit(3)
    return context.invocation_number


@p.asset(registry=REGISTRY)
def announced():
    return 1


@p.asset(partition_def=SIX, registry=REGISTRY)
def emits_from_a_worker(context):
    first = context.emit("announced", extra={"via": "context", "pid": os.getpid()})
    second = p.emit("announced", extra={"via": "module", "pid": os.getpid()})
    return [first.id, second.id]


@p.asset(registry=REGISTRY)
async def emits_on_the_loop(context):
    await asyncio.sleep(0)
    return p.emit("announced", extra={"via": "async", "pid": os.getpid()}).id


@p.asset(registry=REGISTRY)
def blocks_in_a_worker():
    marks = Path(os.environ[MARKS])
    (marks / "blocking.tmp").write_text(str(os.getpid()))
    (marks / "blocking.tmp").replace(marks / "blocking.pid")
    _wait_for_mark("never")


class SyncBodiesInProcesses(p.ProcessExecutor):
    """Sync bodies in worker processes; async bodies stay on the run's event loop."""

    runs_async_bodies = False


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


def test_a_dying_worker_fails_only_the_attempt_it_held_and_the_others_run(tmp_path, monkeypatch):
    monkeypatch.setenv(MARKS, str(tmp_path))
    flow = _flow(["exits_for_one_key"], executor=p.ProcessExecutor(max_workers=2), max_concurrency=6)

    result = flow.run({"partition_keys": ["k1", "k2", "k3", "k4", "k5", "k6"]})

    attempts = {attempt.partition_key: attempt for attempt in result.tasks["exits_for_one_key"].attempts}
    assert attempts["k1"].status is p.AttemptStatus.FAILED
    failures = {key: attempt.failure for key, attempt in attempts.items() if key != "k1"}
    assert all(attempt.status is p.AttemptStatus.SUCCESS for key, attempt in attempts.items() if key != "k1"), failures
    dead = int((tmp_path / "dying").read_text())
    assert dead not in {attempts[key].output[1] for key in failures}  # a replacement worker took over
    error = attempts["k1"].exception
    assert isinstance(error, p.ExecutionError)
    assert "exits_for_one_key" in str(error)
    assert "exit code 3" in str(error)
    assert "k1" not in str(error)  # the message never repeats the raw key
    assert result.status is p.RunStatus.FAILED


def test_a_worker_killed_by_a_signal_names_the_signal():
    result = _flow(["killed_by_a_signal"], executor="process").run()

    attempt = _only_attempt(result, "killed_by_a_signal")
    assert attempt.status is p.AttemptStatus.FAILED
    assert isinstance(attempt.exception, p.ExecutionError)
    assert "killed_by_a_signal" in str(attempt.exception)
    assert "SIGKILL" in str(attempt.exception)


def test_a_dying_worker_goes_through_the_retry_policy_like_any_failure():
    result = _flow(["dies_on_its_first_invocation"], executor="process", clock=p.FastForwardClock()).run()

    attempt = _only_attempt(result, "dies_on_its_first_invocation")
    assert attempt.status is p.AttemptStatus.SUCCESS
    assert attempt.output == 2
    first, second = attempt.invocations
    assert first.failure is not None and "exit code 3" in first.failure.message
    assert second.failure is None


def test_an_executor_that_keeps_async_bodies_on_the_loop_sends_emitting_sync_bodies_to_processes(store_url):
    flow = _flow(
        ["emits_from_a_worker", "emits_on_the_loop"], executor=SyncBodiesInProcesses(max_workers=2), store=store_url
    )

    result = flow.run({"partition_keys": ["k1", "k2"]})

    failures = [(name, attempt.failure) for name, task in result.tasks.items() for attempt in task.attempts]
    assert result.status is p.RunStatus.SUCCESS, failures
    store = p.open_store(store_url)
    try:
        events = {event.id: event for event in store.list_events() if event.source.kind is p.SourceKind.ATTEMPT}
    finally:
        store.close()
    for attempt in result.tasks["emits_from_a_worker"].attempts:
        first, second = (events[i] for i in attempt.output)
        assert (first.extra["via"], second.extra["via"]) == ("context", "module")
        assert first.extra["pid"] != os.getpid()
        assert first.source.run_id == result.run_id
        assert (first.source.asset, first.source.invocation) == ("emits_from_a_worker", 1)
    on_loop = events[_only_attempt(result, "emits_on_the_loop").output]
    assert on_loop.extra == {"via": "async", "pid": os.getpid()}
    assert sorted(event.id for event in result.events) == sorted(events)


# -- the driver dies ------------------------------------------------------------------

DRIVER_ENTRY = """
import os
import pathlib
import time

from partita import Flow, ProcessExecutor, StaticPartitionDef, asset, emit

OUT = pathlib.Path({out!r})


class LivenessPipeOnly(ProcessExecutor):
    _parent_death_signal = False  # the fallback other platforms rely on


@asset
def announced():
    return 1


@asset(partition_def=StaticPartitionDef("keys", ["quick", "slow1", "slow2"]))
def blocks(context):
    key = context.partition_key
    emit("announced", extra={{"started": key}})
    (OUT / f"{{key}}.tmp").write_text(str(os.getpid()))
    (OUT / f"{{key}}.tmp").replace(OUT / f"{{key}}.pid")  # whole, never half-written
    deadline = time.monotonic() + 60
    if key == "quick":  # returns once the others run, so that its worker stays idle
        while not all((OUT / f"{{other}}.pid").exists() for other in ("slow1", "slow2")):
            if time.monotonic() > deadline:
                raise TimeoutError("the other bodies did not start")
            time.sleep(0.01)
        (OUT / "quick.done").write_text("")
        return key
    while not (OUT / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    emit("announced", extra={{"finished": key}})
    return key


flow = Flow(["blocks"], executor={executor}(max_workers=3), max_concurrency=3)
"""


KEYS_OPTIONS = ("--partition-key", "quick", "--partition-key", "slow1", "--partition-key", "slow2")


def _running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for a reaper has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _poll(condition, what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {seconds} s")
        time.sleep(0.01)


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGKILL to the driver")
@pytest.mark.parametrize("executor", ["ProcessExecutor", "LivenessPipeOnly"])
def test_workers_end_with_a_killed_driver_and_publish_nothing_more(tmp_path, executor):
    out = tmp_path / "out"
    out.mkdir()
    entry = tmp_path / "entry.py"
    entry.write_text(DRIVER_ENTRY.format(out=str(out), executor=executor))
    store_url = f"sqlite:///{tmp_path}/store.db"
    driver = subprocess.Popen(
        [str(PARTITA), "run", str(entry), *KEYS_OPTIONS, "--yes", "--store", store_url],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    workers: set[int] = set()
    try:
        pid_files = [out / f"{key}.pid" for key in ("quick", "slow1", "slow2")]
        _poll(lambda: (out / "quick.done").exists() or driver.poll() is not None, "every body started")
        assert driver.poll() is None, driver.stderr.read().decode() if driver.stderr else ""
        workers = {int(path.read_text()) for path in pid_files}
        assert driver.pid not in workers
        assert len(workers) == 3  # two busy workers and an idle one

        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
        (out / "release").write_text("")  # an orphaned body would now publish and return

        _poll(lambda: not any(_running(pid) for pid in workers), "the workers ended with their driver")
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        for pid in workers:  # never leave orphans behind, even when the test fails
            if _running(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if driver.stderr:
            driver.stderr.close()
    store = p.open_store(store_url)
    try:
        extras = [event.extra for event in store.list_events() if event.source.kind is p.SourceKind.ATTEMPT]
    finally:
        store.close()
    # What the bodies published before the driver died stays; nothing came after.
    assert sorted(extras, key=str) == [{"started": "quick"}, {"started": "slow1"}, {"started": "slow2"}]


def test_a_body_still_running_after_the_cancellation_grace_period_ends_with_its_worker(tmp_path, monkeypatch):
    monkeypatch.setenv(MARKS, str(tmp_path))
    pid_file = tmp_path / "blocking.pid"
    flow = _flow(["blocks_in_a_worker"], executor="process", cancel_grace_seconds=0)
    finished: list[p.RunFinished] = []

    class Recorder:
        def on_event(self, event):
            if isinstance(event, p.RunFinished):
                finished.append(event)

    async def main():
        task = asyncio.create_task(flow.run_async(observers=[Recorder()]))
        await asyncio.to_thread(_poll, pid_file.exists, "the body started")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())

    worker = int(pid_file.read_text())
    _poll(lambda: not _running(worker), "the abandoned body's worker ended")
    (attempt,) = finished[0].result.tasks["blocks_in_a_worker"].attempts
    assert attempt.status is p.AttemptStatus.CANCELLED
