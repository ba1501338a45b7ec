"""What an attempt sends to another process does not grow with the keys of the run's definitions.

Each attempt's emitter carries the run's event catalog (every asset's
partition definition, a static one with all its keys). Sent with every
attempt, 20,000 keys made each attempt cost milliseconds; the run's shared
objects now go to each worker once and attempts refer to them. Assets are
module level so worker processes find them.
"""

from __future__ import annotations

import os

import pytest

import partita as p
import partita.execution.process_pool as process_pool
from partita.execution.run_constants import RunConstants, install, load_call

MANY = p.StaticPartitionDef("many", [f"k{index:05d}" for index in range(20_000)])
REGISTRY = p.AssetRegistry()


@p.asset(partition_def=MANY, registry=REGISTRY)
def announced(context):
    return context.partition_key


@p.asset(partition_def=MANY, registry=REGISTRY)
def announces(context):
    # The worker validates the target asset and key against the shared definitions.
    receipt = context.emit("announced", partition_key=context.partition_key, dedupe_key=f"a-{context.partition_key}")
    return (context.partition_key, receipt.duplicate)


@p.asset(partition_def=MANY, registry=REGISTRY, retry=p.RetryPolicy(max_attempts=2))
def kills_its_worker_once(context):
    if context.invocation_number == 1:
        os._exit(1)  # the pool replaces the worker process; the retry runs in the new one
    return context.partition_key


KEYS = ["k00001", "k19999", "k07000"]


def test_a_process_worker_gets_the_runs_definitions_once_and_attempts_stay_small(tmp_path, monkeypatch):
    sent: list[int] = []
    real_submit = process_pool.WorkerPool.submit

    def counting_submit(self, token, asset_name, payload):
        sent.append(len(payload))
        return real_submit(self, token, asset_name, payload)

    monkeypatch.setattr(process_pool.WorkerPool, "submit", counting_submit)
    store = f"sqlite:///{tmp_path}/constants.db"
    result = p.Flow(["announces"], registry=REGISTRY, executor="process", store=store).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS, [a.failure for a in result.attempts()]
    assert [result.output("announces", key) for key in KEYS] == [(key, False) for key in KEYS]
    assert sorted(event.partition_key for event in result.events) == sorted(KEYS)  # validated on the worker
    assert len(sent) == 3 and max(sent) < 4_000, sent  # the definition alone pickles to over 200 KB


def test_a_worker_process_that_replaces_a_dead_one_gets_the_definitions_before_its_first_attempt():
    result = p.Flow(
        ["kills_its_worker_once"], registry=REGISTRY, executor=p.ProcessExecutor(max_workers=1), store=False
    ).run({"partition_keys": KEYS[:1]})

    (attempt,) = result.tasks["kills_its_worker_once"].attempts
    assert [invocation.succeeded for invocation in attempt.invocations] == [False, True]
    assert result.output("kills_its_worker_once", KEYS[0]) == KEYS[0]


def test_a_second_run_on_the_same_executor_sends_its_new_workers_the_definitions_too():
    pool_size_one = p.ProcessExecutor(max_workers=1)
    first = p.Flow(["announced"], registry=REGISTRY, executor=pool_size_one, store=False).run(
        {"partition_keys": KEYS[:1]}
    )
    second = p.Flow(["announced"], registry=REGISTRY, executor=pool_size_one, store=False).run(
        {"partition_keys": KEYS[1:]}
    )

    assert first.status is second.status is p.RunStatus.SUCCESS
    assert [second.output("announced", key) for key in KEYS[1:]] == KEYS[1:]


def test_a_call_refers_to_the_shared_objects_it_was_pickled_with():
    shared = {"announced": MANY}
    constants = RunConstants([shared, MANY])
    payload = constants.dumps((len, {"definition": MANY}, shared))

    assert len(payload) < 200 and len(constants.table) > 100_000
    install("test-token", constants.table)
    fn, kwargs, catalog = load_call(payload, "test-token")
    assert fn is len and kwargs["definition"] is catalog["announced"]
    assert catalog["announced"].keys == MANY.keys


def test_a_call_whose_shared_objects_never_arrived_is_refused_by_name():
    payload = RunConstants([MANY]).dumps(MANY)

    with pytest.raises(LookupError, match="never installed"):
        load_call(payload, "a-token-nobody-installed")


def test_a_run_builds_its_event_catalog_once_and_only_when_a_body_emits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalog lists every registered asset: a run whose bodies never emit does not pay for it."""
    registry = p.AssetRegistry()
    for index in range(3):
        p.asset(name=f"other_{index}", registry=registry)(lambda: None)

    @p.asset(partition_def=p.StaticPartitionDef("few", ["a", "b", "c"]), registry=registry)
    def quiet() -> None:
        pass

    @p.asset(partition_def=p.StaticPartitionDef("few", ["a", "b", "c"]), registry=registry)
    def loud(context: p.AssetContext, quiet: None) -> None:
        context.emit("other_0")

    listed: list[int] = []
    definitions = p.AssetRegistry.definitions

    def counted(self: p.AssetRegistry) -> object:
        listed.append(1)
        return definitions(self)

    every_key = {"partition_keys": ["a", "b", "c"]}
    quiet_plan = p.Flow(["quiet"], registry=registry, store=False).plan(every_key)
    loud_plan = p.Flow(["loud"], registry=registry, store=False).plan(every_key)
    monkeypatch.setattr(p.AssetRegistry, "definitions", counted)
    assert p.Flow(["quiet"], registry=registry, store=False).run(quiet_plan).succeeded
    assert listed == []
    result = p.Flow(["loud"], registry=registry, store=False).run(loud_plan)
    assert result.succeeded and len(result.receipts) == 3
    assert listed == [1]  # one catalog for the run's three emitting attempts
