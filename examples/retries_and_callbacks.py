"""RetryPolicy with backoff, lifecycle callbacks, and an observer that counts execution events.

Retry delays are waited on an injected FastForwardClock, so the example runs
instantly; ``clock.sleeps`` lists the delays the engine asked for.
"""

import collections

from partita import AssetRegistry, CallbackContext, FastForwardClock, Flow, RetryPolicy, StaticPartitionDef, asset

registry = AssetRegistry()
feeds = StaticPartitionDef("feeds", ["news", "sports", "weather"])
retry_policy = RetryPolicy(max_attempts=4, delay=1.0, backoff=2.0, max_delay=3.0)
notes: list[str] = []  # what the asset callbacks saw


def note_retry(context: CallbackContext) -> None:
    notes.append(
        f"on_retry   {context.asset_name} {context.partition_key} "
        f"invocation {context.invocation_number} raised {context.exception!r}"
    )


def note_failure(context: CallbackContext) -> None:
    notes.append(
        f"on_failure {context.asset_name} {context.partition_key} gave up after invocation {context.invocation_number}"
    )


def page_on_call(context: CallbackContext) -> None:
    raise RuntimeError("the pager service is offline")  # a broken callback changes no outcome


def summarize(context: CallbackContext) -> None:
    counts = {status.value: n for status, n in context.result.counts().items() if n}
    print(f"on_complete run status {context.result.status.value}, attempts {counts}")


@asset(partition_def=feeds, registry=registry, retry=retry_policy, on_retry=note_retry, on_failure=note_failure)
async def headlines(context) -> list[str]:
    feed = context.partition_key
    if feed == "sports" and context.invocation_number < 3:
        raise TimeoutError("feed server timed out")  # recovers on the third invocation
    if feed == "weather":
        raise TimeoutError("feed server timed out")  # never recovers
    return [f"{feed}: top story"]


class EventCounter:
    """Observer: counts execution events by type."""

    def __init__(self):
        self.counts = collections.Counter()

    def on_event(self, event) -> None:
        self.counts[type(event).__name__] += 1


clock = FastForwardClock()
flow = Flow(["headlines"], registry=registry, clock=clock, on_failure=page_on_call, on_complete=summarize)

if __name__ == "__main__":
    print("backoff schedule:", [retry_policy.delay_before(n) for n in (2, 3, 4)])

    counter = EventCounter()
    result = flow.run({"partition_keys": list(feeds.keys)}, observers=[counter])
    for attempt in result.tasks["headlines"].attempts:
        outcomes = ["ok" if invocation.succeeded else "failed" for invocation in attempt.invocations]
        print(attempt.partition_key, attempt.status.value, "invocations:", outcomes)
    print("failed keys:", result.failed_partition_keys("headlines"))  # sports recovered: not failed
    print("delays waited:", sorted(clock.sleeps))
    print("\n".join(sorted(notes)))
    for error in result.callback_errors:
        print("callback error:", error.callback, error.failure.type, error.failure.message)
    print("events:", dict(sorted(counter.counts.items())))
