"""`windowed_status` decides what `partition_status` decides, reading only the window's range of keys.

Real runs into real stores (SQLite and PostgreSQL): successes, failures
after successes, successes after failures, a held running run, runs that
did not record keys, and published events; then every window compared.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path

import pytest

import partita as p
from partita import KeyState
from partita.operations.windowed import windowed_states, windowed_status
from partita.store import open_store

NOW = dt.datetime(2026, 8, 20, 12, 30, tzinfo=dt.UTC)


def _flow(store: str, fail: set[str], hold: Path | None = None, *, record: bool = True) -> p.Flow:
    registry = p.AssetRegistry()
    days = p.DatePartitionDef(start="2026-08-01")

    @p.asset(partition_def=days, registry=registry)
    def extract(context) -> int:
        if context.partition_key.isoformat() in fail:
            raise RuntimeError("source unavailable")
        deadline = time.monotonic() + 30
        while hold is not None and hold.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return 1

    return p.Flow(["extract"], registry=registry, store=store, record_partition_keys=record)


def _windowed(flow: p.Flow, store, config: dict) -> dict[str | None, tuple]:
    """The windowed status's keys; its states alone (`windowed_states`) must agree with it."""
    closure = {definition.name: definition for definition in flow.closure()}
    chosen = p.RunConfig.coerce(config)
    status = windowed_status(closure["extract"], closure, chosen, store, NOW)
    states = windowed_states(closure["extract"], closure, chosen, store, NOW)
    assert states.scope == status.scope and states.states == tuple(item.state for item in status.keys)
    return {item.key: item for item in status.keys}


def test_every_window_reads_as_the_whole_status_does(store_url: str, tmp_path: Path) -> None:
    _flow(store_url, set()).run({"partition_range": ("2026-08-01", "2026-08-06")})
    _flow(store_url, {"2026-08-02", "2026-08-07"}).run({"partition_range": ("2026-08-02", "2026-08-08")})
    _flow(store_url, {"2026-08-04"}).run({"partition_range": ("2026-08-03", "2026-08-05")})
    _flow(store_url, set(), record=False).run({"partition_keys": ["2026-08-10"]})
    hold = tmp_path / "hold"
    hold.touch()
    held = _flow(store_url, set(), hold)
    runner = threading.Thread(target=held.run, args=({"partition_keys": ["2026-08-12"]},), daemon=True)
    runner.start()
    store = open_store(store_url)
    try:
        deadline = time.monotonic() + 20
        while _windowed(held, store, {"partition_keys": ["2026-08-12"]})["2026-08-12"].state is not KeyState.RUNNING:
            assert time.monotonic() < deadline, "the held run did not start"
            time.sleep(0.02)
        p.publish_event(store, held, "extract", partition_key="2026-08-11")
        whole = {item.key: item for item in p.partition_status(held, "extract", {"partition_range": ("2026-08-01", "2026-08-20")}).keys}
        states = {key: item.state for key, item in whole.items()}
        assert states["2026-08-02"] is KeyState.FAILED and states["2026-08-04"] is KeyState.FAILED
        assert states["2026-08-03"] is KeyState.MATERIALIZED and states["2026-08-12"] is KeyState.RUNNING
        for first, last in (("2026-08-01", "2026-08-20"), ("2026-08-02", "2026-08-02"), ("2026-08-04", "2026-08-12")):
            window = _windowed(held, store, {"partition_range": (first, last)})
            assert window == {key: item for key, item in whole.items() if first <= key <= last}
        chosen = _windowed(held, store, {"partition_keys": ["2026-08-07", "2026-08-01", "2026-08-12"]})
        assert {key: item for key, item in chosen.items()} == {key: whole[key] for key in chosen}
        assert list(_windowed(held, store, {})) == [(NOW.date() - dt.timedelta(days=n)).isoformat() for n in range(19, -1, -1)]
    finally:
        hold.unlink()
        runner.join(timeout=30)
        store.close()


@pytest.mark.parametrize("record", [True, False])
def test_an_unpartitioned_asset_reads_as_the_whole_status_does(store_url: str, record: bool) -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def total() -> int:
        return 1

    flow = p.Flow(["total"], registry=registry, store=store_url, record_partition_keys=record)
    flow.run()
    store = open_store(store_url)
    try:
        closure = {definition.name: definition for definition in flow.closure()}
        status = windowed_status(closure["total"], closure, p.RunConfig(), store, NOW)
        assert status.keys == p.partition_status(flow, "total").keys
        assert windowed_states(closure["total"], closure, p.RunConfig(), store, NOW).states == (KeyState.MATERIALIZED,)
        assert status.keys[0].state is KeyState.MATERIALIZED
    finally:
        store.close()
