"""`RunResult.output(asset, key)` takes a key as a selection does: objects or canonical text."""

from __future__ import annotations

import datetime as dt

import pytest

from partita import AssetRegistry, DatePartitionDef, Flow, StaticPartitionDef, asset
from partita.errors import SelectionError


def _daily_result():
    registry = AssetRegistry()

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def daily(context):
        return context.partition_key.day

    @asset(registry=registry)
    def unpartitioned():
        return "one"

    flow = Flow(["daily", "unpartitioned"], registry=registry, store=False)
    return flow.run({"partition_keys": ["2026-08-08", "2026-08-09"]})


def test_output_accepts_the_canonical_text_of_a_date_key():
    result = _daily_result()

    assert result.output("daily", "2026-08-08") == 8
    assert result.output("daily", dt.date(2026, 8, 9)) == 9
    assert result.output("unpartitioned") == "one"


def test_output_with_malformed_key_text_names_the_rule_not_the_text():
    result = _daily_result()

    with pytest.raises(SelectionError) as raised:
        result.output("daily", "2026-8-8")

    message = str(raised.value)
    assert "'daily'" in message and "YYYY-MM-DD" in message
    assert "2026-8-8" not in message


def test_output_of_a_well_formed_key_outside_the_run_is_a_lookup_error():
    result = _daily_result()

    with pytest.raises(LookupError, match="no attempt"):
        result.output("daily", "2026-08-10")


def test_output_accepts_static_key_text():
    registry = AssetRegistry()

    @asset(partition_def=StaticPartitionDef("colors", ["red", "blue"]), registry=registry)
    def paint(context):
        return context.partition_key.upper()

    result = Flow(["paint"], registry=registry, store=False).run({"partition_keys": ["red", "blue"]})

    assert result.output("paint", "blue") == "BLUE"
    with pytest.raises(SelectionError):
        result.output("paint", "green")
