"""The engine_overhead workload on kazeflow 0.1.0a5 and on partita, same run.

A three-asset daily chain with no-op sync bodies, N selected keys. kazeflow is
installed with pip into a throwaway virtual environment; both libraries run
in fresh subprocesses (plan + run inside the timed region), median of
``--repeat`` runs. Prints one line per N with both figures and the ratio.

    python benchmarks/peers/kazeflow_chain.py [--sizes 100 1000 3000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import venv
from pathlib import Path

KAZEFLOW = "kazeflow==0.1.0a5"

WORKLOAD = textwrap.dedent(
    """
    import datetime as dt, json, sys, time
    size = int(sys.argv[1])
    start = dt.date(1800, 1, 1)
    keys = [(start + dt.timedelta(days=i)).isoformat() for i in range(size)]
    {setup}
    def extract():
        return None
    def transform(extract):
        return None
    def publish(transform):
        return None
    {register}
    began = time.perf_counter()
    {execute}
    elapsed = time.perf_counter() - began
    print(json.dumps({{"seconds": elapsed}}))
    """
)

KAZEFLOW_PARTS = {
    "setup": "from kazeflow import DatePartitionDef, asset, run\ndays = DatePartitionDef()",
    "register": "\n".join(
        [
            "extract = asset(partition_def=days)(extract)",
            "transform = asset(partition_def=days)(transform)",
            "publish = asset(partition_def=days)(publish)",
        ]
    ),
    "execute": "result = run(['publish'], {'partition_keys': keys})",
}

PARTITA_PARTS = {
    "setup": "from partita import DatePartitionDef, Flow, asset\ndays = DatePartitionDef()",
    "register": "\n".join(
        [
            "extract = asset(partition_def=days)(extract)",
            "transform = asset(partition_def=days)(transform)",
            "publish = asset(partition_def=days)(publish)",
        ]
    ),
    "execute": "result = Flow(['publish']).run({'partition_keys': keys}); assert result.succeeded",
}


def script(parts: dict[str, str]) -> str:
    return WORKLOAD.format(**parts)


def timed(python: str, source: str, size: int) -> float:
    completed = subprocess.run(
        [python, "-c", source, str(size)], capture_output=True, text=True, check=False, timeout=3600
    )
    if completed.returncode != 0:
        raise RuntimeError(f"workload failed (N={size}):\n{completed.stderr[-2000:]}")
    return float(json.loads(completed.stdout.strip().splitlines()[-1])["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 3_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kazeflow-peer-") as folder:
        environment = Path(folder) / "venv"
        venv.create(environment, with_pip=True)
        peer_python = str(environment / "bin" / "python")
        subprocess.run([peer_python, "-m", "pip", "install", "-q", KAZEFLOW], check=True)
        kazeflow_source, partita_source = script(KAZEFLOW_PARTS), script(PARTITA_PARTS)
        for size in args.sizes:
            attempts = 3 * size
            peer = statistics.median(timed(peer_python, kazeflow_source, size) for _ in range(args.repeat))
            ours = statistics.median(timed(sys.executable, partita_source, size) for _ in range(args.repeat))
            print(
                f"kazeflow_chain keys={size} attempts={attempts} "
                f"kazeflow_us_per_attempt={peer / attempts * 1e6:.1f} "
                f"partita_us_per_attempt={ours / attempts * 1e6:.1f} "
                f"ratio_kazeflow_over_partita={peer / ours:.1f} runs={args.repeat}"
            )


if __name__ == "__main__":
    main()
