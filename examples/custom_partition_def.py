"""Custom partition definitions: identity keys and a stricter tenant definition."""

import re

from partita import AssetRegistry, Flow, PartitionDef, SelectionError, asset


class ShardPartitionDef(PartitionDef):
    """Identity normalization: every hashable value is a key, falsey ones included."""

    @property
    def domain(self) -> str:
        return "shard"


class TenantPartitionDef(PartitionDef):
    """Tenant slugs: case and surrounding spaces are normalized away."""

    kind = "tenant"
    key_format = "3 to 20 letters or digits"

    @property
    def domain(self) -> str:
        return "tenant"

    def normalize_key(self, key):
        if not isinstance(key, str):
            raise ValueError("tenant keys must be text")
        slug = key.strip().lower()
        if re.fullmatch(r"[a-z0-9]{3,20}", slug) is None:
            raise ValueError("tenant keys must be 3 to 20 letters or digits")  # no input echoed
        return slug


registry = AssetRegistry()


@asset(partition_def=ShardPartitionDef(), registry=registry)
def shard_size(context) -> str:
    return f"shard {context.partition_key!r} present={context.partition_key_present}"


shards = Flow(["shard_size"], registry=registry)
plan = shards.plan({"partition_keys": [0, "", False, 0]})
print("shard keys selected:", plan.key_count)  # 0 and False stay two keys; the second 0 is dropped
for attempt in shards.run(plan).tasks["shard_size"].attempts:
    print(attempt.output)


@asset(partition_def=TenantPartitionDef(), registry=registry)
def invoices(context) -> str:
    return f"invoices for {context.partition_key}"


tenants = Flow(["invoices"], registry=registry)
plan = tenants.plan({"partition_keys": ["Acme", " acme ", "globex"]})
print("tenant keys selected:", plan.key_count)
print("plan document mentions a tenant:", "acme" in plan.to_json() or "globex" in plan.to_json())
print([attempt.output for attempt in tenants.run(plan).tasks["invoices"].attempts])
try:
    tenants.plan({"partition_keys": ["globex", "no!"]})
except SelectionError as error:
    print("SelectionError:", error)
