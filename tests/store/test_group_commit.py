"""`GroupCommit`'s leader/follower hand-off, with a commit function of plain Python.

The emission tests (`tests/events/test_group_commit_emission.py`) run it on
real stores; here the commit is a function that records what it was given
and can be held, so that who leads, who waits and what each gets back can be
arranged exactly: the lone thread commits at once in its own thread, queued
threads share the next transaction, a commit that raises leaves its followers
to the next leader, and a follower interrupted while waiting never strands
the queue.
"""

from __future__ import annotations

import _thread
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from partita.store.group_commit import GroupCommit

DEADLINE = 10.0


class Recorder:
    """A commit function: notes each call's items and thread; ``hold`` makes the next calls wait."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[Any], int]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()
        self.fail_with: BaseException | None = None

    def __call__(self, items: list[Any]) -> list[Any]:
        self.entered.set()
        assert self.hold.wait(DEADLINE)
        self.calls.append((list(items), threading.get_ident()))
        if self.fail_with is not None:
            error, self.fail_with = self.fail_with, None
            raise error
        return [("done", item) for item in items]


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def _start(group: GroupCommit[Any, Any], items: list[Any], results: dict[Any, Any]) -> list[threading.Thread]:
    """One thread per item, started in order, each queued before the next starts."""

    def submit(item: Any) -> None:
        try:
            results[item] = group.submit(item)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            results[item] = exc

    threads = []
    for item in items:
        before = group.waiting
        thread = threading.Thread(target=submit, args=(item,))
        thread.start()
        _wait_until(lambda before=before: group.waiting == before + 1)
        threads.append(thread)
    return threads


def _outcome(group: GroupCommit[Any, Any], item: Any) -> Any:
    try:
        return group.submit(item)
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        return exc


def _leader_holding(
    group: GroupCommit[Any, Any], commit: Recorder, results: dict[Any, Any], name: str = "leader"
) -> threading.Thread:
    """A thread that leads with ``name`` and is held inside its commit; its outcome lands in ``results``."""
    commit.hold.clear()
    leader = threading.Thread(target=lambda: results.update({name: _outcome(group, name)}))
    leader.start()
    assert commit.entered.wait(DEADLINE)
    return leader


def test_a_lone_thread_commits_at_once_in_its_own_thread() -> None:
    commit = Recorder()
    group = GroupCommit(commit)

    outcomes = [group.submit(n) for n in range(20)]

    assert outcomes == [("done", n) for n in range(20)]
    assert [items for items, _ in commit.calls] == [[n] for n in range(20)]
    assert {thread for _, thread in commit.calls} == {threading.get_ident()}
    assert group.waiting == 0


def test_threads_queued_behind_a_commit_share_the_next_one_and_each_gets_its_own_outcome() -> None:
    commit = Recorder()
    group = GroupCommit(commit)
    results: dict[Any, Any] = {}
    leader = _leader_holding(group, commit, results)

    followers = _start(group, [f"f{n}" for n in range(7)], results)
    commit.hold.set()
    for thread in [leader, *followers]:
        thread.join(DEADLINE)

    assert [items for items, _ in commit.calls] == [["leader"], [f"f{n}" for n in range(7)]]
    assert results == {"leader": ("done", "leader"), **{f"f{n}": ("done", f"f{n}") for n in range(7)}}
    assert group.waiting == 0


def test_a_group_is_limited_and_the_rest_is_committed_by_the_next_leader() -> None:
    commit = Recorder()
    group = GroupCommit(commit, limit=3)
    results: dict[Any, Any] = {}
    leader = _leader_holding(group, commit, results)

    followers = _start(group, list(range(5)), results)
    commit.hold.set()
    for thread in [leader, *followers]:
        thread.join(DEADLINE)

    assert [items for items, _ in commit.calls] == [["leader"], [0, 1, 2], [3, 4]]
    assert all(results[n] == ("done", n) for n in range(5))


def test_a_commit_that_raises_fails_its_own_thread_and_the_queue_is_served_by_the_next_leader() -> None:
    commit = Recorder()
    group = GroupCommit(commit)
    commit.fail_with = RuntimeError("interrupted before anything was written")
    results: dict[Any, Any] = {}
    first = _leader_holding(group, commit, results, "first")
    queued = _start(group, ["x", "y", "z"], results)
    commit.hold.set()
    for thread in [first, *queued]:
        thread.join(DEADLINE)

    assert isinstance(results["first"], RuntimeError)
    assert [items for items, _ in commit.calls] == [["first"], ["x", "y", "z"]]
    assert [results[item] for item in "xyz"] == [("done", item) for item in "xyz"]
    assert group.waiting == 0


def test_a_raising_leader_leaves_the_followers_it_carried_to_the_next_leader() -> None:
    commit = Recorder()
    group = GroupCommit(commit)
    results: dict[Any, Any] = {}
    first = _leader_holding(group, commit, results, "first")
    queued = _start(group, ["x", "y", "z"], results)

    def raise_for_x(items: list[Any]) -> list[Any]:
        if items[0] == "x":  # "x" leads next, carrying "y" and "z"; nothing is written
            commit.calls.append((list(items), threading.get_ident()))
            raise KeyError("x's own failure")
        return commit(items)

    group._commit = raise_for_x  # noqa: SLF001 - the next transaction raises
    commit.hold.set()
    for thread in [first, *queued]:
        thread.join(DEADLINE)

    assert results["first"] == ("done", "first")
    assert isinstance(results["x"], KeyError)
    assert (results["y"], results["z"]) == (("done", "y"), ("done", "z"))
    assert [items for items, _ in commit.calls] == [["first"], ["x", "y", "z"], ["y", "z"]]
    assert group.waiting == 0


@pytest.fixture
def sigint_raises() -> Any:
    """SIGINT raises KeyboardInterrupt in the main thread, as in a plain Python program."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_follower_interrupted_while_queued_leaves_the_queue_and_the_others_go_on(sigint_raises: Any) -> None:
    commit = Recorder()
    group = GroupCommit(commit)
    results: dict[Any, Any] = {}
    leader = _leader_holding(group, commit, results)
    before = _start(group, ["a"], results)

    def interrupt_once_queued() -> None:
        _wait_until(lambda: group.waiting == 2)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # wakes the blocked wait

    interrupter = threading.Thread(target=interrupt_once_queued)
    interrupter.start()
    with pytest.raises(KeyboardInterrupt):
        group.submit("main")  # queued behind "a", then interrupted
    interrupter.join(DEADLINE)
    assert group.waiting == 1  # "a" only
    after = _start(group, ["b"], results)
    commit.hold.set()
    for thread in [leader, *before, *after]:
        thread.join(DEADLINE)

    assert [items for items, _ in commit.calls] == [["leader"], ["a", "b"]]
    assert results == {"leader": ("done", "leader"), "a": ("done", "a"), "b": ("done", "b")}
    assert group.submit("later") == ("done", "later")  # nobody holds the lead


def test_a_follower_interrupted_as_it_is_given_the_lead_passes_it_on() -> None:
    commit = Recorder()
    group = GroupCommit(commit)
    results: dict[Any, Any] = {}
    leader = _leader_holding(group, commit, results)

    def queue_b_then_release() -> None:
        _wait_until(lambda: group.waiting == 1)  # "main" is first in the queue
        results["threads"] = _start(group, ["b"], results)
        _thread.interrupt_main()  # pending until "main" wakes: when it is given the lead
        commit.hold.set()

    helper = threading.Thread(target=queue_b_then_release)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        group.submit("main")
    helper.join(DEADLINE)
    for thread in [leader, *results.pop("threads")]:
        thread.join(DEADLINE)

    assert [items for items, _ in commit.calls] == [["leader"], ["b"]]  # "main" was never written
    assert results == {"leader": ("done", "leader"), "b": ("done", "b")}
    assert group.waiting == 0
    assert group.submit("later") == ("done", "later")


def test_a_follower_interrupted_once_its_transaction_began_is_written_like_a_lost_acknowledgement() -> None:
    commit = Recorder()
    group = GroupCommit(commit)
    results: dict[Any, Any] = {}
    leader = _leader_holding(group, commit, results)
    before = _start(group, ["a"], results)

    def release_once_queued() -> None:
        _wait_until(lambda: group.waiting == 2)  # "a", then "main"
        _thread.interrupt_main()  # pending until "main" wakes: when "a" has committed it
        commit.hold.set()

    helper = threading.Thread(target=release_once_queued)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        group.submit("main")
    helper.join(DEADLINE)
    for thread in [leader, *before]:
        thread.join(DEADLINE)

    assert [items for items, _ in commit.calls] == [["leader"], ["a", "main"]]
    assert results == {"leader": ("done", "leader"), "a": ("done", "a")}
    assert group.waiting == 0
    assert group.submit("later") == ("done", "later")


def test_a_leader_that_saw_other_threads_submit_lets_them_queue_and_still_gets_its_own_outcome() -> None:
    commit = Recorder()
    group = GroupCommit(commit)
    other = threading.Thread(target=lambda: group.submit("other"))
    other.start()
    other.join(DEADLINE)

    assert group.submit("mine") == ("done", "mine")  # crowded: a thread switch, then the same commit
    assert [items for items, _ in commit.calls] == [["other"], ["mine"]]
    assert commit.calls[1][1] == threading.get_ident()
    assert group.waiting == 0


def test_a_follower_interrupted_while_its_transaction_runs_is_skipped_and_the_others_are_woken(
    sigint_raises: Any,
) -> None:
    gates = [threading.Event(), threading.Event()]  # the leader's transaction, then the one carrying "main"
    entered = [threading.Event(), threading.Event()]
    calls: list[list[Any]] = []

    def commit(items: list[Any]) -> list[Any]:
        number = len(calls)
        calls.append(list(items))
        if number < len(gates):
            entered[number].set()
            assert gates[number].wait(DEADLINE)
        return [("done", item) for item in items]

    group = GroupCommit(commit)
    results: dict[Any, Any] = {}
    leader = threading.Thread(target=lambda: results.update(leader=group.submit("leader")))
    leader.start()
    assert entered[0].wait(DEADLINE)
    before = _start(group, ["a"], results)

    def orchestrate() -> None:
        _wait_until(lambda: group.waiting == 2)  # "a", "main"
        results["threads"] = _start(group, ["b"], results)
        gates[0].set()  # the leader ends; "a" leads and carries "main" and "b"
        assert entered[1].wait(DEADLINE)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        time.sleep(0.2)  # "main" has left; then "a"'s transaction ends
        gates[1].set()

    helper = threading.Thread(target=orchestrate)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        group.submit("main")
    helper.join(DEADLINE)
    for thread in [leader, *before, *results.pop("threads")]:
        thread.join(DEADLINE)

    assert calls == [["leader"], ["a", "main", "b"]]  # "main" was written, like a lost acknowledgement
    assert results == {"leader": ("done", "leader"), "a": ("done", "a"), "b": ("done", "b")}
    assert group.waiting == 0
    assert group.submit("later") == ("done", "later")
