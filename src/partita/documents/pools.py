"""``partita.pools``: each shared resource pool with its limit, holders and waiters.

The limit is what the entry's flow declares (a pool only the store knows,
leased by flows of another entry, has none). Holders and waiters are the
store's live rows, in every process using the store: a waiter is a run
whose attempt asked for a slot and was denied; attempts queued behind the
run's own held slots are counted in its ``waiting``, not listed one by one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from partita.definitions.policies import ResourcePolicy
from partita.documents.cancel import iso_time
from partita.store.pools import PoolHolder, PoolWaiter

__all__ = ["DeclaredPool", "declared_pools", "pools_body"]


@dataclass(frozen=True, slots=True)
class DeclaredPool:
    """A shared pool as a flow declares it: its slot count and the resources drawing from it."""

    name: str
    max_concurrency: int | None
    resources: tuple[str, ...]


def declared_pools(resources: Mapping[str, ResourcePolicy]) -> list[DeclaredPool]:
    """The shared pools of a flow's resource policies, by name (the largest limit when two disagree)."""
    found: dict[str, tuple[int, list[str]]] = {}
    for resource, policy in sorted(resources.items()):
        pool = policy.pool_name(resource)
        if pool is not None:
            assert policy.max_concurrency is not None
            limit, names = found.get(pool, (0, []))
            found[pool] = (max(limit, policy.max_concurrency), [*names, resource])
    return [DeclaredPool(name, limit, tuple(names)) for name, (limit, names) in sorted(found.items())]


def _holder(holder: PoolHolder) -> dict[str, Any]:
    return {
        "slot": holder.slot,
        "run_id": holder.run_id,
        "host": holder.host,
        "pid": holder.pid,
        "asset": holder.asset,
        "key_index": holder.key_index,
        "partition_key": holder.partition_key,
        "acquired_at": iso_time(holder.acquired_at),
        "expires_at": iso_time(holder.expires_at),
    }


def _waiter(waiter: PoolWaiter) -> dict[str, Any]:
    return {
        "run_id": waiter.run_id,
        "host": waiter.host,
        "pid": waiter.pid,
        "asset": waiter.asset,
        "waiting": waiter.waiting,
        "since": iso_time(waiter.since),
        "expires_at": iso_time(waiter.expires_at),
    }


def pools_body(
    store_url: str, declared: Sequence[DeclaredPool], holders: Sequence[PoolHolder], waiters: Sequence[PoolWaiter]
) -> dict[str, Any]:
    """The document's body: declared pools first, then pools only the store's rows name."""
    known = {pool.name: pool for pool in declared}
    extra = sorted({row.pool for row in (*holders, *waiters)} - set(known))
    pools = [*declared, *(DeclaredPool(name, None, ()) for name in extra)]
    return {
        "store": store_url,
        "pools": [
            {
                "name": pool.name,
                "declared": pool.name in known,
                "max_concurrency": pool.max_concurrency,
                "resources": list(pool.resources),
                "holders": [_holder(row) for row in holders if row.pool == pool.name],
                "waiters": [_waiter(row) for row in waiters if row.pool == pool.name],
            }
            for pool in pools
        ],
    }
