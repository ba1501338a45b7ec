"""The rules of partitions discovered at run time, one small flow each.

Runs without a store: it shows the two ways a producer declares keys, how
duplicates collapse, what the plan says, how ``allowed``, ``max_keys`` and the
key rules fail the producer, that a rejected key list declares nothing, what
explicit keys do to a runtime domain, and which definitions are rejected.

    python examples/runtime_rules.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from partita import (
    AssetContext,
    AssetRegistry,
    DatePartitionDef,
    DefinitionError,
    DiscoveryError,
    Flow,
    MultiPartitionDef,
    PartitionAtRuntime,
    PartitionKey,
    RunResult,
    asset,
)


def region_flow(producer: Callable[..., Any], regions: PartitionAtRuntime) -> Flow:
    """`producer` discovers regions; `sales` and `forecast` run once per discovered region."""
    registry = AssetRegistry()
    asset(partition_def=regions, registry=registry, name="regions")(producer)

    @asset(partition_def=regions, registry=registry)
    def sales(context: AssetContext, regions: int | None) -> str:
        return f"{context.partition_key}: {regions} stores"

    @asset(partition_def=regions, registry=registry)
    def forecast(sales: str) -> str:
        return sales.upper()

    return Flow(["forecast"], registry=registry, store=False)


def one_at_a_time(context: AssetContext) -> dict[str, int]:
    context.add_partition("eu-west", extra={"stores": 41})
    context.add_partition(PartitionKey("us-east", extra={"stores": 17}))
    context.add_partition("eu-west", extra={"stores": 99})  # declared again: still one key, first extra kept
    print("declared so far:", [declared.key for declared in context.partition_keys])
    return {"eu-west": 41, "us-east": 17}  # only for declared keys; a key without an entry receives None


def print_attempts(result: RunResult) -> None:
    for name, task in result.tasks.items():
        for attempt in task.attempts:
            key = attempt.partition_key if attempt.partition_key_present else "-"
            reason = f" ({attempt.reason.value})" if attempt.reason else ""
            output = f" -> {attempt.output!r}" if attempt.output is not None else ""
            print(f"  {name} {key} {attempt.status.value}{reason}{output}")


def producer_failure(label: str, flow: Flow) -> None:
    result = flow.run()
    failure = result.tasks["regions"].attempts[0].failure
    downstream = len(result.tasks["sales"].attempts) + len(result.tasks["forecast"].attempts)
    assert failure is not None
    print(f"{label}: {failure.type.rsplit('.', 1)[-1]}: {failure.message}; downstream attempts: {downstream}")


def main() -> None:
    regions = PartitionAtRuntime("regions")
    flow = region_flow(one_at_a_time, regions)
    plan = flow.plan()  # no selector: the producer discovers
    print(
        f"plan: {plan.selection_kind.value}, domain {plan.domain}, key count {plan.key_count}, "
        f"attempts {plan.attempt_count} ({plan.known_attempt_count} known before running)"
    )
    result = flow.run(plan)
    print("discovered:", result.discovered_partition_keys("regions"))
    print("extra:", {declared.key: declared.extra for declared in result.discoveries["regions"]})
    print_attempts(result)
    print("events kept without a store:", len(result.events))

    # Explicit keys narrow the run: the producer still discovers, only selected keys fan out.
    narrowed = flow.run({"partition_keys": ["us-east", "apac"]})
    print("narrowed to us-east and apac, discovered:", narrowed.discovered_partition_keys("regions"))
    print_attempts(narrowed)

    def three_regions(context: AssetContext) -> None:
        context.partition_keys = ["eu-west", "us-east", "apac"]

    def an_unknown_region(context: AssetContext) -> None:
        context.partition_keys = ["eu-west", "mars"]

    def an_overlong_key(context: AssetContext) -> None:
        context.add_partition("r" * 256)  # one character over the limit

    def an_undeclared_output(context: AssetContext) -> dict[str, int]:
        context.add_partition("eu-west")
        return {"eu-west": 41, "apac": 8}

    def both_ways(context: AssetContext) -> None:
        context.add_partition("eu-west")
        context.partition_keys = ["us-east"]

    def a_corrected_list(context: AssetContext) -> None:
        try:
            context.partition_keys = ["us-east", ""]  # "" is no key: nothing of the list is declared
        except DiscoveryError:
            context.partition_keys = ["us-east", "eu-west"]  # the one assignment is still unused

    producer_failure("max_keys=2", region_flow(three_regions, PartitionAtRuntime("regions", max_keys=2)))
    known = PartitionAtRuntime("regions", allowed={"eu-west", "us-east", "apac"})
    producer_failure("allowed keys", region_flow(an_unknown_region, known))
    two_letters = PartitionAtRuntime("regions", allowed=lambda key: len(key) == 2)
    producer_failure("allowed predicate", region_flow(three_regions, two_letters))
    producer_failure("key length", region_flow(an_overlong_key, regions))
    producer_failure("output mapping", region_flow(an_undeclared_output, regions))
    producer_failure("declared both ways", region_flow(both_ways, regions))
    corrected = region_flow(a_corrected_list, regions).run()
    print("corrected list, discovered:", corrected.discovered_partition_keys("regions"))

    try:
        MultiPartitionDef({"day": DatePartitionDef(), "region": regions})
    except DefinitionError as error:
        print(f"inside a product: DefinitionError: {error}")


if __name__ == "__main__":
    main()
