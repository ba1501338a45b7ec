"""The dispatcher's start order: later assets first, then earliest ready, whether roots are queued as one block or key by key."""

from __future__ import annotations

import datetime as dt
import threading
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

import partita
from partita.execution.clock import SystemClock
from partita.execution.dispatch import Dispatcher

_TASKS = [SimpleNamespace(index=index, gate=None, name=f"t{index}") for index in range(4)]

# An operation: ("one", task, key), ("block", task, start, count) or ("take", how many).
_operations = st.lists(
    st.one_of(
        st.tuples(st.just("one"), st.integers(0, 3), st.integers(0, 50)),
        st.tuples(st.just("block"), st.integers(0, 3), st.integers(0, 50), st.integers(0, 6)),
        st.tuples(st.just("take"), st.integers(1, 8)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(_operations)
def test_a_block_starts_its_keys_in_order_exactly_where_one_entry_per_key_would(operations):
    started: list[tuple[str, int]] = []
    dispatcher = Dispatcher({}, limit=0, clock=SystemClock())
    dispatcher.connect(lambda task, key: started.append((task.name, key)), lambda *args: None)
    # The reference: every key its own entry, ordered by (minus plan position, arrival, place in its block).
    reference: list[tuple[int, int, int, str, int]] = []
    arrival = 0
    expected: list[tuple[str, int]] = []
    for operation in operations:
        if operation[0] == "one":
            _, task_index, key = operation
            dispatcher.enqueue(_TASKS[task_index], key)
            reference.append((-task_index, arrival, 0, f"t{task_index}", key))
            arrival += 1
        elif operation[0] == "block":
            _, task_index, start, count = operation
            dispatcher.enqueue_block(_TASKS[task_index], start, start + count)
            if count:
                reference.extend(
                    (-task_index, arrival, place, f"t{task_index}", start + place) for place in range(count)
                )
                arrival += 1
        else:
            dispatcher.limit += operation[1]
            dispatcher.dispatch()
            reference.sort()
            free_slots = dispatcher.limit - len(expected)  # slots left unused by an earlier take count too
            taken, reference = reference[:free_slots], reference[free_slots:]
            expected.extend((name, key) for *_, name, key in taken)
            assert started == expected
    dispatcher.limit += len(reference)
    dispatcher.dispatch()
    expected.extend((name, key) for *_, name, key in sorted(reference))
    assert started == expected
    assert dispatcher.running == len(expected)


def _chain(registry: partita.AssetRegistry, days: partita.DatePartitionDef, starts: list[tuple[str, str]]):
    lock = threading.Lock()

    def note(name: str, context: partita.AssetContext) -> None:
        with lock:
            starts.append((name, context.partition_key.isoformat()))

    @partita.asset(partition_def=days, registry=registry)
    def extract(context: partita.AssetContext) -> int:
        note("extract", context)
        return 1

    @partita.asset(partition_def=days, registry=registry)
    def transform(context: partita.AssetContext, extract: int) -> int:
        note("transform", context)
        return extract + 1


def test_a_chain_over_many_keys_still_completes_key_by_key():
    registry, starts = partita.AssetRegistry(), []
    _chain(registry, partita.DatePartitionDef(), starts)
    keys = [dt.date(2026, 1, 1) + dt.timedelta(days=offset) for offset in range(30)]
    result = partita.Flow(["transform"], registry=registry, max_concurrency=1).run({"partition_keys": keys})
    assert result.status is partita.RunStatus.SUCCESS
    assert starts == [(name, key.isoformat()) for key in keys for name in ("extract", "transform")]


def test_roots_beside_a_gated_asset_start_in_order_and_all_run():
    registry, starts = partita.AssetRegistry(), []
    days = partita.DatePartitionDef()
    _chain(registry, days, starts)

    @partita.asset(partition_def=days, registry=registry, resource="api")
    def audit(context: partita.AssetContext) -> None:
        starts.append(("audit", context.partition_key.isoformat()))

    keys = [dt.date(2026, 1, 1) + dt.timedelta(days=offset) for offset in range(12)]
    flow = partita.Flow(
        ["transform", "audit"],
        registry=registry,
        max_concurrency=1,
        resources={"api": partita.ResourcePolicy(max_concurrency=1)},
    )
    result = flow.run({"partition_keys": keys})
    assert result.status is partita.RunStatus.SUCCESS
    by_asset = {name: [key for asset, key in starts if asset == name] for name in ("extract", "transform", "audit")}
    assert by_asset == {name: [key.isoformat() for key in keys] for name in by_asset}
    # Each key's transform starts right after its extract: the block of extract's keys holds its place.
    chained = [entry for entry in starts if entry[0] != "audit"]
    assert chained == [(name, key.isoformat()) for key in keys for name in ("extract", "transform")]
