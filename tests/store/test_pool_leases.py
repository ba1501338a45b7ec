"""The store's pool leases (`SqlPoolLeases`), on SQLite and PostgreSQL.

Acquiring is atomic: two processes racing for the last slot never both get
it. An expired lease frees its slot for the next acquirer, and the holder of
an expired, reclaimed lease can neither renew nor release the new holder's.
"""

from __future__ import annotations

import multiprocessing
import time
from contextlib import closing

from partita.execution.pools import SlotRequest
from partita.store import SqlStore, open_store
from partita.store.pools import SqlPoolLeases

ROUNDS = 15
WAIT = 60.0


def _request(run_id: str, limit: int = 1, lease_seconds: float = 30.0, pool: str = "api") -> SlotRequest:
    return SlotRequest(pool, limit, run_id, "work", 0, None, 1, lease_seconds)


def _racer(url: str, name: str, barrier, results) -> None:  # type: ignore[no-untyped-def]
    with closing(open_store(url)) as store:
        leases = SqlPoolLeases(store.database)
        for number in range(ROUNDS):
            barrier.wait(WAIT)
            lease = leases.acquire_slot(_request(f"{name}-{number}", limit=2))
            results.put((number, name, lease))
            barrier.wait(WAIT)  # both asked: the winner gives the slot back for the next round
            if lease is not None:
                leases.release_leases([lease])
            barrier.wait(WAIT)


def test_two_processes_racing_for_the_last_slot_never_both_get_it(store: SqlStore, store_url: str):
    leases = SqlPoolLeases(store.database)
    assert leases.acquire_slot(_request("holder", limit=2)) is not None  # one of two slots stays taken
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    racers = [context.Process(target=_racer, args=(store_url, name, barrier, results)) for name in ("x", "y")]
    for racer in racers:
        racer.start()
    answers = [results.get(timeout=WAIT) for _ in range(2 * ROUNDS)]
    for racer in racers:
        racer.join(WAIT)
        assert racer.exitcode == 0
    for number in range(ROUNDS):
        granted = [lease for round_number, _, lease in answers if round_number == number and lease is not None]
        assert len(granted) == 1, f"round {number}: {len(granted)} processes got the last slot"


def test_an_expired_lease_frees_its_slot_for_the_next_acquirer(store: SqlStore):
    leases = SqlPoolLeases(store.database)
    stale = leases.acquire_slot(_request("killed", lease_seconds=0.05))
    assert stale is not None
    assert leases.acquire_slot(_request("waiting")) is None
    assert [waiter.run_id for waiter in leases.waiters(["api"])] == ["waiting"]
    deadline = time.monotonic() + WAIT
    while (fresh := leases.acquire_slot(_request("waiting"))) is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    [holder] = leases.holders(["api"])
    assert (holder.run_id, holder.slot) == ("waiting", 0)
    assert leases.waiters() == []  # the grant withdrew the run's waiting row
    # The killed holder coming back can neither renew nor release the new holder's slot.
    assert leases.renew_leases([stale], "killed", 30.0) == 0
    leases.release_leases([stale])
    assert [holder.run_id for holder in leases.holders(["api"])] == ["waiting"]
    assert leases.renew_leases([fresh], "waiting", 30.0) == 1


def test_pools_are_independent_and_a_withdrawn_run_holds_nothing(store: SqlStore):
    leases = SqlPoolLeases(store.database)
    assert leases.acquire_slot(_request("run", pool="a")) is not None
    assert leases.acquire_slot(_request("run", pool="b")) is not None
    assert leases.acquire_slot(_request("other", pool="a")) is None
    assert [(h.pool, h.run_id) for h in leases.holders()] == [("a", "run"), ("b", "run")]
    leases.withdraw_run("run")
    assert [(h.pool, h.run_id) for h in leases.holders()] == []
    assert [w.run_id for w in leases.waiters()] == ["other"]
