"""Quickstart: a daily order pipeline, one partition per calendar day.

    partita plan examples/quickstart.py --partition-range 2026-08-08 2026-08-10
    partita run  examples/quickstart.py --partition-range 2026-08-08 2026-08-10 --yes

For each selected day it generates that day's synthetic orders, aggregates
them per product in EUR using one shared (unpartitioned) rate table, and
writes ``report-YYYY-MM-DD.csv`` under ``$QUICKSTART_OUTPUT`` (default
``out/quickstart``). Days are independent: a failure on one day skips only
that day's downstream work.
"""

from __future__ import annotations

import csv
import datetime as dt
import os
import random
from collections import defaultdict
from pathlib import Path

from partita import AssetContext, DatePartitionDef, Flow, asset

days = DatePartitionDef(start="2020-01-01")

PRODUCTS = ("espresso", "flat-white", "croissant", "bagel")
PRICES = {"espresso": 2.4, "flat-white": 3.6, "croissant": 2.9, "bagel": 3.1}


@asset
def exchange_rates() -> dict[str, float]:
    """Conversion rates to EUR, shared by every day (unpartitioned)."""
    return {"EUR": 1.0, "USD": 0.92, "GBP": 1.17}


@asset(partition_def=days)
def orders(context: AssetContext) -> list[dict[str, object]]:
    """That day's orders; seeded by the date, so a rerun is reproducible."""
    day: dt.date = context.partition_key
    rng = random.Random(day.toordinal())
    return [
        {
            "order_id": f"{day:%Y%m%d}-{number:04d}",
            "product": rng.choice(PRODUCTS),
            "quantity": rng.randint(1, 4),
            "currency": rng.choice(("EUR", "USD", "GBP")),
        }
        for number in range(rng.randint(50, 120))
    ]


@asset(partition_def=days)
def daily_summary(orders: list[dict[str, object]], exchange_rates: dict[str, float]) -> dict[str, dict[str, float]]:
    """Units and revenue in EUR per product for one day."""
    summary: dict[str, dict[str, float]] = defaultdict(lambda: {"units": 0, "revenue_eur": 0.0})
    for order in orders:
        product = str(order["product"])
        quantity = int(order["quantity"])  # type: ignore[call-overload]
        rate = exchange_rates[str(order["currency"])]
        summary[product]["units"] += quantity
        summary[product]["revenue_eur"] += quantity * PRICES[product] * rate
    return dict(sorted(summary.items()))


@asset(partition_def=days)
def daily_report(context: AssetContext, daily_summary: dict[str, dict[str, float]]) -> str:
    """Write the day's CSV report and return its path."""
    folder = Path(os.environ.get("QUICKSTART_OUTPUT", "out/quickstart"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"report-{context.partition_key:%Y-%m-%d}.csv"
    temporary = path.with_suffix(".csv.tmp")
    with temporary.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["product", "units", "revenue_eur"])
        for product, figures in daily_summary.items():
            writer.writerow([product, int(figures["units"]), f"{figures['revenue_eur']:.2f}"])
    temporary.replace(path)
    context.logger.info("wrote %s", path)
    return str(path)


flow = Flow(["daily_report"])
