"""Partitioned and unpartitioned assets in one flow.

An unpartitioned upstream runs once and every key receives its output; an
unpartitioned downstream runs once and receives a dict of key -> output in
selection order.
"""

from partita import AssetRegistry, DatePartitionDef, Flow, asset

registry = AssetRegistry()
days = DatePartitionDef()


@asset(registry=registry)
def tax_rate() -> float:  # unpartitioned: one attempt per run
    return 0.2


@asset(partition_def=days, registry=registry)
def gross(context) -> float:
    return 100.0 * context.partition_key.day


@asset(partition_def=days, registry=registry)
def net(gross: float, tax_rate: float) -> float:  # same day's gross, the one tax_rate
    return gross * (1 - tax_rate)


@asset(registry=registry)
def summary(net: dict) -> list[str]:  # unpartitioned consumer: every selected day
    return [f"{day.isoformat()}={value:.0f}" for day, value in net.items()]


flow = Flow(["summary"], registry=registry)
result = flow.run({"partition_keys": ["2026-08-10", "2026-08-08", "2026-08-09"]})
print("attempts per asset:", {name: len(task.attempts) for name, task in result.tasks.items()})
print("summary:", result.output("summary"))
