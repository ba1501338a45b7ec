"""FileMaterialization commit and load throughput for small JSON outputs.

Prints one line per figure: workload, size, median ops/s over several runs,
unit, and the ratio to a plain-Python baseline measured right before it in
the same run (median over runs, with the lowest and highest; the machine is
shared and noisy, so compare ratios, not absolute figures):

- commit: ``FileMaterialization.commit`` of one small dict per key, against
  ``json.dumps`` + write a temporary file + fsync + ``os.replace``;
- commit, N writers: the same with ``--writers`` threads committing at once
  (as a flow whose ``max_concurrency`` lets several attempts commit), against
  the baseline with as many threads;
- resolve+load: what a materialized attempt costs (``resolve`` then
  ``load``), against reading the file + SHA-256 + ``json.loads``;
- load: ``load`` alone, of records resolved beforehand by another adapter
  instance (so every manifest is read and checked again), same baseline.

Run by hand:

    python benchmarks/materialization.py [--operations 2000] [--repeat 5] [--writers 4] [--dir PATH]

``--dir`` chooses where the temporary stores live (default: the system's
temporary folder); fsync costs depend entirely on that filesystem.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from partita import DatePartitionDef, FileMaterialization, MaterializationContext

days = DatePartitionDef()


def sample_output(number: int) -> dict:
    """About 200 bytes of JSON."""
    return {
        "day": f"2026-08-{number % 28 + 1:02d}",
        "orders": 40 + number % 7,
        "revenue_cents": 123_456 + number,
        "currency": "EUR",
        "regions": {"north": 12, "south": 9, "east": 11, "west": 8},
        "top_products": ["tea", "coffee", "cocoa", "biscuits"],
        "complete": True,
        "notes": "small daily summary",
    }


def contexts_for(count: int) -> list[MaterializationContext]:
    start = dt.date(1900, 1, 1)
    contexts = []
    for offset in range(count):
        key = start + dt.timedelta(days=offset)
        contexts.append(
            MaterializationContext(
                asset_name="daily_summary",
                version="1",
                partition_domain=days.domain,
                partition_key=key,
                partition_key_text=days.format_key(key),
                partition_key_present=True,
            )
        )
    return contexts


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def in_threads(action: Callable[[int], None], count: int, writers: int) -> float:
    """Time ``action(0..count-1)``, sequentially (one writer) or spread over ``writers`` threads."""
    if writers == 1:
        return timed(lambda: [action(number) for number in range(count)])
    with ThreadPoolExecutor(writers) as pool:
        return timed(lambda: list(pool.map(action, range(count))))


def adapter_commit(root: Path, contexts: list[MaterializationContext], outputs: list[dict], writers: int = 1) -> float:
    store = FileMaterialization(root)
    return in_threads(lambda number: store.commit(contexts[number], outputs[number]), len(outputs), writers)


def baseline_commit(root: Path, outputs: list[dict], writers: int = 1) -> float:
    root.mkdir(parents=True)

    def commit(number: int) -> None:
        path = root / f"{number}.json"
        temporary = root / f".{number}.json.tmp"
        with open(temporary, "xb") as handle:
            handle.write(json.dumps(outputs[number], separators=(",", ":")).encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)

    return in_threads(commit, len(outputs), writers)


def adapter_resolve_and_load(root: Path, contexts: list[MaterializationContext]) -> float:
    store = FileMaterialization(root)

    def run() -> None:
        for context in contexts:
            record = store.resolve(context)
            assert record is not None
            store.load(context, record)

    return timed(run)


def adapter_load(root: Path, contexts: list[MaterializationContext]) -> float:
    # Resolved by another instance: the loading one has no manifest handed over and reads each one.
    records = [FileMaterialization(root).resolve(context) for context in contexts]
    store = FileMaterialization(root)

    def run() -> None:
        for context, record in zip(contexts, records, strict=True):
            assert record is not None
            store.load(context, record)

    return timed(run)


def baseline_load(root: Path, count: int, digests: list[str]) -> float:
    def run() -> None:
        for number in range(count):
            data = (root / f"{number}.json").read_bytes()
            if hashlib.sha256(data).hexdigest() != digests[number]:
                raise AssertionError("baseline payload changed")
            json.loads(data)

    return timed(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--operations", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--writers", type=int, default=4, help="threads for the concurrent commit figure")
    parser.add_argument("--dir", type=Path, default=None, help="where temporary stores are created")
    args = parser.parse_args()

    count = args.operations
    contexts = contexts_for(count)
    outputs = [sample_output(number) for number in range(count)]
    size = statistics.median(len(json.dumps(output, separators=(",", ":"))) for output in outputs)
    digests = [hashlib.sha256(json.dumps(o, separators=(",", ":")).encode()).hexdigest() for o in outputs]

    seconds: dict[str, list[float]] = {
        name: [] for name in ("commit", "base_commit", "commit_n", "base_commit_n", "resolve_load", "load", "base_load")
    }
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(dir=args.dir) as folder:
            store_root, plain_root = Path(folder) / "store", Path(folder) / "plain"
            seconds["base_commit"].append(baseline_commit(plain_root, outputs))
            seconds["commit"].append(adapter_commit(store_root, contexts, outputs))
            seconds["base_load"].append(baseline_load(plain_root, count, digests))
            seconds["resolve_load"].append(adapter_resolve_and_load(store_root, contexts))
            seconds["load"].append(adapter_load(store_root, contexts))
            writers = args.writers
            seconds["base_commit_n"].append(baseline_commit(Path(folder) / "plain-n", outputs, writers))
            seconds["commit_n"].append(adapter_commit(Path(folder) / "store-n", contexts, outputs, writers))

    def rate(name: str) -> float:
        return count / statistics.median(seconds[name])

    def ratios(name: str, baseline: str) -> list[float]:
        """Adapter against baseline within each run: both measured back to back, so drift cancels."""
        return sorted(base / took for base, took in zip(seconds[baseline], seconds[name], strict=True))

    figures = [
        ("commit FileMaterialization", rate("commit"), ratios("commit", "base_commit")),
        ("commit baseline (dumps+write+fsync+replace)", rate("base_commit"), None),
        (f"commit FileMaterialization, {args.writers} writers", rate("commit_n"), ratios("commit_n", "base_commit_n")),
        (f"commit baseline, {args.writers} writers", rate("base_commit_n"), None),
        ("resolve+load FileMaterialization", rate("resolve_load"), ratios("resolve_load", "base_load")),
        ("load FileMaterialization", rate("load"), ratios("load", "base_load")),
        ("load baseline (read+sha256+loads)", rate("base_load"), None),
    ]
    where = args.dir or Path(tempfile.gettempdir())
    print(f"# {count} operations of a {size:.0f}-byte JSON dict, median of {args.repeat} runs, under {where}")
    print("# ratio: median of the per-run ratios to the baseline, [lowest-highest] across runs")
    for workload, value, per_run in figures:
        ratio = "1.00" if per_run is None else f"{statistics.median(per_run):.2f} [{per_run[0]:.2f}-{per_run[-1]:.2f}]"
        print(f"{workload:<46} ops={count:<6} size={size:.0f}B  median={value:>10,.0f}  unit=ops/s  ratio={ratio}")


if __name__ == "__main__":
    main()
