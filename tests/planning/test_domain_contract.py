"""Definitions that share a partition domain must key it alike (SPEC §3, §4).

A consumer receives its upstream's output for the same key, so two
definitions of one domain in one closure must normalize, parse and format
keys the same way (`PartitionDef.key_contract`). Another class or another
key setting fails planning, naming both assets; settings that only accept or
reject keys (bounds, static key sets, ``allowed``) may differ.
"""

from __future__ import annotations

import datetime as dt
import textwrap

import pytest
from click.testing import CliRunner

from partita import (
    AssetRegistry,
    DatePartitionDef,
    Flow,
    MultiPartitionDef,
    PartitionAtRuntime,
    PartitionDef,
    PlanningError,
    RunStatus,
    StaticPartitionDef,
    asset,
)
from partita.cli.main import cli

KEYS = {"partition_keys": ["2026-08-08"]}


class TextDates(PartitionDef):
    """Claims the date domain but keeps keys as text (identity normalization)."""

    @property
    def domain(self) -> str:
        return "date"


class Tenants(PartitionDef):
    """A configured custom definition: ``lower`` changes what a key becomes."""

    def __init__(self, *, lower: bool) -> None:
        self.lower = lower

    @property
    def domain(self) -> str:
        return "tenant"

    def normalize_key(self, key):
        return key.lower() if self.lower else key


class LaterDates(DatePartitionDef):
    """A subclass that changes only its defaults: it keys dates exactly like its parent."""

    def __init__(self) -> None:
        super().__init__(start="2026-01-01")


def _chain(upstream_def, downstream_def, calls):
    registry = AssetRegistry()

    @asset(partition_def=upstream_def, registry=registry)
    def extract(context):
        calls.append("extract")
        return context.partition_key

    @asset(partition_def=downstream_def, registry=registry)
    def publish(extract, context):
        calls.append("publish")
        return (extract, context.partition_key)

    return Flow(["publish"], registry=registry, store=False)


@pytest.mark.parametrize("order", ["date-first", "text-first"])
def test_two_definitions_of_one_domain_that_key_it_differently_fail_planning_naming_both_assets(order):
    calls = []
    definitions = (DatePartitionDef(), TextDates())
    if order == "text-first":
        definitions = definitions[::-1]
    flow = _chain(*definitions, calls)
    for selection in (KEYS, {"partition_range": ("2026-08-08", "2026-08-09")}, {"empty_partitions": True}):
        with pytest.raises(PlanningError) as caught:
            flow.plan(selection)
        message = str(caught.value)
        assert "'extract'" in message and "'publish'" in message
        assert "domain date" in message
        assert "DatePartitionDef" in message and "TextDates" in message
        assert "2026-08-08" not in message
    with pytest.raises(PlanningError, match="'extract'.*'publish'"):
        flow.run(KEYS)
    assert calls == []


def test_one_custom_class_configured_otherwise_fails_planning_naming_both_assets():
    calls = []
    flow = _chain(Tenants(lower=True), Tenants(lower=False), calls)
    with pytest.raises(PlanningError, match="'extract'.*'publish'"):
        flow.plan({"partition_keys": ["Acme"]})
    assert calls == []


def test_one_custom_class_configured_alike_plans_and_runs():
    calls = []
    result = _chain(Tenants(lower=True), Tenants(lower=True), calls).run({"partition_keys": ["Acme"]})
    assert result.status is RunStatus.SUCCESS
    assert result.tasks["publish"].attempts[0].output == ("acme", "acme")


def test_date_definitions_with_other_bounds_share_the_domain():
    calls = []
    flow = _chain(DatePartitionDef(), DatePartitionDef(start="2026-01-01", end="2026-12-31"), calls)
    result = flow.run(KEYS)
    assert result.tasks["publish"].attempts[0].output == (dt.date(2026, 8, 8), dt.date(2026, 8, 8))


def test_a_subclass_that_keeps_the_key_methods_shares_the_domain():
    calls = []
    assert _chain(DatePartitionDef(), LaterDates(), calls).run(KEYS).status is RunStatus.SUCCESS


def test_static_definitions_with_other_key_sets_share_the_domain():
    calls = []
    flow = _chain(StaticPartitionDef("regions", ["eu", "us"]), StaticPartitionDef("regions", ["eu"]), calls)
    assert flow.run({"partition_keys": ["eu"]}).status is RunStatus.SUCCESS


def test_runtime_definitions_with_other_limits_share_the_domain():
    calls = []
    flow = _chain(PartitionAtRuntime("tenants", max_keys=5), PartitionAtRuntime("tenants", allowed=["acme"]), calls)
    assert flow.plan({"partition_keys": ["acme"]}).key_count == 1


def test_a_product_whose_dimension_keys_its_domain_differently_fails_planning():
    calls = []
    upstream = MultiPartitionDef({"day": DatePartitionDef(), "region": StaticPartitionDef("regions", ["eu"])})
    downstream = MultiPartitionDef({"day": TextDates(), "region": StaticPartitionDef("regions", ["eu"])})
    with pytest.raises(PlanningError, match="'extract'.*'publish'"):
        _chain(upstream, downstream, calls).plan({"partition_keys": ["2026-08-08|eu"]})
    assert calls == []


ENTRY = """\
from partita import DatePartitionDef, PartitionDef, asset


class TextDates(PartitionDef):
    @property
    def domain(self):
        return "date"


@asset(partition_def=DatePartitionDef())
def extract(context):
    raise AssertionError("no body runs")


@asset(partition_def=TextDates())
def publish(extract, context):
    raise AssertionError("no body runs")
"""


@pytest.mark.parametrize("command", [["plan"], ["run", "--yes", "--no-store"]])
def test_the_cli_exits_2_naming_both_assets(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    entry = tmp_path / "dates.py"
    entry.write_text(textwrap.dedent(ENTRY))
    result = CliRunner().invoke(cli, [*command, str(entry), "--partition-key", "2026-08-08"])
    assert result.exit_code == 2, result.output
    assert "'extract'" in result.output and "'publish'" in result.output
    assert "Traceback" not in result.output
    assert "2026-08-08" not in result.output
