"""Tenant fan-out: the set of tenants is read from a table while the run executes.

A small SQLite table lists the tenants. The discovering producer `tenants`
reads it and declares one key per active tenant (with the tenant's plan as
event metadata); `usage` and `invoice` then run once per declared tenant in
the same run, and `billing_total` sums the invoices. Nothing in this file
names a tenant except the seed rows of the table.

    python examples/tenant_fanout.py [--data FOLDER]
    partita plan examples/tenant_fanout.py
    partita run examples/tenant_fanout.py --yes
    partita partitions examples/tenant_fanout.py --domain tenants
    partita partitions retire tenants globex

As a script it runs three times against one store (``sqlite:///<data>/partita.db``):
after the first run a tenant is added and another one leaves, in the table
and in the partition registry; before the third run the one that left comes
back. ``--data`` defaults to a new temporary folder. As a CLI entry the
producer reads the table in ``$TENANT_DATA`` (else ``out/tenants``), creating
and seeding it when it is missing, and ``partita run`` records in the CLI's
store.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from partita import AssetContext, Flow, PartitionAtRuntime, PartitionKey, RunResult, SourceKind, asset, open_store

SEED_ROWS = [  # name, plan, seats, active
    ("acme", "pro", 12, 1),
    ("globex", "basic", 4, 1),
    ("initech", "pro", 30, 1),
    ("hooli", "basic", 8, 0),  # signed up, never activated: not a partition
]
PRICE_PER_SEAT = {"basic": 5, "pro": 9}  # EUR per seat and month

tenant_partitions = PartitionAtRuntime("tenants", max_keys=100)


def data_folder() -> Path:
    return Path(os.environ.get("TENANT_DATA", "out/tenants"))


def tenant_table() -> sqlite3.Connection:
    """The tenant table under the data folder; created and seeded on first use."""
    folder = data_folder()
    folder.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(folder / "tenants.db")
    with connection:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS tenants (name TEXT PRIMARY KEY, plan TEXT NOT NULL, "
            "seats INTEGER NOT NULL, active INTEGER NOT NULL)"
        )
        if connection.execute("SELECT COUNT(*) FROM tenants").fetchone()[0] == 0:
            connection.executemany("INSERT INTO tenants VALUES (?, ?, ?, ?)", SEED_ROWS)
    return connection


def active_tenants() -> list[dict[str, Any]]:
    connection = tenant_table()
    try:
        rows = connection.execute("SELECT name, plan, seats FROM tenants WHERE active = 1 ORDER BY name").fetchall()
    finally:
        connection.close()
    return [{"name": name, "plan": plan, "seats": seats} for name, plan, seats in rows]


@asset(partition_def=tenant_partitions)
def tenants(context: AssetContext) -> dict[str, dict[str, Any]]:
    """Discovering producer: one key per active tenant, and each tenant's row as its output."""
    rows = active_tenants()
    context.partition_keys = [PartitionKey(row["name"], extra={"plan": row["plan"]}) for row in rows]
    return {row["name"]: row for row in rows}  # each downstream attempt receives its tenant's row


@asset(partition_def=tenant_partitions)
def usage(context: AssetContext, tenants: dict[str, Any]) -> int:
    """Seat-days used this month by one tenant (a stand-in for reading a usage log)."""
    assert context.partition_key == tenants["name"]  # the producer's output for the same key
    return tenants["seats"] * 30


@asset(partition_def=tenant_partitions)
def invoice(tenants: dict[str, Any], usage: int) -> int:
    """One tenant's invoice in EUR: a month of seats at the tenant's plan price."""
    return usage // 30 * PRICE_PER_SEAT[tenants["plan"]]


@asset
def billing_total(invoice: dict[str, int]) -> int:
    """Unpartitioned: receives every discovered tenant's invoice."""
    return sum(invoice.values())


flow = Flow(["billing_total"])  # what `partita plan/run examples/tenant_fanout.py` use


def change_tenants(
    *, add: tuple[str, str, int] | None = None, leave: str | None = None, rejoin: str | None = None
) -> None:
    """Edit the tenant table the way an onboarding or offboarding tool would."""
    connection = tenant_table()
    with connection:
        if add is not None:
            connection.execute(
                "INSERT INTO tenants VALUES (?, ?, ?, 1) ON CONFLICT (name) DO UPDATE SET active = 1", add
            )
        if leave is not None:
            connection.execute("UPDATE tenants SET active = 0 WHERE name = ?", (leave,))
        if rejoin is not None:
            connection.execute("UPDATE tenants SET active = 1 WHERE name = ?", (rejoin,))
    connection.close()


def report(result: RunResult, label: str, store: Any, run_labels: dict[str, str]) -> None:
    run_labels[result.run_id] = label
    print(f"{label}: {result.status.value}, discovered {list(result.discovered_partition_keys('tenants'))}")
    for attempt in result.tasks["invoice"].attempts:
        print(f"  invoice {attempt.partition_key}: {attempt.output} EUR")
    print(f"  billing total: {result.tasks['billing_total'].attempts[0].output} EUR")
    print("  registry:")
    for known in store.list_partitions("runtime:tenants"):
        first, last = (f"{moment:%H:%M:%S.%f}"[:-3] for moment in (known.first_seen, known.last_seen))
        last_run = run_labels.get(known.last_run_id or "", "?")
        print(f"    {known.key:<8} {known.state:<7} first seen {first}  last seen {last} ({last_run})")
    print("  discovery events:")
    for event in store.list_events(run_id=result.run_id, kinds=[SourceKind.DISCOVERY]):
        print(f"    event {event.id}: {event.asset} {event.partition_key} {event.extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Discover tenants from a table and fan out per tenant.")
    parser.add_argument("--data", help="folder for the tenant table and the store (default: a new temporary folder)")
    args = parser.parse_args()
    data = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="tenant-fanout-"))
    print(f"data folder: {data}")
    os.environ["TENANT_DATA"] = str(data)  # the producer reads it, exactly as under `partita run`
    store = open_store(f"sqlite:///{data}/partita.db")
    labels: dict[str, str] = {}
    try:
        report(Flow(["billing_total"], store=store).run(), "run 1", store, labels)

        change_tenants(add=("umbrella", "pro", 20), leave="globex")
        retired = store.retire_partition("runtime:tenants", "globex")  # the registry follows the table
        print(f"retired {retired.key} in the registry: {retired.state}")
        report(Flow(["billing_total"], store=store).run(), "run 2", store, labels)

        change_tenants(rejoin="globex")  # globex comes back: discovering it again reactivates it
        report(Flow(["billing_total"], store=store).run(), "run 3", store, labels)
        history = store.partition_history("runtime:tenants", "globex")
        print("globex history:", [(action, labels.get(run_id, "-")) for action, _, run_id in history])
    finally:
        store.close()


if __name__ == "__main__":
    main()
