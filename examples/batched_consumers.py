"""Batched consumer runs: a producer announces 50 keys; the consumer serves them 20 keys a run.

``max_keys_per_run=20`` makes the trigger start the due keys as attempts of
one run, up to 20 keys a run, instead of a run per key. Each key is still
its own request, started once, and each attempt sees only its own key's
triggering events.

    python examples/batched_consumers.py
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from partita import AssetContext, Flow, OnAssetEvents, StaticPartitionDef, asset, open_store
from partita.automation.daemon import TriggerDaemon

shards = StaticPartitionDef("shards", [f"shard-{index:02d}" for index in range(50)])
runs_seen: Counter[str] = Counter()
own_events = []


@asset(partition_def=shards)
def landed_shard() -> None:
    """Announced by `announce_shards`; never runs itself."""


@asset
def announce_shards(context: AssetContext) -> int:
    for key in shards.keys:
        context.emit("landed_shard", partition_key=key)
    return len(shards.keys)


@asset(partition_def=shards)
def indexed_shard(context: AssetContext) -> None:
    runs_seen[context.run_id] += 1
    own_events.append([event.partition_key for event in context.triggering_events] == [context.partition_key])


flow = Flow(["announce_shards"])  # the producer
index_shards = Flow(
    ["indexed_shard"], name="index_shards", trigger=OnAssetEvents(["landed_shard"], max_keys_per_run=20)
)


def main() -> None:
    url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='partita-batched-')) / 'partita.db'}"
    store = open_store(url)
    try:
        Flow(["announce_shards"], store=store).run()
        started = TriggerDaemon([index_shards], store, max_in_flight=1).run_once()
        print(f"consumer runs: {started} for {sum(runs_seen.values())} keys")
        print(f"keys per run: {sorted(runs_seen.values(), reverse=True)}")
        print(f"every attempt saw only its own key's event: {all(own_events)}")
        print(f"a second pass starts: {TriggerDaemon([index_shards], store).run_once()} runs")
    finally:
        store.close()


if __name__ == "__main__":
    main()
