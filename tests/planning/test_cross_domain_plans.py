"""Plans that span partition domains through mappers (SPEC §4, §17).

Selecting days plans exactly the hours they need, each hour once however
many daily consumers need it; the plan reports each domain's keys and
attempts. Edges no mapper bridges, mappers that do not fit their two
definitions and self-dependencies without an offset fail planning, naming
the assets, the mapper and the rule.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import partita as p
from partita.errors import DefinitionError, PlanningError

HOURS = p.HourlyPartitionDef("Europe/Berlin", start="2026-01-01T00")
DAYS = p.DatePartitionDef(start="2026-01-01")
MONTHS = p.MonthlyPartitionDef(start="2026-01")
SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" / "plan.v1.json").read_text())






def _report_registry() -> p.AssetRegistry:
    registry = p.AssetRegistry()

    @p.asset(partition_def=HOURS, registry=registry)
    def hourly_events():
        return 1

    @p.asset(partition_def=DAYS, deps={"hourly_events": p.RollupMapper("day")}, registry=registry)
    def daily_report(hourly_events):
        return sum(hourly_events.values())

    @p.asset(partition_def=DAYS, deps={"hourly_events": p.RollupMapper("day")}, registry=registry)
    def daily_quality(hourly_events):
        return len(hourly_events)

    @p.asset(registry=registry)
    def summary(daily_report):
        return dict(daily_report)

    return registry


def _plan(targets, registry, **config):
    return p.Flow(targets, registry=registry).plan(config)


def test_selecting_days_plans_exactly_their_hours_once_for_both_consumers() -> None:
    plan = _plan(["daily_report", "daily_quality"], _report_registry(), partition_range=("2026-03-28", "2026-03-30"))
    # 2026-03-29 is the spring-forward day in Berlin: 23 hours.
    assert plan.task("hourly_events").attempt_count == 24 + 23 + 24
    assert plan.task("daily_report").attempt_count == 3 == plan.task("daily_quality").attempt_count
    assert plan.attempt_count == 71 + 6
    assert plan.key_count == 3 and plan.domain == "date"
    assert plan.to_dict()["domains"] == [
        {"domain": "hour:Europe/Berlin", "assets": ["hourly_events"], "key_count": 71, "attempt_count": 71},
        {"domain": "date", "assets": ["daily_report", "daily_quality"], "key_count": 3, "attempt_count": 6},
    ]
    hours = plan.task("hourly_events").keys
    assert len(set(hours)) == len(hours) == 71
    assert [HOURS.format_key(hours[0]), HOURS.format_key(hours[-1])] == ["2026-03-28T00", "2026-03-30T23"]


def test_a_fall_back_day_plans_25_hours_and_the_plan_document_validates() -> None:
    plan = _plan(["summary"], _report_registry(), partition_keys=["2026-10-25"])
    assert plan.task("hourly_events").attempt_count == 25
    document = plan.to_dict()
    jsonschema.validate(document, SCHEMA)
    assert document["tasks"][1]["mappers"] == {"hourly_events": "RollupMapper('day')"}
    assert "domains" not in _plan(["hourly_events"], _report_registry(), partition_keys=["2026-10-25T02+01:00"]).to_dict()


def test_a_day_before_the_upstream_start_needs_only_the_hours_that_can_exist() -> None:
    registry = _report_registry()
    late_hours = p.HourlyPartitionDef("Europe/Berlin", start="2026-03-29T12")

    @p.asset(partition_def=late_hours, registry=registry)
    def late_events():
        return 1

    @p.asset(partition_def=DAYS, deps={"late_events": p.RollupMapper("day")}, registry=registry)
    def late_report(late_events):
        return len(late_events)

    plan = _plan(["late_report"], registry, partition_range=("2026-03-28", "2026-03-29"))
    assert plan.task("late_events").attempt_count == 12  # 12:00 to 23:00 of the 23-hour day
    assert plan.task("late_report").attempt_count == 2


def test_a_plan_of_one_domain_is_unchanged() -> None:
    plan = _plan(["hourly_events"], _report_registry(), partition_range=("2026-01-01T00", "2026-01-01T05"))
    assert plan.task("hourly_events").keys is None and plan.task("hourly_events").mapped == ()
    assert "domains" not in plan.to_dict()


def test_mixing_domains_without_a_mapper_names_both_assets() -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=HOURS, registry=registry)
    def hourly_events():
        return 1

    @p.asset(partition_def=DAYS, deps={"other": None}, registry=registry)
    def daily_report(hourly_events):
        return 1

    @p.asset(partition_def=DAYS, deps={"hourly_events": p.RollupMapper("day")}, registry=registry)
    def other(hourly_events):
        return 1

    with pytest.raises(PlanningError, match=r"asset 'daily_report' \(date\) depends on 'hourly_events' \(hour:Europe/Berlin\) without a partition mapper"):
        _plan(["daily_report"], registry, partition_keys=["2026-01-02"])


def test_targets_of_two_domains_are_refused() -> None:
    with pytest.raises(PlanningError, match=r"2 partition domains .*select targets of one domain"):
        _plan(["daily_report", "hourly_events"], _report_registry(), partition_keys=["2026-01-02"])


def test_a_roll_up_from_months_to_hours_does_not_fit() -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=MONTHS, registry=registry)
    def monthly():
        return 1

    @p.asset(partition_def=HOURS, deps={"monthly": p.RollupMapper("hour")}, registry=registry)
    def hourly(monthly):
        return 1

    with pytest.raises(PlanningError) as caught:
        _plan(["hourly"], registry, partition_keys=["2026-01-02T00"])
    message = str(caught.value)
    assert "'hourly'" in message and "'monthly'" in message and "RollupMapper('hour')" in message
    assert "does not fit the two definitions" in message and "MonthlyPartitionDef keys are coarser" in message


def test_a_roll_up_into_the_wrong_consumer_cadence_does_not_fit() -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=HOURS, registry=registry)
    def hourly():
        return 1

    @p.asset(partition_def=MONTHS, deps={"hourly": p.RollupMapper("day")}, registry=registry)
    def monthly(hourly):
        return 1

    with pytest.raises(PlanningError, match=r"consumer's keys must be the day windows themselves"):
        _plan(["monthly"], registry, partition_keys=["2026-02"])


def test_a_mapper_the_definitions_reject_is_a_planning_error() -> None:
    registry = p.AssetRegistry()
    shards = p.StaticPartitionDef("shards", ["a", "b"])

    @p.asset(partition_def=shards, registry=registry)
    def shard():
        return 1

    @p.asset(partition_def=DAYS, deps={"shard": p.RollupMapper("day")}, registry=registry)
    def daily(shard):
        return 1

    with pytest.raises(PlanningError, match=r"asset 'daily' \(date\) maps its dependency 'shard' \(static:shards\) with RollupMapper\('day'\), which does not fit"):
        _plan(["daily"], registry, partition_keys=["2026-01-02"])


def test_a_mapper_on_an_unpartitioned_dependency_or_asset_is_refused() -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def settings():
        return 1

    @p.asset(partition_def=DAYS, deps={"settings": p.RollupMapper("day")}, registry=registry)
    def daily(settings):
        return 1

    with pytest.raises(PlanningError, match=r"'settings' is not partitioned; a mapper pairs the keys of two partitioned"):
        _plan(["daily"], registry, partition_keys=["2026-01-02"])
    def report(settings):
        return 1

    with pytest.raises(DefinitionError, match=r"deps\['settings'\] declares a partition mapper, but the asset is not partitioned"):
        p.asset(deps={"settings": p.RollupMapper("day")}, registry=p.AssetRegistry())(report)
    with pytest.raises(DefinitionError, match=r"deps\['settings'\] must be a PartitionMapper or None"):
        p.asset(partition_def=DAYS, deps={"settings": "day"}, registry=p.AssetRegistry())(report)


def test_a_self_dependency_needs_a_mapper_and_an_offset() -> None:
    def total(total):
        return 1

    with pytest.raises(DefinitionError, match=r"depends on itself; to read its own earlier partitions declare deps=\{'total': OffsetMapper\(-1\)\}"):
        p.asset(partition_def=DAYS, registry=p.AssetRegistry())(total)
    registry = p.AssetRegistry()
    p.asset(partition_def=DAYS, deps={"total": p.IdentityMapper()}, registry=registry)(total)
    with pytest.raises(PlanningError, match=r"asset 'total' depends on its own partitions through IdentityMapper in a cycle"):
        _plan(["total"], registry, partition_keys=["2026-01-02"])


def test_a_self_dependency_plans_from_the_start_or_from_a_selected_predecessor() -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, deps={"running_total": p.OffsetMapper(-1)}, registry=registry)
    def running_total(running_total):
        return 1

    plan = _plan(["running_total"], registry, partition_range=("2026-01-01", "2026-01-05"))
    assert plan.attempt_count == 5
    (edge,) = plan.task("running_total").mapped
    assert edge.needs == ((), (0,), (1,), (2,), (3,))
    with pytest.raises(PlanningError, match=r"planned key #0 needs one the run does not plan; select from the definition's start"):
        _plan(["running_total"], registry, partition_range=("2026-01-03", "2026-01-05"))


def test_a_group_member_that_reads_through_a_mapper_is_refused() -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    def extract():
        return 1

    @p.asset(partition_def=DAYS, deps={"extract": p.IdentityMapper()}, registry=registry)
    def load(extract):
        return 1

    with pytest.raises(PlanningError, match=r"member 'load' plans other keys .* group members must plan the same keys"):
        p.Flow(["load"], registry=registry, partition_groups=[p.PartitionGroup(["extract", "load"])]).plan(
            {"partition_keys": ["2026-01-02"]}
        )


def test_a_materialized_consumer_may_read_a_mapped_upstream_of_another_domain(tmp_path: Path) -> None:
    registry = p.AssetRegistry()
    store = p.FileMaterialization(tmp_path)

    @p.asset(partition_def=HOURS, materialization=store, version="1", registry=registry)
    def hourly_events():
        return 1

    @p.asset(partition_def=DAYS, deps={"hourly_events": p.RollupMapper("day")}, materialization=store, version="1", registry=registry)
    def daily_report(hourly_events):
        return 1

    assert _plan(["daily_report"], registry, partition_keys=["2026-01-02"]).attempt_count == 25


def test_planning_a_year_of_days_over_hours_plans_every_hour_once() -> None:
    plan = _plan(["daily_report", "daily_quality"], _report_registry(), partition_range=("2026-01-01", "2026-12-31"))
    assert plan.task("hourly_events").attempt_count == 8760
    assert plan.attempt_count == 8760 + 2 * 365
    needs = plan.task("daily_report").mapped[0].needs
    assert sorted(position for day in needs for position in day) == list(range(8760))


class Broken(p.PartitionMapper):
    def requirement(self, downstream_key, upstream, downstream):
        raise KeyError("oops")


def test_a_mapper_that_raises_is_a_planning_error_naming_it() -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=HOURS, registry=registry)
    def hourly():
        return 1

    @p.asset(partition_def=DAYS, deps={"hourly": Broken()}, registry=registry)
    def daily(hourly):
        return 1

    with pytest.raises(PlanningError, match=r"maps its dependency 'hourly' .* with Broken, which does not fit the two definitions: its requirement\(\) raised KeyError"):
        _plan(["daily"], registry, partition_keys=["2026-01-02"])
