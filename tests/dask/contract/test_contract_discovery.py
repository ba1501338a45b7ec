"""Runtime partitions discovered by a body fan out in the same run on every executor (SPEC §9, §11).

The discovering producer runs once, where the executor runs bodies, and
declares keys with ``context.add_partition``; each key becomes one attempt
of every downstream asset of the domain, which receives the producer's
output for that key, and one discovery event and known key in the store.
"""

from __future__ import annotations

import os
from contextlib import closing

import partita as p

TENANTS = p.PartitionAtRuntime("contract-tenants", max_keys=10)
REGISTRY = p.AssetRegistry()
FOUND = ("acme", "globex", "initech")


@p.asset(partition_def=TENANTS, registry=REGISTRY)
def found_tenants(context):
    for key in FOUND:
        context.add_partition(key, extra={"pid": os.getpid()})
    context.add_partition("acme")  # a duplicate collapses into the first
    return {key: len(key) for key in FOUND}


@p.asset(partition_def=TENANTS, registry=REGISTRY)
def tenant_rows(context, found_tenants):
    return (context.partition_key, found_tenants)


@p.asset(registry=REGISTRY)
def tenant_summary(tenant_rows):
    return dict(tenant_rows.values())


def test_keys_added_by_a_body_fan_out_to_every_downstream_asset_in_the_same_run(executor_kind, tmp_path):
    url = f"sqlite:///{tmp_path}/contract.db"
    flow = p.Flow(["tenant_summary"], registry=REGISTRY, executor=executor_kind, store=url)

    result = flow.run()

    assert result.status is p.RunStatus.SUCCESS, [a.failure for a in result.attempts()]
    (producer,) = result.tasks["found_tenants"].attempts
    assert producer.status is p.AttemptStatus.SUCCESS and len(producer.invocations) == 1
    assert result.discovered_partition_keys("found_tenants") == FOUND
    rows = result.tasks["tenant_rows"].attempts
    assert [(a.partition_key, a.status) for a in rows] == [(key, p.AttemptStatus.SUCCESS) for key in FOUND]
    assert result.output("tenant_summary") == {"acme": 4, "globex": 6, "initech": 7}
    worker = result.discoveries["found_tenants"][0].extra["pid"]
    assert (worker == os.getpid()) is (executor_kind == "thread")  # discovered where the body ran
    with closing(p.open_store(url)) as store:
        events = store.list_events(asset="found_tenants", kinds=[p.SourceKind.DISCOVERY])
        known = [record.key for record in store.list_partitions("runtime:contract-tenants")]
    assert [(event.partition_key, event.extra) for event in events] == [(key, {"pid": worker}) for key in FOUND]
    assert known == list(FOUND)
