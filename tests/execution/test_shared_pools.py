"""`ResourcePolicy(shared=True)`: its rules, and what one run does with its pool's leases.

The limit across processes is tested in `test_shared_pools_processes.py`;
here a run's leases are read from the store while its bodies run: one slot
per invocation, released on failure, on cancellation and at the end.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import closing

import pytest

import partita as p
from partita.errors import StoreError
from partita.execution.pools import SlotRequest
from partita.store import SqlStore, open_store
from partita.store.pools import PoolHolder, SqlPoolLeases

KEYS = ["a", "b"]
WAIT = 30.0


@pytest.fixture
def leases(store: SqlStore) -> Iterator[SqlPoolLeases]:
    yield SqlPoolLeases(store.database)


def _flow(registry: p.AssetRegistry, url: str | bool, policy: p.ResourcePolicy, **options) -> p.Flow:
    return p.Flow(["work"], registry=registry, store=url, resources={"api": policy}, **options)


# -- the policy's rules ---------------------------------------------------------


def test_a_shared_policy_needs_max_concurrency_and_the_error_names_it():
    with pytest.raises(p.DefinitionError, match="max_concurrency must be set when shared=True"):
        p.ResourcePolicy(shared=True)


def test_max_concurrency_zero_with_shared_is_rejected_naming_the_field():
    with pytest.raises(p.DefinitionError, match="ResourcePolicy max_concurrency must be at least 1"):
        p.ResourcePolicy(max_concurrency=0, shared=True)


def test_shared_must_be_a_bool():
    with pytest.raises(p.DefinitionError, match="ResourcePolicy shared must be True or False"):
        p.ResourcePolicy(max_concurrency=1, shared="yes")  # type: ignore[arg-type]


def test_a_pool_name_without_shared_is_rejected():
    with pytest.raises(p.DefinitionError, match="ResourcePolicy pool names a shared pool; set shared=True"):
        p.ResourcePolicy(max_concurrency=1, pool="api")


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("", "must be a non-empty string"),
        ("   ", "must be a non-empty string"),
        ("a\x00b", "contains a NUL character"),
        ("a\udcffb", "lone surrogate"),
        ("a\nb", "contains a control character"),
        ("x" * 201, "at most 200 characters"),
    ],
)
def test_a_pool_name_no_store_can_keep_is_rejected_without_repeating_it(name: str, rule: str):
    with pytest.raises(p.DefinitionError, match=rule) as caught:
        p.ResourcePolicy(max_concurrency=1, shared=True, pool=name)
    assert "ResourcePolicy pool" in str(caught.value)
    assert name.strip() == "" or name not in str(caught.value)


def test_a_resource_name_that_would_be_an_unstorable_pool_name_is_rejected():
    registry = p.AssetRegistry()
    p.asset(registry=registry, name="work")(lambda: 1)
    with pytest.raises(p.DefinitionError, match="its pool name.* contains a NUL character"):
        p.Flow(["work"], registry=registry, resources={"a\x00": p.ResourcePolicy(max_concurrency=1, shared=True)})


def test_a_run_with_a_shared_pool_and_no_store_is_refused_before_any_body_runs():
    registry = p.AssetRegistry()
    ran: list[str] = []

    @p.asset(registry=registry, resource="api")
    def work() -> int:
        ran.append("work")
        return 1

    flow = _flow(registry, False, p.ResourcePolicy(max_concurrency=1, shared=True))
    with pytest.raises(p.ConfigurationError, match="shared=True needs a store"):
        flow.run()
    assert ran == []


# -- one run's leases -----------------------------------------------------------


def test_each_invocation_leases_a_slot_a_failure_releases_it_and_a_retry_leases_again(
    store_url: str, leases: SqlPoolLeases
):
    registry = p.AssetRegistry()
    seen: list[tuple[str, int, list[PoolHolder]]] = []

    @p.asset(registry=registry, partition_def=p.StaticPartitionDef("k", KEYS), resource="api")
    def work(context: p.AssetContext) -> int:
        seen.append((context.partition_key, context.invocation_number, leases.holders(["api"])))
        if context.partition_key == "a" and context.invocation_number == 1:
            raise RuntimeError("first invocation fails")
        return 1

    policy = p.ResourcePolicy(max_concurrency=1, shared=True, max_attempts=2)
    result = _flow(registry, store_url, policy, max_concurrency=1).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS
    # The retry queues behind b.
    assert [(key, number) for key, number, _ in seen] == [("a", 1), ("b", 1), ("a", 2)]
    # Each invocation held the pool's one slot alone: the failed one's lease was gone.
    assert [[(h.asset, h.key_index, h.run_id) for h in holders] for _, _, holders in seen] == [
        [("work", 0, result.run_id)],
        [("work", 1, result.run_id)],
        [("work", 0, result.run_id)],
    ]
    acquired = [holders[0].acquired_at for _, _, holders in seen]
    assert acquired == sorted(acquired) and len(set(acquired)) == 3  # the retry leased a slot again
    assert leases.holders() == [] and leases.waiters() == []


def test_a_named_pool_is_shared_by_two_resources_of_one_run(store_url: str, leases: SqlPoolLeases):
    registry = p.AssetRegistry()
    holders: list[int] = []

    def body() -> int:
        holders.append(len(leases.holders(["db"])))
        time.sleep(0.02)  # the body's own work, long enough for a second body to try
        return 1

    p.asset(registry=registry, name="left", partition_def=p.StaticPartitionDef("k", KEYS), resource="x")(body)
    p.asset(registry=registry, name="right", partition_def=p.StaticPartitionDef("k", KEYS), resource="y")(body)
    policy = p.ResourcePolicy(max_concurrency=1, shared=True, pool="db")
    flow = p.Flow(["left", "right"], registry=registry, store=store_url, resources={"x": policy, "y": policy})

    assert flow.run({"partition_keys": KEYS}).status is p.RunStatus.SUCCESS
    assert holders == [1, 1, 1, 1]


def test_cancelling_a_run_releases_its_leases_and_its_waiting_rows(store_url: str, leases: SqlPoolLeases):
    registry = p.AssetRegistry()
    started, release = threading.Event(), threading.Event()

    @p.asset(registry=registry, partition_def=p.StaticPartitionDef("k", KEYS), resource="api")
    async def work() -> int:
        started.set()
        while not release.is_set():
            await asyncio.sleep(0.01)  # the body's own work: it runs until cancelled
        return 1

    # Another holder (as another process would) takes one of the pool's two slots.
    other = leases.acquire_slot(SlotRequest("api", 2, "other-run", "elsewhere", 0, None, 1, WAIT))
    assert other is not None
    flow = _flow(registry, store_url, p.ResourcePolicy(max_concurrency=2, shared=True))
    results: list[p.RunResult] = []
    runner = threading.Thread(target=lambda: results.append(flow.run({"partition_keys": KEYS})))
    runner.start()
    try:
        assert started.wait(WAIT)
        deadline = time.monotonic() + WAIT
        while not leases.waiters(["api"]):  # key b asked for the last slot, held by the other
            assert time.monotonic() < deadline, "the second key never waited for the pool"
            time.sleep(0.01)
        [waiter] = leases.waiters(["api"])
        assert {holder.run_id for holder in leases.holders(["api"])} == {"other-run", waiter.run_id}
        p.cancel_run(waiter.run_id, store=store_url, wait=True, timeout=WAIT)
        runner.join(WAIT)
    finally:
        release.set()
        runner.join(WAIT)
    assert results[0].status is p.RunStatus.CANCELLED
    assert [holder.run_id for holder in leases.holders()] == ["other-run"] and leases.waiters() == []


def test_a_store_failure_while_acquiring_fails_that_attempt_with_a_store_error_and_the_run_goes_on(
    store_url: str, leases: SqlPoolLeases, monkeypatch: pytest.MonkeyPatch
):
    registry = p.AssetRegistry()
    ran: list[str] = []

    @p.asset(registry=registry, partition_def=p.StaticPartitionDef("k", KEYS), resource="api")
    def work(context: p.AssetContext) -> int:
        ran.append(context.partition_key)
        return 1

    acquire = SqlPoolLeases.acquire_slot
    failures = iter([StoreError("store sqlite:///x: cannot acquire a slot of pool 'api': disk I/O error")])

    def failing_once(self: SqlPoolLeases, request):  # type: ignore[no-untyped-def]
        for error in failures:
            raise error
        return acquire(self, request)

    monkeypatch.setattr(SqlPoolLeases, "acquire_slot", failing_once)
    flow = _flow(registry, store_url, p.ResourcePolicy(max_concurrency=1, shared=True), max_concurrency=1)
    result = flow.run({"partition_keys": KEYS})

    first, second = result.tasks["work"].attempts
    assert first.status is p.AttemptStatus.FAILED and first.invocations == ()
    assert first.failure is not None and first.failure.type == "partita.errors.StoreError"
    assert "cannot acquire a slot of pool 'api'" in first.failure.message
    assert second.status is p.AttemptStatus.SUCCESS and ran == ["b"]
    with closing(open_store(store_url)) as store:
        assert SqlPoolLeases(store.database).holders() == []


def test_the_plan_document_names_the_shared_pool_and_matches_the_plan_schema():
    import json
    from pathlib import Path

    from jsonschema import Draft202012Validator

    registry = p.AssetRegistry()
    p.asset(registry=registry, name="work", resource="api")(lambda: 1)
    p.asset(registry=registry, name="other", resource="local")(lambda: 1)
    flow = p.Flow(
        ["work", "other"],
        registry=registry,
        resources={
            "api": p.ResourcePolicy(max_concurrency=2, shared=True, pool="warehouse"),
            "local": p.ResourcePolicy(max_concurrency=2),
        },
    )
    document = flow.plan().to_dict()
    assert {r["name"]: r.get("shared_pool") for r in document["resources"]} == {"api": "warehouse", "local": None}
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" / "plan.v1.json").read_text())
    assert not [error.message for error in Draft202012Validator(schema).iter_errors(document)]


def test_an_attempt_waiting_for_a_slot_lets_other_work_of_the_run_proceed(store_url: str, leases: SqlPoolLeases):
    registry = p.AssetRegistry()
    free_done = threading.Event()

    @p.asset(registry=registry)
    def free() -> int:
        # Runs while pooled waits: pooled asked the store first, and its waiting row appears.
        deadline = time.monotonic() + WAIT
        while not leases.waiters(["api"]):
            assert time.monotonic() < deadline, "pooled never waited for the pool"
            time.sleep(0.01)
        free_done.set()
        return 2

    # Declared last, so of the two ready attempts it is offered a start first (later assets first).
    @p.asset(registry=registry, resource="api")
    def pooled() -> int:
        return 1

    # Another process holds the pool's only slot.
    other = leases.acquire_slot(SlotRequest("api", 1, "other-run", "elsewhere", 0, None, 1, WAIT))
    assert other is not None
    flow = p.Flow(
        ["free", "pooled"], registry=registry, store=store_url,
        resources={"api": p.ResourcePolicy(max_concurrency=1, shared=True)}, max_concurrency=1,
    )
    results: list[p.RunResult] = []
    runner = threading.Thread(target=lambda: results.append(flow.run()))
    runner.start()
    try:
        assert free_done.wait(WAIT)  # the run's one global slot went to free while pooled waits
        assert not results
        leases.release_leases([other])
        runner.join(WAIT)
    finally:
        leases.release_leases([other])
        runner.join(WAIT)
    assert results[0].status is p.RunStatus.SUCCESS
