"""What a new store costs: creating its schema, and a first command on it.

    python benchmarks/new_store.py [--stores 40] [--commands 5]

Figures, each a median: ``open_store`` on a new SQLite file in a process
that has opened one before (the schema's creation alone); then
``partita run examples/quickstart.py`` over three days as a subprocess, on a
new store and again on the store it left (the difference is what a first
command pays for the store). The subprocesses alternate, so a busy moment
of the machine weighs on both.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from partita.store import open_store

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "quickstart.py"
COMMAND = ["-m", "partita", "run", str(EXAMPLE), "--partition-range", "2026-08-08", "2026-08-10", "--yes"]


def new_store_ms(stores: int) -> float:
    """Median milliseconds to open (create) a store on a new SQLite file."""
    with tempfile.TemporaryDirectory() as folder:
        open_store(f"sqlite:///{folder}/warm.db").close()  # imports and first connection out of the figure
        times = []
        for index in range(stores):
            began = time.perf_counter()
            open_store(f"sqlite:///{folder}/s{index}.db").close()
            times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def _command_seconds(folder: Path) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, *COMMAND], cwd=folder, check=True, capture_output=True)
    return time.perf_counter() - began


def first_command_seconds(commands: int) -> tuple[float, float]:
    """Median seconds of the example's run as a subprocess: on a new store, and on the store it left."""
    fresh, again = [], []
    for _ in range(commands):
        folder = Path(tempfile.mkdtemp(prefix="partita-bench-"))
        try:
            fresh.append(_command_seconds(folder))
            again.append(_command_seconds(folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return statistics.median(fresh), statistics.median(again)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", type=int, default=40, help="new stores opened in one process (default 40)")
    parser.add_argument("--commands", type=int, default=5, help="pairs of example runs (default 5)")
    args = parser.parse_args()
    print(f"new_store sqlite median_ms={new_store_ms(args.stores):.1f} stores={args.stores}")
    fresh, again = first_command_seconds(args.commands)
    print(
        f"first_command quickstart new_store_s={fresh:.3f} existing_store_s={again:.3f} "
        f"difference_s={fresh - again:.3f} pairs={args.commands}"
    )


if __name__ == "__main__":
    main()
