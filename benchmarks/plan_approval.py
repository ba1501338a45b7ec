"""What checking a plan against the running Flow costs, next to planning itself.

A chain of N date-partitioned assets is written to an entry file and loaded
twice. Figures: planning one key (the baseline); approving the plan on the Flow
that made it (definitions are the same objects); approving it on the Flow
loaded again from the entry (every definition compared by value). Median of
``--repeat`` runs; one line per figure with the ratio to planning.

    python benchmarks/plan_approval.py [--assets 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from partita import Flow
from partita.entry import load_entry
from partita.planning.approval import plan_differences

KEYS = {"partition_keys": ["2026-01-01"]}


def chain_source(count: int) -> str:
    lines = ["from partita import DatePartitionDef, Flow, asset", "DAYS = DatePartitionDef()", ""]
    lines += ["@asset(partition_def=DAYS)", "def a0(context):", "    return 0", ""]
    for index in range(1, count):
        upstream = f"a{index - 1}"
        lines += ["@asset(partition_def=DAYS)", f"def a{index}({upstream}, context):", f"    return {upstream} + 1", ""]
    lines.append(f"flow = Flow(['a{count - 1}'], store=False, max_concurrency=4)")
    return "\n".join(lines)


def median_seconds(work: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        entry = Path(directory) / "chain.py"
        entry.write_text(chain_source(args.assets))
        planner, rebuilt = load_entry(str(entry)), load_entry(str(entry))
    plan = planner.plan(KEYS)

    def approve(flow: Flow) -> Callable[[], object]:
        def check() -> object:
            differences = plan_differences(
                plan,
                registry=flow.registry,
                targets=flow.targets,
                resources=flow.resources,
                partition_groups=flow.partition_groups,
                max_concurrency=flow.max_concurrency,
            )
            assert differences == (), differences
            return differences

        return check

    baseline = median_seconds(lambda: planner.plan(KEYS), args.repeat)
    print(f"plan, {args.assets} assets, one key: {baseline * 1000:.1f} ms (baseline)")
    for label, flow in (("the same Flow", planner), ("a Flow loaded again from the entry", rebuilt)):
        seconds = median_seconds(approve(flow), args.repeat)
        print(f"approve on {label}, {args.assets} assets: {seconds * 1000:.1f} ms ({seconds / baseline:.2f}x planning)")


if __name__ == "__main__":
    main()
