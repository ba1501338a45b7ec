"""Who published an event, and emission independent of the outcome (SPEC §7, §8, seed 001).

Provenance: an event from an asset body (sync, async, a thread the body
started, a worker process) or from an asset callback (``on_success``,
``on_failure``, ``on_retry``) has source kind ``attempt`` with the run id,
the producer asset, whether it had a key (never the key itself) and its
invocation number. A flow callback (``on_success``, ``on_failure``,
``on_complete``) publishes kind ``flow`` with null attempt fields. A
producer outside partita (``publish_event``, ``partita events emit``) is
``external``. An emitted event stays when the producer fails later, and the
run's events and receipts are on its `RunResult` with or without a store.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import partita as p
from partita.cli.main import cli

TENANTS = p.StaticPartitionDef("tenants", ["acme-private-7731", "globex-private-8842"])

# Module level: the process executor's workers find these by module and name.
PROCESS_REGISTRY = p.AssetRegistry()


@p.asset(registry=PROCESS_REGISTRY)
def announced():
    return 1


@p.asset(partition_def=TENANTS, registry=PROCESS_REGISTRY)
def process_producer(context):
    first = context.emit("announced", extra={"via": "context"})
    second = p.emit("announced", extra={"via": "module"})
    return [first.id, second.id]


@p.asset(registry=PROCESS_REGISTRY)
async def async_process_producer(context):
    await asyncio.sleep(0)
    return p.emit("announced", extra={"via": "async"}).id


@p.asset(registry=PROCESS_REGISTRY, retry=p.RetryPolicy(max_attempts=2))
def retried_process_producer(context):
    context.emit("announced", extra={"invocation": context.invocation_number})
    if context.invocation_number == 1:
        raise RuntimeError("first invocation fails")
    return context.invocation_number


@p.asset(registry=PROCESS_REGISTRY)
def failing_process_producer(context):
    context.emit("announced", extra={"batch": 41})
    raise RuntimeError("batch 42 is broken")


@p.asset(registry=PROCESS_REGISTRY)
def process_producer_without_store(context):
    return context.emit("announced").id


def _targets() -> p.AssetRegistry:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def plain():
        return 1

    return registry


def _attempt_source(run_id: str, asset: str, key_present: bool, invocation: int) -> p.EventSource:
    return p.EventSource(p.SourceKind.ATTEMPT, run_id, asset, key_present, invocation)


# -- asset bodies ----------------------------------------------------------------------------------


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_a_sync_body_publishes_as_its_attempt(sink, partitioned, published):
    registry = _targets()

    @p.asset(registry=registry, partition_def=TENANTS if partitioned else None)
    def producer(context):
        return context.emit("plain", extra={"from": "context"}), p.emit("plain", extra={"from": "module"})

    config = {"partition_keys": ["acme-private-7731"]} if partitioned else None
    result = p.Flow(["producer"], registry=registry, store=sink).run(config)

    events = published(sink, result)
    assert [event.extra["from"] for event in events] == ["context", "module"]
    for event in events:
        assert event.source == _attempt_source(result.run_id, "producer", partitioned, 1)
        assert "acme-private-7731" not in json.dumps(event.source.to_dict())


def test_an_async_body_publishes_as_its_attempt(sink, published):
    registry = _targets()

    @p.asset(registry=registry)
    async def producer(context):
        await asyncio.sleep(0)
        first = context.emit("plain", extra={"from": "context"})
        await asyncio.sleep(0)
        second = p.emit("plain", extra={"from": "module"})
        child = await asyncio.create_task(_emit_in_child_task())
        return [first, second, child]

    result = p.Flow(["producer"], registry=registry, store=sink).run()

    assert result.status is p.RunStatus.SUCCESS
    events = published(sink, result)
    assert [event.extra["from"] for event in events] == ["context", "module", "child task"]
    assert {event.source for event in events} == {_attempt_source(result.run_id, "producer", False, 1)}


async def _emit_in_child_task() -> p.EmissionReceipt:
    await asyncio.sleep(0)
    return p.emit("plain", extra={"from": "child task"})


def test_async_bodies_running_together_keep_their_own_producers(sink, published):
    registry = _targets()
    started: set[str] = set()

    async def rendezvous(name: str) -> None:
        """Wait (polling the loop, with a deadline) until both bodies are running."""
        started.add(name)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(started) < 2:
            assert loop.time() < deadline, "the other body never started"
            await asyncio.sleep(0)

    @p.asset(registry=registry)
    async def left():
        await rendezvous("left")
        first = p.emit("plain", extra={"by": "left"})
        await asyncio.sleep(0)
        return [first, p.emit("plain", extra={"by": "left"})]

    @p.asset(registry=registry)
    async def right():
        await rendezvous("right")
        first = p.emit("plain", extra={"by": "right"})
        await asyncio.sleep(0)
        return [first, p.emit("plain", extra={"by": "right"})]

    result = p.Flow(["left", "right"], registry=registry, store=sink).run()

    assert result.status is p.RunStatus.SUCCESS
    events = published(sink, result)
    assert len(events) == 4
    for event in events:
        assert event.source == _attempt_source(result.run_id, event.extra["by"], False, 1)


def test_a_thread_started_by_the_body_publishes_through_its_context_as_the_attempt(sink, published):
    registry = _targets()

    @p.asset(registry=registry, retry=p.RetryPolicy(max_attempts=2))
    def producer(context):
        receipts: list[p.EmissionReceipt] = []
        thread = threading.Thread(target=lambda: receipts.append(context.emit("plain", extra={"thread": True})))
        thread.start()
        thread.join()
        if context.invocation_number == 1:
            raise RuntimeError("retry me")
        return receipts[0]

    result = p.Flow(["producer"], registry=registry, store=sink, clock=p.FastForwardClock()).run()

    events = published(sink, result)
    assert [event.source for event in events] == [
        _attempt_source(result.run_id, "producer", False, 1),
        _attempt_source(result.run_id, "producer", False, 2),
    ]
    assert events[-1].id == result.tasks["producer"].attempts[0].output.id


def test_process_executor_bodies_publish_into_the_store_as_their_attempts(store_url, published):
    flow = p.Flow(
        ["process_producer", "async_process_producer", "retried_process_producer"],
        registry=PROCESS_REGISTRY,
        executor="process",
        store=store_url,
        clock=p.FastForwardClock(),
    )

    result = flow.run({"partition_keys": ["acme-private-7731"]})

    failures = [(name, attempt.failure) for name, task in result.tasks.items() for attempt in task.attempts]
    assert result.status is p.RunStatus.SUCCESS, failures  # the message names an intermittent failure's cause
    events = {event.id: event for event in published(store_url)}
    sync_ids = result.tasks["process_producer"].attempts[0].output
    async_id = result.tasks["async_process_producer"].attempts[0].output
    assert [events[i].extra for i in sync_ids] == [{"via": "context"}, {"via": "module"}]
    for i in sync_ids:
        assert events[i].source == _attempt_source(result.run_id, "process_producer", True, 1)
    assert events[async_id].source == _attempt_source(result.run_id, "async_process_producer", False, 1)
    retried = sorted(
        (event for event in events.values() if event.source.asset == "retried_process_producer"),
        key=lambda event: event.id,
    )
    assert [(event.extra["invocation"], event.source.invocation) for event in retried] == [(1, 1), (2, 2)]


def test_a_process_executor_emit_without_a_store_fails_the_attempt_with_a_clear_error():
    flow = p.Flow(["process_producer_without_store"], registry=PROCESS_REGISTRY, executor="process", store=False)

    result = flow.run()

    assert result.status is p.RunStatus.FAILED
    (attempt,) = result.tasks["process_producer_without_store"].attempts
    assert attempt.status is p.AttemptStatus.FAILED
    assert isinstance(attempt.exception, p.EmissionError)
    assert "needs a store" in str(attempt.exception)
    assert "Flow(store=...)" in str(attempt.exception)
    assert attempt.failure is not None and attempt.failure.type.endswith("EmissionError")
    assert result.receipts == () and result.events == ()


def test_events_published_in_worker_processes_are_on_the_run_result(store_url):
    flow = p.Flow(["process_producer"], registry=PROCESS_REGISTRY, executor="process", store=store_url)

    result = flow.run({"partition_keys": ["acme-private-7731"]})

    assert result.status is p.RunStatus.SUCCESS
    ids = result.tasks["process_producer"].attempts[0].output
    assert [event.id for event in result.events] == ids


# -- asset callbacks --------------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync callbacks", "async callbacks"])
def test_asset_callbacks_publish_as_the_attempt_they_report_on(sink, asynchronous, published):
    registry = _targets()

    def make(label: str) -> Any:
        if asynchronous:

            async def callback(context: p.CallbackContext) -> None:
                await asyncio.sleep(0)
                p.emit("plain", extra={"callback": label, "invocation": context.invocation_number})

        else:

            def callback(context: p.CallbackContext) -> None:
                context.emit("plain", extra={"callback": label, "invocation": context.invocation_number})

        return callback

    @p.asset(
        partition_def=TENANTS,
        registry=registry,
        retry=p.RetryPolicy(max_attempts=2),
        on_success=make("on_success"),
        on_failure=make("on_failure"),
        on_retry=make("on_retry"),
    )
    def producer(context):
        if context.partition_key == "globex-private-8842":
            raise RuntimeError("tenant export refused")
        return 1

    result = p.Flow(["producer"], registry=registry, store=sink, clock=p.FastForwardClock()).run(
        {"partition_keys": ["acme-private-7731", "globex-private-8842"]}
    )

    assert result.callback_errors == ()
    by_callback = {(e.extra["callback"], e.extra["invocation"]): e.source for e in published(sink, result)}
    assert by_callback == {
        ("on_success", 1): _attempt_source(result.run_id, "producer", True, 1),
        ("on_retry", 1): _attempt_source(result.run_id, "producer", True, 1),
        ("on_failure", 2): _attempt_source(result.run_id, "producer", True, 2),
    }


def test_an_unpartitioned_assets_callback_reports_no_key(sink, published):
    registry = _targets()

    def on_success(context):
        context.emit("plain", extra={"callback": "on_success"})

    @p.asset(registry=registry, on_success=on_success)
    def producer():
        return 1

    result = p.Flow(["producer"], registry=registry, store=sink).run()

    (event,) = published(sink, result)
    assert event.source == _attempt_source(result.run_id, "producer", False, 1)


# -- flow callbacks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fails", [False, True], ids=["successful run", "failed run"])
def test_flow_callbacks_publish_as_the_flow_with_null_attempt_fields(sink, fails, published):
    registry = _targets()

    def make(label: str) -> Any:
        def callback(context: p.CallbackContext) -> None:
            assert context.asset_name is None and context.partition_key is None
            context.emit("plain", extra={"callback": label, "status": context.result.status.value})

        return callback

    @p.asset(partition_def=TENANTS, registry=registry)
    def producer(context):
        if fails:
            raise RuntimeError("broken")
        return 1

    result = p.Flow(
        ["producer"],
        registry=registry,
        store=sink,
        on_success=make("on_success"),
        on_failure=make("on_failure"),
        on_complete=make("on_complete"),
    ).run({"partition_keys": ["acme-private-7731"]})

    expected = ["on_failure", "on_complete"] if fails else ["on_success", "on_complete"]
    events = published(sink, result)
    assert [event.extra["callback"] for event in events] == expected
    for event in events:
        assert event.source == p.EventSource(p.SourceKind.FLOW, result.run_id, None, None, None)
        assert event.source.to_dict() == {
            "kind": "flow",
            "run_id": result.run_id,
            "asset": None,
            "partition_key_present": None,
            "invocation": None,
        }


# -- external producers --------------------------------------------------------------------------


def test_publish_event_is_an_external_source(store_url):
    registry = _targets()
    store = p.open_store(store_url)
    try:
        receipt = p.publish_event(store, registry, "plain", extra={"uploaded": "a.csv"})
        (event,) = store.list_events()
    finally:
        store.close()

    assert event.id == receipt.id
    assert event.source == p.EventSource(p.SourceKind.EXTERNAL)
    assert event.source.to_dict() == {
        "kind": "external",
        "run_id": None,
        "asset": None,
        "partition_key_present": None,
        "invocation": None,
    }


def test_publish_event_accepts_a_flow_for_its_definitions(store_url):
    registry = _targets()
    flow = p.Flow(["plain"], registry=registry)
    store = p.open_store(store_url)
    try:
        receipt = p.publish_event(store, flow, "plain")
        assert [event.id for event in store.list_events()] == [receipt.id]
    finally:
        store.close()


def test_the_cli_publishes_as_an_external_source(store_url, tmp_path: Path):
    (tmp_path / "entry.py").write_text(
        textwrap.dedent(
            """
            from partita import StaticPartitionDef, asset

            @asset(partition_def=StaticPartitionDef("tenants", ["acme-private-7731"]))
            def tenant_export():
                return 1
            """
        )
    )

    outcome = CliRunner().invoke(
        cli,
        [
            "events",
            "emit",
            "tenant_export",
            "entry.py",
            "--partition-key",
            "acme-private-7731",
            "--store",
            store_url,
            "--json",
        ],
        catch_exceptions=False,
    )

    assert outcome.exit_code == 0, outcome.output
    receipt = json.loads(outcome.stdout)["receipt"]
    store = p.open_store(store_url)
    try:
        (event,) = store.list_events()
    finally:
        store.close()
    assert event.id == receipt["id"]
    assert event.partition_key == "acme-private-7731"
    assert event.source == p.EventSource(p.SourceKind.EXTERNAL)


# -- emission is independent of the outcome ----------------------------------------------------------


def test_events_emitted_before_a_failure_staypublished(sink, published):
    registry = _targets()

    @p.asset(partition_def=TENANTS, registry=registry)
    def ingest(context):
        context.emit("plain", extra={"batch": 41})
        context.emit("plain", extra={"batch": 42})
        raise RuntimeError("batch 43 is broken")

    @p.asset(partition_def=TENANTS, registry=registry)
    def downstream(ingest):
        return ingest

    result = p.Flow(["downstream"], registry=registry, store=sink).run({"partition_keys": ["acme-private-7731"]})

    assert result.status is p.RunStatus.FAILED
    assert result.tasks["ingest"].attempts[0].status is p.AttemptStatus.FAILED
    assert result.tasks["downstream"].attempts[0].reason is p.SkipReason.DEPENDENCY_FAILED
    events = published(sink, result)
    assert [event.extra for event in events] == [{"batch": 41}, {"batch": 42}]
    assert [receipt.id for receipt in result.receipts] == [event.id for event in events]
    if sink is not False:
        store = p.open_store(sink)
        try:
            outlets = [e for e in store.list_events() if e.source.kind is p.SourceKind.OUTLET]
        finally:
            store.close()
        assert outlets == []  # emitting never marks the attempt successful


def test_events_emitted_before_the_run_is_cancelled_staypublished(store_url, published):
    registry = _targets()

    async def scenario() -> None:
        emitted = asyncio.Event()

        @p.asset(registry=registry)
        async def producer(context):
            context.emit("plain", extra={"batch": 41})
            emitted.set()
            await asyncio.Event().wait()  # still running when the run is cancelled

        run = asyncio.create_task(p.Flow(["producer"], registry=registry, store=store_url).run_async())
        await asyncio.wait_for(emitted.wait(), 60)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(scenario())

    store = p.open_store(store_url)
    try:
        (run,) = store.list_runs()
        events = store.list_events()
    finally:
        store.close()
    assert run.header.status == "cancelled"
    assert [(event.extra, event.source.kind) for event in events] == [({"batch": 41}, p.SourceKind.ATTEMPT)]


def test_events_emitted_in_a_worker_process_before_a_failure_staypublished(store_url, published):
    result = p.Flow(["failing_process_producer"], registry=PROCESS_REGISTRY, executor="process", store=store_url).run()

    assert result.status is p.RunStatus.FAILED
    (event,) = published(store_url)
    assert event.extra == {"batch": 41}
    assert event.source == _attempt_source(result.run_id, "failing_process_producer", False, 1)


def test_a_callback_that_raises_after_emitting_keeps_its_event_and_changes_no_outcome(sink, published):
    registry = _targets()

    def on_success(context):
        context.emit("plain", extra={"cleanup": "started"})
        raise RuntimeError("cleanup failed")

    @p.asset(registry=registry, on_success=on_success)
    def producer():
        return 1

    result = p.Flow(["producer"], registry=registry, store=sink).run()

    assert result.status is p.RunStatus.SUCCESS
    assert len(result.callback_errors) == 1
    (event,) = published(sink, result)
    assert event.extra == {"cleanup": "started"}


# -- RunResult.events and receipts --------------------------------------------------------------------


def test_the_run_result_lists_what_bodies_and_callbackspublished(sink, published):
    registry = _targets()

    def on_success(context):
        context.emit("plain", extra={"from": "asset callback"})

    def on_complete(context):
        context.emit("plain", extra={"from": "flow callback"})

    @p.asset(partition_def=TENANTS, registry=registry, on_success=on_success)
    def producer(context):
        return context.emit("plain", extra={"from": "body"}, partition_key=None)

    result = p.Flow(["producer"], registry=registry, store=sink, on_complete=on_complete).run(
        {"partition_keys": ["acme-private-7731"]}
    )

    assert result.status is p.RunStatus.SUCCESS
    assert {event.extra["from"] for event in result.events} == {"body", "asset callback", "flow callback"}
    assert all(isinstance(event, p.AssetEvent) for event in result.events)
    assert sorted(receipt.id for receipt in result.receipts) == sorted(event.id for event in result.events)
    assert all(event.source.kind is not p.SourceKind.OUTLET for event in result.events)
    by_id = {event.id: event for event in result.events}
    for receipt in result.receipts:
        assert by_id[receipt.id].timestamp == receipt.timestamp
    if sink is not False:
        stored = {event.id: event for event in published(sink)}
        assert stored == by_id


def test_a_run_that_publishes_nothing_has_no_events_or_receipts(sink):
    registry = _targets()

    @p.asset(registry=registry)
    def producer():
        return 1

    result = p.Flow(["producer"], registry=registry, store=sink).run()

    assert result.events == () and result.receipts == ()
