"""Declaring a PartitionGroup: an ordered chain of partitioned assets.

Planning checks each group's rules and records the group in the plan; a run
then admits at most max_active_keys selected keys into the chain at once
(see examples/group_admission.py for the order this produces).

    partita plan examples/partition_groups.py --partition-key 2026-08-08 --partition-key 2026-08-09
"""

from partita import DatePartitionDef, Flow, PartitaError, PartitionGroup, asset

days = DatePartitionDef()


@asset(partition_def=days)
def download(context) -> str:
    return f"file for {context.partition_key}"


@asset(partition_def=days)
def parse(download: str) -> list[str]:
    return download.split()


@asset(partition_def=days)
def audit(parse: list[str]) -> int:
    return len(parse)


@asset(partition_def=days)
def publish(parse: list[str], audit: int) -> str:
    return f"{len(parse)} words, audited {audit}"


flow = Flow(["parse"], partition_groups=[PartitionGroup(["download", "parse"], max_active_keys=1)])

if __name__ == "__main__":
    plan = flow.plan({"partition_keys": ["2026-08-08", "2026-08-09"]})
    print("groups:", plan.to_dict()["groups"])
    print("task groups:", {task.name: task.group for task in plan.tasks})

    def check(label, targets, groups):
        try:
            Flow(targets, partition_groups=groups).plan({"partition_keys": ["2026-08-08"]})
            print(f"{label}: ok")
        except PartitaError as error:
            print(f"{label}: {type(error).__name__}: {error}")

    check("whole chain", ["audit"], [PartitionGroup(["download", "parse", "audit"])])
    check("partial selection", ["download"], [PartitionGroup(["download", "parse"])])
    check("not a direct chain", ["audit"], [PartitionGroup(["download", "audit"])])
    check("leaves and re-enters", ["publish"], [PartitionGroup(["parse", "publish"])])
    check("overlapping groups", ["parse"], [PartitionGroup(["download"]), PartitionGroup(["download", "parse"])])
    try:
        PartitionGroup(["download", "parse"], max_active_keys=0)
    except PartitaError as error:
        print(f"declaration: {type(error).__name__}: {error}")
