"""Entry forms for the CLI: named Flow objects and a zero-argument factory.

This file defines two Flow objects and none named ``flow``, so the bare file
is ambiguous and the CLI asks for a name:

    partita plan examples/cli_entries.py:visits_flow --partition-key 2026-08-08
    partita plan examples/cli_entries.py:make_flow --partition-key 2026-08-08
    partita assets examples.cli_entries:summary_flow        (from the repository root)
"""

from partita import AssetRegistry, DatePartitionDef, Flow, asset

# An explicit registry keeps these assets apart from the default registry;
# every Flow below (and the factory) names it.
registry = AssetRegistry()
days = DatePartitionDef()


@asset(partition_def=days, registry=registry)
def visits(context) -> int:
    return 1000 + context.partition_key.day


@asset(partition_def=days, registry=registry)
def visit_summary(visits: int) -> str:
    return f"{visits} visits"


visits_flow = Flow(["visits"], registry=registry)
summary_flow = Flow(["visit_summary"], registry=registry)


def make_flow() -> Flow:
    """A zero-argument factory: the CLI calls it and uses the Flow it returns."""
    return Flow(["visit_summary"], registry=registry, max_concurrency=2)


if __name__ == "__main__":
    result = make_flow().run({"partition_keys": ["2026-08-08"]})
    print("factory flow:", result.status.value, result.output("visit_summary", result.plan.partition_keys[0]))
