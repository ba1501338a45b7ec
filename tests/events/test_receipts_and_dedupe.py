"""Receipts and idempotent emission (SPEC §8 "Beyond the anchors").

A receipt (id, timestamp, duplicate) acknowledges a stored event. An event
is identified by its ``dedupe_key`` or, without one, by the producer's run,
asset, key, invocation and emission sequence number: emitting the same
identity again returns the first receipt with ``duplicate=True`` and stores
nothing new, while distinct emissions (two calls in one invocation, a retry,
a body and its own callback) never collide. A dedupe key reused for another
payload is an `EmissionError`. Under concurrency — threads sharing a store,
threads sharing one body's context, several processes opening the store by
URL — each dedupe key ends as exactly one event and every receipt for it
names the same id.
"""

from __future__ import annotations

import datetime as dt
import multiprocessing
import queue
import random
import sys
import threading
import time
from typing import Any

import pytest

import partita as p

DEADLINE_SECONDS = 60.0
DEDUPE_KEYS = [f"batch-{n}" for n in range(24)]
TENANTS = p.StaticPartitionDef("tenants", ["acme-private-7731", "globex-private-8842"])

# Module level: forked processes find these by inheritance.
REGISTRY = p.AssetRegistry()


@p.asset(registry=REGISTRY)
def batches():
    return 1


@p.asset(registry=REGISTRY)
def batch_producer(context):
    """Publishes every dedupe key in a shuffled order; returns the receipts."""
    order = list(enumerate(DEDUPE_KEYS))
    random.shuffle(order)
    return [(dedupe, context.emit("batches", extra={"n": n}, dedupe_key=dedupe)) for n, dedupe in order]


def _targets() -> p.AssetRegistry:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def plain():
        return 1

    @p.asset(partition_def=TENANTS, registry=registry)
    def tenant_export():
        return 1

    return registry


def _check_one_event_per_key(url: str, receipts: list[tuple[str, p.EmissionReceipt]], producers: int) -> None:
    """Exactly one stored event per dedupe key; all of its receipts agree on id and timestamp."""
    by_key: dict[str, list[p.EmissionReceipt]] = {}
    for dedupe, receipt in receipts:
        by_key.setdefault(dedupe, []).append(receipt)
    assert sorted(by_key) == sorted(DEDUPE_KEYS)
    store = p.open_store(url)
    try:
        stored = store.list_events(asset="batches")
    finally:
        store.close()
    assert len(stored) == len(DEDUPE_KEYS)
    by_id = {event.id: event for event in stored}
    assert len(by_id) == len(DEDUPE_KEYS)
    for n, dedupe in enumerate(DEDUPE_KEYS):
        issued = by_key[dedupe]
        assert len(issued) == producers
        assert len({receipt.id for receipt in issued}) == 1, issued
        assert len({receipt.timestamp for receipt in issued}) == 1, issued
        assert [receipt.duplicate for receipt in issued].count(False) == 1, issued
        event = by_id[issued[0].id]
        assert event.extra == {"n": n}
        assert event.timestamp == issued[0].timestamp


# -- receipts -------------------------------------------------------------------------------------


def test_a_receipt_names_the_stored_event_and_its_timestamp(sink, published):
    registry = _targets()
    before = dt.datetime.now(dt.UTC)

    @p.asset(registry=registry)
    def producer(context):
        return context.emit("plain", extra={"rows": 100})

    result = p.Flow(["producer"], registry=registry, store=sink).run()
    after = dt.datetime.now(dt.UTC)

    receipt = result.tasks["producer"].attempts[0].output
    assert isinstance(receipt, p.EmissionReceipt)
    assert receipt.duplicate is False
    assert isinstance(receipt.id, int)
    assert receipt.timestamp.utcoffset() == dt.timedelta(0)
    assert before <= receipt.timestamp <= after
    assert result.receipts == (receipt,)
    (event,) = published(sink, result)
    assert (event.id, event.timestamp, event.extra) == (receipt.id, receipt.timestamp, {"rows": 100})


def test_a_repeated_dedupe_key_returns_the_first_receipt_marked_duplicate(sink, published):
    registry = _targets()

    @p.asset(registry=registry)
    def producer(context):
        first = context.emit("plain", extra={"rows": 1}, dedupe_key="batch-41")
        second = p.emit("plain", extra={"rows": 1}, dedupe_key="batch-41")
        return first, second

    result = p.Flow(["producer"], registry=registry, store=sink).run()

    first, second = result.tasks["producer"].attempts[0].output
    assert first.duplicate is False
    assert second.duplicate is True
    assert (second.id, second.timestamp) == (first.id, first.timestamp)
    assert result.receipts == (first, second)
    (event,) = published(sink, result)
    assert event.id == first.id
    assert [e.id for e in result.events] == [first.id]


def test_a_dedupe_key_identifies_one_event_across_runs_and_producers(store_url):
    registry = _targets()

    @p.asset(registry=registry)
    def producer(context):
        return context.emit("tenant_export", partition_key="acme-private-7731", extra={"rows": 3}, dedupe_key="d-41")

    flow = p.Flow(["producer"], registry=registry, store=store_url)
    first = flow.run().tasks["producer"].attempts[0].output
    second = flow.run().tasks["producer"].attempts[0].output
    store = p.open_store(store_url)
    try:
        external = p.publish_event(
            store, registry, "tenant_export", partition_key="acme-private-7731", extra={"rows": 3}, dedupe_key="d-41"
        )
        stored = store.list_events(asset="tenant_export")
    finally:
        store.close()

    assert first.duplicate is False
    for repeat in (second, external):
        assert repeat.duplicate is True
        assert (repeat.id, repeat.timestamp) == (first.id, first.timestamp)
    (event,) = stored
    assert event.id == first.id and event.source.kind is p.SourceKind.ATTEMPT


def test_publish_event_with_a_dedupe_key_is_idempotent(store_url):
    registry = _targets()
    store = p.open_store(store_url)
    try:
        first = p.publish_event(store, registry, "plain", extra={"file": "a.csv"}, dedupe_key="upload-a")
        again = p.publish_event(store, registry, "plain", extra={"file": "a.csv"}, dedupe_key="upload-a")
        without_key = [p.publish_event(store, registry, "plain", extra={"file": "a.csv"}) for _ in range(2)]
        stored = store.list_events()
    finally:
        store.close()

    assert (first.duplicate, again.duplicate) == (False, True)
    assert (again.id, again.timestamp) == (first.id, first.timestamp)
    assert [receipt.duplicate for receipt in without_key] == [False, False]
    assert len({first.id, *(receipt.id for receipt in without_key)}) == 3
    assert len(stored) == 3


def test_a_dedupe_key_reused_for_another_payload_raises_and_stores_nothing(store_url):
    registry = _targets()
    store = p.open_store(store_url)
    try:
        first = p.publish_event(store, registry, "plain", extra={"rows": 1}, dedupe_key="batch-41")
        with pytest.raises(p.EmissionError, match="dedupe_key was already used for a different event"):
            p.publish_event(store, registry, "plain", extra={"rows": 2}, dedupe_key="batch-41")
        with pytest.raises(p.EmissionError, match="dedupe_key was already used"):
            p.publish_event(store, registry, "tenant_export", partition_key="acme-private-7731", dedupe_key="batch-41")
        (event,) = store.list_events()
    finally:
        store.close()

    assert (event.id, event.extra) == (first.id, {"rows": 1})


def test_a_body_reusing_another_runs_dedupe_key_for_another_payload_fails_its_attempt(store_url, published):
    registry = _targets()
    rows = iter([1, 2])

    @p.asset(registry=registry)
    def producer(context):
        return context.emit("plain", extra={"rows": next(rows)}, dedupe_key="batch-41")

    flow = p.Flow(["producer"], registry=registry, store=store_url)
    assert flow.run().status is p.RunStatus.SUCCESS
    second = flow.run()

    assert second.status is p.RunStatus.FAILED
    (attempt,) = second.tasks["producer"].attempts
    assert isinstance(attempt.exception, p.EmissionError)
    assert second.receipts == ()
    assert [event.extra for event in published(store_url)] == [{"rows": 1}]


# -- the default identity -------------------------------------------------------------------------


def test_two_identical_emissions_in_one_invocation_are_two_events(sink, published):
    registry = _targets()

    @p.asset(registry=registry)
    def producer(context):
        return [context.emit("plain", extra={"rows": 1}), p.emit("plain", extra={"rows": 1})]

    result = p.Flow(["producer"], registry=registry, store=sink).run()

    receipts = result.tasks["producer"].attempts[0].output
    assert [receipt.duplicate for receipt in receipts] == [False, False]
    assert len({receipt.id for receipt in receipts}) == 2
    assert sorted(event.id for event in published(sink, result)) == sorted(receipt.id for receipt in receipts)


def test_each_key_of_a_partitioned_producer_publishes_its_own_events(sink, published):
    registry = _targets()

    @p.asset(partition_def=TENANTS, registry=registry)
    def producer(context):
        return context.emit("plain", extra={"same": "payload"})

    result = p.Flow(["producer"], registry=registry, store=sink).run(
        {"partition_keys": ["acme-private-7731", "globex-private-8842"]}
    )

    receipts = [attempt.output for attempt in result.tasks["producer"].attempts]
    assert [receipt.duplicate for receipt in receipts] == [False, False]
    assert len(published(sink, result)) == 2


def test_a_retried_invocation_emitting_again_creates_new_events(sink, published):
    registry = _targets()

    @p.asset(registry=registry, retry=p.RetryPolicy(max_attempts=3, delay=5.0))
    def producer(context):
        context.emit("plain", extra={"batch": 41})
        if context.invocation_number < 3:
            raise RuntimeError("the warehouse went away")
        return context.invocation_number

    clock = p.FastForwardClock()
    result = p.Flow(["producer"], registry=registry, store=sink, clock=clock).run()

    assert result.status is p.RunStatus.SUCCESS
    assert clock.sleeps  # the retry waited on the injected clock, not in real time
    assert [receipt.duplicate for receipt in result.receipts] == [False, False, False]
    events = sorted(published(sink, result), key=lambda event: event.id)
    assert [event.source.invocation for event in events] == [1, 2, 3]
    assert {event.extra["batch"] for event in events} == {41}


def test_explicit_dedupe_key_makes_a_retry_idempotent(sink, published):
    registry = _targets()

    @p.asset(registry=registry, retry=p.RetryPolicy(max_attempts=2))
    def producer(context):
        receipt = context.emit("plain", extra={"batch": 41}, dedupe_key="batch-41")
        if context.invocation_number == 1:
            raise RuntimeError("lost acknowledgement")
        return receipt

    result = p.Flow(["producer"], registry=registry, store=sink, clock=p.FastForwardClock()).run()

    first, second = result.receipts
    assert (first.duplicate, second.duplicate) == (False, True)
    assert second.id == first.id
    (event,) = published(sink, result)
    assert event.source.invocation == 1


def test_a_body_and_its_own_callbacks_emitting_the_same_payload_do_not_collide(sink, published):
    registry = _targets()

    def on_retry(context):
        context.emit("plain", extra={"same": "payload"})

    def on_failure(context):
        context.emit("plain", extra={"same": "payload"})

    @p.asset(registry=registry, retry=p.RetryPolicy(max_attempts=2), on_retry=on_retry, on_failure=on_failure)
    def producer(context):
        context.emit("plain", extra={"same": "payload"})
        raise RuntimeError("broken")

    result = p.Flow(["producer"], registry=registry, store=sink, clock=p.FastForwardClock()).run()

    assert result.status is p.RunStatus.FAILED
    assert result.callback_errors == ()
    # body (1), on_retry (1), body (2), on_failure (2)
    assert len(result.receipts) == 4
    assert not any(receipt.duplicate for receipt in result.receipts)
    events = published(sink, result)
    assert len(events) == 4
    assert sorted(event.source.invocation for event in events) == [1, 1, 2, 2]


def test_flow_callbacks_emitting_the_same_payload_do_not_collide(sink, published):
    registry = _targets()

    def announce(context):
        context.emit("plain", extra={"status": context.result.status.value})

    @p.asset(registry=registry)
    def producer():
        raise RuntimeError("broken")

    result = p.Flow(["producer"], registry=registry, store=sink, on_failure=announce, on_complete=announce).run()

    assert [receipt.duplicate for receipt in result.receipts] == [False, False]
    assert len(published(sink, result)) == 2


def test_runs_of_the_same_flow_never_share_default_identities(store_url, published):
    registry = _targets()

    @p.asset(registry=registry)
    def producer(context):
        return context.emit("plain", extra={"same": "payload"})

    flow = p.Flow(["producer"], registry=registry, store=store_url)
    receipts = [flow.run().tasks["producer"].attempts[0].output for _ in range(2)]

    assert [receipt.duplicate for receipt in receipts] == [False, False]
    assert receipts[0].id != receipts[1].id
    assert len(published(store_url)) == 2


@pytest.mark.slow
def test_threads_sharing_a_context_never_draw_the_same_default_identity():
    registry = _targets()
    threads = 16
    failures: list[str] = []

    @p.asset(registry=registry)
    def producer(context):
        barrier = threading.Barrier(threads)
        errors: list[BaseException] = []
        receipts: list[p.EmissionReceipt] = []

        def work(n: int) -> None:
            barrier.wait()
            try:
                receipts.append(context.emit("plain", extra={"thread": n}))
            except p.EmissionError as error:
                errors.append(error)

        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        if errors:
            raise errors[0]
        return receipts

    flow = p.Flow(["producer"], registry=registry, store=False)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # many thread switches: the first emissions really overlap
    try:
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline and not failures:
            result = flow.run()
            receipts = result.tasks["producer"].attempts[0].output or []
            if result.status is not p.RunStatus.SUCCESS or len(result.events) != threads:
                failures.append(f"{result.status}: {len(result.events)} events")
            elif any(receipt.duplicate for receipt in receipts):
                failures.append("a distinct emission was answered as a duplicate")
    finally:
        sys.setswitchinterval(interval)

    assert failures == []


# -- concurrency: one event per dedupe key -------------------------------------------------------


def test_threads_sharing_a_store_publish_each_dedupe_key_once(store_url):
    threads = 8
    store = p.open_store(store_url)
    barrier = threading.Barrier(threads)
    receipts: list[tuple[str, p.EmissionReceipt]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def publish() -> None:
        order = list(enumerate(DEDUPE_KEYS))
        random.shuffle(order)
        try:
            barrier.wait(timeout=DEADLINE_SECONDS)
            for n, dedupe in order:
                receipt = p.publish_event(store, REGISTRY, "batches", extra={"n": n}, dedupe_key=dedupe)
                with lock:
                    receipts.append((dedupe, receipt))
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    workers = [threading.Thread(target=publish) for _ in range(threads)]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=DEADLINE_SECONDS)
            assert not worker.is_alive()
    finally:
        store.close()

    assert errors == []
    _check_one_event_per_key(store_url, receipts, threads)


def test_threads_inside_one_body_publish_each_dedupe_key_once(sink):
    threads = 8

    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def batches():
        return 1

    @p.asset(registry=registry)
    def producer(context):
        barrier = threading.Barrier(threads)
        receipts: list[tuple[str, p.EmissionReceipt]] = []
        lock = threading.Lock()

        def work() -> None:
            order = list(enumerate(DEDUPE_KEYS))
            random.shuffle(order)
            barrier.wait(timeout=DEADLINE_SECONDS)
            for n, dedupe in order:
                receipt = context.emit("batches", extra={"n": n}, dedupe_key=dedupe)
                with lock:
                    receipts.append((dedupe, receipt))

        workers = [threading.Thread(target=work) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return receipts

    result = p.Flow(["producer"], registry=registry, store=sink).run()

    assert result.status is p.RunStatus.SUCCESS
    receipts = result.tasks["producer"].attempts[0].output
    assert len(receipts) == threads * len(DEDUPE_KEYS)
    assert len(result.events) == len(DEDUPE_KEYS)
    assert sorted(event.extra["n"] for event in result.events) == list(range(len(DEDUPE_KEYS)))
    if sink is not False:
        _check_one_event_per_key(sink, receipts, threads)
    else:
        ids = {}
        for dedupe, receipt in receipts:
            assert ids.setdefault(dedupe, receipt.id) == receipt.id


def _publish_in_process(url: str, barrier: Any, results: Any) -> None:
    """A producer process: opens the store by URL and publishes every dedupe key."""
    try:
        store = p.open_store(url)
        order = list(enumerate(DEDUPE_KEYS))
        random.shuffle(order)
        barrier.wait(timeout=DEADLINE_SECONDS)
        receipts = [
            (dedupe, p.publish_event(store, REGISTRY, "batches", extra={"n": n}, dedupe_key=dedupe))
            for n, dedupe in order
        ]
        store.close()
        results.put(("ok", receipts))
    except BaseException as error:  # noqa: BLE001 - sent to the test
        results.put(("error", repr(error)))


def _run_flow_in_process(url: str, barrier: Any, results: Any) -> None:
    """A producer process: runs a flow whose body publishes every dedupe key."""
    try:
        barrier.wait(timeout=DEADLINE_SECONDS)
        result = p.Flow(["batch_producer"], registry=REGISTRY, store=url).run()
        (attempt,) = result.tasks["batch_producer"].attempts
        if attempt.status is not p.AttemptStatus.SUCCESS:
            results.put(("error", repr(attempt.exception)))
        else:
            results.put(("ok", attempt.output))
    except BaseException as error:  # noqa: BLE001 - sent to the test
        results.put(("error", repr(error)))


@pytest.mark.parametrize("producer", [_publish_in_process, _run_flow_in_process], ids=["publish_event", "flow"])
def test_processes_sharing_a_store_publish_each_dedupe_key_once(store_url, producer):
    processes = 4
    p.open_store(store_url).close()  # the schema exists before the race starts
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(processes)
    results = context.Queue()
    workers = [context.Process(target=producer, args=(store_url, barrier, results)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    collected: list[tuple[str, Any]] = []
    deadline = time.monotonic() + DEADLINE_SECONDS
    try:
        while len(collected) < processes:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"only {len(collected)} of {processes} producers reported"
            try:
                collected.append(results.get(timeout=remaining))
            except queue.Empty:
                continue
    finally:
        for worker in workers:
            worker.join(timeout=DEADLINE_SECONDS)
            if worker.is_alive():
                worker.kill()
                worker.join()

    assert [status for status, _ in collected] == ["ok"] * processes, collected
    receipts = [pair for _, batch in collected for pair in batch]
    _check_one_event_per_key(store_url, receipts, processes)
