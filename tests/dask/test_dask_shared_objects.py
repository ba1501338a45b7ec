"""The Dask executor sends the run's definitions to each worker once; a task carries only its own call.

Assets are module level so workers import this module by name.
"""

from __future__ import annotations

import partita as p
from partita.execution import run_constants

MANY = p.StaticPartitionDef("many", [f"k{index:05d}" for index in range(20_000)])
REGISTRY = p.AssetRegistry()
KEYS = ["k00001", "k19999", "k07000"]


@p.asset(partition_def=MANY, registry=REGISTRY)
def announced(context):
    return context.partition_key


@p.asset(partition_def=MANY, registry=REGISTRY)
def announces(context):
    receipt = context.emit("announced", partition_key=context.partition_key, dedupe_key=f"a-{context.partition_key}")
    return receipt.duplicate


def _installed_tokens(client):
    return client.run(lambda: list(run_constants._loaded))


def test_tasks_stay_small_and_workers_forget_the_definitions_when_the_run_ends(dask_client, tmp_path, monkeypatch):
    payloads: list[int] = []
    real_map = dask_client.map

    def counting_map(fn, payload_column, *columns, **options):
        payloads.extend(len(payload) for payload in payload_column)
        return real_map(fn, payload_column, *columns, **options)

    monkeypatch.setattr(dask_client, "map", counting_map)
    before = _installed_tokens(dask_client)
    store = f"sqlite:///{tmp_path}/shared.db"
    result = p.Flow(
        ["announces"], registry=REGISTRY, executor=p.DaskExecutor(client=dask_client), store=store
    ).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS, [a.failure for a in result.attempts()]
    assert [result.output("announces", key) for key in KEYS] == [False, False, False]
    assert sorted(event.partition_key for event in result.events) == sorted(KEYS)  # validated on the workers
    assert len(payloads) == 3 and max(payloads) < 4_000, payloads  # the definition alone is over 200 KB
    assert _installed_tokens(dask_client) == before
