"""Shared resource pools across real processes, on SQLite and PostgreSQL.

Each process runs ``pool_child.py``: a flow whose bodies use the shared
pool ``api`` and record when they enter and leave. The limit must hold over
all of them together, and a SIGKILLed holder's slot must come back once its
lease expires.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

from partita.store import open_store
from partita.store.pools import SqlPoolLeases

CHILD = Path(__file__).with_name("pool_child.py")
WAIT = 60.0


def _start(store_url: str, out: Path, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), store_url, str(out), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_files(folder: Path, pattern: str, count: int) -> list[Path]:
    deadline = time.monotonic() + WAIT
    while len(found := sorted(folder.glob(pattern))) < count:
        assert time.monotonic() < deadline, f"fewer than {count} files {pattern} appeared"
        time.sleep(0.01)
    return found


def _finish(process: subprocess.Popen[str]) -> str:
    stdout, stderr = process.communicate(timeout=WAIT)
    assert process.returncode == 0, stderr
    return stdout


def _max_overlap(folder: Path) -> int:
    """The most bodies inside at one moment, from every process's enter/exit times."""
    moments: list[tuple[float, int]] = []
    for path in folder.glob("*.interval"):
        entered, left = (float(value) for value in path.read_text().split())
        moments += [(entered, 1), (left, -1)]
    inside = peak = 0
    for _, change in sorted(moments):  # an exit sorts before an enter at the same instant
        inside += change
        peak = max(peak, inside)
    return peak


def test_three_processes_on_one_shared_pool_of_two_never_run_more_than_two_bodies_at_once(
    store_url: str, tmp_path: Path
):
    go = tmp_path / "go"
    open_store(store_url).close()  # the schema exists before three processes open it at once
    processes = [
        _start(store_url, tmp_path, "--keys", "6", "--limit", "2", "--body-seconds", "0.1", "--go", str(go))
        for _ in range(3)
    ]
    try:
        _wait_for_files(tmp_path, "*.ready", 3)
        go.write_text("")
        outputs = [_finish(process) for process in processes]
    finally:
        for process in processes:
            process.kill()
    assert [output.split()[0] for output in outputs] == ["success"] * 3
    assert len(list(tmp_path.glob("*.interval"))) == 18
    assert _max_overlap(tmp_path) == 2
    with closing(open_store(store_url)) as store:
        assert SqlPoolLeases(store.database).holders() == []  # every process released its slots


def test_a_sigkilled_holders_slot_is_reclaimed_after_its_lease_and_a_waiting_process_then_runs(
    store_url: str, tmp_path: Path
):
    holder_out, waiter_out = tmp_path / "holder", tmp_path / "waiter"
    holder_out.mkdir()
    waiter_out.mkdir()
    lease = ["--limit", "1", "--keys", "1", "--lease", "1.0"]
    holder = _start(store_url, holder_out, *lease, "--hold", str(tmp_path / "never"))
    waiter = None
    try:
        _wait_for_files(holder_out, "*.entered", 1)
        waiter = _start(store_url, waiter_out, *lease)
        with closing(open_store(store_url)) as store:
            leases = SqlPoolLeases(store.database)
            deadline = time.monotonic() + WAIT
            while not leases.waiters(["api"]):  # the second process asked and was denied
                assert time.monotonic() < deadline, "the second process never waited for the pool"
                time.sleep(0.01)
            assert [holder_row.pid for holder_row in leases.holders(["api"])] == [holder.pid]
            assert not list(waiter_out.glob("*.entered"))
            holder.send_signal(signal.SIGKILL)
            killed_at = time.time()
            holder.wait(WAIT)
            output = _finish(waiter)
            [entered] = waiter_out.glob("*.entered")
            waited = float(entered.read_text()) - killed_at
            assert leases.holders(["api"]) == []
    finally:
        holder.kill()
        if waiter is not None:
            waiter.kill()
    assert output.split()[0] == "success"
    assert holder.returncode == -signal.SIGKILL
    # Reclaimed once the 1 s lease ran out (renewed every 0.25 s until the kill), within a poll or two.
    assert 0.0 < waited < 3.0


def test_a_run_cancelled_from_another_process_releases_its_slot_to_a_waiting_process(store_url: str, tmp_path: Path):
    import partita as p

    hold = tmp_path / "release"
    holder_out, waiter_out = tmp_path / "holder", tmp_path / "waiter"
    holder_out.mkdir()
    waiter_out.mkdir()
    options = ["--limit", "1", "--keys", "1"]
    holder = _start(store_url, holder_out, *options, "--hold", str(hold), "--grace", "0.2")
    waiter = None
    try:
        _wait_for_files(holder_out, "*.entered", 1)
        waiter = _start(store_url, waiter_out, *options)
        with closing(open_store(store_url)) as store:
            leases = SqlPoolLeases(store.database)
            deadline = time.monotonic() + WAIT
            while not leases.waiters(["api"]):
                assert time.monotonic() < deadline, "the second process never waited for the pool"
                time.sleep(0.01)
            [held] = leases.holders(["api"])
            request = p.cancel_run(held.run_id, store=store, wait=True, timeout=WAIT)
            assert request.status == "cancelled"
            # The waiter ran while the cancelled holder's sync body still blocks.
            assert _finish(waiter).split()[0] == "success"
            hold.write_text("")  # the body may now return, and its process exit
            assert _finish(holder).split() == ["cancelled", held.run_id]
            assert leases.holders() == [] and leases.waiters() == []
    finally:
        hold.write_text("")
        holder.kill()
        if waiter is not None:
            waiter.kill()
