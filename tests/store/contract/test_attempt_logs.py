"""Attempt logs in the run history contract: written with progress, cut, replayed, read back (SQLite and PostgreSQL)."""

from __future__ import annotations

import logging

import pytest

from partita.errors import UnknownRunError
from partita.execution.attempt_logs import LogBatch, RunLogs
from partita.results.logs import LogCapture, LogStream
from partita.results.record import AttemptRecord
from partita.store.protocol import LogQuery

from .conftest import NOW, count_rows, keyed_plan_document, start_run

RUN = "e" * 32
OTHER = "d" * 32


def _logs(head: int = 200, tail: int = 200) -> RunLogs:
    logs = RunLogs(LogCapture(head=head, tail=tail))
    logs.keep_for_store()
    return logs


def _log_lines(logs: RunLogs, asset: str, index: int, count: int, level: int = logging.INFO) -> None:
    log = logs.for_attempt(asset, index, None, 1)
    for number in range(count):
        log.add(LogStream.LOG, level, f"partita.asset.{asset}", f"{asset} line {number + 1}", 1000.0 + number)


def _messages(history, **where) -> list[str]:
    return [stored.line.message for stored in history.attempt_logs(RUN, LogQuery(**where))]


def test_lines_written_with_progress_read_back_in_write_order_with_recorded_key_text(run_history) -> None:
    start_run(run_history, RUN, NOW, plan=keyed_plan_document(["acme", "beta"]), record_partition_keys=True)
    logs = _logs()
    _log_lines(logs, "load", 0, 2)
    _log_lines(logs, "load", 1, 1)
    attempt = AttemptRecord(asset="load", index=0, partition_key_present=True, status="running", partition_key="acme")
    run_history.record_progress([attempt], RUN, new=True, logs=logs.drain())

    stored = run_history.attempt_logs(RUN)
    assert [s.line.message for s in stored] == ["load line 1", "load line 2", "load line 1"]
    assert [s.id for s in stored] == sorted(s.id for s in stored)
    assert [s.partition_key for s in stored] == ["acme", "acme", None]  # attempt 1 has no row yet
    assert stored[0].line.level == logging.INFO and stored[0].line.logger == "partita.asset.load"


def test_a_batch_of_lines_alone_is_written_without_any_attempt(run_history, tables) -> None:
    start_run(run_history, RUN, NOW)
    logs = _logs()
    _log_lines(logs, "one", 0, 3)
    run_history.record_progress([], RUN, logs=logs.drain())
    assert count_rows(tables, "partita_attempt_logs", run_id=RUN) == 3


def test_a_cut_deletes_the_lines_it_covers_and_leaves_one_marker_counting_them(run_history, tables) -> None:
    start_run(run_history, RUN, NOW)
    logs = _logs(head=2, tail=2)
    _log_lines(logs, "one", 0, 4)  # lines 1-4: all kept so far
    run_history.record_progress([], RUN, logs=logs.drain())
    log = logs.for_attempt("one", 0, None, 1)
    for number in range(5, 10):  # lines 5-9: 3-7 are cut, 8 and 9 are the tail
        log.add(LogStream.LOG, logging.INFO, "partita.asset.one", f"one line {number}", 1000.0 + number)
    run_history.record_progress([], RUN, logs=logs.drain())

    stored = run_history.attempt_logs(RUN)
    seqs = sorted((s.line.seq, s.line.stream, s.line.message) for s in stored)
    assert seqs == [
        (1, LogStream.LOG, "one line 1"),
        (2, LogStream.LOG, "one line 2"),
        (3, LogStream.CUT, "5 lines cut"),
        (8, LogStream.LOG, "one line 8"),
        (9, LogStream.LOG, "one line 9"),
    ]
    assert count_rows(tables, "partita_attempt_logs", run_id=RUN, stream="cut") == 1


def test_a_cut_growing_over_several_writes_deletes_what_it_covers_and_only_that(run_history, tables) -> None:
    start_run(run_history, RUN, NOW)
    logs = _logs(head=1, tail=2)
    chatty = logs.for_attempt("one", 0, None, 1)

    def add(*numbers: int) -> None:
        for number in numbers:
            chatty.add(LogStream.LOG, logging.INFO, "partita.asset.one", f"one line {number}", 1000.0 + number)
        _log_lines(logs, "two", numbers[0], 1)  # another attempt's rows lie between, and stay
        run_history.record_progress([], RUN, logs=logs.drain())

    add(1, 2, 3)  # all written: 2 and 3 are the tail
    add(4)  # 2 is cut: its row goes
    add(5, 6)  # 3 and 4 are cut too: their rows and the first marker go
    add(7)

    stored = sorted((s.line.asset, s.line.seq, s.line.message) for s in run_history.attempt_logs(RUN))
    assert stored == [
        ("one", 1, "one line 1"),
        ("one", 2, "4 lines cut"),
        ("one", 6, "one line 6"),
        ("one", 7, "one line 7"),
        *[("two", 1, "two line 1")] * 4,
    ]
    assert count_rows(tables, "partita_attempt_logs", run_id=RUN, stream="cut") == 1


def test_runs_written_at_once_each_read_back_and_follow_their_own_lines_in_write_order(run_history) -> None:
    start_run(run_history, RUN, NOW)
    start_run(run_history, OTHER, NOW)
    mine, theirs = _logs(), _logs()
    for number in range(3):
        _log_lines(mine, "one", number, 1)
        run_history.record_progress([], RUN, logs=mine.drain())
        _log_lines(theirs, "one", number, 2)
        run_history.record_progress([], OTHER, logs=theirs.drain())

    stored = run_history.attempt_logs(RUN)
    assert [(s.line.index, s.line.message) for s in stored] == [(0, "one line 1"), (1, "one line 1"), (2, "one line 1")]
    assert [s.id for s in stored] == sorted({s.id for s in stored})
    after = run_history.attempt_logs(RUN, LogQuery(after_id=stored[0].id))
    assert [s.line.index for s in after] == [1, 2]
    assert len(run_history.attempt_logs(OTHER)) == 6


def test_a_replayed_batch_writes_no_line_twice(run_history, tables) -> None:
    start_run(run_history, RUN, NOW)
    logs = _logs(head=1, tail=1)
    _log_lines(logs, "one", 0, 3)
    batch = logs.drain()
    run_history.record_progress([], RUN, logs=batch)
    run_history.record_progress([], RUN, logs=batch, replay=True)
    assert count_rows(tables, "partita_attempt_logs", run_id=RUN) == 3  # line 1, the marker, line 3
    assert sorted(_messages(run_history)) == ["1 line cut", "one line 1", "one line 3"]


def test_lines_filter_by_asset_by_level_and_after_an_id(run_history) -> None:
    start_run(run_history, RUN, NOW)
    logs = _logs()
    _log_lines(logs, "one", 0, 1, logging.DEBUG)
    _log_lines(logs, "two", 0, 1, logging.WARNING)
    logs.for_attempt("two", 0, None, 1).write(LogStream.STDOUT, "printed\n", 1002.0)
    run_history.record_progress([], RUN, logs=logs.drain())

    assert _messages(run_history, asset="two") == ["two line 1", "printed"]
    assert _messages(run_history, min_level=logging.INFO) == ["two line 1", "printed"]  # output has no level
    first = run_history.attempt_logs(RUN)[0].id
    assert _messages(run_history, after_id=first) == ["two line 1", "printed"]
    assert _messages(run_history, asset="one", limit=5) == ["one line 1"]


def test_a_run_without_lines_reads_back_empty_and_an_unknown_run_is_refused(run_history) -> None:
    start_run(run_history, RUN, NOW)
    assert run_history.attempt_logs(RUN) == []
    assert run_history.attempt_logs(RUN[:6]) == []  # a unique prefix names the run, as `runs show` takes it
    with pytest.raises(UnknownRunError, match="no run with id"):
        run_history.attempt_logs("f" * 32)


def test_an_empty_batch_writes_nothing(run_history, tables) -> None:
    start_run(run_history, RUN, NOW)
    run_history.record_progress([], RUN, logs=LogBatch(()))
    assert count_rows(tables, "partita_attempt_logs", run_id=RUN) == 0
