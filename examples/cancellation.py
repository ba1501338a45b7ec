"""Cancelling a run: cancel the task awaiting run_async and read the cancelled result from RunFinished."""

import asyncio
import time

from partita import AssetRegistry, AttemptStarted, Flow, RunFinished, StaticPartitionDef, asset

registry = AssetRegistry()
shards = StaticPartitionDef("shards", ["s1", "s2"])


@asset(partition_def=shards, registry=registry)
def compress(context) -> str:  # sync body on a worker thread: it cannot be interrupted
    time.sleep(0.3)
    return f"{context.partition_key}.gz"


@asset(partition_def=shards, registry=registry)
async def upload(context) -> str:  # async body on the event loop: cancelled at once
    await asyncio.sleep(60)
    return f"uploaded {context.partition_key}"


@asset(registry=registry)
def report(compress: dict, upload: dict) -> str:
    return f"{len(compress)} compressed, {len(upload)} uploaded"


flow = Flow(["report"], registry=registry, cancel_grace_seconds=5.0)


class Outcome:
    """Observer: notices when every body is running and keeps the final result."""

    def __init__(self, bodies: int):
        self.bodies = bodies
        self.all_running = asyncio.Event()
        self.result = None

    def on_event(self, event):
        if isinstance(event, AttemptStarted):
            self.bodies -= 1
            if self.bodies == 0:
                self.all_running.set()
        elif isinstance(event, RunFinished):
            self.result = event.result  # also delivered for a cancelled run


async def main() -> None:
    outcome = Outcome(bodies=4)  # compress and upload for both shards
    running = asyncio.create_task(flow.run_async({"partition_keys": ["s1", "s2"]}, observers=[outcome]))
    await outcome.all_running.wait()
    running.cancel()
    try:
        await running
    except asyncio.CancelledError:
        print("run_async raised CancelledError")

    result = outcome.result
    print("run status:", result.status.value)
    for attempt in result.attempts():
        key = attempt.partition_key if attempt.partition_key_present else "-"
        detail = attempt.output if attempt.reason is None else f"reason: {attempt.reason.value}"
        print(" ", attempt.asset_name, key, attempt.status.value, detail)


if __name__ == "__main__":
    asyncio.run(main())
