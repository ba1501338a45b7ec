"""The run history contract (SPEC §6): runs, attempts and liveness, driven through the verbs alone.

Every test runs on SQLite and PostgreSQL (`run_history` in conftest.py):
record_run_started, record_progress, record_heartbeat, record_run_finished,
list_runs, get_run and get_tasks. Rows are counted through a separate engine
(`tables`) where a test proves that nothing is written twice.
"""

from __future__ import annotations

import datetime as dt
import os
import time

import pytest

from partita.errors import ConfigurationError, StoreError, UnknownRunError
from partita.events.model import SourceKind
from partita.results.model import FailureInfo
from partita.results.record import AttemptRecord, InvocationRecord
from partita.store import RunEnd
from partita.store.history import compare_runs
from partita.store.protocol import ProgressBatch

from .conftest import (
    NOW,
    count_rows,
    dead_pid,
    finish_run,
    keyed_plan_document,
    outlet,
    start_run,
    statuses,
)

KEYS = ["a", "b", "c"]
RUN = "e" * 32


def _full_attempt(index: int = 0) -> AttemptRecord:
    """An attempt with every field set: retried, failed, blocking, keyed, resolved."""
    return AttemptRecord(
        asset="one",
        index=index,
        partition_key_present=True,
        status="failed",
        reason="exhausted",
        partition_key="tenant-ü/7",
        blocked_by=(("upstream", 2), ("other", 0)),
        invocations=(
            InvocationRecord(1, 1000.25, 1001.5, False, "builtins.ConnectionError", "transient 1"),
            InvocationRecord(2, 1002.0, 1003.75, False, "builtins.ValueError", "bad row"),
        ),
        started_at=1000.25,
        finished_at=1003.75,
        duration=3.5,
        failure=FailureInfo("builtins.ValueError", "bad row", "Traceback (most recent call last):\n  ValueError"),
        resolution="executed",
        materialization_id="mat-41",
    )


def _success(asset: str, index: int, started: float = 10.0) -> AttemptRecord:
    invocation = InvocationRecord(1, started, started + 1, True)
    return AttemptRecord(
        asset, index, True, "success", invocations=(invocation,), started_at=started, finished_at=started + 1,
        duration=1.0, resolution="executed",
    )  # fmt: skip


# -- a run's start and end ---------------------------------------------------------------------


@pytest.mark.parametrize("record_keys", [False, True])
def test_a_started_run_reads_back_its_plan_owner_and_start_in_utc(run_history, record_keys):
    plan = keyed_plan_document(KEYS)
    started = dt.datetime(2026, 3, 1, 14, 30, 15, 250_000, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    start_run(run_history, RUN, started, plan=plan, record_partition_keys=record_keys)

    run = run_history.get_run(RUN)
    assert run.run_id == RUN
    assert run.status == "running"
    assert run.header.started_at == started
    assert run.header.started_at.utcoffset() == dt.timedelta(0)
    assert run.header.finished_at is None
    assert run.duration is None
    assert run.header.targets == ("publish",)
    selection = plan["selection"]
    assert (run.header.selection_kind, run.header.domain, run.header.key_count) == ("keys", selection["domain"], 3)
    assert run.attempt_count == plan["attempt_count"] == 6
    assert run.plan == plan
    assert run.record_partition_keys is record_keys
    assert run.counts == {}
    assert (run.header.resources, run.header.callback_errors, run.header.discovered_key_counts) == ({}, (), {})


def test_a_finished_run_reads_back_its_status_end_and_summary(run_history):
    start_run(run_history, RUN, NOW)
    summary = {
        "resources": {"api": {"invocations": 3, "succeeded": 2, "failed": 1}},
        "callback_errors": [{"callback": "on_success", "asset": "one", "failure": {"type": "builtins.RuntimeError"}}],
        "discovered_key_counts": {"tenants": 3},
    }
    finished = NOW + dt.timedelta(seconds=90, microseconds=500)
    run_history.record_run_finished(RunEnd(RUN, "failed", finished, summary))

    run = run_history.get_run(RUN)
    assert run.status == "failed"
    assert run.header.finished_at == finished
    assert run.header.finished_at.utcoffset() == dt.timedelta(0)
    assert run.duration == pytest.approx(90.0005)
    assert run.header.resources == summary["resources"]
    assert run.header.callback_errors == tuple(summary["callback_errors"])
    assert run.header.discovered_key_counts == {"tenants": 3}
    (listed,) = run_history.list_runs()
    assert listed.header == run.header


def test_a_second_start_of_the_same_run_id_is_refused_and_keeps_the_first(run_history):
    start_run(run_history, RUN, NOW)

    with pytest.raises(StoreError):
        start_run(run_history, RUN, NOW + dt.timedelta(hours=1), host="other-host.invalid", pid=1, token="other")

    (run,) = run_history.list_runs()
    assert run.header.started_at == NOW
    assert run.status == "running"


def test_the_run_end_commits_its_last_progress_in_the_same_transaction(run_history, event_store):
    start_run(run_history, RUN, NOW, plan=keyed_plan_document(KEYS))
    run_history.record_progress([AttemptRecord("load", 0, True, "running")], RUN, new=True)
    last = ProgressBatch(
        [_success("load", 0), _success("load", 1)],
        new=False,
        outlets=[outlet("load", "a", RUN), outlet("load", "b", RUN)],
    )
    fresh = ProgressBatch([_success("publish", 0)], new=True, outlets=[outlet("publish", "a", RUN)])

    run_history.record_run_finished(RunEnd(RUN, "success", NOW + dt.timedelta(minutes=1)), [last, fresh])

    assert run_history.get_run(RUN).status == "success"
    assert statuses(run_history, RUN) == {"load": ["success", "success"], "publish": ["success"]}
    assert run_history.get_run(RUN).counts == {"success": 3}
    outlets = event_store.list_events(run_id=RUN, kinds=[SourceKind.OUTLET])
    assert [(event.asset, event.partition_key) for event in outlets] == [("load", "a"), ("load", "b"), ("publish", "a")]


def test_a_run_end_whose_last_progress_cannot_be_written_records_neither(run_history):
    start_run(run_history, RUN, NOW)
    good = ProgressBatch([_success("one", 0)])
    broken = ProgressBatch([AttemptRecord("one", 1, False, None)])  # type: ignore[arg-type]  # status is required

    with pytest.raises(StoreError):
        run_history.record_run_finished(RunEnd(RUN, "success", NOW + dt.timedelta(minutes=1)), [good, broken])

    run = run_history.get_run(RUN)
    assert run.status == "running"
    assert run.header.finished_at is None
    assert statuses(run_history, RUN) == {"one": []}


@pytest.mark.parametrize("verb", ["record_progress", "record_run_finished"])
def test_a_bulk_write_that_cannot_be_stored_is_a_store_error_and_writes_nothing(run_history, verb):
    start_run(run_history, RUN, NOW)
    run_history.record_progress([AttemptRecord("one", 0, False, "running")], RUN, new=True)
    again = [_success("one", 0)]  # breaks the promise of new=True: attempt 0 is stored already

    with pytest.raises(StoreError, match="cannot record"):
        if verb == "record_progress":
            run_history.record_progress(again, RUN, new=True)
        else:
            run_history.record_run_finished(RunEnd(RUN, "success", NOW), [ProgressBatch(again, new=True)])

    assert run_history.get_run(RUN).status == "running"
    assert statuses(run_history, RUN) == {"one": ["running"]}


# -- attempts ------------------------------------------------------------------------------------


@pytest.mark.parametrize("new", [True, False], ids=["bulk", "upsert"])
def test_every_attempt_field_round_trips(run_history, new):
    start_run(run_history, RUN, NOW, record_partition_keys=True)
    attempts = [_full_attempt(0), _success("one", 1), AttemptRecord("one", 2, False, "skipped", "dependency_failed")]

    run_history.record_progress(attempts, RUN, new=new)

    (task,) = run_history.get_tasks(RUN)
    assert (task.asset, task.partitioned, task.skip_reason) == ("one", False, None)
    assert list(task.attempts) == attempts


def test_attempts_read_back_in_index_order_whatever_the_write_order(run_history):
    start_run(run_history, RUN, NOW)
    run_history.record_progress([_success("one", 2), _success("one", 0)], RUN, new=True)
    run_history.record_progress([_success("one", 1)], RUN)

    assert [attempt.index for attempt in run_history.get_tasks(RUN)[0].attempts] == [0, 1, 2]


def test_the_last_record_of_an_attempt_in_one_batch_is_the_one_stored(run_history):
    start_run(run_history, RUN, NOW)
    run_history.record_progress([AttemptRecord("one", 0, False, "running"), _success("one", 0)], RUN, new=True)

    assert statuses(run_history, RUN) == {"one": ["success"]}


def test_a_running_attempt_gains_its_invocations_as_it_is_retried(run_history):
    start_run(run_history, RUN, NOW)
    failed = InvocationRecord(1, 5.0, 6.0, False, "builtins.TimeoutError", "first try")
    run_history.record_progress([AttemptRecord("one", 0, False, "running", invocations=(failed,))], RUN, new=True)
    (attempt,) = run_history.get_tasks(RUN)[0].attempts
    assert (attempt.status, attempt.invocations) == ("running", (failed,))
    assert attempt.finished_at is None and attempt.failure is None

    done = InvocationRecord(2, 7.0, 8.0, True)
    final = AttemptRecord("one", 0, False, "success", invocations=(failed, done), started_at=5.0, finished_at=8.0)
    run_history.record_progress([final], RUN)

    assert run_history.get_tasks(RUN)[0].attempts == (final,)


def test_an_empty_progress_batch_writes_nothing(run_history):
    run_history.record_progress([], "no-such-run")

    assert run_history.list_runs() == []


def test_record_progress_upserts_one_row_per_attempt(run_history):
    start_run(run_history, "e" * 32, NOW)
    run_history.record_progress([AttemptRecord("one", 0, False, "running")], "e" * 32)
    assert statuses(run_history, "e" * 32) == {"one": ["running"]}

    now = time.time()
    run_history.record_progress(
        [AttemptRecord("one", 0, False, "success", started_at=now, finished_at=now + 1, duration=1.0)], "e" * 32
    )
    assert statuses(run_history, "e" * 32) == {"one": ["success"]}
    assert run_history.get_run("e" * 32).counts == {"success": 1}


def test_a_replayed_progress_batch_writes_only_what_is_missing(run_history, event_store):
    run_id = "e" * 32
    plan = keyed_plan_document(KEYS)
    start_run(run_history, run_id, dt.datetime.now(dt.UTC), host="h", pid=1, token="t", plan=plan)
    records = [AttemptRecord("load", index, True, "success") for index in range(len(KEYS))]
    outlets = [outlet("load", key, run_id) for key in KEYS]
    run_history.record_progress(records[:1], run_id, new=True, outlets=outlets[:1])

    run_history.record_progress(records, run_id, new=True, outlets=outlets, replay=True)

    (load,) = [task for task in run_history.get_tasks(run_id) if task.asset == "load"]
    assert [attempt.index for attempt in load.attempts] == [0, 1, 2]
    assert len(event_store.list_events(run_id=run_id, kinds=[SourceKind.OUTLET])) == len(KEYS)


def test_replaying_a_whole_batch_writes_no_attempt_invocation_or_outlet_twice(run_history, event_store, tables):
    start_run(run_history, RUN, NOW)
    batch = ([_full_attempt(0), _success("one", 1)], [outlet("one", None, RUN)])
    run_history.record_progress(batch[0], RUN, new=True, outlets=batch[1])

    for _ in range(2):
        run_history.record_progress(batch[0], RUN, new=True, outlets=batch[1], replay=True)
    run_history.record_run_finished(
        RunEnd(RUN, "failed", NOW + dt.timedelta(minutes=1)), [ProgressBatch(batch[0], True, batch[1], replay=True)]
    )

    assert count_rows(tables, "partita_attempts", run_id=RUN) == 2
    assert count_rows(tables, "partita_invocations", run_id=RUN) == 2  # the retried attempt's two
    assert len(event_store.list_events(run_id=RUN, kinds=[SourceKind.OUTLET])) == 1
    assert list(run_history.get_tasks(RUN)[0].attempts) == batch[0]


# -- tasks ---------------------------------------------------------------------------------------


def test_tasks_follow_the_plan_and_a_cancelled_run_names_the_tasks_it_never_reached(run_history):
    start_run(run_history, RUN, NOW, plan=keyed_plan_document(KEYS))
    run_history.record_progress([_success("load", 0)], RUN, new=True)
    finish_run(run_history, RUN, "cancelled", NOW + dt.timedelta(seconds=5))

    tasks = run_history.get_tasks(RUN)
    assert [(task.asset, task.partitioned) for task in tasks] == [("load", True), ("publish", True)]
    assert [len(task.attempts) for task in tasks] == [1, 0]
    assert [task.skip_reason for task in tasks] == [None, "cancelled"]


# -- listing, ordering, filtering, lookup ------------------------------------------------------------


def test_ordering_follows_start_time_not_insertion_order(run_history):
    start_run(run_history, "c" * 32, NOW - dt.timedelta(hours=1))
    start_run(run_history, "a" * 32, NOW)
    start_run(run_history, "b" * 32, NOW - dt.timedelta(hours=2))
    for run_id in ("a" * 32, "b" * 32, "c" * 32):
        finish_run(run_history, run_id, "success", NOW + dt.timedelta(minutes=1))

    assert [run.run_id for run in run_history.list_runs()] == ["a" * 32, "c" * 32, "b" * 32]
    assert [run.run_id for run in run_history.list_runs(limit=2)] == ["a" * 32, "c" * 32]


def test_the_status_filter_and_the_limit_apply_together_newest_first(run_history):
    outcomes = ["success", "failed", "success", "cancelled", "success"]
    for number, status in enumerate(outcomes):
        run_id = f"{number}" * 32
        start_run(run_history, run_id, NOW + dt.timedelta(minutes=number))
        finish_run(run_history, run_id, status, NOW + dt.timedelta(minutes=number, seconds=30))

    assert [run.run_id for run in run_history.list_runs(status="success")] == ["4" * 32, "2" * 32, "0" * 32]
    assert [run.run_id for run in run_history.list_runs(status="success", limit=2)] == ["4" * 32, "2" * 32]
    assert [run.run_id for run in run_history.list_runs(status="failed")] == ["1" * 32]
    assert [run.run_id for run in run_history.list_runs(status="cancelled")] == ["3" * 32]
    assert run_history.list_runs(status="running") == []
    assert len(run_history.list_runs(limit=3)) == 3


def test_get_run_by_exact_id_and_by_unique_prefix(run_history):
    start_run(run_history, "abcd1111" + "0" * 24, NOW)
    start_run(run_history, "abcd2222" + "0" * 24, NOW + dt.timedelta(seconds=1))

    assert run_history.get_run("abcd1111" + "0" * 24).run_id == "abcd1111" + "0" * 24
    assert run_history.get_run("abcd1").run_id == "abcd1111" + "0" * 24
    assert run_history.get_run("abcd2222").run_id == "abcd2222" + "0" * 24
    assert [task.asset for task in run_history.get_tasks("abcd2")] == ["one"]


def test_an_ambiguous_prefix_is_refused(run_history):
    start_run(run_history, "abcd1111" + "0" * 24, NOW)
    start_run(run_history, "abcd2222" + "0" * 24, NOW)

    with pytest.raises(UnknownRunError, match="several"):
        run_history.get_run("abcd")
    with pytest.raises(UnknownRunError, match="several"):
        run_history.get_tasks("abcd")


def test_an_unknown_run_id_is_an_unknown_run_error(run_history):
    start_run(run_history, "abcd1111" + "0" * 24, NOW)

    for missing in ("ffff0000", "nope", "abc", "abcd1111" + "0" * 23 + "1", "abcd%", "a_cd"):
        with pytest.raises(UnknownRunError) as caught:
            run_history.get_run(missing)
        assert isinstance(caught.value, ConfigurationError)
        assert caught.value.exit_code == 2
        with pytest.raises(UnknownRunError):
            run_history.get_tasks(missing)
    with pytest.raises(UnknownRunError):
        compare_runs(run_history, "abcd1111", "ffff0000")


def test_a_prefix_shorter_than_four_characters_matches_nothing_even_when_unique(run_history):
    start_run(run_history, "abcd1111" + "0" * 24, NOW)

    for short in ("a", "ab", "abc"):
        with pytest.raises(UnknownRunError, match="too short: give at least 4 characters"):
            run_history.get_run(short)
    assert run_history.get_run("abcd").run_id == "abcd1111" + "0" * 24


def test_a_prefix_matches_run_ids_case_sensitively_like_an_exact_id(run_history):
    start_run(run_history, "abcd1111" + "0" * 24, NOW)

    with pytest.raises(UnknownRunError):
        run_history.get_run("ABCD1111" + "0" * 24)
    with pytest.raises(UnknownRunError):
        run_history.get_run("ABCD1111")


# -- liveness: running versus interrupted --------------------------------------------


def test_a_running_run_of_a_dead_process_on_this_host_is_interrupted(run_history):
    start_run(run_history, "d" * 32, NOW, pid=dead_pid())
    run_history.record_progress(
        [
            AttemptRecord("one", 0, True, "success", started_at=1.0, finished_at=2.0, duration=1.0),
            AttemptRecord("one", 1, True, "running"),
        ],
        "d" * 32,
    )

    run = run_history.get_run("d" * 32)
    assert run.status == "interrupted"
    assert run.header.finished_at is None
    assert statuses(run_history, "d" * 32) == {"one": ["success", "interrupted"]}
    assert [r.run_id for r in run_history.list_runs(status="interrupted")] == ["d" * 32]
    assert run_history.list_runs(status="running") == []


def test_a_recycled_pid_does_not_keep_a_run_alive(run_history):
    start_run(run_history, "d" * 32, NOW, pid=os.getpid(), token="not-this-process")

    assert run_history.get_run("d" * 32).status == "interrupted"


def test_a_running_run_of_this_live_process_stays_running(run_history):
    start_run(run_history, "d" * 32, NOW)
    run_history.record_progress([AttemptRecord("one", 0, False, "running")], "d" * 32)

    assert run_history.get_run("d" * 32).status == "running"
    assert statuses(run_history, "d" * 32) == {"one": ["running"]}
    assert [r.run_id for r in run_history.list_runs(status="running")] == ["d" * 32]


def test_a_run_on_another_host_is_judged_by_its_heartbeat(run_history):
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    start_run(run_history, "f" * 32, long_ago, host="some-other-host.invalid", pid=1, token="x")
    assert run_history.get_run("f" * 32).status == "interrupted"

    run_history.record_heartbeat("f" * 32, time.time())
    assert run_history.get_run("f" * 32).status == "running"
    assert [r.run_id for r in run_history.list_runs(status="running")] == ["f" * 32]

    finish_run(run_history, "f" * 32, "success", dt.datetime.now(dt.UTC))
    assert run_history.get_run("f" * 32).status == "success"


def test_the_counts_of_an_interrupted_run_say_interrupted_not_running(run_history):
    start_run(run_history, "d" * 32, NOW, pid=dead_pid())
    run_history.record_progress(
        [
            AttemptRecord("one", 0, True, "success", started_at=1.0, finished_at=2.0, duration=1.0),
            AttemptRecord("one", 1, True, "running"),
        ],
        "d" * 32,
    )

    assert run_history.get_run("d" * 32).counts == {"success": 1, "interrupted": 1}
    assert run_history.list_runs()[0].counts == {"success": 1, "interrupted": 1}


def test_a_stale_heartbeat_of_another_host_makes_the_run_interrupted_and_the_status_filters_follow(run_history):
    start_run(run_history, "f" * 32, NOW, host="some-other-host.invalid", pid=1, token="x")
    start_run(run_history, "a" * 32, NOW + dt.timedelta(seconds=1))
    run_history.record_heartbeat("f" * 32, time.time() - 3600)

    assert run_history.get_run("f" * 32).status == "interrupted"
    assert [run.run_id for run in run_history.list_runs(status="interrupted")] == ["f" * 32]
    assert [run.run_id for run in run_history.list_runs(status="running")] == ["a" * 32]
    assert [run.run_id for run in run_history.list_runs(status="running", limit=1)] == ["a" * 32]
    assert [run.status for run in run_history.list_runs()] == ["running", "interrupted"]


def test_a_finished_run_is_never_interrupted_whoever_owned_it(run_history):
    start_run(run_history, "d" * 32, NOW, pid=dead_pid())
    finish_run(run_history, "d" * 32, "success", NOW + dt.timedelta(seconds=1))

    assert run_history.get_run("d" * 32).status == "success"
    assert run_history.list_runs(status="interrupted") == []


# -- a journal's plain successes -------------------------------------------------------------------


def _plain_success(index: int, record_keys: bool) -> tuple[object, ...]:
    """A `journal_rows.success_row` tuple: every fifth one is not announced (a producer's), every other is materialized."""
    started = 1_700_000_000.1 + index * 0.37
    key = f"tenant-ü/{index}"
    materialization = f"mat-{index}" if index % 2 == 0 else None
    return (
        "load", index, True, key if record_keys else None, started, started + 0.0123 * (index + 1), "executed",
        materialization, key, index % 5 != 4,
    )  # fmt: skip


@pytest.mark.parametrize("record_keys", [False, True])
@pytest.mark.parametrize("size", [3, 12])  # below and above the batch SQLite takes as one JSON text
def test_plain_successes_store_their_attempts_and_the_outlets_they_announce(run_history, event_store, size, record_keys):
    start_run(run_history, RUN, NOW, plan=keyed_plan_document(KEYS), record_partition_keys=record_keys)
    rows = [_plain_success(index, record_keys) for index in range(size)]

    run_history.record_batch(RUN, ProgressBatch((), True, attempt_rows=rows))
    run_history.record_batch(RUN, ProgressBatch((), True, attempt_rows=rows, replay=True))  # writes nothing twice

    (load,) = [task for task in run_history.get_tasks(RUN) if task.asset == "load"]
    assert [attempt.index for attempt in load.attempts] == list(range(size))
    for attempt, row in zip(load.attempts, rows, strict=True):
        _, _, _, key, started, finished, resolution, materialization, _, _ = row
        assert (attempt.status, attempt.partition_key, attempt.resolution) == ("success", key, resolution)
        assert (attempt.started_at, attempt.finished_at, attempt.duration) == (started, finished, finished - started)
        assert attempt.materialization_id == materialization
        assert [(invocation.number, invocation.succeeded) for invocation in attempt.invocations] == [(1, True)]
    outlets = event_store.list_events(run_id=RUN, kinds=[SourceKind.OUTLET])
    announced = [row for row in rows if row[9]]
    assert [(event.asset, event.partition_key) for event in outlets] == [("load", row[8]) for row in announced]
    for event, row in zip(outlets, announced, strict=True):
        assert event.timestamp == dt.datetime.fromtimestamp(row[5], dt.UTC)
        assert event.extra == ({} if row[7] is None else {"materialization_id": row[7]})
        assert (event.source.kind, event.source.run_id, event.source.asset) == (SourceKind.OUTLET, RUN, "load")
        assert (event.source.partition_key_present, event.source.invocation) == (True, 1)
