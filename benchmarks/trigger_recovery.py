"""Consumer runs under repeated SIGKILL of the trigger daemon: does every key end in exactly one success?

Publishes ``--keys`` events, then starts ``partita serve`` and kills it with
SIGKILL at random moments ``--kills`` times, restarting it each time; a last
daemon runs until no request is open. Prints the keys, the kills, the
interrupted runs and their follow-ups, and how many successful consumer runs
each key got (the promise: exactly one each; none abandoned unless one key
was interrupted more than ``rerun_interrupted`` times).

    python benchmarks/trigger_recovery.py --keys 500 --kills 20
    python benchmarks/trigger_recovery.py --store postgresql://... --keys 500 --kills 20
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import partita as p
from partita.store.sql import SqlStore
from partita.store.triggers import TriggerStore

ENTRY = '''
import os
import time

from partita import DatePartitionDef, Flow, OnAssetEvents, asset


@asset(partition_def=DatePartitionDef())
def raw():
    return 1


@asset(partition_def=DatePartitionDef())
def consumer(context):
    time.sleep(float(os.environ["CONSUMER_DELAY"]))
    return len(context.triggering_events)


consumer_flow = Flow(
    ["consumer"], name="consumer_flow", record_partition_keys=True,
    trigger=OnAssetEvents(["raw"], rerun_interrupted=int(os.environ["RERUN_INTERRUPTED"])),
)
'''


def _serve(entry: Path, url: str, delay: float, reruns: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CONSUMER_DELAY": str(delay), "RERUN_INTERRUPTED": str(reruns)}
    with log.open("ab") as stream:
        return subprocess.Popen(
            [sys.executable, "-m", "partita", "serve", str(entry), "--store", url, "--max-in-flight", "4"],
            stdout=subprocess.DEVNULL,
            stderr=stream,
            env=env,
        )


def _open_requests(store: SqlStore) -> int:
    return len(TriggerStore(store).requests("consumer_flow", ("pending", "claimed")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="store URL (default: a new SQLite file)")
    parser.add_argument("--keys", type=int, default=500)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.02, help="seconds each consumer body sleeps")
    parser.add_argument("--rerun-interrupted", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    random.seed(args.seed)
    folder = Path(tempfile.mkdtemp(prefix="partita-recovery-"))
    url = args.store or f"sqlite:///{folder}/store.db"
    entry = folder / "entry.py"
    entry.write_text(ENTRY)
    log = folder / "serve.log"

    registry = p.AssetRegistry()

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def raw() -> int:
        return 1

    first = dt.date(2000, 1, 1)
    keys = [(first + dt.timedelta(days=n)).isoformat() for n in range(args.keys)]
    with contextlib.closing(SqlStore(url)) as store:
        for key in keys:
            p.publish_event(store, registry, "raw", partition_key=key)

    began = time.monotonic()
    with contextlib.closing(SqlStore(url)) as store:
        for _ in range(args.kills):
            daemon = _serve(entry, url, args.delay, args.rerun_interrupted, log)
            time.sleep(random.uniform(0.3, 1.5))
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()
        daemon = _serve(entry, url, args.delay, args.rerun_interrupted, log)
        try:
            # Claims of killed daemons whose runs never started are taken over once stale (30 s).
            deadline = time.monotonic() + 600
            while _open_requests(store) and time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait()
        elapsed = time.monotonic() - began

        with store._engine.connect() as connection:  # noqa: SLF001 - a report over the raw rows
            successes = dict(
                connection.exec_driver_sql(
                    "SELECT partition_key, count(*) FROM partita_attempts "
                    "WHERE asset = 'consumer' AND status = 'success' GROUP BY partition_key"
                ).fetchall()
            )
            follow_ups = connection.exec_driver_sql(
                "SELECT count(*) FROM partita_trigger_runs WHERE follows_run_id IS NOT NULL"
            ).scalar_one()
        runs = store.list_runs(limit=10 * args.keys + 100)
        statuses = collections.Counter(run.status for run in runs)
        abandoned = TriggerStore(store).requests("consumer_flow", ("abandoned",))

    distribution = collections.Counter(successes.get(key, 0) for key in keys)
    print(f"store                         {url.split(':')[0]}")
    print(f"keys                          {len(keys)}")
    print(f"daemon kills (SIGKILL)        {args.kills}")
    print(f"consumer runs                 {len(runs)} ({', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))})")
    print(f"follow-up runs                {follow_ups}")
    print(f"abandoned requests            {len(abandoned)}")
    print(f"successful runs per key       {dict(sorted(distribution.items()))}")
    print(f"elapsed                       {elapsed:.1f} s")


if __name__ == "__main__":
    main()
