"""`RunHistory.list_attempts`: a run's attempts a page at a time, filtered, as history shows them (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from partita.errors import UnknownRunError
from partita.results.record import AttemptRecord, InvocationRecord
from partita.store.protocol import AttemptQuery

from .conftest import NOW, dead_pid, finish_run, keyed_plan_document, start_run

KEYS = [f"k{number}" for number in range(5)]
PLAN = keyed_plan_document(KEYS)


def _attempt(asset: str, index: int, status: str, *, retried: bool = False) -> AttemptRecord:
    invocations = (
        (InvocationRecord(1, 10.0, 11.0, False, "builtins.OSError", "flaky"), InvocationRecord(2, 12.0, 13.0, True))
        if retried
        else (InvocationRecord(1, 10.0, 11.0, status == "success"),)
        if status in ("success", "failed")
        else ()
    )
    return AttemptRecord(
        asset, index, True, status, partition_key=KEYS[index], invocations=invocations,
        started_at=10.0 if invocations else None, finished_at=13.0 if invocations else None, duration=1.0,
    )  # fmt: skip


def _ran(history, run_id: str, attempts: list[AttemptRecord], *, status: str | None = "failed", **owner) -> None:
    start_run(history, run_id, NOW, plan=PLAN, record_partition_keys=True, **owner)
    history.record_progress(attempts, run_id, new=True)
    if status is not None:
        finish_run(history, run_id, status, NOW)


def _ids(page: list[AttemptRecord]) -> list[tuple[str, int]]:
    return [(record.asset, record.index) for record in page]


def test_pages_follow_asset_and_index_order_and_continue_after_the_cursor(run_history) -> None:
    attempts = [_attempt("load", index, "success") for index in range(5)]
    attempts += [_attempt("publish", index, "success") for index in range(5)]
    _ran(run_history, "r" * 32, attempts, status="success")
    first = run_history.list_attempts("r" * 32, AttemptQuery(limit=4))
    assert _ids(first) == [("load", 0), ("load", 1), ("load", 2), ("load", 3)]
    second = run_history.list_attempts("r" * 32, AttemptQuery(limit=4, after=("load", 3)))
    assert _ids(second) == [("load", 4), ("publish", 0), ("publish", 1), ("publish", 2)]
    assert _ids(run_history.list_attempts("r" * 32, AttemptQuery(after=("publish", 4)))) == []


def test_attempts_filter_by_asset_and_status_and_keep_their_invocations(run_history) -> None:
    attempts = [_attempt("load", 0, "failed"), _attempt("load", 1, "success", retried=True), _attempt("publish", 1, "success")]
    attempts.append(AttemptRecord("publish", 0, True, "skipped", "dependency_failed", KEYS[0], (("load", 0),)))
    _ran(run_history, "r" * 32, attempts)
    (failed,) = run_history.list_attempts("r" * 32, AttemptQuery(status="failed"))
    assert (failed.asset, failed.index, len(failed.invocations)) == ("load", 0, 1)
    retried = run_history.list_attempts("r" * 32, AttemptQuery(asset="load", status="success"))
    assert [invocation.number for invocation in retried[0].invocations] == [1, 2]
    (skipped,) = run_history.list_attempts("r" * 32, AttemptQuery(asset="publish", status="skipped"))
    assert skipped.blocked_by == (("load", 0),) and skipped.partition_key == KEYS[0]


def test_a_dead_owners_running_attempts_read_interrupted(run_history) -> None:
    _ran(run_history, "d" * 32, [_attempt("load", 0, "running")], status=None, pid=dead_pid())
    assert _ids(run_history.list_attempts("d" * 32, AttemptQuery(status="interrupted"))) == [("load", 0)]
    assert run_history.list_attempts("d" * 32, AttemptQuery(status="running")) == []
    (shown,) = run_history.list_attempts("d" * 32, AttemptQuery())
    assert shown.status == "interrupted"


def test_a_live_runs_running_attempts_read_running(run_history) -> None:
    _ran(run_history, "l" * 32, [_attempt("load", 0, "running")], status=None)
    assert _ids(run_history.list_attempts("l" * 32, AttemptQuery(status="running"))) == [("load", 0)]
    assert run_history.list_attempts("l" * 32, AttemptQuery(status="interrupted")) == []


def test_the_attempts_of_an_unknown_run_are_an_unknown_run_error(run_history) -> None:
    with pytest.raises(UnknownRunError):
        run_history.list_attempts("f" * 32, AttemptQuery())
