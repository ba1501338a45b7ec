"""Partition status over 100,000 keys with 1,000,000 events in a SQLite store (target: under 1 s).

Setup (bulk SQL into a store partita created, for speed): one daily asset
with ``--keys`` consecutive days; ``--runs`` finished runs whose outlet events
cover a growing share of the keys (``--events`` in all, of which a fifth are
published events on the same asset, with dedupe keys); the last two runs
recorded keys, so their attempts (successes and some failures) name them; a
live run of this process has 1,000 keys running.

Figures, each the median of ``--repeat``: the store queries alone
(`last_successes`, the reference: its author measured 0.4 s on an idle
machine; `key_attempts`; and what the text grid reads instead,
`succeeded_keys` and `failed_or_running_keys`), `partita.partition_status`
from Python, and
``partita status ENTRY --partition-range A B`` (text, then ``--json``) as a
subprocess, next to the baseline of ``partita --version`` in a subprocess
(start-up). The machine is shared, so ratios to the reference say more
than seconds.

    python benchmarks/status.py [--keys 100000] [--events 1000000] [--runs 8] [--repeat 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import partita
from partita.store import open_store
from partita.store.liveness import current_owner_token

FIRST_DAY = dt.date(1760, 1, 1)
ENTRY = '''
from partita import DatePartitionDef, Flow, asset

@asset(partition_def=DatePartitionDef(start="{first}"))
def loads(context) -> int:
    return 1

flow = Flow(["loads"])
'''
EVENT_SQL = (
    "INSERT INTO partita_events (asset, partition_key, partition_date, extra, timestamp, source_kind, source_run_id, "
    "source_asset, source_key_present, source_invocation, dedupe_key, payload_hash) VALUES (?, ?, NULL, '{}', ?, ?, ?, ?, ?, 1, ?, ?)"
)
RUN_SQL = (
    "INSERT INTO partita_runs (run_id, status, started_at, finished_at, targets, selection_kind, domain, key_count, "
    "attempt_count, plan, record_partition_keys, owner_host, owner_pid, owner_token, heartbeat_at, launched_by, flow_name) "
    "VALUES (?, ?, ?, ?, '[\"loads\"]', 'range', 'date', ?, ?, '{}', ?, ?, ?, ?, ?, 'cli', 'loads')"
)
ATTEMPT_SQL = (
    "INSERT INTO partita_attempts (run_id, asset, idx, status, reason, partition_key_present, partition_key, "
    "invocations, started_at, finished_at, duration) VALUES (?, 'loads', ?, ?, NULL, 1, ?, 1, ?, ?, 1.0)"
)


def _keys(count: int) -> list[str]:
    return [(FIRST_DAY + dt.timedelta(days=offset)).isoformat() for offset in range(count)]


def build(path: Path, keys: list[str], events: int, run_count: int) -> None:
    open_store(f"sqlite:///{path}").close()  # partita's schema and indexes
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode = WAL")
    base = time.time() - run_count * 86400.0
    published = events // 5
    outlets = events - published
    per_run = outlets // run_count
    host, pid, token = socket.gethostname(), os.getpid(), current_owner_token()
    with connection:
        for number in range(run_count):
            run_id = f"run{number:029d}"
            started = base + number * 86400.0
            recorded = number >= run_count - 2
            connection.execute(
                RUN_SQL,
                (run_id, "success", started, started + 3600, len(keys), len(keys), recorded, host, pid, token, started, ),
            )
            # Each run materializes a window of keys; later runs reach further.
            first = (number * len(keys)) // (run_count * 4)
            chosen = [keys[(first + offset) % len(keys)] for offset in range(per_run)]
            connection.executemany(
                EVENT_SQL,
                ((("loads", key, started + index * 0.001, "outlet", run_id, "loads", True, None, None))
                 for index, key in enumerate(chosen)),
            )
            if recorded:
                connection.executemany(
                    ATTEMPT_SQL,
                    ((run_id, index, "failed" if index % 97 == 0 else "success", key, started, started + index * 0.001)
                     for index, key in enumerate(chosen)),
                )
        connection.executemany(
            EVENT_SQL,
            (("loads", keys[index % len(keys)], base + index, "external", None, None, None, f"pub-{index}", "0" * 64)
             for index in range(published)),
        )
        live = "live" + "0" * 28
        now = time.time()
        connection.execute(RUN_SQL, (live, "running", now, None, 1000, 1000, True, host, pid, token, now))
        connection.executemany(
            ATTEMPT_SQL, ((live, index, "running", keys[-1 - index], now, None) for index in range(1000))
        )
    connection.execute("ANALYZE")
    connection.close()


def _median(repeat: int, measure) -> float:
    return statistics.median(measure() for _ in range(repeat))


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    arguments = parser.parse_args()
    keys = _keys(arguments.keys)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        database = root / "status.db"
        entry = root / "status_entry.py"
        entry.write_text(ENTRY.format(first=FIRST_DAY.isoformat()))
        built = _timed(lambda: build(database, keys, arguments.events, arguments.runs))
        print(f"setup: {arguments.keys:,} keys, {arguments.events:,} events, built in {built:.1f} s", file=sys.stderr)
        url = f"sqlite:///{database}"

        store = open_store(url, create=False)
        try:
            successes = _median(arguments.repeat, lambda: _timed(lambda: store.last_successes("loads")))
            attempts = _median(arguments.repeat, lambda: _timed(lambda: store.key_attempts("loads")))
            grid_reads = _median(
                arguments.repeat,
                lambda: _timed(lambda: (store.succeeded_keys("loads"), store.failed_or_running_keys("loads"))),
            )
        finally:
            store.close()
        # last_successes is the reference: the same machine's speed, in this run (0.4 s on an idle one).
        print(f"last_successes (reference): {arguments.keys:,} keys, {arguments.events:,} events: median {successes:.3f} s")
        print(f"key_attempts: {arguments.keys:,} keys: median {attempts:.3f} s ({attempts / successes:.2f}x reference)")
        print(
            f"succeeded_keys + failed_or_running_keys (what the text grid reads): median {grid_reads:.3f} s "
            f"({grid_reads / successes:.2f}x reference)"
        )
        namespace: dict[str, object] = {}
        exec(compile(entry.read_text(), str(entry), "exec"), namespace)  # noqa: S102 - the benchmark's own entry
        flow = namespace["flow"]
        config = {"partition_range": (keys[0], keys[-1])}

        def python_api() -> None:
            result = partita.partition_status(flow, "loads", config, store=url)
            assert len(result.keys) == len(keys)

        api = _median(arguments.repeat, lambda: _timed(python_api))
        print(f"partition_status (Python): {arguments.keys:,} keys: median {api:.3f} s ({api / successes:.2f}x reference; target < 1 s)")

        command = [str(Path(sys.executable).with_name("partita"))]
        environment = {**os.environ, "PARTITA_STORE": url}

        def cli(*extra: str) -> float:
            return _timed(
                lambda: subprocess.run([*command, *extra], env=environment, cwd=root, check=True, stdout=subprocess.DEVNULL)
            )

        selection = ("status", str(entry), "--partition-range", keys[0], keys[-1])
        baseline = _median(arguments.repeat, lambda: cli("--version"))
        text = _median(arguments.repeat, lambda: cli(*selection))
        document = _median(arguments.repeat, lambda: cli(*selection, "--json"))
        print(f"partita --version (subprocess start-up baseline): median {baseline:.3f} s")
        for name, figure in (("partita status", text), ("partita status --json", document)):
            print(
                f"{name} (subprocess): {arguments.keys:,} keys: median {figure:.3f} s "
                f"({figure - baseline:.3f} s beyond start-up, {(figure - baseline) / successes:.2f}x reference)"
            )

if __name__ == "__main__":
    main()
