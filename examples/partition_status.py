"""Partition status: which keys of an asset are materialized, failed, running or missing.

Run as a script, this file records two runs in a temporary store (the first
fails one day, the second reruns it) and reads each key's state back with
``partita.partition_status``. ``partita status ENTRY`` prints the same.
"""

import tempfile

import partita
from partita import AssetRegistry, DatePartitionDef, Flow, KeyState, asset

registry = AssetRegistry()
days = DatePartitionDef(start="2026-08-01")
late_exports = {"2026-08-09"}  # days whose export has not arrived yet


@asset(partition_def=days, registry=registry)
def exports(context) -> int:
    if context.partition_key.isoformat() in late_exports:
        raise FileNotFoundError("the export for this day has not arrived")
    return 10 * context.partition_key.day


flow = Flow(["exports"], registry=registry)  # what `partita status examples/partition_status.py` reads


def report(recorded: Flow) -> None:
    status = partita.partition_status(recorded, "exports", {"partition_range": ("2026-08-07", "2026-08-11")})
    counts = {state.value: count for state, count in status.counts.items()}
    print(f"{status.asset}: {status.scope.description}: {counts}")
    print(f"failed: {list(status.keys_in(KeyState.FAILED))} missing: {list(status.keys_in(KeyState.MISSING))}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        # Failed keys need recorded keys; materialized keys come from outlet events either way.
        recorded = flow.with_store(f"sqlite:///{folder}/status.db", record_partition_keys=True)
        first = recorded.run({"partition_range": ("2026-08-08", "2026-08-10")})
        report(recorded)
        late_exports.clear()  # the export arrived: rerun the failed day
        recorded.run({"partition_keys": first.failed_partition_keys("exports")})
        report(recorded)
