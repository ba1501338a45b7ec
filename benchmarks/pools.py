"""What a shared resource pool costs: a lease per invocation, in the store and in a run.

lease: one acquire plus one release of a slot (two write transactions), in
microseconds, straight through `SqlPoolLeases`. run: a flow of N no-op
attempts on a resource of 4 slots, shared (each invocation leases a slot)
next to the same policy kept local, as milliseconds per attempt and their
ratio. Median of ``--repeat`` runs; one line per figure.

    python benchmarks/pools.py [--attempts 2000] [--repeat 3] [--postgresql URL]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import partita
from partita.execution.pools import SlotRequest
from partita.store import open_store
from partita.store.pools import SqlPoolLeases

sys.path.insert(0, str(Path(__file__).parent))
from emission import fresh_postgresql_database  # noqa: E402  (a sibling script)


def lease_micros(url: str, count: int) -> float:
    with closing(open_store(url)) as store:
        leases = SqlPoolLeases(store.database)
        request = SlotRequest("bench", 4, "bench-run", "work", 0, None, 1, 15.0)
        started = time.perf_counter()
        for _ in range(count):
            lease = leases.acquire_slot(request)
            assert lease is not None
            leases.release_leases([lease])
        return (time.perf_counter() - started) / count * 1e6


def run_millis(url: str, count: int, shared: bool) -> float:
    registry = partita.AssetRegistry()
    keys = [str(number) for number in range(count)]

    @partita.asset(registry=registry, partition_def=partita.StaticPartitionDef("k", keys), resource="api")
    def work() -> int:
        return 1

    policy = partita.ResourcePolicy(max_concurrency=4, shared=shared)
    flow = partita.Flow(["work"], registry=registry, store=url, resources={"api": policy})
    started = time.perf_counter()
    result = flow.run({"partition_keys": keys})
    assert result.status is partita.RunStatus.SUCCESS
    return (time.perf_counter() - started) / count * 1e3


def measure(backend: str, new_url: Callable[[], str], attempts: int, repeat: int) -> None:
    lease = statistics.median(lease_micros(new_url(), attempts) for _ in range(repeat))
    print(f"pools backend={backend} leases={attempts} acquire_and_release_us={lease:,.0f} runs={repeat}")
    shared = statistics.median(run_millis(new_url(), attempts, True) for _ in range(repeat))
    local = statistics.median(run_millis(new_url(), attempts, False) for _ in range(repeat))
    print(f"pools backend={backend} attempts={attempts} shared_ms_per_attempt={shared:.3f} runs={repeat}")
    print(f"pools backend={backend} attempts={attempts} local_ms_per_attempt={local:.3f} runs={repeat}")
    print(f"pools backend={backend} attempts={attempts} ratio_shared_over_local={shared / local:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgresql", metavar="URL", help="a PostgreSQL server the benchmark may create databases on")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        numbers = iter(range(1_000_000))
        measure("sqlite", lambda: f"sqlite:///{folder}/pools-{next(numbers)}.db", args.attempts, args.repeat)
    if args.postgresql:
        measure("postgresql", lambda: fresh_postgresql_database(args.postgresql), args.attempts, args.repeat)


if __name__ == "__main__":
    main()
