"""A first partitioned asset: one attempt per selected calendar day.

Run it as a script, or use it as a CLI entry:

    partita partitions examples/first_asset.py
    partita plan examples/first_asset.py --partition-key 2026-08-08
    partita run examples/first_asset.py --partition-key 2026-08-08 --yes
"""

import datetime as dt

from partita import AssetContext, DatePartitionDef, Flow, asset

days = DatePartitionDef(start="2026-01-01")


@asset(partition_def=days)
def daily_visits(context: AssetContext) -> int:
    day: dt.date = context.partition_key  # already a datetime.date
    return 100 + day.day  # stand-in for counting that day's visits


flow = Flow(["daily_visits"])

if __name__ == "__main__":
    plan = flow.plan({"partition_keys": ["2026-08-08", "2026-08-09"]})
    print(plan.to_json())  # reviewable before anything runs
    result = flow.run(plan)  # runs exactly this plan
    print("run status:", result.status.value)
    for attempt in result.tasks["daily_visits"].attempts:
        print(attempt.partition_key.isoformat(), attempt.status.value, attempt.output)
