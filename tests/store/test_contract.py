"""The store contract (SPEC §6, §14): every test runs on SQLite and on PostgreSQL.

Runs are recorded through the public behaviour (``Flow(..., store=...)``) and
read back through the `Store` verbs (list, get, tasks) and `compare_runs`.
The verbs driven directly (prefix lookup, ordering, liveness) are proven in
tests/store/contract/test_run_history.py. Privacy is proven by reading
the tables with SQLAlchemy: without the opt-in no column holds a raw key.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, select, text

import partita
from partita.results.record import render_record
from partita.store import SqlStore, Store, open_store
from partita.store.history import compare_runs

DEADLINE_SECONDS = 30.0
TENANTS = ["tenant-qx7-private", "tenant-zz4-hidden", "tenant-mm9-secret"]
FAILING_TENANTS = {TENANTS[2]}


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        opened.close()


def _wait_for(condition: Callable[[], Any], what: str, timeout: float = DEADLINE_SECONDS) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _sa_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


# Asset events are the one exception to key privacy (SPEC §1.6): their key is
# the routing pointer downstream work needs. Every other table is run history.
EVENT_TABLES = {"partita_events"}


def _all_rows(url: str) -> list[tuple[str, dict[str, Any]]]:
    """Every row of every run-history table in the store database, as (table, row mapping)."""
    engine = create_engine(_sa_url(url))
    try:
        with engine.connect() as connection:
            rows = []
            tables = set(inspect(connection).get_table_names()) - EVENT_TABLES
            assert {"partita_runs", "partita_attempts", "partita_invocations"} <= tables
            for table in sorted(tables):
                for row in connection.execute(text(f'SELECT * FROM "{table}"')).mappings():
                    rows.append((table, dict(row)))
            return rows
    finally:
        engine.dispose()


def _attempt_rows(url: str, run_id: str) -> list[dict[str, Any]]:
    from partita.store.schema import attempts

    engine = create_engine(_sa_url(url))
    try:
        with engine.connect() as connection:
            query = select(attempts).where(attempts.c.run_id == run_id).order_by(attempts.c.asset, attempts.c.idx)
            return [dict(row) for row in connection.execute(query).mappings()]
    finally:
        engine.dispose()


def _tenants() -> partita.StaticPartitionDef:
    return partita.StaticPartitionDef("tenants", TENANTS)


def _statuses(store: Store, run_id: str) -> dict[str, list[str]]:
    return {task.asset: [attempt.status for attempt in task.attempts] for task in store.get_tasks(run_id)}


def _simple_registry() -> partita.AssetRegistry:
    registry = partita.AssetRegistry()

    @partita.asset(registry=registry)
    def one() -> int:
        return 1

    return registry


# -- recording a real run and reading it back ---------------------------------------


def _mixed_flow(store: Any, calls: dict[str, int], **options: Any) -> partita.Flow:
    """Retries, a permanent failure, a dependency skip, a resource and a failing callback."""
    registry = partita.AssetRegistry()

    def broken_callback(context: partita.CallbackContext) -> None:
        raise RuntimeError("callback broke")

    @partita.asset(
        partition_def=_tenants(),
        retry=partita.RetryPolicy(max_attempts=3, delay=5.0),
        resource="api",
        on_success=broken_callback,
        registry=registry,
    )
    def extract(context: partita.AssetContext) -> int:
        count = calls[context.partition_key] = calls.get(context.partition_key, 0) + 1
        if context.partition_key in FAILING_TENANTS:
            raise ValueError("source unavailable")
        if context.partition_key == TENANTS[0] and count < 3:
            raise ConnectionError(f"transient {count}")
        return count

    @partita.asset(partition_def=_tenants(), registry=registry)
    def publish(context: partita.AssetContext, extract: int) -> int:
        return extract + 1

    @partita.asset(registry=registry)
    def settings() -> dict[str, int]:
        return {"scale": 2}

    return partita.Flow(
        ["publish", "settings"],
        registry=registry,
        store=store,
        clock=partita.FastForwardClock(),
        resources={"api": partita.ResourcePolicy(max_concurrency=1)},
        **options,
    )


def test_a_run_read_back_from_the_store_renders_the_same_record_as_the_live_result(store_url, store):
    result = _mixed_flow(store_url, {}).run({"partition_keys": TENANTS})

    assert result.status is partita.RunStatus.FAILED
    stored = store.get_run(result.run_id)
    tasks = store.get_tasks(result.run_id)
    for version in (1, 2, 3, 4):
        assert render_record(stored.header, tasks, version) == result.to_record(version=version)
    assert stored.status == "failed"
    assert stored.attempt_count == result.plan.attempt_count == 7
    assert stored.counts == {"success": 5, "failed": 1, "skipped": 1}
    assert stored.header.targets == ("publish", "settings")
    assert stored.header.selection_kind == "keys"
    assert stored.header.key_count == 3
    assert stored.header.started_at == result.started_at
    assert stored.header.finished_at == result.finished_at
    assert stored.duration == pytest.approx(result.duration)
    assert stored.plan == result.plan.to_dict()
    assert stored.record_partition_keys is False


def test_statuses_reasons_blockers_and_failures_are_stored_per_attempt(store_url, store):
    result = _mixed_flow(store_url, {}).run({"partition_keys": TENANTS})

    tasks = {task.asset: task for task in store.get_tasks(result.run_id)}
    assert list(tasks) == ["extract", "publish", "settings"]
    assert [a.status for a in tasks["extract"].attempts] == ["success", "success", "failed"]
    assert [a.status for a in tasks["publish"].attempts] == ["success", "success", "skipped"]
    skipped = tasks["publish"].attempts[2]
    assert skipped.reason == "dependency_failed"
    assert skipped.blocked_by == (("extract", 2),)
    failed = tasks["extract"].attempts[2]
    assert failed.failure is not None
    assert failed.failure.type == "builtins.ValueError"
    assert failed.failure.message == "source unavailable"
    assert "ValueError" in failed.failure.traceback
    assert all(a.partition_key_present for a in tasks["extract"].attempts)
    assert [a.partition_key_present for a in tasks["settings"].attempts] == [False]
    assert tasks["settings"].partitioned is False and tasks["extract"].partitioned is True
    assert [a.resolution for a in tasks["extract"].attempts[:2]] == ["executed", "executed"]


def test_retried_attempts_keep_every_invocation(store_url, store):
    calls: dict[str, int] = {}
    result = _mixed_flow(store_url, calls).run({"partition_keys": TENANTS})

    extract = next(task for task in store.get_tasks(result.run_id) if task.asset == "extract")
    recovered, clean, failed = extract.attempts
    assert [i.number for i in recovered.invocations] == [1, 2, 3]
    assert [i.succeeded for i in recovered.invocations] == [False, False, True]
    assert [i.failure_type for i in recovered.invocations] == ["builtins.ConnectionError"] * 2 + [None]
    assert [i.failure_message for i in recovered.invocations] == ["transient 1", "transient 2", None]
    for invocation in recovered.invocations:
        assert invocation.started_at is not None and invocation.finished_at is not None
        assert invocation.started_at <= invocation.finished_at
    starts = [i.started_at for i in recovered.invocations]
    assert starts == sorted(starts)
    assert recovered.started_at == starts[0]
    assert recovered.finished_at == recovered.invocations[-1].finished_at

    assert len(clean.invocations) == 1 and clean.invocations[0].succeeded
    assert clean.invocations[0].failure_type is None

    assert [i.succeeded for i in failed.invocations] == [False, False, False]
    assert {i.failure_message for i in failed.invocations} == {"source unavailable"}
    assert calls == {TENANTS[0]: 3, TENANTS[1]: 1, TENANTS[2]: 3}

    record = render_record(store.get_run(result.run_id).header, store.get_tasks(result.run_id), 2)
    details = record["tasks"][0]["attempts"][0]["invocation_details"]
    assert [d["failure"] for d in details] == [
        {"type": "builtins.ConnectionError", "message": "transient 1"},
        {"type": "builtins.ConnectionError", "message": "transient 2"},
        None,
    ]


def test_resources_and_callback_errors_summary_round_trip(store_url, store):
    result = _mixed_flow(store_url, {}).run({"partition_keys": TENANTS})

    header = store.get_run(result.run_id).header
    live = result.resources["api"]
    assert header.resources == {
        "api": {
            "invocations": live.invocations,
            "succeeded": live.succeeded,
            "failed": live.failed,
            "retries": live.retries,
            "wait_count": live.wait_count,
            "wait_duration_seconds": live.wait_duration,
            "invocation_duration_seconds": live.invocation_duration,
        }
    }
    assert (live.invocations, live.succeeded, live.failed, live.retries) == (7, 2, 5, 4)
    assert len(header.callback_errors) == len(result.callback_errors) == 2
    for error in header.callback_errors:
        assert error["callback"] == "on_success"
        assert error["asset"] == "extract"
        assert error["partition_key_present"] is True
        assert error["failure"]["type"] == "builtins.RuntimeError"
        assert error["failure"]["message"] == "callback broke"
    listed = next(run for run in store.list_runs() if run.run_id == result.run_id)
    assert listed.header.resources == header.resources
    assert listed.header.callback_errors == header.callback_errors


def test_a_run_without_resources_or_callback_errors_has_empty_summaries(store_url, store):
    result = partita.Flow(["one"], registry=_simple_registry(), store=store_url).run()

    header = store.get_run(result.run_id).header
    assert header.resources == {}
    assert header.callback_errors == ()
    assert _statuses(store, result.run_id) == {"one": ["success"]}


def test_an_empty_partitions_run_is_recorded_with_skipped_partitioned_tasks(store_url, store):
    result = _mixed_flow(store_url, {}).run({"empty_partitions": True})

    stored = store.get_run(result.run_id)
    assert stored.status == "success"
    assert stored.header.selection_kind == "empty"
    assert stored.header.key_count == 0
    assert stored.attempt_count == 1
    tasks = {task.asset: task for task in store.get_tasks(result.run_id)}
    assert tasks["extract"].attempts == () and tasks["extract"].skip_reason == "no_partition_keys"
    assert tasks["publish"].attempts == () and tasks["publish"].skip_reason == "no_partition_keys"
    assert [a.status for a in tasks["settings"].attempts] == ["success"]
    assert tasks["settings"].skip_reason is None
    record = render_record(stored.header, list(tasks.values()), 4)
    assert record == result.to_record(version=4)
    assert [(t["status"], t["reason"]) for t in record["tasks"]] == [
        ("skipped", "no_partition_keys"),
        ("skipped", "no_partition_keys"),
        ("success", None),
    ]


# -- listing, ordering, filtering, lookup ------------------------------------------------


def test_list_runs_is_newest_first_and_honours_limit(store_url, store):
    registry = _simple_registry()
    ids = [partita.Flow(["one"], registry=registry, store=store_url).run().run_id for _ in range(4)]

    listed = store.list_runs()
    assert [run.run_id for run in listed] == ids[::-1]
    assert [run.run_id for run in store.list_runs(limit=2)] == ids[::-1][:2]
    assert [run.run_id for run in store.list_runs(limit=1)] == ids[-1:]
    assert all(run.status == "success" and run.counts == {"success": 1} for run in listed)


def test_status_filter(store_url, store):
    registry = partita.AssetRegistry()

    @partita.asset(registry=registry)
    def flaky() -> int:
        if Path("broken").exists():
            raise RuntimeError("broken")
        return 1

    ok_first = partita.Flow(["flaky"], registry=registry, store=store_url).run()
    Path("broken").write_text("")
    failed = partita.Flow(["flaky"], registry=registry, store=store_url).run()
    Path("broken").unlink()
    ok_second = partita.Flow(["flaky"], registry=registry, store=store_url).run()

    assert [r.run_id for r in store.list_runs(status="success")] == [ok_second.run_id, ok_first.run_id]
    assert [r.run_id for r in store.list_runs(status="success", limit=1)] == [ok_second.run_id]
    assert [r.run_id for r in store.list_runs(status="failed")] == [failed.run_id]
    assert store.list_runs(status="failed")[0].counts == {"failed": 1}
    assert store.list_runs(status="running") == []
    assert store.list_runs(status="interrupted") == []
    assert store.list_runs(status="cancelled") == []


def test_a_flow_given_a_store_object_leaves_it_open(store):
    registry = _simple_registry()
    first = partita.Flow(["one"], registry=registry, store=store).run()
    second = partita.run(["one"], registry=registry, store=store)

    assert [run.run_id for run in store.list_runs()] == [second.run_id, first.run_id]
    assert isinstance(store, Store)


# -- live progress -----------------------------------------------------------------------


def test_attempts_are_written_as_the_run_progresses(store_url, store):
    registry = partita.AssetRegistry()
    release = threading.Event()

    @partita.asset(partition_def=_tenants(), registry=registry)
    def slow(context: partita.AssetContext) -> int:
        if context.partition_key == TENANTS[1]:
            assert release.wait(DEADLINE_SECONDS)
        return 1

    results: list[partita.RunResult] = []
    runner = threading.Thread(
        target=lambda: results.append(
            partita.Flow(["slow"], registry=registry, store=store_url).run({"partition_keys": TENANTS})
        )
    )
    runner.start()
    try:

        def progressed() -> Any:
            runs = store.list_runs()
            if not runs:
                return None
            statuses = _statuses(store, runs[0].run_id).get("slow", [])
            return runs[0] if sorted(statuses) == ["running", "success", "success"] else None

        running = _wait_for(progressed, "two finished attempts and one running")
        assert running.status == "running"
        assert running.header.finished_at is None
        assert running.duration is None
        assert [r.run_id for r in store.list_runs(status="running")] == [running.run_id]
        assert store.list_runs(status="interrupted") == []
        assert store.list_runs(status="success") == []
        assert _statuses(store, running.run_id) == {"slow": ["success", "running", "success"]}
        unfinished = store.get_tasks(running.run_id)[0].attempts[1]
        assert unfinished.finished_at is None
        assert unfinished.failure is None
    finally:
        release.set()
        runner.join(DEADLINE_SECONDS)
    assert not runner.is_alive()

    finished = store.get_run(results[0].run_id)
    assert finished.status == "success"
    assert finished.counts == {"success": 3}
    assert _statuses(store, finished.run_id) == {"slow": ["success", "success", "success"]}
    assert store.list_runs(status="running") == []


def test_a_retried_attempt_shows_its_failed_invocation_while_it_is_still_running(store_url, store):
    registry = partita.AssetRegistry()
    release = threading.Event()
    calls: list[int] = []

    @partita.asset(retry=partita.RetryPolicy(max_attempts=3, delay=1.0), registry=registry)
    def fetch() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise TimeoutError("first try")
        assert release.wait(DEADLINE_SECONDS)
        return 1

    flow = partita.Flow(["fetch"], registry=registry, store=store_url, clock=partita.FastForwardClock())
    runner = threading.Thread(target=flow.run)
    runner.start()
    try:

        def retrying() -> Any:
            runs = store.list_runs()
            if not runs:
                return None
            attempts = store.get_tasks(runs[0].run_id)[0].attempts
            if attempts and attempts[0].status == "running" and attempts[0].invocations:
                return attempts[0]
            return None

        attempt = _wait_for(retrying, "a running attempt with a failed invocation")
        assert attempt.invocations[0].number == 1
        assert attempt.invocations[0].succeeded is False
        assert attempt.invocations[0].failure_type == "builtins.TimeoutError"
        assert attempt.invocations[0].failure_message == "first try"
    finally:
        release.set()
        runner.join(DEADLINE_SECONDS)

    run_id = store.list_runs()[0].run_id
    final = store.get_tasks(run_id)[0].attempts[0]
    assert final.status == "success"
    assert [(i.number, i.succeeded) for i in final.invocations] == [(1, False), (2, True)]


# -- liveness: running versus interrupted --------------------------------------------


# -- privacy: raw partition keys -------------------------------------------------------


def _key_flow(store_url: str, **options: Any) -> partita.Flow:
    registry = partita.AssetRegistry()

    def broken_callback(context: partita.CallbackContext) -> None:
        raise RuntimeError("callback broke")

    @partita.asset(
        partition_def=_tenants(),
        retry=partita.RetryPolicy(max_attempts=2),
        on_failure=broken_callback,
        registry=registry,
    )
    def tenant_report(context: partita.AssetContext) -> int:
        if context.partition_key in FAILING_TENANTS:
            raise LookupError("no rows")
        return 1

    @partita.asset(partition_def=_tenants(), registry=registry)
    def tenant_summary(context: partita.AssetContext, tenant_report: int) -> int:
        return tenant_report

    return partita.Flow(["tenant_summary"], registry=registry, store=store_url, **options)


def _texts(rows: list[tuple[str, dict[str, Any]]]) -> str:
    return "\n".join(f"{table}: {json.dumps(row, default=str)}" for table, row in rows)


def test_without_the_opt_in_no_column_holds_a_raw_partition_key(store_url, store):
    result = _key_flow(store_url).run({"partition_keys": TENANTS})
    assert result.status is partita.RunStatus.FAILED

    dump = _texts(_all_rows(store_url))
    assert result.run_id in dump  # the dump does contain the run
    for key in TENANTS:
        assert key not in dump
    rows = _attempt_rows(store_url, result.run_id)
    assert len(rows) == 6
    assert all(row["partition_key"] is None for row in rows)
    assert all(row["partition_key_present"] for row in rows)
    stored = store.get_run(result.run_id)
    assert stored.record_partition_keys is False
    record = render_record(stored.header, store.get_tasks(result.run_id), 4)
    assert record["partition_keys_recorded"] is False
    for key in TENANTS:
        assert key not in json.dumps(record)
        assert key not in json.dumps(result.to_record(version=4))
    assert all("partition_key" not in a for t in record["tasks"] for a in t["attempts"])


def test_without_the_opt_in_a_running_attempt_holds_no_raw_key_either(store_url, store):
    registry = partita.AssetRegistry()
    release = threading.Event()

    @partita.asset(partition_def=_tenants(), registry=registry)
    def blocking(context: partita.AssetContext) -> int:
        assert release.wait(DEADLINE_SECONDS)
        return 1

    flow = partita.Flow(["blocking"], registry=registry, store=store_url)
    runner = threading.Thread(target=flow.run, args=({"partition_keys": TENANTS},))
    runner.start()
    try:

        def all_running() -> Any:
            runs = store.list_runs()
            return runs and _statuses(store, runs[0].run_id) == {"blocking": ["running"] * 3}

        _wait_for(all_running, "three running attempts")
        dump = _texts(_all_rows(store_url))
        for key in TENANTS:
            assert key not in dump
    finally:
        release.set()
        runner.join(DEADLINE_SECONDS)


def test_with_the_opt_in_the_canonical_key_text_is_stored(store_url, store):
    result = _key_flow(store_url, record_partition_keys=True).run({"partition_keys": TENANTS})

    rows = _attempt_rows(store_url, result.run_id)
    by_asset: dict[str, list[str | None]] = {}
    for row in rows:
        by_asset.setdefault(row["asset"], []).append(row["partition_key"])
    assert by_asset == {"tenant_report": TENANTS, "tenant_summary": TENANTS}
    stored = store.get_run(result.run_id)
    assert stored.record_partition_keys is True
    tasks = store.get_tasks(result.run_id)
    assert [a.partition_key for a in tasks[0].attempts] == TENANTS
    record = render_record(stored.header, tasks, 4, record_partition_keys=True)
    assert record == result.to_record(version=4, record_partition_keys=True)
    assert [a["partition_key"] for a in record["tasks"][0]["attempts"]] == TENANTS


def test_with_the_opt_in_date_keys_are_stored_as_canonical_text(store_url, store):
    registry = partita.AssetRegistry()

    @partita.asset(partition_def=partita.DatePartitionDef(), registry=registry)
    def daily(context: partita.AssetContext) -> int:
        return 1

    @partita.asset(registry=registry)
    def unkeyed() -> int:
        return 1

    result = partita.Flow(["daily", "unkeyed"], registry=registry, store=store_url, record_partition_keys=True).run(
        {"partition_range": ("2026-02-27", "2026-03-01")}
    )

    tasks = {task.asset: task for task in store.get_tasks(result.run_id)}
    assert [a.partition_key for a in tasks["daily"].attempts] == ["2026-02-27", "2026-02-28", "2026-03-01"]
    assert [(a.partition_key_present, a.partition_key) for a in tasks["unkeyed"].attempts] == [(False, None)]


# -- concurrency -------------------------------------------------------------------------


def _concurrent_flows(store_a: Any, store_b: Any) -> tuple[partita.RunResult, partita.RunResult]:
    registry = partita.AssetRegistry()
    barrier = threading.Barrier(2, timeout=DEADLINE_SECONDS)

    @partita.asset(partition_def=partita.DatePartitionDef(), registry=registry)
    def left(context: partita.AssetContext) -> int:
        if context.partition_key == dt.date(2026, 1, 1):
            barrier.wait()  # both runs are in progress at once
        return 1

    @partita.asset(partition_def=partita.DatePartitionDef(), registry=registry)
    def right(context: partita.AssetContext) -> int:
        if context.partition_key == dt.date(2026, 1, 1):
            barrier.wait()
        return 2

    config = {"partition_range": ("2026-01-01", "2026-04-30")}  # 120 keys each
    results: dict[str, partita.RunResult] = {}
    errors: list[BaseException] = []

    def work(name: str, store: Any) -> None:
        try:
            results[name] = partita.Flow([name], registry=registry, store=store).run(config)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=work, args=("left", store_a)),
        threading.Thread(target=work, args=("right", store_b)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_SECONDS * 2)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    return results["left"], results["right"]


def test_two_flows_write_one_store_at_once(store_url, store):
    left, right = _concurrent_flows(store_url, store_url)

    assert left.status is right.status is partita.RunStatus.SUCCESS
    assert {run.run_id for run in store.list_runs()} == {left.run_id, right.run_id}
    for result, asset in ((left, "left"), (right, "right")):
        stored = store.get_run(result.run_id)
        assert stored.status == "success"
        assert stored.counts == {"success": 120}
        assert _statuses(store, result.run_id) == {asset: ["success"] * 120}


def test_two_flows_share_one_store_object_at_once(store_url, store):
    left, right = _concurrent_flows(store, store)

    assert {run.run_id for run in store.list_runs()} == {left.run_id, right.run_id}
    assert store.get_run(left.run_id).counts == {"success": 120}
    assert store.get_run(right.run_id).counts == {"success": 120}


# -- compare ------------------------------------------------------------------------------


def _fixable_flow(store_url: str) -> partita.Flow:
    registry = partita.AssetRegistry()

    @partita.asset(partition_def=partita.DatePartitionDef(), registry=registry)
    def load(context: partita.AssetContext) -> int:
        if Path("broken").exists() and context.partition_key.day == 2:
            raise RuntimeError("bad file")
        return 1

    @partita.asset(partition_def=partita.DatePartitionDef(), registry=registry)
    def report(context: partita.AssetContext, load: int) -> int:
        return load

    return partita.Flow(["report"], registry=registry, store=store_url)


def test_compare_a_failing_and_a_fixed_run(store_url, store):
    Path("broken").write_text("")
    failing = _fixable_flow(store_url).run({"partition_range": ("2026-05-01", "2026-05-03")})
    Path("broken").unlink()
    fixed = _fixable_flow(store_url).run({"partition_range": ("2026-05-01", "2026-05-03")})

    comparison = compare_runs(store, failing.run_id, fixed.run_id[:10])
    assert comparison["a"]["run_id"] == failing.run_id
    assert comparison["b"]["run_id"] == fixed.run_id
    assert (comparison["a"]["status"], comparison["b"]["status"]) == ("failed", "success")
    assert comparison["status_changed"] is True
    assert comparison["changed"] is True
    assert comparison["duration_delta_seconds"] == pytest.approx(fixed.duration - failing.duration)
    rows = {row["asset"]: row for row in comparison["assets"]}
    assert list(rows) == ["load", "report"]
    assert rows["load"]["a"]["status"] == "failed" and rows["load"]["b"]["status"] == "success"
    assert rows["load"]["a"]["counts"] == {"success": 2, "failed": 1}
    assert rows["load"]["b"]["counts"] == {"success": 3}
    assert "status failed -> success" in rows["load"]["changes"]
    assert "failed 1 -> 0" in rows["load"]["changes"]
    assert "status skipped -> success" in rows["report"]["changes"]
    assert rows["report"]["a"]["counts"] == {"success": 2, "skipped": 1}
    assert "skipped 1 -> 0" in rows["report"]["changes"]
    for row in rows.values():
        assert row["a"]["duration_seconds"] >= 0 and row["b"]["duration_seconds"] >= 0


def test_compare_reports_attempt_changes_and_assets_in_only_one_run(store_url, store):
    flow = _fixable_flow(store_url)
    wide = flow.run({"partition_range": ("2026-05-01", "2026-05-03")})
    narrow = flow.with_targets(["load"]).run({"partition_range": ("2026-05-01", "2026-05-02")})

    comparison = compare_runs(store, wide.run_id, narrow.run_id)
    rows = {row["asset"]: row for row in comparison["assets"]}
    assert rows["load"]["changes"] == ["attempts 3 -> 2"]
    assert rows["report"]["b"] is None
    assert rows["report"]["changes"] == ["only in A"]
    assert comparison["status_changed"] is False
    assert comparison["changed"] is True

    reverse = {row["asset"]: row for row in compare_runs(store, narrow.run_id, wide.run_id)["assets"]}
    assert reverse["report"]["changes"] == ["only in B"]


def test_comparing_identical_runs_reports_no_change(store_url, store):
    flow = _fixable_flow(store_url)
    first = flow.run({"partition_range": ("2026-05-01", "2026-05-02")})
    second = flow.run({"partition_range": ("2026-05-01", "2026-05-02")})

    comparison = compare_runs(store, first.run_id, second.run_id)
    assert comparison["changed"] is False
    assert all(row["changes"] == [] for row in comparison["assets"])


# -- which store the Python API records into --------------------------------------------


def test_the_python_api_records_nothing_by_default(tmp_path):
    result = partita.Flow(["one"], registry=_simple_registry()).run()

    assert result.status is partita.RunStatus.SUCCESS
    assert list(tmp_path.iterdir()) == []


def test_the_python_api_honours_partita_store(store_url, store, monkeypatch):
    monkeypatch.setenv("PARTITA_STORE", store_url)
    first = partita.Flow(["one"], registry=_simple_registry()).run()
    second = partita.run(["one"], registry=_simple_registry())

    assert [run.run_id for run in store.list_runs()] == [second.run_id, first.run_id]


def test_store_false_records_nothing_even_with_partita_store(store_url, store, monkeypatch):
    monkeypatch.setenv("PARTITA_STORE", store_url)
    partita.Flow(["one"], registry=_simple_registry(), store=False).run()

    assert store.list_runs() == []


def test_an_explicit_store_wins_over_partita_store(store_url, store, monkeypatch, tmp_path):
    other = f"sqlite:///{tmp_path}/other.db"
    monkeypatch.setenv("PARTITA_STORE", other)
    result = partita.run(["one"], registry=_simple_registry(), store=store_url)

    assert [run.run_id for run in store.list_runs()] == [result.run_id]
    assert not (tmp_path / "other.db").exists()
