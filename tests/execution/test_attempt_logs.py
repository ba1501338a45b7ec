"""Attempt logs: each body's records (and, when asked, its output) are kept with its own attempt (SPEC §15).

Routing is proven with bodies that run at the same time (a barrier holds
every thread body until all have started; async bodies wait on each other),
in worker processes, and across retries. The assets used by the process
executor are module level, so forked workers find them.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time

import pytest

import partita as p
from partita.store.attempt_log_rows import sorted_for_reading
from partita.store.protocol import LogQuery

DAYS = p.DatePartitionDef()
KEYS = ["2026-08-08", "2026-08-09", "2026-08-10", "2026-08-11"]
WAIT = 30.0

REGISTRY = p.AssetRegistry()


@p.asset(partition_def=DAYS, registry=REGISTRY)
def in_worker(context) -> int:
    context.logger.info("worker line for %s", context.partition_key)
    print(f"printed for {context.partition_key}")
    return 1


@p.asset(partition_def=DAYS, registry=REGISTRY)
def fails_in_worker(context) -> int:
    context.logger.warning("about to fail for %s", context.partition_key)
    raise ValueError("worker body failed")


@p.asset(registry=REGISTRY)
def chatty_in_worker(context) -> None:
    for number in range(1, 6):
        context.logger.info("worker line %d", number)


def _messages(result: p.RunResult, asset: str, key: object = None) -> list[str]:
    return [line.message for line in result.logs(asset, key)]


def test_thread_bodies_running_at_once_each_keep_only_their_own_lines() -> None:
    registry = p.AssetRegistry()
    together = threading.Barrier(len(KEYS), timeout=WAIT)

    @p.asset(partition_def=DAYS, registry=registry)
    def extract(context) -> None:
        context.logger.info("start %s", context.partition_key)
        together.wait()  # every body is running now: the lines interleave in time
        context.logger.info("end %s", context.partition_key)

    result = p.Flow(["extract"], registry=registry, max_concurrency=len(KEYS)).run({"partition_keys": KEYS})

    assert result.succeeded
    for key in KEYS:
        assert _messages(result, "extract", key) == [f"start {key}", f"end {key}"]
        assert {line.logger for line in result.logs("extract", key)} == {"partita.asset.extract"}


def test_async_bodies_interleaved_on_the_loop_each_keep_only_their_own_lines() -> None:
    registry = p.AssetRegistry()
    started: list[str] = []
    all_started = asyncio.Event()

    @p.asset(partition_def=DAYS, registry=registry)
    async def fetch(context) -> None:
        key = str(context.partition_key)
        context.logger.info("start %s", key)
        started.append(key)
        if len(started) == len(KEYS):
            all_started.set()
        await asyncio.wait_for(all_started.wait(), WAIT)
        context.logger.info("end %s", key)

    result = p.Flow(["fetch"], registry=registry).run({"partition_keys": KEYS})

    assert result.succeeded
    for key in KEYS:
        assert _messages(result, "fetch", key) == [f"start {key}", f"end {key}"]


def test_process_executor_lines_come_back_with_each_invocation_to_their_attempt() -> None:
    flow = p.Flow(["in_worker"], registry=REGISTRY, executor="process", log_capture=True)
    result = flow.run({"partition_keys": KEYS})

    assert result.succeeded
    for key in KEYS:
        assert _messages(result, "in_worker", key) == [f"worker line for {key}", f"printed for {key}"]


def test_a_failing_worker_body_keeps_its_lines_and_its_error() -> None:
    result = p.Flow(["fails_in_worker"], registry=REGISTRY, executor="process").run({"partition_keys": KEYS[:1]})

    attempt = result.tasks["fails_in_worker"].attempts[0]
    assert attempt.status is p.AttemptStatus.FAILED
    assert isinstance(attempt.exception, ValueError)
    assert _messages(result, "fails_in_worker", KEYS[0]) == [f"about to fail for {KEYS[0]}"]


def test_an_attempt_keeps_its_head_and_tail_and_one_marker_counting_the_cut() -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def chatty(context) -> None:
        for number in range(1, 101):
            context.logger.info("line %d", number)

    result = p.Flow(["chatty"], registry=registry, log_capture=p.LogCapture(head=3, tail=2)).run()

    lines = result.logs("chatty")
    assert [line.message for line in lines] == ["line 1", "line 2", "line 3", "95 lines cut", "line 99", "line 100"]
    assert lines[3].stream == p.LogStream.CUT
    assert [line.seq for line in lines] == [1, 2, 3, 4, 99, 100]


def test_a_line_over_the_limit_is_shortened_and_says_by_how_much() -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def wordy(context) -> None:
        context.logger.info("x" * 100)

    result = p.Flow(["wordy"], registry=registry, log_capture=p.LogCapture(line_chars=40)).run()

    (line,) = result.logs("wordy")
    assert line.message == "x" * 40 + " … [60 characters cut]"


def test_an_exception_logged_keeps_its_traceback_in_the_line() -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def careful(context) -> None:
        try:
            {}["missing"]
        except KeyError:
            context.logger.exception("lookup failed")

    result = p.Flow(["careful"], registry=registry).run()

    (line,) = result.logs("careful")
    assert line.level == logging.ERROR and line.level_name == "ERROR"
    assert line.message.startswith("lookup failed\nTraceback (most recent call last):")
    assert "KeyError: 'missing'" in line.message


def test_a_process_executor_run_stores_its_workers_lines(store) -> None:
    flow = p.Flow(["in_worker"], registry=REGISTRY, executor="process", store=store)
    result = flow.run({"partition_keys": KEYS[:2]})
    stored = [(s.line.index, s.line.message) for s in store.attempt_logs(result.run_id)]
    assert sorted(stored) == [(0, f"worker line for {KEYS[0]}"), (1, f"worker line for {KEYS[1]}")]


def test_output_is_kept_only_with_output_capture_and_passes_through_without(capsys: pytest.CaptureFixture) -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def noisy() -> None:
        print("to stdout")
        print("partial", end="")
        import sys

        print("to stderr", file=sys.stderr)

    kept = p.Flow(["noisy"], registry=registry, log_capture=True).run()
    assert capsys.readouterr().out == ""
    assert [(line.stream, line.message) for line in kept.logs("noisy")] == [
        (p.LogStream.STDOUT, "to stdout"),
        (p.LogStream.STDERR, "to stderr"),
        (p.LogStream.STDOUT, "partial"),  # kept when the invocation ends without a newline
    ]

    passed = p.Flow(["noisy"], registry=registry).run()
    captured = capsys.readouterr()
    assert captured.out == "to stdout\npartial" and captured.err == "to stderr\n"
    assert passed.logs("noisy") == ()


def test_output_written_outside_any_attempt_passes_through_while_a_capturing_run_runs(
    capsys: pytest.CaptureFixture,
) -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def spawns() -> None:
        # A thread the body starts is outside the attempt: its output is not the body's.
        helper = threading.Thread(target=print, args=("from a helper thread",))
        helper.start()
        helper.join(WAIT)
        print("from the body")

    result = p.Flow(["spawns"], registry=registry, log_capture=True).run()

    assert capsys.readouterr().out == "from a helper thread\n"
    assert _messages(result, "spawns") == ["from the body"]


def test_the_users_own_handlers_still_get_every_record() -> None:
    registry = p.AssetRegistry()
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(f"{record.levelname} {record.getMessage()}")

    @p.asset(registry=registry)
    def watched(context) -> None:
        context.logger.info("one")
        context.logger.warning("two")

    handler = Collect()
    logger = logging.getLogger("partita.asset.watched")
    logger.addHandler(handler)
    try:
        result = p.Flow(["watched"], registry=registry).run()
    finally:
        logger.removeHandler(handler)

    assert seen == ["INFO one", "WARNING two"]
    assert _messages(result, "watched") == ["one", "two"]


def test_debug_records_are_kept_when_the_user_lets_them_through() -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def detailed(context) -> None:
        context.logger.debug("fine detail")
        context.logger.info("summary")

    logger = logging.getLogger("partita.asset.detailed")
    quiet = p.Flow(["detailed"], registry=registry).run()
    logger.setLevel(logging.DEBUG)
    try:
        verbose = p.Flow(["detailed"], registry=registry).run()
    finally:
        logger.setLevel(logging.NOTSET)

    assert _messages(quiet, "detailed") == ["summary"]
    assert _messages(verbose, "detailed") == ["fine detail", "summary"]


def test_a_retried_attempt_keeps_the_lines_of_every_invocation_numbered_by_invocation() -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry, retry=p.RetryPolicy(max_attempts=2, delay=0.0))
    def flaky(context) -> None:
        context.logger.info("try %d", context.invocation_number)
        if context.invocation_number == 1:
            raise RuntimeError("first try fails")

    result = p.Flow(["flaky"], registry=registry).run()

    assert result.succeeded
    assert [(line.invocation, line.seq, line.message) for line in result.logs("flaky")] == [
        (1, 1, "try 1"),
        (2, 2, "try 2"),
    ]


def test_a_retry_that_logs_past_the_head_is_cut_across_its_invocations_alike_in_the_result_and_the_store(
    store,
) -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry, retry=p.RetryPolicy(max_attempts=2, delay=0.0))
    def flaky(context) -> None:
        invocation = context.invocation_number
        for number in range(1, 4 if invocation == 1 else 5):  # 3 lines, all in the head; then 4 more
            context.logger.info("try %d line %d", invocation, number)
        if invocation == 1:
            raise RuntimeError("first try fails")

    result = p.Flow(["flaky"], registry=registry, store=store, log_capture=p.LogCapture(head=4, tail=2)).run()

    assert result.succeeded
    expected = [
        (1, 1, "try 1 line 1"), (1, 2, "try 1 line 2"), (1, 3, "try 1 line 3"), (2, 4, "try 2 line 1"),
        (2, 5, "1 line cut"), (2, 6, "try 2 line 3"), (2, 7, "try 2 line 4"),
    ]
    assert [(line.invocation, line.seq, line.message) for line in result.logs("flaky")] == expected
    stored = sorted_for_reading(store.attempt_logs(result.run_id))
    assert [(s.line.invocation, s.line.seq, s.line.message) for s in stored] == expected


def test_a_worker_cut_with_no_tail_window_is_kept_and_stored_as_its_marker(store) -> None:
    flow = p.Flow(
        ["chatty_in_worker"], registry=REGISTRY, executor="process", store=store,
        log_capture=p.LogCapture(head=2, tail=0),
    )
    result = flow.run()

    expected = ["worker line 1", "worker line 2", "3 lines cut"]
    assert _messages(result, "chatty_in_worker") == expected
    assert [s.line.message for s in sorted_for_reading(store.attempt_logs(result.run_id))] == expected


def test_a_runs_kept_lines_leave_nothing_for_the_garbage_collector_to_visit_again() -> None:
    # Each full collection visits every tracked object: a line object per logged line would
    # make every later collection of the process slower, as the engine's own objects do.
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    def logs_once(context) -> None:
        context.logger.info("line for %s", context.partition_key)

    result = p.Flow(["logs_once"], registry=registry).run({"partition_keys": KEYS})
    gc.collect()
    gc.collect()  # a tuple is left alone once its items are: a full collection may meet the head before its line

    kept = list(result.attempt_logs.values())
    assert len(kept) == len(KEYS)
    assert not any(gc.is_tracked(lines) or any(map(gc.is_tracked, lines)) for lines in kept)
    assert _messages(result, "logs_once", KEYS[0]) == [f"line for {KEYS[0]}"]


def test_lines_reach_the_store_while_the_attempt_still_runs(store) -> None:
    registry = p.AssetRegistry()
    release = threading.Event()

    @p.asset(registry=registry)
    def slow(context) -> None:
        context.logger.info("before the wait")
        assert release.wait(WAIT)
        context.logger.info("after the wait")

    flow = p.Flow(["slow"], registry=registry, store=store)
    outcome: list[p.RunResult] = []
    runner = threading.Thread(target=lambda: outcome.append(flow.run()))
    runner.start()
    try:
        deadline = time.monotonic() + WAIT
        stored: list[str] = []
        while not stored and time.monotonic() < deadline:  # a periodic flush writes it, not the run's end
            runs = store.list_runs(limit=1)
            if runs:
                stored = [s.line.message for s in store.attempt_logs(runs[0].run_id)]
        assert stored == ["before the wait"]
    finally:
        release.set()
        runner.join(WAIT)
    run_id = outcome[0].run_id
    assert [s.line.message for s in store.attempt_logs(run_id)] == ["before the wait", "after the wait"]


def test_many_lines_are_written_in_batches_never_one_commit_per_line(store) -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    def busy(context) -> None:
        for number in range(20):
            context.logger.info("line %d", number)

    writes: list[int] = []
    progress, finished = store.record_batch, store.record_run_finished

    def counted_progress(*args, **kwargs):  # counts the transactions; the real store writes
        writes.append(1)
        return progress(*args, **kwargs)

    def counted_end(*args, **kwargs):
        writes.append(1)
        return finished(*args, **kwargs)

    store.record_batch, store.record_run_finished = counted_progress, counted_end  # type: ignore[method-assign]
    result = p.Flow(["busy"], registry=registry, store=store).run({"partition_keys": KEYS})

    stored = store.attempt_logs(result.run_id, LogQuery(asset="busy"))
    assert len(stored) == 20 * len(KEYS)
    assert len(writes) < len(stored) / 10


def test_a_run_without_a_store_keeps_its_lines_on_the_result_only() -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def plain(context) -> None:
        context.logger.info("kept in memory")

    result = p.Flow(["plain"], registry=registry, store=False).run()
    assert _messages(result, "plain") == ["kept in memory"]
    assert "kept in memory" not in str(result.to_record(version=4))  # never in a portable record


def test_log_capture_bounds_are_checked_when_the_flow_is_made() -> None:
    with pytest.raises(p.DefinitionError, match="LogCapture head must be an integer of at least 0"):
        p.LogCapture(head=-1)
    with pytest.raises(p.DefinitionError, match="Flow log_capture must be True, False or a LogCapture"):
        p.Flow(["x"], log_capture="yes")
