"""Portable run records: what each version adds, and what a record leaves out.

``RunResult.to_record(version=N)`` turns a run into JSON-safe data that can be
stored or sent elsewhere. Raw partition keys stay out unless
``record_partition_keys=True``; failure messages are application text and are
kept as they are.
"""

import json

from partita import (
    AssetRegistry,
    CallbackContext,
    FastForwardClock,
    Flow,
    ResourcePolicy,
    RetryPolicy,
    StaticPartitionDef,
    asset,
)

registry = AssetRegistry()
tenants = StaticPartitionDef("tenants", ["acme", "globex"])
slow_feeds = {"acme"}  # times out once, then answers
missing_feeds = {"globex"}  # never arrives


@asset(partition_def=tenants, registry=registry, resource="billing_api", retry=RetryPolicy(max_attempts=2, delay=5.0))
def invoices(context) -> int:
    tenant = context.partition_key
    if tenant in missing_feeds:
        raise LookupError(f"no invoice feed for {tenant}")  # application text: it names the tenant
    if tenant in slow_feeds and context.invocation_number == 1:
        raise TimeoutError("the billing API timed out")
    return 3


def notify_chat(context: CallbackContext) -> None:
    raise RuntimeError("the chat webhook is offline")  # recorded; changes no outcome


flow = Flow(
    ["invoices"],
    registry=registry,
    resources={"billing_api": ResourcePolicy(max_concurrency=1)},
    clock=FastForwardClock(),
    on_complete=notify_chat,
)


def fields(record: dict) -> set[str]:
    """Top-level fields, and attempt fields as ``attempt.NAME``."""
    attempt = record["tasks"][0]["attempts"][0]
    return set(record) | {f"attempt.{name}" for name in attempt}


if __name__ == "__main__":
    result = flow.run({"partition_keys": ["acme", "globex"]})

    print("default version:", result.to_record()["version"])
    previous = fields(result.to_record(version=1))
    print("v1 attempt fields:", sorted(name for name in previous if name.startswith("attempt.")))
    for version in (2, 3, 4):
        current = fields(result.to_record(version=version))
        print(f"v{version} adds:", sorted(current - previous))
        previous = current

    record = result.to_record(version=4)
    print("selection:", json.dumps(record["selection"]))
    acme, globex = record["tasks"][0]["attempts"]
    print("attempt 0:", acme["status"], "invocations", acme["invocations"], "resolution", acme["resolution"])
    print(
        "  invocation details:",
        [(i["number"], i["succeeded"], i["failure"] and i["failure"]["type"]) for i in acme["invocation_details"]],
    )
    statistics = record["resources"]["billing_api"]
    print("billing_api:", {name: statistics[name] for name in ("invocations", "succeeded", "failed", "retries")})
    error = record["callback_errors"][0]
    print("callback error:", error["callback"], error["failure"]["type"], error["failure"]["message"])

    # The boundary: no attempt carries its key, but application text can repeat it.
    print("attempts carry a partition_key field:", any("partition_key" in a for a in (acme, globex)))
    print("attempt 1 failure message:", globex["failure"]["message"])
    opted_in = result.to_record(version=4, record_partition_keys=True)
    print("with record_partition_keys=True:", [a["partition_key"] for a in opted_in["tasks"][0]["attempts"]])
    print("failed keys from the live result:", result.failed_partition_keys("invoices"))

    try:
        result.to_record(version=5)
    except ValueError as error:
        print("ValueError:", error)
