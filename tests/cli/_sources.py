"""Entry source snippets shared by the CLI tests (prefixed with HEADER)."""

from __future__ import annotations

HEADER = """\
import pathlib

from partita import (
    AssetContext,
    AssetRegistry,
    DatePartitionDef,
    Flow,
    HourlyPartitionDef,
    MonthlyPartitionDef,
    MultiPartitionDef,
    PartitionGroup,
    StaticPartitionDef,
    asset,
)

OUT = pathlib.Path({out!r})


def mark(*parts):
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "-".join(str(part) for part in parts)).write_text("ran")

"""


# Shared entry sources -------------------------------------------------------

DAILY_PIPELINE = """
@asset
def settings():
    mark("settings")
    return {"scale": 2}


@asset(partition_def=DatePartitionDef())
def extract(context, settings):
    mark("extract", context.partition_key.isoformat())
    return settings["scale"]


@asset(partition_def=DatePartitionDef())
def publish(context, extract):
    mark("publish", context.partition_key.isoformat())
    return extract + 1


flow = Flow(["publish"])
"""

UNPARTITIONED_PIPELINE = """
@asset
def raw():
    mark("raw")
    return [1, 2, 3]


@asset
def total(raw):
    mark("total")
    return sum(raw)
"""
