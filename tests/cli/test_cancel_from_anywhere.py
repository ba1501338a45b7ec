"""`partita runs cancel` stops a run in whichever process runs it, through the store (issue 14, item 8).

Real processes throughout: a `partita run`, `partita serve` or `partita
trigger --once` child runs bodies that block reading a named pipe (one per
partition key, held open by the test, so a body blocks until the test
writes to its pipe or the run cancels it). Another child, `partita runs
cancel`, records the request. The time from the request to the run
recording ``cancelled`` is the owner's notice latency: async bodies stop
as soon as they are cancelled, and sync bodies are abandoned after the
grace period, which the bound adds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="named pipes and POSIX signals")

SCRIPT = Path(sys.executable).with_name("partita")
DEADLINE = 60.0
KEYS = ["a", "b", "c", "d", "e"]
STARTED = 2  # --max-concurrency: bodies blocked when the request arrives
GRACE = 0.2  # cancel_grace_seconds of the sync variant
NOTICE = 1.0  # the promise: a request is noticed within a second
EXIT_INTERRUPTED = 130  # what Ctrl-C gives

BODIES = """
import asyncio
import os
import pathlib

from partita import DatePartitionDef, Flow, OnAssetEvents, StaticPartitionDef, asset

PIPES = pathlib.Path({pipes!r})
KEYS = {keys!r}


def _pipe(key):
    return os.open(PIPES / str(key), os.O_RDONLY | os.O_NONBLOCK)


async def _wait_on_pipe(key):
    # Reads one byte of the key's pipe: returns when the test writes it, or is cancelled.
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(_pipe(key), "rb", buffering=0)
    )
    try:
        await reader.readexactly(1)
    finally:
        transport.close()


def _block_on_pipe(key):
    fd = _pipe(key)
    os.set_blocking(fd, True)
    try:
        os.read(fd, 1)
    finally:
        os.close(fd)


def _started(key):
    (PIPES / f"started-{{key}}").touch()


@asset(partition_def=StaticPartitionDef("tenants", KEYS))
async def slow(context):
    _started(context.partition_key)
    await _wait_on_pipe(context.partition_key)
    return 1


@asset(partition_def=StaticPartitionDef("tenants", KEYS))
def slow_sync(context):
    _started(context.partition_key)
    _block_on_pipe(context.partition_key)
    return 1


@asset(partition_def=StaticPartitionDef("tenants", KEYS))
def publish(slow):
    return slow


@asset(partition_def=StaticPartitionDef("tenants", KEYS))
def publish_sync(slow_sync):
    return slow_sync


flow = Flow(["publish"])
sync_flow = Flow(["publish_sync"], cancel_grace_seconds={grace})
# Running sync bodies get a minute to finish: the run stays cancelling until the test releases them.
patient_flow = Flow(["publish_sync"], cancel_grace_seconds=60)


@asset(partition_def=DatePartitionDef())
def raw():
    return 1


@asset(partition_def=DatePartitionDef())
async def consumer(context):
    key = context.partition_key.isoformat()
    _started(key)
    await _wait_on_pipe(key)
    return 1


consumer_flow = Flow(["consumer"], name="consumer_flow", trigger=OnAssetEvents(["raw"]))
"""


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PARTITA_STORE"}
    return {**env, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}


def _partita(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], cwd=cwd, env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=DEADLINE,
    )  # fmt: skip


def _json(*args: str, cwd: Path, code: int = 0) -> dict[str, Any]:
    completed = _partita(*args, "--json", cwd=cwd)
    assert completed.returncode == code, completed.stdout + completed.stderr
    return json.loads(completed.stdout)


def _wait_for(condition: Callable[[], Any], what: str, process: subprocess.Popen[str] | None = None) -> Any:
    deadline = time.monotonic() + DEADLINE
    while True:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"the process ended before {what} ({process.returncode}):\n{out}\n{err}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not before the deadline")
        time.sleep(0.02)


class Pipes:
    """One named pipe per key, held open for writing (so a reader blocks until a byte arrives)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir()
        self._fds: dict[str, int] = {}

    def add(self, key: str) -> None:
        os.mkfifo(self.folder / key)
        self._fds[key] = os.open(self.folder / key, os.O_RDWR | os.O_NONBLOCK)

    def release(self, key: str) -> None:
        os.write(self._fds[key], b"x")

    def started(self) -> list[str]:
        return sorted(path.name.removeprefix("started-") for path in self.folder.glob("started-*"))

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)


@pytest.fixture
def pipes(tmp_path: Path) -> Iterator[Pipes]:
    opened = Pipes(tmp_path / "pipes")
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def bodies(tmp_path: Path, pipes: Pipes) -> str:
    path = tmp_path / "bodies.py"
    path.write_text(BODIES.format(pipes=str(pipes.folder), keys=KEYS, grace=GRACE))
    return str(path)


@contextlib.contextmanager
def _child(*args: str, cwd: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [str(SCRIPT), *args], cwd=cwd, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()  # only the process this test started
        process.communicate()


def _running_ids(url: str, cwd: Path) -> list[str]:
    return [run["run_id"] for run in _json("runs", "list", "--status", "running", "--store", url, cwd=cwd)["runs"]]


def _latency(url: str, run_id: str, requested_at: str, cwd: Path) -> tuple[dict[str, Any], float]:
    """The run as `runs show --json` reads it, and the seconds from the request to its recorded end."""
    import datetime as dt

    shown = _json("runs", "show", run_id, "--store", url, cwd=cwd)["run"]
    finished = dt.datetime.fromisoformat(shown["finished_at"])
    return shown, (finished - dt.datetime.fromisoformat(requested_at)).total_seconds()


# -- partita run ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flow_name, asset_name, bound",
    [("flow", "slow", NOTICE), ("sync_flow", "slow_sync", NOTICE + GRACE)],
    ids=["async bodies", "sync bodies"],
)
def test_runs_cancel_from_another_process_cancels_a_partita_run_within_a_second(
    store_url: str, tmp_path: Path, pipes: Pipes, bodies: str, flow_name: str, asset_name: str, bound: float
):
    if store_url.startswith("postgresql") and asset_name == "slow_sync":
        pytest.skip("the sync variant proves the grace rule once; the backends differ only in the store")
    for key in KEYS:
        pipes.add(key)
    keys = [arg for key in KEYS for arg in ("--partition-key", key)]
    entry = f"{bodies}:{flow_name}"
    with _child("run", entry, *keys, "--max-concurrency", str(STARTED), "--yes", "--store", store_url, cwd=tmp_path) as run:
        _wait_for(lambda: len(pipes.started()) == STARTED, "two bodies started", run)
        [run_id] = _wait_for(lambda: _running_ids(store_url, tmp_path), "the run is recorded running", run)

        asked = _json("runs", "cancel", run_id[:8], "--store", store_url, cwd=tmp_path)

        out, err = run.communicate(timeout=DEADLINE)
    assert asked["outcome"] == "requested" and asked["run_id"] == run_id
    assert run.returncode == EXIT_INTERRUPTED, err
    assert "Cancelled on request" in err and "Traceback" not in err
    assert "status: cancelled" in out
    shown, latency = _latency(store_url, run_id, asked["requested_at"], tmp_path)
    print(f"\nnotice latency ({asset_name}, {store_url.split(':')[0]}): {latency:.3f}s")
    assert shown["status"] == "cancelled"
    assert 0 < latency < bound
    tasks = {task["asset"]: task for task in shown["tasks"]}
    attempts = tasks[asset_name]["attempts"]
    assert [attempt["status"] for attempt in attempts] == ["cancelled"] * len(KEYS)
    assert sorted(KEYS[a["index"]] for a in attempts if a["invocations"]) == pipes.started()
    downstream = tasks["publish" if asset_name == "slow" else "publish_sync"]
    assert downstream["status"] == "not_started"
    assert all(a["status"] == "cancelled" and a["invocations"] == 0 for a in downstream["attempts"])


def test_cancelling_twice_says_already_requested_and_a_running_sync_body_finishes_within_its_grace(
    tmp_path: Path, pipes: Pipes, bodies: str
):
    url = f"sqlite:///{tmp_path}/history.db"
    pipes.add("a")
    entry = f"{bodies}:patient_flow"
    with _child("run", entry, "--partition-key", "a", "--yes", "--store", url, cwd=tmp_path) as run:
        [run_id] = _wait_for(lambda: _running_ids(url, tmp_path) if pipes.started() else None, "a running run", run)
        first = _partita("runs", "cancel", run_id, "--store", url, cwd=tmp_path)
        second = _json("runs", "cancel", run_id, "--store", url, cwd=tmp_path)
        timed_out = _json("runs", "cancel", run_id, "--wait", "--timeout", "0.5", "--store", url, cwd=tmp_path, code=4)
        shown_running = _partita("runs", "show", run_id, "--store", url, cwd=tmp_path)
        pipes.release("a")  # the body blocked in its grace period returns
        out, err = run.communicate(timeout=DEADLINE)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"asked run {run_id} to cancel: the process running it cancels it within about a second"
    assert (second["outcome"], second["status"]) == ("already_requested", "running")
    assert timed_out["wait"] == {"timeout_seconds": 0.5, "timed_out": True}
    assert "cancel requested at " in shown_running.stdout and "the process running it is cancelling it" in shown_running.stdout
    assert run.returncode == EXIT_INTERRUPTED, err
    shown = _json("runs", "show", run_id, "--store", url, cwd=tmp_path)["run"]
    tasks = {task["asset"]: task for task in shown["tasks"]}
    assert shown["status"] == "cancelled"
    assert [a["status"] for a in tasks["slow_sync"]["attempts"]] == ["success"]  # finished within its grace
    assert tasks["publish_sync"]["status"] == "not_started"
    waited = _json("runs", "cancel", run_id, "--wait", "--store", url, cwd=tmp_path, code=2)
    assert (waited["outcome"], waited["status"]) == ("finished", "cancelled")


def test_runs_cancel_wait_returns_once_the_run_recorded_cancelled(tmp_path: Path, pipes: Pipes, bodies: str):
    url = f"sqlite:///{tmp_path}/history.db"
    for key in KEYS:
        pipes.add(key)
    with _child("run", f"{bodies}:flow", "--partition-key", "a", "--yes", "--store", url, cwd=tmp_path) as run:
        [run_id] = _wait_for(lambda: _running_ids(url, tmp_path) if pipes.started() else None, "a running run", run)
        waited = _partita("runs", "cancel", run_id, "--wait", "--timeout", "20", "--store", url, cwd=tmp_path)
        run.communicate(timeout=DEADLINE)
    assert waited.returncode == 0, waited.stderr
    assert waited.stdout.strip() == f"run {run_id} cancelled"
    assert _json("runs", "show", run_id, "--store", url, cwd=tmp_path)["run"]["status"] == "cancelled"


# -- bad inputs -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """One run that succeeded, shared by the tests that only read it: ``(run_id, store url, folder)``.

    A `partita run` child costs seconds; the tests below never write to its
    store (cancelling a finished or unknown run records nothing), so one run
    serves them all.
    """
    folder = tmp_path_factory.mktemp("finished")
    opened = Pipes(folder / "pipes")
    try:
        path = folder / "bodies.py"
        path.write_text(BODIES.format(pipes=str(opened.folder), keys=KEYS, grace=GRACE))
        url = f"sqlite:///{folder}/history.db"
        opened.add("a")
        opened.release("a")  # the body reads its byte and succeeds
        completed = _partita("run", f"{path}:flow", "--partition-key", "a", "--yes", "--store", url, cwd=folder)
        assert completed.returncode == 0, completed.stderr
        [run] = _json("runs", "list", "--store", url, cwd=folder)["runs"]
        yield str(run["run_id"]), url, folder
    finally:
        opened.close()


def test_cancelling_a_finished_run_exits_2_with_its_status(finished_run: tuple[str, str, Path]):
    run_id, url, folder = finished_run

    completed = _partita("runs", "cancel", run_id, "--store", url, cwd=folder)

    assert completed.returncode == 2
    assert f"run {run_id} already finished (success)" in completed.stderr
    assert "Traceback" not in completed.stderr and completed.stdout == ""
    [run] = _json("runs", "list", "--store", url, cwd=folder)["runs"]  # the refusal recorded nothing
    assert (run["run_id"], run["status"]) == (run_id, "success")


@pytest.mark.parametrize(
    "run_id, message",
    [("f" * 32, "no run with id"), ("ab", "too short"), ("zzzz", "no run with id")],
    ids=["unknown id", "too-short prefix", "unknown prefix"],
)
def test_an_unknown_run_or_a_too_short_prefix_exits_2_like_runs_show(
    finished_run: tuple[str, str, Path], run_id: str, message: str
):
    _, url, folder = finished_run

    cancelled = _partita("runs", "cancel", run_id, "--store", url, cwd=folder)
    shown = _partita("runs", "show", run_id, "--store", url, cwd=folder)

    assert cancelled.returncode == shown.returncode == 2
    assert message in cancelled.stderr
    assert cancelled.stderr == shown.stderr
    error = _json("runs", "cancel", run_id, "--store", url, cwd=folder, code=2)
    assert error["schema"] == "partita.error" and error["error"]["type"] == "UnknownRunError"


def test_cancelling_with_no_store_yet_exits_2_and_creates_none(tmp_path: Path):
    completed = _partita("runs", "cancel", "f" * 32, "--store", f"sqlite:///{tmp_path}/none.db", cwd=tmp_path)

    assert completed.returncode == 2
    assert "no run-history store exists" in completed.stderr
    assert not (tmp_path / "none.db").exists()


def test_timeout_without_wait_is_a_usage_error(tmp_path: Path):
    completed = _partita("runs", "cancel", "f" * 32, "--timeout", "3", cwd=tmp_path)

    assert completed.returncode == 2
    assert "--timeout needs --wait" in completed.stderr


def test_cancelling_a_run_whose_process_was_killed_exits_2_saying_it_is_not_running(
    tmp_path: Path, pipes: Pipes, bodies: str
):
    url = f"sqlite:///{tmp_path}/history.db"
    pipes.add("a")
    with _child("run", f"{bodies}:flow", "--partition-key", "a", "--yes", "--store", url, cwd=tmp_path) as run:
        [run_id] = _wait_for(lambda: _running_ids(url, tmp_path) if pipes.started() else None, "a running run", run)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=DEADLINE)

    completed = _partita("runs", "cancel", run_id, "--store", url, cwd=tmp_path)

    assert completed.returncode == 2
    assert f"run {run_id} is not running (interrupted)" in completed.stderr
    document = _json("runs", "cancel", run_id, "--store", url, cwd=tmp_path, code=2)
    assert (document["outcome"], document["status"]) == ("not_running", "interrupted")


# -- serve and trigger --once ---------------------------------------------------------------------------

DAYS = ["2024-01-01", "2024-01-02"]


def _publish(url: str, *days: str, cwd: Path, bodies: str) -> None:
    for day in days:
        completed = _partita("events", "emit", "raw", bodies, "--partition-key", day, "--store", url, cwd=cwd)
        assert completed.returncode == 0, completed.stderr


def _consumer_runs(url: str, cwd: Path) -> dict[str, str]:
    return {run["run_id"]: run["status"] for run in _json("runs", "list", "--store", url, cwd=cwd)["runs"]}


def test_cancelling_one_consumer_run_of_serve_stops_that_run_only(
    store_url: str, tmp_path: Path, pipes: Pipes, bodies: str
):
    for day in DAYS:
        pipes.add(day)
    _publish(store_url, *DAYS, cwd=tmp_path, bodies=bodies)
    serve = ["serve", bodies, "--store", store_url, "--poll-interval", "0.05", "--log-format", "json"]
    with _child(*serve, cwd=tmp_path) as daemon:
        _wait_for(lambda: pipes.started() == DAYS, "both consumer runs blocked", daemon)
        running = _wait_for(
            lambda: (ids := _running_ids(store_url, tmp_path)) and len(ids) == 2 and ids, "two running runs", daemon
        )
        victim, survivor = running

        asked = _json("runs", "cancel", victim, "--store", store_url, cwd=tmp_path)
        _wait_for(lambda: _consumer_runs(store_url, tmp_path)[victim] == "cancelled", "the run cancelled", daemon)

        assert daemon.poll() is None  # the daemon serves on
        assert _consumer_runs(store_url, tmp_path)[survivor] == "running"
        for day in DAYS:  # the cancelled body no longer reads its pipe: only the other one returns
            pipes.release(day)
        _wait_for(lambda: _consumer_runs(store_url, tmp_path)[survivor] == "success", "the other run done", daemon)
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=DEADLINE)
    assert daemon.returncode == 0, err
    shown, latency = _latency(store_url, victim, asked["requested_at"], tmp_path)
    print(f"\nnotice latency (serve, {store_url.split(':')[0]}): {latency:.3f}s")
    assert 0 < latency < NOTICE
    [attempt] = {task["asset"]: task for task in shown["tasks"]}["consumer"]["attempts"]
    assert (attempt["status"], attempt["invocations"]) == ("cancelled", 1)
    ends = {
        record["run_id"]: record["status"]
        for record in map(json.loads, filter(None, err.splitlines()))
        if record["message"].startswith("consumer run finished")
    }
    assert ends == {victim: "cancelled", survivor: "success"}


def test_cancelling_the_consumer_run_of_trigger_once_reports_it_cancelled(tmp_path: Path, pipes: Pipes, bodies: str):
    url = f"sqlite:///{tmp_path}/history.db"
    pipes.add(DAYS[0])
    _publish(url, DAYS[0], cwd=tmp_path, bodies=bodies)
    with _child("trigger", bodies, "--once", "--store", url, cwd=tmp_path) as once:
        _wait_for(lambda: pipes.started() == DAYS[:1], "the consumer run blocked", once)
        [run_id] = _wait_for(lambda: _running_ids(url, tmp_path), "a running run", once)

        _json("runs", "cancel", run_id, "--store", url, cwd=tmp_path)

        out, err = once.communicate(timeout=DEADLINE)
    assert once.returncode == 1, err  # a consumer run did not succeed
    assert f"consumer run {run_id} of flow consumer_flow: cancelled" in out
    assert out.splitlines()[0] == "started 1 consumer run: 0 succeeded, 1 failed"
    assert _consumer_runs(url, tmp_path) == {run_id: "cancelled"}
