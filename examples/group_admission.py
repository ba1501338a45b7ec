"""Partition-group admission: selected keys move through a chain one at a time.

    partita run examples/group_admission.py --partition-key 2026-08-08 --partition-key 2026-08-09 --yes
"""

import time

from partita import (
    AssetRegistry,
    AttemptFinished,
    AttemptRetrying,
    AttemptStarted,
    DatePartitionDef,
    FastForwardClock,
    Flow,
    PartitionGroup,
    RetryPolicy,
    asset,
)

registry = AssetRegistry()
days = DatePartitionDef()
interrupted_days: set[str] = set()  # days whose first download attempt breaks off


@asset(partition_def=days, registry=registry, retry=RetryPolicy(max_attempts=2, delay=5.0))
def extract_daily(context) -> list[int]:
    time.sleep(0.05)  # stand-in for a download
    if context.partition_key.isoformat() in interrupted_days and context.invocation_number == 1:
        raise ConnectionError("download interrupted")
    return [context.partition_key.day] * 3


@asset(partition_def=days, registry=registry)
def publish_daily(extract_daily: list[int]) -> int:
    time.sleep(0.05)  # stand-in for an upload
    return sum(extract_daily)


chain = PartitionGroup(["extract_daily", "publish_daily"])  # max_active_keys=1
flow = Flow(["publish_daily"], registry=registry, partition_groups=[chain])


class Order:
    """Observer: one line per start, retry and finish, in the order they happen."""

    def __init__(self):
        self.lines = []

    def on_event(self, event):
        if isinstance(event, AttemptStarted):
            again = f" (invocation {event.invocation})" if event.invocation > 1 else ""
            self.lines.append(f"start  {event.asset_name} {event.partition_key}{again}")
        elif isinstance(event, AttemptRetrying):
            self.lines.append(f"retry  {event.asset_name} {event.partition_key} in {event.delay:g}s")
        elif isinstance(event, AttemptFinished):
            attempt = event.attempt
            self.lines.append(f"finish {attempt.asset_name} {attempt.partition_key} {attempt.status.value}")


def active_keys_peak(lines, last_member):
    """Most keys that had started the chain but not yet finished its last member."""
    active, peak = set(), 0
    for line in lines:
        verb, asset_name, key = line.split()[:3]
        if verb == "start":
            active.add(key)
        elif verb == "finish" and asset_name == last_member:
            active.discard(key)
        peak = max(peak, len(active))
    return peak


if __name__ == "__main__":
    selection = {"partition_keys": ["2026-08-08", "2026-08-09"]}

    order = Order()
    flow.run(selection, observers=[order])
    print("\n".join(order.lines))

    # Without the group both keys start at once.
    ungrouped = Order()
    Flow(["publish_daily"], registry=registry).run(selection, observers=[ungrouped])
    second_starts = ungrouped.lines.index("start  extract_daily 2026-08-09")
    first_done = ungrouped.lines.index("finish publish_daily 2026-08-08 success")
    print("without the group, 2026-08-09 starts before 2026-08-08 is published:", second_starts < first_done)

    # A key keeps its slot while it waits for a retry.
    interrupted_days.add("2026-08-08")
    retried = Order()
    Flow(["publish_daily"], registry=registry, partition_groups=[chain], clock=FastForwardClock()).run(
        selection, observers=[retried]
    )
    interrupted_days.clear()
    print("\n".join(retried.lines))

    # max_active_keys=2 lets two keys share the chain; never more.
    wider = Order()
    Flow(["publish_daily"], registry=registry, partition_groups=[PartitionGroup(chain.assets, max_active_keys=2)]).run(
        {"partition_range": ("2026-08-08", "2026-08-11")}, observers=[wider]
    )
    print("max_active_keys=2, keys in the chain at once:", active_keys_peak(wider.lines, "publish_daily"))
