"""Outlet events: every successful attempt announces its asset and key (SPEC §8, seed 001).

With a store, each successful attempt records exactly one event (source kind
``outlet``) for its asset and canonical key text (``None`` when
unpartitioned), committed in the same transaction as the attempt's success:
the tables never show one without the other. Failed, skipped and empty work
announces nothing; an attempt resolved from a materialization carries its
``materialization_id`` in ``extra``. Outlets live in the store only: they are
not part of `RunResult.events`, which lists what bodies and callbacks
published.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

import partita as p

DEADLINE_SECONDS = 60.0
TENANTS = p.StaticPartitionDef("tenants", ["acme-private-7731", "globex-private-8842", "initech-private-9953"])
DAYS = p.DatePartitionDef()
DAY_TENANT = p.MultiPartitionDef({"day": DAYS, "tenant": TENANTS})

# Module level: the process executor's workers find it by module and name.
PROCESS_REGISTRY = p.AssetRegistry()


@p.asset(partition_def=TENANTS, registry=PROCESS_REGISTRY)
def process_export(context):
    if context.partition_key == "globex-private-8842":
        raise RuntimeError("refused")
    return 1


def _outlets(url: str, run_id: str | None = None) -> list[p.AssetEvent]:
    store = p.open_store(url)
    try:
        return [
            event
            for event in store.list_events()
            if event.source.kind is p.SourceKind.OUTLET and (run_id is None or event.source.run_id == run_id)
        ]
    finally:
        store.close()


def _announced(url: str, run_id: str) -> dict[tuple[str, str | None], list[p.AssetEvent]]:
    found: dict[tuple[str, str | None], list[p.AssetEvent]] = {}
    for event in _outlets(url, run_id):
        found.setdefault((event.asset, event.partition_key), []).append(event)
    return found


def _engine(url: str) -> sa.Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return sa.create_engine(parsed)


# -- which attempts announce themselves --------------------------------------------------------------


def test_every_successful_attempt_records_one_outlet_with_canonical_key_text(store_url):
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    def daily(context):
        return context.partition_key.day

    @p.asset(partition_def=DAYS, registry=registry)
    def report(daily):
        return daily * 2

    result = p.Flow(["report"], registry=registry, store=store_url).run(
        {"partition_keys": [dt.date(2026, 8, 8), "2026-08-09"]}
    )

    assert result.status is p.RunStatus.SUCCESS
    announced = _announced(store_url, result.run_id)
    assert sorted(announced) == [
        ("daily", "2026-08-08"),
        ("daily", "2026-08-09"),
        ("report", "2026-08-08"),
        ("report", "2026-08-09"),
    ]
    for (asset_name, _), events in announced.items():
        (event,) = events
        assert event.source == p.EventSource(p.SourceKind.OUTLET, result.run_id, asset_name, True, 1)
        assert event.extra == {}
        assert event.partition_date is None
        assert result.started_at <= event.timestamp <= result.finished_at


def test_static_and_multi_keys_are_announced_as_their_canonical_text_without_opting_in(store_url):
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAY_TENANT, registry=registry)
    def daily_tenant():
        return 1

    result = p.Flow(["daily_tenant"], registry=registry, store=store_url).run(
        {"partition_keys": ["2026-08-08|acme-private-7731", {"day": "2026-08-09", "tenant": "globex-private-8842"}]}
    )

    assert sorted(_announced(store_url, result.run_id)) == [
        ("daily_tenant", "2026-08-08|acme-private-7731"),
        ("daily_tenant", "2026-08-09|globex-private-8842"),
    ]


def test_an_unpartitioned_outlet_has_no_key(store_url):
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def summary():
        return 1

    result = p.Flow(["summary"], registry=registry, store=store_url).run()

    ((key, events),) = _announced(store_url, result.run_id).items()
    assert key == ("summary", None)
    (event,) = events
    assert event.source == p.EventSource(p.SourceKind.OUTLET, result.run_id, "summary", False, 1)


def test_failed_and_skipped_attempts_announce_nothing(store_url):
    registry = p.AssetRegistry()

    @p.asset(partition_def=TENANTS, registry=registry)
    def export(context):
        if context.partition_key == "globex-private-8842":
            raise RuntimeError("refused")
        return 1

    @p.asset(partition_def=TENANTS, registry=registry)
    def publish(export):
        return export

    result = p.Flow(["publish"], registry=registry, store=store_url).run(
        {"partition_keys": ["acme-private-7731", "globex-private-8842"]}
    )

    assert result.status is p.RunStatus.FAILED
    statuses = {(a.asset_name, a.partition_key): a.status for t in result.tasks.values() for a in t.attempts}
    assert statuses[("export", "globex-private-8842")] is p.AttemptStatus.FAILED
    assert statuses[("publish", "globex-private-8842")] is p.AttemptStatus.SKIPPED
    assert sorted(_announced(store_url, result.run_id)) == [
        ("export", "acme-private-7731"),
        ("publish", "acme-private-7731"),
    ]


def test_deliberately_empty_work_announces_nothing(store_url):
    registry = p.AssetRegistry()

    @p.asset(partition_def=TENANTS, registry=registry)
    def export():
        return 1

    result = p.Flow(["export"], registry=registry, store=store_url).run({"empty_partitions": True})

    assert result.status is p.RunStatus.SUCCESS
    assert _outlets(store_url) == []


def test_a_recovered_attempt_records_one_outlet_naming_its_last_invocation(store_url):
    registry = p.AssetRegistry()

    @p.asset(partition_def=TENANTS, registry=registry, retry=p.RetryPolicy(max_attempts=3))
    def flaky(context):
        if context.invocation_number < 3:
            raise RuntimeError("transient")
        return 1

    result = p.Flow(["flaky"], registry=registry, store=store_url, clock=p.FastForwardClock()).run(
        {"partition_keys": ["acme-private-7731"]}
    )

    assert result.status is p.RunStatus.SUCCESS
    (events,) = _announced(store_url, result.run_id).values()
    (event,) = events
    assert event.source.invocation == 3


def test_outlets_and_emissions_are_separate_events(store_url):
    registry = p.AssetRegistry()

    @p.asset(partition_def=TENANTS, registry=registry)
    def export(context):
        context.emit("export", partition_key=context.partition_key, extra={"early": True})
        return 1

    result = p.Flow(["export"], registry=registry, store=store_url).run({"partition_keys": ["acme-private-7731"]})

    store = p.open_store(store_url)
    try:
        events = store.list_events(asset="export", partition_key="acme-private-7731")
    finally:
        store.close()
    assert [event.source.kind for event in events] == [p.SourceKind.ATTEMPT, p.SourceKind.OUTLET]
    assert [event.extra for event in events] == [{"early": True}, {}]
    assert [event.id for event in result.events] == [events[0].id]


def test_process_executor_attempts_record_outlets_too(store_url):
    flow = p.Flow(["process_export"], registry=PROCESS_REGISTRY, executor="process", store=store_url)

    result = flow.run({"partition_keys": ["acme-private-7731", "globex-private-8842"]})

    assert sorted(_announced(store_url, result.run_id)) == [("process_export", "acme-private-7731")]


def test_materialized_attempts_outlets_carry_the_materialization_id(store_url, tmp_path: Path):
    registry = p.AssetRegistry()
    adapter = p.FileMaterialization(tmp_path / "materialized")
    calls: list[str] = []

    @p.asset(partition_def=TENANTS, registry=registry, materialization=adapter, version="1")
    def orders(context):
        calls.append(context.partition_key)
        return {"tenant": context.partition_key}

    flow = p.Flow(["orders"], registry=registry, store=store_url)
    keys = {"partition_keys": ["acme-private-7731", "globex-private-8842"]}
    first = flow.run(keys)
    second = flow.run(keys)

    assert len(calls) == 2  # the second run reused the committed outputs
    for result, resolution in ((first, p.Resolution.EXECUTED), (second, p.Resolution.MATERIALIZED)):
        assert result.status is p.RunStatus.SUCCESS
        announced = _announced(store_url, result.run_id)
        for attempt in result.tasks["orders"].attempts:
            assert attempt.resolution is resolution
            assert attempt.materialization_id
            (event,) = announced[("orders", attempt.partition_key)]
            assert event.extra == {"materialization_id": attempt.materialization_id}
            assert event.source.kind is p.SourceKind.OUTLET
    first_ids = {a.partition_key: a.materialization_id for a in first.tasks["orders"].attempts}
    second_ids = {a.partition_key: a.materialization_id for a in second.tasks["orders"].attempts}
    assert first_ids == second_ids


# -- outlets live in the store only -----------------------------------------------------------------


def test_outlets_are_not_part_of_the_run_results_events(sink):
    registry = p.AssetRegistry()

    @p.asset(partition_def=TENANTS, registry=registry)
    def export():
        return 1

    result = p.Flow(["export"], registry=registry, store=sink).run({"partition_keys": ["acme-private-7731"]})

    assert result.status is p.RunStatus.SUCCESS
    assert result.events == () and result.receipts == ()
    if sink is not False:
        assert len(_outlets(sink, result.run_id)) == 1


# -- same transaction as the success ---------------------------------------------------------------

SNAPSHOT = sa.text(
    "SELECT 'attempt' AS what, asset, partition_key, status FROM partita_attempts WHERE run_id = :run "
    "UNION ALL "
    "SELECT 'outlet' AS what, asset, partition_key, source_kind FROM partita_events "
    "WHERE source_run_id = :run AND source_kind = 'outlet'"
)


def _snapshot(engine: sa.Engine, run_id: str) -> tuple[dict[tuple[str, str], str], list[tuple[str, str]]]:
    """Attempt statuses and outlet events, read by one statement (one consistent view)."""
    with engine.connect() as connection:
        rows = list(connection.execute(SNAPSHOT, {"run": run_id}))
    attempts = {(row.asset, row.partition_key): row.status for row in rows if row.what == "attempt"}
    outlets = [(row.asset, row.partition_key) for row in rows if row.what == "outlet"]
    return attempts, outlets


def _check_consistent(attempts: dict[tuple[str, str], str], outlets: list[tuple[str, str]]) -> None:
    succeeded = sorted(key for key, status in attempts.items() if status == "success")
    assert sorted(outlets) == succeeded, (attempts, outlets)


def test_outlet_rows_exist_exactly_when_the_success_rows_exist(store_url):
    keys = ["acme-private-7731", "globex-private-8842", "initech-private-9953"]
    gates = {key: threading.Event() for key in keys}
    registry = p.AssetRegistry()

    @p.asset(partition_def=TENANTS, registry=registry)
    def export(context):
        assert gates[context.partition_key].wait(DEADLINE_SECONDS)
        if context.partition_key == "globex-private-8842":
            raise RuntimeError("refused")
        return 1

    @p.asset(partition_def=TENANTS, registry=registry)
    def publish(export):
        return export

    flow = p.Flow(["publish"], registry=registry, store=store_url, max_concurrency=1, record_partition_keys=True)
    outcome: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: outcome.setdefault("result", flow.run({"partition_keys": keys})))
    p.open_store(store_url).close()  # the schema exists before the run starts
    engine = _engine(store_url)
    runner.start()
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        run_id = None
        while run_id is None:
            assert time.monotonic() < deadline, "the run was never recorded"
            with engine.connect() as connection:
                run_id = connection.execute(sa.text("SELECT run_id FROM partita_runs")).scalar()
        snapshots = 0
        for key in keys:
            gates[key].set()
            while True:
                assert time.monotonic() < deadline, f"the attempt for {key} was never recorded as finished"
                attempts, outlets = _snapshot(engine, run_id)
                snapshots += 1
                _check_consistent(attempts, outlets)
                if attempts.get(("export", key)) in ("success", "failed"):
                    break
    finally:
        for gate in gates.values():
            gate.set()
        runner.join(DEADLINE_SECONDS)
    assert not runner.is_alive()

    result = outcome["result"]
    assert result.status is p.RunStatus.FAILED
    attempts, outlets = _snapshot(engine, result.run_id)
    engine.dispose()
    _check_consistent(attempts, outlets)
    assert len(outlets) == len(set(outlets)) == 4  # export and publish for two keys
    assert attempts[("export", "globex-private-8842")] == "failed"
    assert attempts[("publish", "globex-private-8842")] == "skipped"
    assert snapshots >= len(keys)
