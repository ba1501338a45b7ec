"""Static key sets and products of dimensions (day x region)."""

from partita import (
    AssetRegistry,
    DatePartitionDef,
    Flow,
    MultiPartitionDef,
    MultiPartitionKey,
    SelectionError,
    StaticPartitionDef,
    asset,
)

regions = StaticPartitionDef("regions", ["eu-west", "us-east", "apac"])
print("static:", regions.kind, regions.domain, regions.supports_range, regions.keys)
try:
    regions.normalize_key("mars")
except ValueError as error:
    print("rejected:", error)

day_region = MultiPartitionDef({"day": DatePartitionDef(), "region": regions})
print("multi:", day_region.kind, day_region.domain)
print("key format:", day_region.key_format)

key = day_region.parse_key("2026-08-08|eu-west")
print("in memory:", key)
print("dimensions:", key["day"].isoformat(), key["region"], "->", day_region.format_key(key))
same = day_region.normalize_key({"region": "eu-west", "day": "2026-08-08"})
also = day_region.normalize_key(MultiPartitionKey(day="2026-08-08", region="eu-west"))
print("same key from a mapping or a MultiPartitionKey:", key == same == also)

registry = AssetRegistry()


@asset(partition_def=day_region, registry=registry)
def shipments(context) -> str:
    key = context.partition_key
    return f"{key['region']} shipments on {key['day']:%d %b}"


flow = Flow(["shipments"], registry=registry)
result = flow.run(
    {"partition_keys": ["2026-08-08|eu-west", "2026-08-08|apac", {"day": "2026-08-09", "region": "us-east"}]}
)
for attempt in result.tasks["shipments"].attempts:
    print(day_region.format_key(attempt.partition_key), "->", attempt.output)

# A range walks the time dimension with the region fixed; two regions are not one range.
print("range:", flow.plan({"partition_range": ("2026-08-08|eu-west", "2026-08-10|eu-west")}).key_count, "keys")
try:
    flow.plan({"partition_range": ("2026-08-08|eu-west", "2026-08-09|apac")})
except SelectionError as error:
    print("SelectionError:", error)

# Bounded in every dimension, a product lists its keys: the first dimension slowest.
august = MultiPartitionDef({"day": DatePartitionDef(start="2026-08-08", end="2026-08-09"), "region": regions})
print("listed:", [august.format_key(key) for key in august.all_keys()][:4])
