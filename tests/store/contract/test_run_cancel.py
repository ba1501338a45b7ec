"""The cancel-request contract (SPEC §15): `request_cancel` and `cancel_requests`, on SQLite and PostgreSQL.

A request is recorded only for a run that is running: a finished run is
refused with its status, a run whose owner died is refused as not running,
asking twice is idempotent, and of two processes asking at once exactly one
records the request. The owner's poll (`cancel_requests`) sees only runs
that were asked.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from partita.errors import UnknownRunError
from partita.store.protocol import CancelOutcome

from .conftest import NOW, dead_pid, finish_run, start_run

RUN = "c" * 32
OTHER = "d" * 32


def test_a_running_run_takes_a_request_that_its_owner_reads_back(run_history):
    start_run(run_history, RUN, NOW)
    start_run(run_history, OTHER, NOW)
    assert run_history.cancel_requests([RUN, OTHER]) == frozenset()

    before = time.time()
    request = run_history.request_cancel(RUN)

    assert request.outcome is CancelOutcome.REQUESTED
    assert (request.run_id, request.status) == (RUN, "running")
    assert request.requested_at is not None and before <= request.requested_at <= time.time()
    assert run_history.cancel_requests([RUN, OTHER]) == frozenset({RUN})
    assert run_history.get_run(RUN).cancel_requested_at == request.requested_at
    assert run_history.get_run(OTHER).cancel_requested_at is None


def test_asking_twice_says_already_requested_and_keeps_the_first_request(run_history):
    start_run(run_history, RUN, NOW)
    first = run_history.request_cancel(RUN)

    second = run_history.request_cancel(RUN)

    assert second.outcome is CancelOutcome.ALREADY_REQUESTED
    assert second.requested_at == first.requested_at
    assert second.outcome.recorded and first.outcome.recorded


def test_a_unique_prefix_names_the_run_and_the_request_carries_its_full_id(run_history):
    start_run(run_history, RUN, NOW)

    assert run_history.request_cancel(RUN[:6]).run_id == RUN


@pytest.mark.parametrize("status", ["success", "failed", "cancelled"])
def test_a_finished_run_is_refused_with_its_status_and_nothing_is_recorded(run_history, status):
    start_run(run_history, RUN, NOW)
    finish_run(run_history, RUN, status, NOW)

    request = run_history.request_cancel(RUN)

    assert (request.outcome, request.status, request.requested_at) == (CancelOutcome.FINISHED, status, None)
    assert not request.outcome.recorded
    assert run_history.cancel_requests([RUN]) == frozenset()


def test_a_run_whose_owner_died_is_refused_as_not_running(run_history):
    start_run(run_history, RUN, NOW, pid=dead_pid())

    request = run_history.request_cancel(RUN)

    assert (request.outcome, request.status) == (CancelOutcome.NOT_RUNNING, "interrupted")
    assert run_history.cancel_requests([RUN]) == frozenset()


def test_a_run_that_finishes_after_the_request_records_its_outcome_and_refuses_more_requests(run_history):
    start_run(run_history, RUN, NOW)
    run_history.request_cancel(RUN)
    finish_run(run_history, RUN, "cancelled", NOW)

    assert run_history.get_run(RUN).status == "cancelled"
    assert run_history.request_cancel(RUN).outcome is CancelOutcome.FINISHED


@pytest.mark.parametrize("run_id", ["f" * 32, "ffff", "cc"])
def test_an_unknown_run_or_a_too_short_prefix_is_an_unknown_run_error(run_history, run_id):
    start_run(run_history, RUN, NOW)

    with pytest.raises(UnknownRunError):
        run_history.request_cancel(run_id)


def test_the_poll_of_no_runs_asks_nothing(run_history):
    assert run_history.cancel_requests([]) == frozenset()


_ASKER = """
import json, sys, time
from pathlib import Path
from partita.store import open_store

url, folder, rounds = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
name = sys.argv[4]
store = open_store(url)
for round_number in range(rounds):
    (folder / f"ready-{round_number}-{name}").touch()  # connected, upgraded, waiting for this round
    go = folder / f"go-{round_number}"
    deadline = time.monotonic() + 30
    while not go.exists():
        if time.monotonic() > deadline:
            sys.exit("no go")
    request = store.request_cancel(f"{round_number:x}" * 32)
    print(json.dumps({"outcome": request.outcome.value, "requested_at": request.requested_at}), flush=True)
store.close()
"""

ROUNDS = 3


def test_two_processes_asking_at_once_record_one_request(store, run_history, tmp_path: Path):
    """Each round releases the same two asking processes together: one records, one finds it recorded.

    The two processes serve every round, so the race is run three times for
    the cost of two Python starts.
    """
    script = tmp_path / "ask.py"
    script.write_text(textwrap.dedent(_ASKER))
    askers = [
        subprocess.Popen(
            [sys.executable, str(script), store.connect_url, str(tmp_path), str(ROUNDS), name],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        for name in ("first", "second")
    ]
    try:
        for round_number in range(ROUNDS):
            run_id = f"{round_number:x}" * 32
            start_run(run_history, run_id, NOW)
            ready = [tmp_path / f"ready-{round_number}-{name}" for name in ("first", "second")]
            deadline = time.monotonic() + 60
            while not all(mark.exists() for mark in ready):
                assert all(asker.poll() is None for asker in askers), [asker.communicate() for asker in askers]
                assert time.monotonic() < deadline, "the asking processes never became ready"
                time.sleep(0.01)
            (tmp_path / f"go-{round_number}").touch()
            answers = [json.loads(asker.stdout.readline() or "null") for asker in askers]  # type: ignore[union-attr]
            assert None not in answers, [asker.communicate() for asker in askers]
            outcomes = sorted(answer["outcome"] for answer in answers)
            assert outcomes == ["already_requested", "requested"]
            assert answers[0]["requested_at"] == answers[1]["requested_at"]
            assert run_history.cancel_requests([run_id]) == frozenset({run_id})
        for asker in askers:
            _, err = asker.communicate(timeout=60)
            assert asker.returncode == 0, err
    finally:
        for asker in askers:
            if asker.poll() is None:
                asker.kill()  # only the processes this test started
                asker.communicate()
