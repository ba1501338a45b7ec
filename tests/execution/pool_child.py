"""A process running one flow whose bodies share the pool ``api`` (for the shared pool tests).

Each body writes ``PID-KEY.entered`` when it starts and ``PID-KEY.interval``
(enter and exit times) when it ends, into OUT. With ``--go FILE`` the run
starts only once FILE exists (``PID.ready`` says the process waits), so
several processes contend from the same moment. With ``--hold FILE`` each
body waits for FILE before it returns. Prints the run's status and id.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import partita as p
from partita.execution import pools


def _wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.005)  # polling a file another process creates


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("out", type=Path)
    parser.add_argument("--keys", type=int, default=4)
    parser.add_argument("--limit", type=int, default=2)
    parser.add_argument("--body-seconds", type=float, default=0.05)
    parser.add_argument("--go", type=Path)
    parser.add_argument("--hold", type=Path)
    parser.add_argument("--lease", type=float)
    parser.add_argument("--grace", type=float, default=10.0, help="cancel_grace_seconds")
    args = parser.parse_args()
    if args.lease is not None:
        pools.LEASE_TIMING = pools.LeaseTiming(args.lease, args.lease / 4, 0.02, 0.1)
    out: Path = args.out
    keys = [str(number) for number in range(args.keys)]
    registry = p.AssetRegistry()

    @p.asset(registry=registry, partition_def=p.StaticPartitionDef("k", keys), resource="api")
    def work(context: p.AssetContext) -> int:
        entered = time.time()
        (out / f"{os.getpid()}-{context.partition_key}.entered").write_text(repr(entered))
        if args.hold is not None:
            _wait_for(args.hold)
        else:
            time.sleep(args.body_seconds)  # the body's own work
        (out / f"{os.getpid()}-{context.partition_key}.interval").write_text(f"{entered!r} {time.time()!r}")
        return 1

    flow = p.Flow(
        ["work"],
        registry=registry,
        store=args.store,
        record_partition_keys=True,
        cancel_grace_seconds=args.grace,
        resources={"api": p.ResourcePolicy(max_concurrency=args.limit, shared=True)},
    )
    if args.go is not None:
        (out / f"{os.getpid()}.ready").write_text("")
        _wait_for(args.go)
    result = flow.run({"partition_keys": keys})
    print(result.status.value, result.run_id, flush=True)


if __name__ == "__main__":
    main()
