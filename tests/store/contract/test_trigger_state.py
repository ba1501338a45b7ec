"""The trigger state contract (SPEC §12): cursors, pauses, requests, claims and launches on every backend.

Exactly-once rests on these verbs: a pass records only if the cursor is still
the one it read; a request is unique per (flow, key, generation) and new
events join it until it is claimed; of two claims of one request exactly one
wins (two stores on one URL stand for two daemons); a refused start gives
the claim back with a backoff; an interrupted run gets one follow-up; each
try's launch is recorded with its run id.
"""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from partita.definitions.launch import LaunchKind, RunLaunch
from partita.store.protocol import RequestClaim, RequestClaimLost, RunStart
from partita.store.schema import event_ids_text
from partita.store.triggers import EventPosition, NewEvents, TriggerLaunch, WaitingKey

from .conftest import count_rows, dead_pid, draft, plan_document, start_run

FLOW = "consumer_flow"
START = EventPosition()
T0 = 1_000.0


def _pass(triggers, ready=None, waiting=None, *, expected=START, cursor=START, tick=None, now=T0) -> bool:
    return triggers.record_pass(FLOW, ready or {}, waiting or {}, expected, cursor, tick, now)


def _one(triggers, *statuses: str):
    (request,) = triggers.requests(FLOW, statuses or ("pending",))
    return request


def _claimed(triggers, run_id: str = "r" * 32, now: float = T0 + 1):
    """Open a request for key ``k`` and claim it; the claimed request as the store reads it back."""
    _pass(triggers, {"k": [1]}, cursor=EventPosition(0, 1))
    assert triggers.claim(_one(triggers), run_id, now)
    return _one(triggers, "claimed")


# -- cursors, pauses, knowing a flow ---------------------------------------------------------------


def test_a_flow_without_state_starts_before_every_event_unpaused_and_unknown(trigger_state):
    assert trigger_state.cursor(FLOW) == (START, None)
    assert trigger_state.is_paused(FLOW) is False
    assert trigger_state.knows_flow(FLOW) is False
    assert trigger_state.requests(FLOW, ("pending", "claimed", "finished", "abandoned")) == []
    assert trigger_state.waiting(FLOW) == []


def test_pausing_and_resuming_are_read_back_and_make_the_flow_known(trigger_state, other_trigger_state):
    trigger_state.set_paused(FLOW, True, T0)
    assert other_trigger_state.is_paused(FLOW) is True
    assert other_trigger_state.knows_flow(FLOW) is True

    trigger_state.set_paused(FLOW, False, T0 + 1)
    assert other_trigger_state.is_paused(FLOW) is False
    assert other_trigger_state.knows_flow(FLOW) is True
    assert other_trigger_state.is_paused("other_flow") is False


def test_a_pass_opens_one_request_per_ready_key_and_advances_the_cursor(trigger_state):
    assert _pass(trigger_state, {"k1": [2, 1], "k2": [3]}, cursor=EventPosition(0, 3), tick=99.5)

    assert trigger_state.cursor(FLOW) == (EventPosition(0, 3), 99.5)
    assert trigger_state.knows_flow(FLOW) is True
    requests = trigger_state.requests(FLOW)
    assert [(r.partition_key, r.generation, r.status, r.event_ids) for r in requests] == [
        ("k1", 0, "pending", (1, 2)),
        ("k2", 0, "pending", (3,)),
    ]
    for request in requests:
        assert (request.flow, request.run_id, request.created_at, request.claimed_at) == (FLOW, None, T0, None)
        assert (request.tries, request.start_failures, request.not_before, request.last_error) == (0, 0, None, None)


def test_a_pass_that_read_a_stale_cursor_records_nothing(trigger_state, other_trigger_state):
    assert _pass(trigger_state, {"k1": [1]}, cursor=EventPosition(7, 1))

    assert not _pass(other_trigger_state, {"k1": [1], "k2": [2]}, waiting={"w": [3]}, cursor=EventPosition(7, 2))

    assert trigger_state.cursor(FLOW) == (EventPosition(7, 1), None)
    assert [(r.partition_key, r.event_ids) for r in trigger_state.requests(FLOW)] == [("k1", (1,))]
    assert trigger_state.waiting(FLOW) == []


# -- requests: one per (flow, key, generation) ------------------------------------------------------


def test_events_join_the_open_request_of_their_key_until_it_is_claimed(trigger_state):
    _pass(trigger_state, {"k": [1]}, cursor=EventPosition(0, 1))
    _pass(trigger_state, {"k": [3, 1]}, expected=EventPosition(0, 1), cursor=EventPosition(0, 3))
    first = _one(trigger_state)
    assert (first.generation, first.event_ids) == (0, (1, 3))

    assert trigger_state.claim(first, "r" * 32, T0 + 1)
    _pass(trigger_state, {"k": [4]}, expected=EventPosition(0, 3), cursor=EventPosition(0, 4))

    requests = trigger_state.requests(FLOW, ("pending", "claimed"))
    assert [(r.id, r.generation, r.status, r.event_ids) for r in requests] == [
        (first.id, 0, "claimed", (1, 3)),
        (requests[1].id, 1, "pending", (4,)),
    ]
    assert requests[1].id > first.id


def test_waiting_keys_are_remembered_and_their_events_join_the_request_once_ready(trigger_state):
    _pass(trigger_state, waiting={"w": [5]}, cursor=EventPosition(0, 5), now=T0)
    _pass(trigger_state, waiting={"w": [6]}, expected=EventPosition(0, 5), cursor=EventPosition(0, 6), now=T0 + 1)
    assert trigger_state.waiting(FLOW) == [WaitingKey(FLOW, "w", T0, (5, 6))]
    assert trigger_state.requests(FLOW) == []

    _pass(trigger_state, {"w": [7]}, expected=EventPosition(0, 6), cursor=EventPosition(0, 7))

    assert _one(trigger_state).event_ids == (5, 6, 7)
    assert trigger_state.waiting(FLOW) == []


def test_a_schedule_key_is_requested_once_and_the_schedule_keeps_the_event_position(trigger_state):
    trigger_state.record_schedule(FLOW, ["2026-01-01", "2026-01-02"], 10.0, T0)
    assert trigger_state.cursor(FLOW) == (START, 10.0)
    _pass(trigger_state, {"k": [9]}, cursor=EventPosition(0, 9), tick=10.0)

    trigger_state.record_schedule(FLOW, ["2026-01-02", "2026-01-03"], 20.0, T0 + 1)
    trigger_state.record_schedule(FLOW, [], 30.0, T0 + 2)

    assert trigger_state.cursor(FLOW) == (EventPosition(0, 9), 30.0)
    scheduled = [r for r in trigger_state.requests(FLOW) if r.partition_key != "k"]
    assert [(r.partition_key, r.generation, r.event_ids) for r in scheduled] == [
        ("2026-01-01", 0, ()),
        ("2026-01-02", 0, ()),
        ("2026-01-03", 0, ()),
    ]


def test_requests_read_in_creation_order_by_status_with_a_limit(trigger_state):
    _pass(trigger_state, {key: [n] for n, key in enumerate(["c", "a", "b"], 1)}, cursor=EventPosition(0, 3))
    assert trigger_state.claim(trigger_state.requests(FLOW)[1], "r" * 32, T0 + 1)

    assert [r.partition_key for r in trigger_state.requests(FLOW)] == ["c", "b"]
    assert [r.partition_key for r in trigger_state.requests(FLOW, limit=1)] == ["c"]
    assert [r.partition_key for r in trigger_state.requests(FLOW, ("claimed",))] == ["a"]
    assert [r.partition_key for r in trigger_state.requests(FLOW, ("pending", "claimed"))] == ["c", "a", "b"]
    assert trigger_state.requests("other_flow") == []


# -- claims ------------------------------------------------------------------------------------------


def test_of_two_daemons_claiming_one_request_exactly_one_wins(trigger_state, other_trigger_state):
    _pass(trigger_state, {"k": [1]}, cursor=EventPosition(0, 1))
    pending = _one(trigger_state)
    barrier = threading.Barrier(2, timeout=30)
    won: dict[str, bool] = {}

    def claim(triggers, run_id: str) -> None:
        barrier.wait()
        won[run_id] = triggers.claim(pending, run_id, T0 + 1)

    workers = [
        threading.Thread(target=claim, args=(triggers, run_id))
        for triggers, run_id in ((trigger_state, "a" * 32), (other_trigger_state, "b" * 32))
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)

    assert sorted(won.values()) == [False, True]
    (winner,) = [run_id for run_id, claimed in won.items() if claimed]
    (loser,) = [run_id for run_id, claimed in won.items() if not claimed]
    claimed = _one(trigger_state, "claimed")
    assert (claimed.run_id, claimed.tries) == (winner, 1)
    assert trigger_state.launch(winner) == TriggerLaunch(FLOW, pending.id, 1, None)
    assert trigger_state.launch(loser) is None


def test_a_claim_fixes_the_run_id_of_the_try_and_records_its_launch(trigger_state):
    claimed = _claimed(trigger_state, "r" * 32, T0 + 1)

    assert (claimed.status, claimed.run_id, claimed.claimed_at, claimed.tries) == ("claimed", "r" * 32, T0 + 1, 1)
    assert trigger_state.launch("r" * 32) == TriggerLaunch(FLOW, claimed.id, 1, None)
    assert trigger_state.launch("never-launched") is None
    assert trigger_state.requests(FLOW) == []


def test_a_stale_claim_is_taken_over_once_and_keeps_its_run_id(trigger_state, other_trigger_state):
    claimed = _claimed(trigger_state, "r" * 32, T0 + 1)

    assert other_trigger_state.claim(claimed, "s" * 32, T0 + 100)
    assert not trigger_state.claim(claimed, "t" * 32, T0 + 101)

    taken = _one(trigger_state, "claimed")
    assert (taken.run_id, taken.claimed_at, taken.tries) == ("r" * 32, T0 + 100, 1)
    assert trigger_state.launch("r" * 32) == TriggerLaunch(FLOW, claimed.id, 1, None)
    assert trigger_state.launch("s" * 32) is None


# -- one-key runs: the run's start claims its request ------------------------------------------------


def _claim_of(request, now: float, *, flow: str = FLOW, event_ids=None) -> RequestClaim:
    """The claim of a pending request as read, as a one-key run's start takes it."""
    ids = request.event_ids if event_ids is None else event_ids
    return RequestClaim(flow, request.id, request.tries + 1, now, event_ids_text(ids))


def test_a_run_start_claims_its_pending_request_and_records_its_launch_with_its_row(trigger_state, run_history):
    _pass(trigger_state, {"k": [1]}, cursor=EventPosition(0, 1))
    pending = _one(trigger_state)

    start_run(run_history, "r" * 32, dt.datetime.now(dt.UTC), claim=_claim_of(pending, T0 + 1))

    claimed = _one(trigger_state, "claimed")
    assert (claimed.id, claimed.run_id, claimed.claimed_at, claimed.tries) == (pending.id, "r" * 32, T0 + 1, 1)
    assert trigger_state.launch("r" * 32) == TriggerLaunch(FLOW, pending.id, 1, None)
    assert trigger_state.run_status("r" * 32) == "running"


def test_a_run_start_whose_request_another_daemon_claimed_writes_nothing(
    trigger_state, other_trigger_state, run_history, tables
):
    _pass(trigger_state, {"k": [1]}, cursor=EventPosition(0, 1))
    pending = _one(trigger_state)
    assert other_trigger_state.claim(pending, "o" * 32, T0 + 1)

    with pytest.raises(RequestClaimLost, match="changed since it was read"):
        start_run(run_history, "r" * 32, dt.datetime.now(dt.UTC), claim=_claim_of(pending, T0 + 2))

    assert trigger_state.run_status("r" * 32) is None and trigger_state.launch("r" * 32) is None
    assert count_rows(tables, "partita_runs") == 0
    taken = _one(trigger_state, "claimed")
    assert (taken.run_id, taken.claimed_at, taken.tries) == ("o" * 32, T0 + 1, 1)


def test_a_run_start_claims_only_a_pending_request_of_its_own_flow(trigger_state, run_history, tables):
    _pass(trigger_state, {"k": [1]}, cursor=EventPosition(0, 1))
    pending = _one(trigger_state)
    trigger_state.finish(pending.id, T0 + 1)
    with pytest.raises(RequestClaimLost):  # finished already
        start_run(run_history, "r" * 32, dt.datetime.now(dt.UTC), claim=_claim_of(pending, T0 + 2))
    with pytest.raises(RequestClaimLost):  # another flow's id
        start_run(run_history, "s" * 32, dt.datetime.now(dt.UTC), claim=_claim_of(pending, T0 + 2, flow="other"))
    assert count_rows(tables, "partita_runs") == 0 and count_rows(tables, "partita_trigger_runs") == 0


def test_a_run_start_given_fewer_events_than_its_request_now_has_claims_nothing(trigger_state, run_history, tables):
    _pass(trigger_state, {"k": [1]}, cursor=EventPosition(0, 1))
    read = _one(trigger_state)
    # Another event joins the open request after the daemon read it: the run would not see it.
    _pass(trigger_state, {"k": [2]}, expected=EventPosition(0, 1), cursor=EventPosition(0, 2), now=T0 + 1)
    assert _one(trigger_state).event_ids == (1, 2)

    with pytest.raises(RequestClaimLost):
        start_run(run_history, "r" * 32, dt.datetime.now(dt.UTC), claim=_claim_of(read, T0 + 2))
    assert count_rows(tables, "partita_runs") == 0 and _one(trigger_state).status == "pending"

    start_run(run_history, "s" * 32, dt.datetime.now(dt.UTC), claim=_claim_of(_one(trigger_state), T0 + 3))
    assert _one(trigger_state, "claimed").run_id == "s" * 32


def test_a_run_start_with_tags_claims_in_its_transaction_too(trigger_state, other_trigger_state, run_history, tables):
    """Tags keep the start's transaction of several statements on every backend: the claim is in it."""
    _pass(trigger_state, {"k": [1], "l": [2]}, cursor=EventPosition(0, 2))
    first, second = trigger_state.requests(FLOW)
    assert other_trigger_state.claim(second, "o" * 32, T0 + 1)

    def start(run_id: str, request) -> None:
        run_history.record_run_started(
            RunStart(
                run_id=run_id, started_at=dt.datetime.now(dt.UTC), plan=plan_document(), record_partition_keys=False,
                owner_host="h", owner_pid=1, owner_token="t",
                launch=RunLaunch(LaunchKind.TRIGGER, FLOW, (("team", "data"),)), claim=_claim_of(request, T0 + 2),
            )
        )  # fmt: skip

    start("r" * 32, first)
    with pytest.raises(RequestClaimLost):
        start("s" * 32, second)
    claimed = {request.run_id for request in trigger_state.requests(FLOW, ("claimed",))}
    assert claimed == {"r" * 32, "o" * 32}
    assert trigger_state.launch("r" * 32) == TriggerLaunch(FLOW, first.id, 1, None)
    assert count_rows(tables, "partita_runs") == 1 and count_rows(tables, "partita_run_tags") == 1


def test_a_pending_request_is_put_off_and_abandoned_only_while_pending(trigger_state):
    _pass(trigger_state, {"k": [1]}, cursor=EventPosition(0, 1))
    pending = _one(trigger_state)

    assert trigger_state.defer(pending, "the store refused the start", T0 + 60)
    put_off = _one(trigger_state)
    assert (put_off.status, put_off.run_id, put_off.tries) == ("pending", None, 0)
    assert (put_off.start_failures, put_off.not_before, put_off.last_error) == (1, T0 + 60, "the store refused the start")
    assert trigger_state.requests(FLOW, due_at=T0 + 59) == []

    assert trigger_state.abandon_pending(put_off, "its plan is refused", T0 + 61)
    assert not trigger_state.abandon_pending(put_off, "again", T0 + 62)
    assert not trigger_state.defer(put_off, "too late", T0 + 63)
    abandoned = _one(trigger_state, "abandoned")
    assert (abandoned.last_error, abandoned.start_failures) == ("its plan is refused", 1)


def test_a_claimed_request_is_neither_put_off_nor_abandoned_as_pending(trigger_state):
    claimed = _claimed(trigger_state, "r" * 32, T0 + 1)
    assert not trigger_state.defer(claimed, "late", T0 + 60)
    assert not trigger_state.abandon_pending(claimed, "late", T0 + 60)
    still = _one(trigger_state, "claimed")
    assert (still.run_id, still.start_failures, still.last_error) == ("r" * 32, 0, None)


# -- refused starts: release with backoff ----------------------------------------------------------


def test_a_released_claim_is_pending_again_and_not_due_before_its_backoff(trigger_state):
    claimed = _claimed(trigger_state, "r" * 32, T0 + 1)

    assert trigger_state.release(claimed, "the store refused the start", T0 + 60)

    released = _one(trigger_state)
    assert (released.status, released.run_id, released.claimed_at, released.tries) == ("pending", None, None, 0)
    assert (released.start_failures, released.not_before) == (1, T0 + 60)
    assert released.last_error == "the store refused the start"
    assert trigger_state.launch("r" * 32) is None
    assert trigger_state.requests(FLOW, due_at=T0 + 59) == []
    assert [r.id for r in trigger_state.requests(FLOW, due_at=T0 + 60)] == [claimed.id]
    assert not trigger_state.release(claimed, "again", T0 + 120)


def test_each_refused_start_counts_and_a_finished_request_forgets_its_backoff(trigger_state):
    first = _claimed(trigger_state, "r" * 32, T0 + 1)
    assert trigger_state.release(first, "refused once", T0 + 10)
    assert trigger_state.claim(_one(trigger_state), "s" * 32, T0 + 10)
    second = _one(trigger_state, "claimed")
    assert (second.run_id, second.tries, second.start_failures) == ("s" * 32, 1, 1)
    assert trigger_state.launch("s" * 32) == TriggerLaunch(FLOW, first.id, 1, None)

    assert trigger_state.release(second, "refused twice", T0 + 30)
    assert (_one(trigger_state).start_failures, _one(trigger_state).not_before) == (2, T0 + 30)
    assert trigger_state.claim(_one(trigger_state), "t" * 32, T0 + 30)
    trigger_state.finish(first.id, T0 + 40)

    finished = _one(trigger_state, "finished")
    assert (finished.run_id, finished.start_failures, finished.not_before) == ("t" * 32, 0, None)
    assert trigger_state.requests(FLOW, ("pending", "claimed")) == []


def test_only_the_current_claimant_can_release_a_claim(trigger_state, other_trigger_state):
    claimed = _claimed(trigger_state, "r" * 32, T0 + 1)
    assert other_trigger_state.claim(claimed, "s" * 32, T0 + 100)

    assert not trigger_state.release(claimed, "late refusal", T0 + 200)

    still = _one(trigger_state, "claimed")
    assert (still.run_id, still.start_failures, still.last_error) == ("r" * 32, 0, None)
    assert trigger_state.launch("r" * 32) is not None


# -- interrupted runs: follow-ups and abandoning -----------------------------------------------------


def test_run_status_follows_the_run_history_and_its_owner(trigger_state, run_history):
    assert trigger_state.run_status("l" * 32) is None
    start_run(run_history, "l" * 32, dt.datetime.now(dt.UTC))
    start_run(run_history, "d" * 32, dt.datetime.now(dt.UTC), pid=dead_pid())

    assert trigger_state.run_status("l" * 32) == "running"
    assert trigger_state.run_status("d" * 32) == "interrupted"


def test_an_interrupted_run_gets_exactly_one_follow_up_launched_after_it(
    trigger_state, other_trigger_state, run_history
):
    claimed = _claimed(trigger_state, "r" * 32, T0 + 1)
    start_run(run_history, "r" * 32, dt.datetime.now(dt.UTC), pid=dead_pid())
    assert trigger_state.run_status("r" * 32) == "interrupted"

    assert trigger_state.follow_up(claimed, "f" * 32, T0 + 50)
    assert not other_trigger_state.follow_up(claimed, "g" * 32, T0 + 51)

    current = _one(trigger_state, "claimed")
    assert (current.run_id, current.claimed_at, current.tries) == ("f" * 32, T0 + 50, 2)
    assert trigger_state.launch("f" * 32) == TriggerLaunch(FLOW, claimed.id, 2, "r" * 32)
    assert trigger_state.launch("r" * 32) == TriggerLaunch(FLOW, claimed.id, 1, None)
    assert trigger_state.launch("g" * 32) is None


def test_an_abandoned_request_ends_with_its_reason_and_cannot_be_abandoned_twice(trigger_state):
    claimed = _claimed(trigger_state, "r" * 32, T0 + 1)

    assert trigger_state.abandon(claimed, "run r was interrupted and its tries are used up", T0 + 9)
    assert not trigger_state.abandon(claimed, "again", T0 + 10)

    abandoned = _one(trigger_state, "abandoned")
    assert (abandoned.id, abandoned.run_id) == (claimed.id, "r" * 32)
    assert abandoned.last_error == "run r was interrupted and its tries are used up"
    assert trigger_state.requests(FLOW, ("pending", "claimed")) == []
    assert not trigger_state.follow_up(claimed, "f" * 32, T0 + 11)


def test_a_pending_request_cannot_be_abandoned(trigger_state):
    _pass(trigger_state, {"k": [1]}, cursor=EventPosition(0, 1))

    assert not trigger_state.abandon(_one(trigger_state), "never claimed", T0 + 1)
    assert _one(trigger_state).status == "pending"


# -- reading the event log for a pass -------------------------------------------------------------------


def test_new_events_are_read_in_commit_order_after_the_position_for_the_consumed_assets(trigger_state, event_store):
    ids = [
        event_store.record_event(draft(asset, key=key)).id
        for asset, key in [("raw", "k1"), ("other", "k1"), ("raw", "k2"), ("raw", None)]
    ]

    found = trigger_state.new_events(["raw"], START)
    assert [(position.event_id, asset, key) for position, asset, key in found] == [
        (ids[0], "raw", "k1"),
        (ids[2], "raw", "k2"),
        (ids[3], "raw", None),
    ]
    assert [position for position, _, _ in found] == sorted(position for position, _, _ in found)
    assert [key for _, _, key in trigger_state.new_events(["raw"], found[0][0])] == ["k2", None]
    assert [key for _, _, key in trigger_state.new_events(["raw", "other"], START, limit=2)] == ["k1", "k1"]
    assert trigger_state.new_events(["raw"], found[-1][0]) == []
    assert trigger_state.keys_with_events("raw", ["k2", "k3", "k1", "k2"]) == {"k1", "k2"}
    assert trigger_state.keys_with_events("other", []) == set()
    assert (trigger_state.has_event("other"), trigger_state.has_event("missing")) == (True, False)


# -- daemons -----------------------------------------------------------------------------------------


def test_new_events_of_no_assets_are_none_on_every_backend(trigger_state, event_store):
    event_store.record_event(draft("raw", key="k1"))

    assert trigger_state.new_events([], START) == []
    assert trigger_state.read_new_events([], START) == NewEvents([], None)


def test_with_no_transaction_in_progress_no_event_is_held_back(trigger_state, event_store):
    for asset, key in [("raw", "k1"), ("other", "k1"), ("raw", "k2")]:
        event_store.record_event(draft(asset, key=key))

    read = trigger_state.read_new_events(["raw"], START)
    assert read == NewEvents(trigger_state.new_events(["raw"], START), None)
    assert [key for _, _, key in read.events] == ["k1", "k2"]
    assert trigger_state.read_new_events(["raw"], START, limit=1).held_back is None


def test_a_daemon_is_registered_beats_and_stops(trigger_state, tables):
    trigger_state.daemon_started("daemon-1", "host-a", 4242, T0)
    trigger_state.daemon_heartbeat("daemon-1", T0 + 5)
    assert count_rows(tables, "partita_daemons", daemon_id="daemon-1", heartbeat_at=T0 + 5, started_at=T0) == 1
    assert count_rows(tables, "partita_daemons", daemon_id="daemon-1", host="host-a", pid=4242) == 1

    trigger_state.daemon_heartbeat("daemon-1", T0 + 9, stopped=True)

    assert count_rows(tables, "partita_daemons", daemon_id="daemon-1", heartbeat_at=T0 + 9, stopped_at=T0 + 9) == 1
