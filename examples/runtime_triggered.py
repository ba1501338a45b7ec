"""Runtime-triggered consumer: each key a producer discovers starts a consumer run.

`warehouses` is a discovering producer of the runtime domain
``runtime:warehouses``: it reads which warehouses exist and declares one key
per warehouse. Every declared key is stored as a discovery event of the
asset `warehouses`. The consumer flow `stock_check` declares
``OnAssetEvents(["warehouses"])`` and is partitioned by the same runtime
domain, so each discovery event starts one consumer run for its key.

    python examples/runtime_triggered.py [--store URL]
    partita run examples/runtime_triggered.py --yes
    partita trigger examples/runtime_triggered.py --once

``--store`` defaults to a new temporary SQLite file, printed first.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

from partita import AssetContext, Flow, PartitionAtRuntime, PartitionDef, PartitionKey, asset, open_store
from partita.automation.daemon import TriggerDaemon
from partita.automation.triggers import OnAssetEvents

warehouse_partitions = PartitionAtRuntime("warehouses", max_keys=50)
WAREHOUSES = {"hamburg": 1200, "lyon": 800}  # what the inventory system lists right now (name: pallets)


@asset(partition_def=warehouse_partitions)
def warehouses(context: AssetContext) -> dict[str, int]:
    """Discovering producer: one key per warehouse, with its pallet count as event metadata."""
    names = sorted(WAREHOUSES)
    context.partition_keys = [PartitionKey(name, extra={"pallets": WAREHOUSES[name]}) for name in names]
    return {name: WAREHOUSES[name] for name in names}


class WarehouseKeys(PartitionDef):
    """The consumer's keys: the warehouse names the producer discovers (lower-case slugs)."""

    kind = "warehouse"
    key_format = "a lower-case warehouse name"

    @property
    def domain(self) -> str:
        return "warehouse"

    def normalize_key(self, key):
        if not isinstance(key, str) or re.fullmatch(r"[a-z][a-z0-9-]{0,39}", key) is None:
            raise ValueError("warehouse keys are lower-case names")
        return key


@asset(partition_def=WarehouseKeys())
def stock_check(context: AssetContext) -> str:
    """The consumer: one run per discovery event of its key."""
    (event,) = context.triggering_events
    line = (
        f"stock_check {context.partition_key}: {event.extra['pallets']} pallets "
        f"(event {event.id}, {event.source.kind.value} of {event.source.asset})"
    )
    print(line)
    return line


flow = Flow(["warehouses"])  # the producer: what `partita run examples/runtime_triggered.py` runs
stock_checks = Flow(["stock_check"], name="stock_check", trigger=OnAssetEvents(["warehouses"]))


def main() -> None:
    parser = argparse.ArgumentParser(description="Start one consumer run per discovered warehouse.")
    parser.add_argument("--store", metavar="URL", help="store URL (default: a new temporary SQLite file)")
    args = parser.parse_args()
    url = args.store or f"sqlite:///{Path(tempfile.mkdtemp(prefix='partita-warehouses-')) / 'partita.db'}"
    print(f"store: {url}")
    store = open_store(url)
    try:
        first = Flow(["warehouses"], store=store).run()
        print(f"producer run 1: {first.status.value}, discovered {list(first.discovered_partition_keys('warehouses'))}")
        started = TriggerDaemon([stock_checks], store, max_in_flight=1).run_once()
        print(f"trigger pass: started {started} consumer runs")

        WAREHOUSES["oslo"] = 300  # a new warehouse opens
        second = Flow(["warehouses"], store=store).run()
        print(f"producer run 2: {second.status.value}, discovered {list(second.discovered_partition_keys('warehouses'))}")
        started = TriggerDaemon([stock_checks], store, max_in_flight=1).run_once()
        print(f"trigger pass: started {started} consumer runs (each discovery event is new)")
        print(f"nothing left: started {TriggerDaemon([stock_checks], store).run_once()}")
    finally:
        store.close()


if __name__ == "__main__":
    main()
