"""The three selection forms and the rules planning enforces before any body runs."""

import datetime as dt

from partita import AssetRegistry, DatePartitionDef, Flow, PartitaError, StaticPartitionDef, asset

registry = AssetRegistry()
days = DatePartitionDef()


@asset(partition_def=days, registry=registry)
def extract(context) -> str:
    return f"rows of {context.partition_key}"


@asset(partition_def=days, registry=registry)
def load(extract: str) -> int:
    return len(extract)


@asset(registry=registry)
def refresh_dashboard(load: dict) -> int:
    return len(load)


@asset(registry=registry)
def housekeeping() -> str:  # unpartitioned, with no partitioned upstream
    return "done"


@asset(partition_def=StaticPartitionDef("regions", ["eu", "us"]), registry=registry)
def regional(housekeeping: str) -> str:
    return housekeeping


flow = Flow(["refresh_dashboard"], registry=registry)


def show(label, config, targets=None):
    chosen = flow if targets is None else Flow(targets, registry=registry)
    try:
        plan = chosen.plan(config)
    except PartitaError as error:
        print(f"{label}: {type(error).__name__}: {error}")
    else:
        print(f"{label}: {plan.selection_kind.value}, {plan.key_count} keys, {plan.attempt_count} attempts")


# The three forms.
show("keys", {"partition_keys": ["2026-08-08", "2026-08-09"]})
show("range", {"partition_range": ("2026-08-08", "2026-08-14")})
show("empty", {"empty_partitions": True})

# A range from Python: DatePartitionDef.range() returns normalized dates.
week = days.range("2026-08-08", "2026-08-14")
show("range() as keys", {"partition_keys": week})

# Duplicates after normalization are selected once; the first occurrence wins.
plan = flow.plan({"partition_keys": ["2026-08-09", dt.date(2026, 8, 9), "2026-08-08"]})
print("deduplicated:", [key.isoformat() for key in plan.partition_keys])

# The rules.
show("no selector", {})
show("two forms", {"partition_keys": ["2026-08-08"], "empty_partitions": True})
show("unpartitioned closure", {"partition_keys": ["2026-08-08"]}, targets=["housekeeping"])
show("unpartitioned, no selector", {}, targets=["housekeeping"])
show("two domains", {"partition_keys": ["2026-08-08"]}, targets=["refresh_dashboard", "regional"])
show("bad key", {"partition_keys": ["2026-08-08", "tenant-4711"]})
show("unknown field", {"partition_key": ["2026-08-08"]})

# Deliberately empty work: partitioned tasks are skipped with no_partition_keys.
result = flow.run({"empty_partitions": True})
for task in result.tasks.values():
    reasons = {attempt.reason.value for attempt in task.attempts if attempt.reason}
    reason = task.reason.value if task.reason else ",".join(sorted(reasons))
    print(f"empty run: {task.asset_name} {task.status.value} ({reason}), {len(task.attempts)} attempts")

# The portable plan document carries kinds and counts, never the keys.
document = flow.plan({"partition_keys": ["2026-08-08"]}).to_json()
print("plan document contains the key:", "2026-08-08" in document)
