"""The README's example flow: three days of events, a daily total, one report."""

from partita import AssetContext, DatePartitionDef, Flow, asset

days = DatePartitionDef()


@asset(partition_def=days)
def raw_events(context: AssetContext) -> list[int]:
    return [context.partition_key.day] * 3  # one list per selected day


@asset(partition_def=days)
def daily_total(raw_events: list[int]) -> int:  # receives the same day's output
    return sum(raw_events)


@asset
def report(daily_total: dict) -> str:  # unpartitioned: gets every selected day
    return ", ".join(f"{day}: {total}" for day, total in daily_total.items())


flow = Flow(["report"])

if __name__ == "__main__":
    plan = flow.plan({"partition_range": ("2026-08-08", "2026-08-10")})
    print(plan.to_json())  # kinds and counts, never raw keys
    result = flow.run(plan)  # runs exactly the reviewed plan
    print(result.status, result.failed_partition_keys("daily_total"))
    print(result.output("report"))
