"""Per-key outcomes: a failed day, the work it blocked, and a deliberate follow-up run."""

from partita import AssetRegistry, DatePartitionDef, Flow, asset

registry = AssetRegistry()
days = DatePartitionDef()
not_ready = {"2026-08-09"}  # days whose source export has not arrived yet


@asset(registry=registry)
def prices() -> dict[str, float]:
    return {"tea": 2.5, "cake": 4.0}


@asset(partition_def=days, registry=registry)
def sales(context) -> dict[str, int]:
    if context.partition_key.isoformat() in not_ready:
        raise RuntimeError("the export for this day has not arrived")
    return {"tea": 10, "cake": 3}


@asset(partition_def=days, registry=registry)
def revenue(sales: dict[str, int], prices: dict[str, float]) -> float:
    return sum(prices[item] * count for item, count in sales.items())


@asset(registry=registry)
def report(revenue: dict) -> str:
    return f"{len(revenue)} days, {sum(revenue.values()):.2f} total"


flow = Flow(["report"], registry=registry)
result = flow.run({"partition_range": ("2026-08-08", "2026-08-10")})
print("run status:", result.status.value)
for task in result.tasks.values():
    for attempt in task.attempts:
        key = attempt.partition_key.isoformat() if attempt.partition_key_present else "-"
        line = [task.asset_name, key, attempt.status.value]
        if attempt.reason is not None:
            blockers = ",".join(blocker.asset_name for blocker in attempt.blocked_by)
            line += [attempt.reason.value, f"blocked by {blockers}"]
        print(" ".join(line))

failed = result.failed_partition_keys("sales")
print("failed sales keys:", [key.isoformat() for key in failed])
print("failed revenue keys:", result.failed_partition_keys("revenue"))  # skipped, not failed
failure = result.tasks["sales"].attempts[1].failure
print("failure:", failure.type, "-", failure.message)

# Re-running is an explicit decision: the export arrived, select exactly those keys.
not_ready.clear()
follow_up = Flow(["revenue"], registry=registry).run({"partition_keys": failed})
print("follow-up status:", follow_up.status.value, "attempts:", len(follow_up.tasks["revenue"].attempts))

try:
    result.failed_partition_keys("report")
except ValueError as error:
    print("ValueError:", error)
