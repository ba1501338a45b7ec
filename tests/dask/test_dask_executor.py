"""The Dask executor: bodies on a real two-worker LocalCluster, decisions in the driver (SPEC §11).

Assets are defined at module level in a module-level registry: workers
import this module by name to find them.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import partita as p

DAYS = p.DatePartitionDef()
KEYS = ["2026-08-08", "2026-08-09", "2026-08-10", "2026-08-11"]
MARKS = "PARTITA_TEST_DASK_MARKS"
REGISTRY = p.AssetRegistry()


@p.asset(partition_def=DAYS, registry=REGISTRY)
def extract(context):
    return {"day": context.partition_key.day, "pid": os.getpid()}


@p.asset(partition_def=DAYS, registry=REGISTRY)
def transform(extract):
    return {"value": extract["day"] * 10, "pid": os.getpid()}


@p.asset(partition_def=DAYS, registry=REGISTRY)
async def publish(context, transform):
    await asyncio.sleep(0)
    return (context.partition_key.isoformat(), transform["value"] + 1)


@p.asset(registry=REGISTRY)
def total(publish):
    return sum(value for _, value in publish.values())


def _flow(targets, **options):
    return p.Flow(targets, registry=REGISTRY, **options)


def _poll(predicate, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _failures(result):
    return [(a.asset_name, a.failure) for a in result.attempts() if a.status is not p.AttemptStatus.SUCCESS]


def test_a_three_asset_chain_over_partitions_gives_the_same_outputs_as_in_process(dask_client):
    config = {"partition_keys": KEYS}
    on_dask = _flow(["total"], executor=p.DaskExecutor(client=dask_client)).run(config)
    in_process = _flow(["total"]).run(config)

    assert on_dask.status is p.RunStatus.SUCCESS, _failures(on_dask)
    assert on_dask.output("total") == in_process.output("total") == sum(day * 10 + 1 for day in (8, 9, 10, 11))
    leaves = _flow(["publish"], executor=p.DaskExecutor(client=dask_client)).run(config)
    for key in KEYS:
        assert leaves.output("publish", key) == in_process.output("publish", key)
    assert [a.status for a in leaves.attempts()] == [a.status for a in in_process.attempts() if a.asset_name != "total"]


# -- outputs stay on the cluster ------------------------------------------------------


def _record_unpickling(folder: str, label: str) -> str:
    (Path(folder) / f"{label}-{os.getpid()}-{time.monotonic_ns()}").write_text("")
    return label


class Traced:
    """An output that leaves a mark (naming the process) wherever it is unpickled."""

    def __init__(self, folder: str, label: str) -> None:
        self.folder, self.label = folder, label

    def __reduce__(self):
        return (_unpickled_traced, (self.folder, self.label))


def _unpickled_traced(folder: str, label: str) -> Traced:
    _record_unpickling(folder, label)
    return Traced(folder, label)


@p.asset(partition_def=DAYS, registry=REGISTRY)
def traced_source(context):
    return Traced(os.environ[MARKS], f"source{context.partition_key.day}")


@p.asset(partition_def=DAYS, registry=REGISTRY)
def traced_middle(context, traced_source):
    assert isinstance(traced_source, Traced)
    return Traced(os.environ[MARKS], f"middle{context.partition_key.day}")


@p.asset(partition_def=DAYS, registry=REGISTRY)
def traced_leaf(traced_middle):
    return traced_middle.label


def test_outputs_move_between_workers_and_never_through_the_driver(dask_client, marks):
    executor = p.DaskExecutor(client=dask_client)
    result = _flow(["traced_leaf"], executor=executor).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS, _failures(result)
    driver = str(os.getpid())
    unpickled_here = [mark.name for mark in marks.iterdir() if mark.name.split("-")[1] == driver]
    assert unpickled_here == []
    # The driver fetches an output only when asked.
    assert result.output("traced_leaf", KEYS[0]) == "middle8"
    attempt = result.tasks["traced_source"].attempts[0]
    assert "released" in repr(attempt.output)  # every reader finished: the cluster dropped it
    with pytest.raises(LookupError, match="released"):
        result.output("traced_source", KEYS[0])


def _run_keys_on_scheduler(client, run_id: str) -> list[str]:
    def keys(dask_scheduler: Any, run_id: str = run_id) -> list[str]:
        return [str(key) for key in dask_scheduler.tasks if run_id in str(key)]

    return client.run_on_scheduler(keys)


@p.asset(partition_def=p.StaticPartitionDef("many", [f"k{i:03d}" for i in range(200)]), registry=REGISTRY)
def many_first(context):
    return bytes(1000)


@p.asset(partition_def=p.StaticPartitionDef("many", [f"k{i:03d}" for i in range(200)]), registry=REGISTRY)
def many_second(many_first):
    return len(many_first)


@p.asset(partition_def=p.StaticPartitionDef("many", [f"k{i:03d}" for i in range(200)]), registry=REGISTRY)
def many_third(many_second):
    return many_second + 1


@pytest.mark.parametrize("grouped", [True, False], ids=["grouped", "ungrouped"])
def test_a_200_key_chain_keeps_only_its_in_flight_window_on_the_cluster(dask_client, grouped):
    # A group of 4 keys, or no group and 4 slots: later assets start first, so keys complete one by one.
    active_keys = 4
    options: dict = {"max_concurrency": active_keys}
    if grouped:
        options = {"partition_groups": [p.PartitionGroup(["many_first", "many_second", "many_third"], max_active_keys=active_keys)]}
    flow = _flow(["many_third"], executor=p.DaskExecutor(client=dask_client, keep_unread_outputs=False), **options)
    peak = [0]

    async def barrier():
        return None

    class HeldFutures:
        def on_event(self, event):
            if isinstance(event, p.AttemptFinished):
                # A dropped future is let go on the client's loop; what was queued there before this runs first.
                dask_client.sync(barrier)
                prefix = f"partita-{event.run_id}-"
                held = sum(1 for key in list(dask_client.futures) if str(key).startswith(prefix))
                peak[0] = max(peak[0], held)

    result = flow.run({"partition_keys": [f"k{i:03d}" for i in range(200)]}, observers=[HeldFutures()])

    assert result.status is p.RunStatus.SUCCESS, _failures(result)
    # Per active key: the output its next asset reads, a running body with its summary, and the
    # output of the attempt just finishing (released right after observers hear of it).
    assert 0 < peak[0] <= active_keys * 4
    _poll(lambda: _run_keys_on_scheduler(dask_client, result.run_id) == [], "the cluster forgot the run's keys")


@p.asset(partition_def=DAYS, registry=REGISTRY)
def waits_for_both_runs(context):
    folder = Path(os.environ[MARKS])
    (folder / f"started-{context.run_id}").write_text("")
    deadline = time.monotonic() + 30
    while len(list(folder.glob("started-*"))) < 2:  # both runs have a body on the cluster at once
        if time.monotonic() > deadline:
            raise TimeoutError("the other run never started")
        time.sleep(0.01)
    return context.run_id


def test_two_concurrent_runs_of_one_flow_both_complete_with_their_own_task_keys(dask_client, marks):
    flow = _flow(["waits_for_both_runs"], executor=p.DaskExecutor(client=dask_client))

    async def both():
        config = {"partition_keys": KEYS[:1]}
        return await asyncio.gather(flow.run_async(config), flow.run_async(config))

    first, second = asyncio.run(both())

    assert first.status is second.status is p.RunStatus.SUCCESS, (_failures(first), _failures(second))
    assert first.output("waits_for_both_runs", KEYS[0]) == first.run_id
    assert second.output("waits_for_both_runs", KEYS[0]) == second.run_id


# -- emissions from workers -------------------------------------------------------------


@p.asset(registry=REGISTRY)
def announced():
    return 1


@p.asset(partition_def=DAYS, registry=REGISTRY)
def emits_from_a_worker(context):
    first = context.emit("announced", extra={"pid": os.getpid()}, dedupe_key=f"day-{context.partition_key.day}")
    again = p.emit("announced", extra={"pid": os.getpid()}, dedupe_key=f"day-{context.partition_key.day}")
    return (first.id, first.duplicate, again.id, again.duplicate)


def test_emission_from_a_worker_is_stored_before_emit_returns_with_receipts_and_dedupe(dask_client, store_url):
    flow = _flow(["emits_from_a_worker"], executor=p.DaskExecutor(client=dask_client), store=store_url)

    result = flow.run({"partition_keys": KEYS[:2]})

    assert result.status is p.RunStatus.SUCCESS, _failures(result)
    store = p.open_store(store_url)
    try:
        stored = {event.id: event for event in store.list_events() if event.source.kind is p.SourceKind.ATTEMPT}
    finally:
        store.close()
    for key in KEYS[:2]:
        first_id, first_duplicate, again_id, again_duplicate = result.output("emits_from_a_worker", key)
        assert (first_duplicate, again_duplicate) == (False, True)
        assert first_id == again_id  # the same dedupe key: one event
        event = stored[first_id]
        assert event.extra["pid"] != os.getpid()
        assert (event.source.run_id, event.source.asset) == (result.run_id, "emits_from_a_worker")
    assert len(stored) == 2
    assert sorted(event.id for event in result.events) == sorted(stored)


def test_a_sqlite_store_with_a_scheduler_on_another_machine_is_refused_before_anything_runs(tmp_path):
    # No connection is made: the refusal comes first.
    flow = _flow(["announced"], executor="dask://scheduler.example:8786", store=f"sqlite:///{tmp_path}/p.db")

    with pytest.raises(p.ConfigurationError, match=r"SQLite file on this machine.*scheduler\.example:8786"):
        flow.run()


# -- failures ---------------------------------------------------------------------------


@p.asset(registry=REGISTRY, retry=p.RetryPolicy(max_attempts=3))
def fails_twice(context):
    if context.invocation_number < 3:
        raise ValueError(f"flaky input on try {context.invocation_number}")
    return context.invocation_number


def test_a_body_raising_on_a_worker_fails_its_attempt_and_is_retried_per_its_policy(dask_client):
    result = _flow(["fails_twice"], executor=p.DaskExecutor(client=dask_client)).run()

    assert result.status is p.RunStatus.SUCCESS, _failures(result)
    (attempt,) = result.tasks["fails_twice"].attempts
    assert [invocation.succeeded for invocation in attempt.invocations] == [False, False, True]
    assert attempt.invocations[0].failure.type == "builtins.ValueError"
    assert "flaky input on try 1" in attempt.invocations[0].failure.message
    assert result.output("fails_twice") == 3


@p.asset(registry=REGISTRY)
def raises_without_retry():
    raise KeyError("missing column")


def test_a_body_exception_travels_back_from_the_worker_as_the_attempt_failure(dask_client):
    result = _flow(["raises_without_retry"], executor=p.DaskExecutor(client=dask_client)).run()

    (attempt,) = result.tasks["raises_without_retry"].attempts
    assert attempt.status is p.AttemptStatus.FAILED
    assert attempt.failure.type == "builtins.KeyError"
    assert "missing column" in attempt.failure.message


@p.asset(partition_def=DAYS, registry=REGISTRY, retry=p.RetryPolicy(max_attempts=2))
def dies_on_its_first_invocation(context):
    if context.partition_key.day == 8 and context.invocation_number == 1:
        os._exit(3)
    return (context.partition_key.day, context.invocation_number)


def test_a_worker_killed_mid_body_fails_that_attempt_only_and_its_retry_succeeds(dask_client):
    result = _flow(["dies_on_its_first_invocation"], executor=p.DaskExecutor(client=dask_client)).run(
        {"partition_keys": KEYS[:2]}
    )

    assert result.status is p.RunStatus.SUCCESS, _failures(result)
    dying, other = result.tasks["dies_on_its_first_invocation"].attempts
    assert [invocation.succeeded for invocation in dying.invocations] == [False, True]
    assert "Dask worker died" in dying.invocations[0].failure.message
    assert [invocation.succeeded for invocation in other.invocations] == [True]
    assert result.output("dies_on_its_first_invocation", KEYS[0]) == (8, 2)
    _poll(lambda: len(dask_client.scheduler_info()["workers"]) == 2, "the nanny restarted the worker")


@p.asset(registry=REGISTRY)
def blocks_on_a_worker():
    folder = Path(os.environ[MARKS])
    (folder / "blocking").write_text(str(os.getpid()))
    deadline = time.monotonic() + 30
    while not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return 1


@p.asset(registry=REGISTRY)
def after_the_block(blocks_on_a_worker):
    return blocks_on_a_worker + 1


def test_cancelling_a_run_cancels_its_futures_and_abandons_the_running_body_after_the_grace(dask_client, marks):
    flow = _flow(["after_the_block"], executor=p.DaskExecutor(client=dask_client), cancel_grace_seconds=0)
    finished: list[p.RunFinished] = []

    class Recorder:
        def on_event(self, event):
            if isinstance(event, p.RunFinished):
                finished.append(event)

    async def main():
        task = asyncio.create_task(flow.run_async(observers=[Recorder()]))
        await asyncio.to_thread(_poll, (marks / "blocking").exists, "the body started")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())
        result = finished[0].result
        assert {a.asset_name: a.status for a in result.attempts()} == {
            "blocks_on_a_worker": p.AttemptStatus.CANCELLED,
            "after_the_block": p.AttemptStatus.CANCELLED,
        }
        _poll(lambda: _run_keys_on_scheduler(dask_client, result.run_id) == [], "the cluster dropped the run's tasks")
    finally:
        (marks / "release").write_text("")


# -- construction and options -------------------------------------------------------------


def test_flow_accepts_dask_executor_forms_and_names_them_when_rejecting_one():
    assert _flow(["announced"], executor="dask").executor == "dask"
    assert _flow(["announced"], executor="dask://127.0.0.1:8786").executor == "dask://127.0.0.1:8786"
    with pytest.raises(p.ConfigurationError, match="dask://HOST:PORT"):
        _flow(["announced"], executor="dask://no-port")
    with pytest.raises(p.ConfigurationError, match="'dask', 'dask://HOST:PORT'"):
        _flow(["announced"], executor="cluster")


def test_a_dask_executor_without_distributed_installed_names_the_extra(tmp_path):
    # A fresh interpreter where dask, distributed and cloudpickle cannot be imported.
    script = (
        "import sys\n"
        "for name in ('dask', 'distributed', 'cloudpickle'): sys.modules[name] = None\n"
        "import partita\n"
        "try:\n"
        "    partita.DaskExecutor()\n"
        "except partita.ConfigurationError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)

    assert result.returncode == 0, result.stderr
    assert "pip install 'partita[dask]'" in result.stdout


def test_a_run_on_a_local_cluster_of_its_own_returns_its_outputs_after_the_cluster_closed():
    executor = p.DaskExecutor(n_workers=1, threads_per_worker=2)

    result = _flow(["total"], executor=executor).run({"partition_keys": KEYS[:2]})

    assert result.status is p.RunStatus.SUCCESS, _failures(result)
    assert result.output("total") == 81 + 91  # fetched before its cluster closed
    pickle.dumps(result.output("total"))


# -- discovery and materialization from workers ---------------------------------------------

TENANTS = p.PartitionAtRuntime("dask_tenants", max_keys=10)


@p.asset(partition_def=TENANTS, registry=REGISTRY)
def tenants(context):
    for key in ("acme", "globex"):
        context.add_partition(key, extra={"pid": os.getpid()})
    return {"acme": 4, "globex": 6}


@p.asset(partition_def=TENANTS, registry=REGISTRY)
def tenant_load(context, tenants):
    return (context.partition_key, tenants, os.getpid())


def test_a_producer_on_a_worker_discovers_keys_that_fan_out_in_the_same_run(dask_client, store_url):
    flow = _flow(["tenant_load"], executor=p.DaskExecutor(client=dask_client), store=store_url)

    result = flow.run()

    assert result.status is p.RunStatus.SUCCESS, _failures(result)
    assert [key.key for key in result.discoveries["tenants"]] == ["acme", "globex"]
    assert result.discoveries["tenants"][0].extra["pid"] != os.getpid()
    loaded = {attempt.partition_key: result.output("tenant_load", attempt.partition_key)[:2]
              for attempt in result.tasks["tenant_load"].attempts}
    assert loaded == {"acme": ("acme", 4), "globex": ("globex", 6)}


def test_materialized_outputs_from_workers_are_committed_and_reused_by_the_next_run(dask_client, tmp_path):
    registry = p.AssetRegistry()
    files = p.FileMaterialization(tmp_path / "outputs")
    letters = p.StaticPartitionDef("mat_letters", ["a", "b"])

    @p.asset(partition_def=letters, materialization=files, version="1", registry=registry)
    def committed(context):
        return {"letter": context.partition_key, "pid": os.getpid()}

    @p.asset(partition_def=letters, registry=registry)
    def reads_committed(committed):
        return committed["letter"].upper()

    flow = p.Flow(["reads_committed"], registry=registry, executor=p.DaskExecutor(client=dask_client))
    config = {"partition_keys": ["a", "b"]}

    first = flow.run(config)
    second = flow.run(config)

    assert first.status is second.status is p.RunStatus.SUCCESS, (_failures(first), _failures(second))
    assert {a.resolution for a in first.tasks["committed"].attempts} == {p.Resolution.EXECUTED}
    assert {a.resolution for a in second.tasks["committed"].attempts} == {p.Resolution.MATERIALIZED}
    assert second.tasks["committed"].attempts[0].output["pid"] != os.getpid()  # computed on a worker
    assert [second.output("reads_committed", key) for key in ("a", "b")] == ["A", "B"]


def test_runs_on_one_local_cluster_share_it_and_it_starts_only_when_a_run_needs_it():
    psutil = pytest.importorskip("psutil")

    def children() -> set[int]:
        return {child.pid for child in psutil.Process().children(recursive=True)}

    before = children()
    with p.DaskExecutor.on_one_local_cluster(n_workers=1, threads_per_worker=1) as executor:
        assert children() == before  # a daemon pass with nothing due starts no cluster
        first = _flow(["extract"], executor=executor).run({"partition_keys": KEYS[:1]})
        second = _flow(["extract"], executor=executor).run({"partition_keys": KEYS[1:2]})
        started = children() - before
        pids = [first.output("extract", KEYS[0])["pid"], second.output("extract", KEYS[1])["pid"]]

    assert first.status is second.status is p.RunStatus.SUCCESS
    assert pids[0] == pids[1]  # one worker process served both runs: one cluster, not one per run
    assert pids[0] in started and pids[0] not in children()  # its worker started with the first run, ended on exit
