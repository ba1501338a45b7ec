"""Sync and async bodies in one flow, bounded by max_concurrency."""

import asyncio
import threading
import time

from partita import AssetRegistry, Flow, StaticPartitionDef, asset

registry = AssetRegistry()
shops = StaticPartitionDef("shops", ["berlin", "lisbon", "oslo", "rome", "vienna", "zurich"])
lock = threading.Lock()
running = peak = 0


@asset(partition_def=shops, registry=registry)
def stock_level(context) -> int:  # sync body: runs in a worker thread
    global running, peak
    with lock:
        running += 1
        peak = max(peak, running)
    time.sleep(0.05)  # stand-in for blocking I/O
    with lock:
        running -= 1
    return 10 * len(context.partition_key)


@asset(partition_def=shops, registry=registry)
async def reorder(stock_level: int) -> int:  # async body: awaited on the event loop
    await asyncio.sleep(0.01)
    return max(0, 60 - stock_level)


flow = Flow(["reorder"], registry=registry, max_concurrency=2)
every_shop = {"partition_keys": list(shops.keys)}

plan = flow.plan(every_shop)
print("planned max_concurrency:", plan.to_dict()["options"]["max_concurrency"])
result = flow.run(plan)
print("orders:", {attempt.partition_key: attempt.output for attempt in result.tasks["reorder"].attempts})
print("at most 2 bodies at once:", peak <= 2)

peak = 0
wider = flow.plan({**every_shop, "max_concurrency": 6})  # a run can override the flow's limit
print("overridden max_concurrency:", wider.to_dict()["options"]["max_concurrency"])
flow.run(wider)
print("at most 6 bodies at once:", peak <= 6)


async def main() -> None:
    # Inside a running event loop, await run_async instead of calling run().
    outcome = await flow.run_async({"partition_keys": ["oslo"]})
    print("run_async status:", outcome.status.value)


asyncio.run(main())
print("reorder is still a plain coroutine function:", asyncio.run(reorder(25)))
