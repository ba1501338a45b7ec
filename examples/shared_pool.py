"""A shared resource pool: one limit for every run and every process using the store.

Two runs of one flow (on two threads here; two processes or two machines on
one PostgreSQL store behave the same) draw from the pool ``warehouse_api``
of 2 slots, so at most two bodies call the API at once between them. The
store is a temporary SQLite file unless PARTITA_STORE names one.
``partita pools examples/shared_pool.py`` lists the pool's holders.
"""

import os
import tempfile
import threading
import time

from partita import AssetRegistry, Flow, ResourcePolicy, StaticPartitionDef, asset

registry = AssetRegistry()
stores = StaticPartitionDef("stores", ["berlin", "lisbon", "oslo", "rome", "vienna", "zurich"])
lock = threading.Lock()
calls = {"inside": 0, "most": 0}


@asset(partition_def=stores, resource="warehouse_api", registry=registry)
def stock(context) -> int:
    with lock:
        calls["inside"] += 1
        calls["most"] = max(calls["most"], calls["inside"])
    time.sleep(0.05)  # the API call
    with lock:
        calls["inside"] -= 1
    return 10 * len(context.partition_key)


warehouse = ResourcePolicy(max_concurrency=2, shared=True)  # the pool is named "warehouse_api"
flow = Flow(["stock"], registry=registry, resources={"warehouse_api": warehouse})

# Two resources, or two flows under different resource names, drawing from one pool:
reporting = ResourcePolicy(max_concurrency=2, shared=True, pool="warehouse_api")


if __name__ == "__main__":
    url = os.environ.get("PARTITA_STORE") or f"sqlite:///{tempfile.mkdtemp()}/partita.db"
    recorded = flow.with_store(url)
    statuses = []
    runs = [
        threading.Thread(target=lambda: statuses.append(recorded.run({"partition_keys": list(stores.keys)})))
        for _ in range(2)
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    print("runs:", ", ".join(result.status.value for result in statuses))
    print("bodies inside at once, at most:", calls["most"])
