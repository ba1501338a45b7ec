"""A shared API behind a ResourcePolicy: concurrency, a rate window, failure classification.

The flow waits on an injected FastForwardClock, so the 30- and 60-second
waits pass instantly and the printed timeline is the same on every run.
"""

from partita import (
    AssetRegistry,
    AttemptFinished,
    AttemptRetrying,
    AttemptStarted,
    Fail,
    FastForwardClock,
    Flow,
    OpenCircuit,
    RateLimit,
    ResourcePolicy,
    Retry,
    StaticPartitionDef,
    asset,
)

registry = AssetRegistry()
stores = StaticPartitionDef("stores", ["berlin", "lisbon", "oslo", "rome", "vienna", "zurich"])


class Throttled(Exception):
    """The API answered 429 Too Many Requests."""


def classify(error: Exception):
    if isinstance(error, Throttled):
        return Retry(after_seconds=30, cooldown_resource=True)  # every caller backs off
    if isinstance(error, ValueError):
        return Fail()  # a bad request does not improve by repeating it
    return OpenCircuit()  # anything else: treat the API as down


warehouse_api = ResourcePolicy(
    max_concurrency=2,  # at most two calls in flight
    rate_limit=RateLimit(requests=4, per_seconds=60),  # at most four starts per minute
    max_attempts=3,  # invocations per attempt when classify_failure says Retry
    classify_failure=classify,
)


@asset(partition_def=stores, resource="warehouse_api", registry=registry)
async def stock(context) -> int:
    store = context.partition_key
    if store == "lisbon" and context.invocation_number == 1:
        raise Throttled("429 too many requests")
    if store == "rome":
        raise ValueError("400 unknown store code")
    return 10 * len(store)


clock = FastForwardClock()
flow = Flow(["stock"], registry=registry, resources={"warehouse_api": warehouse_api}, clock=clock)


class Timeline:
    """Observer: prints each start, retry and finish with the (virtual) time."""

    def on_event(self, event):
        now = f"t={clock.monotonic():3.0f}s"
        if isinstance(event, AttemptStarted):
            print(now, "start ", event.partition_key, f"(invocation {event.invocation})")
        elif isinstance(event, AttemptRetrying):
            print(now, "retry ", event.partition_key, f"in {event.delay:g}s")
        elif isinstance(event, AttemptFinished):
            print(now, "finish", event.attempt.partition_key, event.attempt.status.value)


if __name__ == "__main__":
    result = flow.run({"partition_keys": list(stores.keys)}, observers=[Timeline()])
    print("run status:", result.status.value)
    print("waits requested from the clock:", clock.sleeps)

    stats = result.resources["warehouse_api"]
    print(f"{stats.name}: {stats.invocations} invocations, {stats.succeeded} succeeded, {stats.failed} failed")
    print(f"retries scheduled: {stats.retries}")
    print(f"admission waits: {stats.wait_count}, {stats.wait_duration:g}s in total")
