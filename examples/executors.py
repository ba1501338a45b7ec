"""Executors: worker processes for CPU-bound bodies, and a small custom Executor."""

import collections
import os
import threading

from partita import AssetRegistry, Flow, InProcessExecutor, StaticPartitionDef, asset

registry = AssetRegistry()
chunks = StaticPartitionDef("chunks", ["c1", "c2", "c3"])


@asset(partition_def=chunks, registry=registry)
def checksum(context) -> tuple[int, int]:  # CPU-bound; module level, so it can be pickled
    size = 100_000 * int(context.partition_key[1:])
    return os.getpid(), sum(i * i % 7 for i in range(size))


@asset(registry=registry)
def total(checksum: dict) -> int:
    return sum(value for _, value in checksum.values())


@asset(registry=registry)
def lock_holder() -> threading.Lock:
    return threading.Lock()  # cannot be pickled: fails under executor="process"


class CountingExecutor:
    """An Executor that hands each body to the in-process executor and counts them."""

    runs_async_bodies = False  # async bodies stay on the event loop

    def __init__(self):
        self.inner = InProcessExecutor()
        self.submitted = collections.Counter()

    def start(self, loop, deliver, max_workers):
        self.inner.start(loop, deliver, max_workers)

    def submit(self, token, fn, kwargs, asset_name, emitter=None):
        self.submitted[asset_name] += 1
        self.inner.submit(token, fn, kwargs, asset_name, emitter)

    def shutdown(self, wait=None):
        return self.inner.shutdown(wait)


selection = {"partition_keys": list(chunks.keys)}

if __name__ == "__main__":
    in_processes = Flow(["total"], registry=registry, executor="process")
    result = in_processes.run(selection)
    pids = {pid for pid, _ in (attempt.output for attempt in result.tasks["checksum"].attempts)}
    print("process executor:", result.status.value, "total", result.output("total"))
    print("checksum bodies ran in this process:", os.getpid() in pids)

    unpicklable = Flow(["lock_holder"], registry=registry, executor="process").run()
    failure = unpicklable.tasks["lock_holder"].attempts[0].failure
    print("unpicklable output:", failure.type, "-", failure.message)

    counting = CountingExecutor()
    result = Flow(["total"], registry=registry, executor=counting).run(selection)
    print("custom executor:", result.status.value, "total", result.output("total"))
    print("bodies submitted:", dict(counting.submitted))
