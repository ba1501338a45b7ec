"""Selection rules (SPEC §3, §4, §14; seed 003 "Choose exactly one selection form")."""

import datetime as dt

import pytest

from partita import (
    AssetRegistry,
    AttemptStatus,
    ConfigurationError,
    DatePartitionDef,
    Flow,
    HourlyPartitionDef,
    MultiPartitionDef,
    MultiPartitionKey,
    PartitionDef,
    PlanningError,
    SelectionError,
    SelectionKind,
    SkipReason,
    StaticPartitionDef,
    asset,
)

UTC = dt.UTC


class AnyKeyDef(PartitionDef):
    """A custom definition keeping the default identity normalization."""


class IntTextDef(PartitionDef):
    """Identity in Python, but canonical text parses to int."""

    @property
    def domain(self):
        return "custom:int-text"

    def parse_key(self, text):
        if not isinstance(text, str) or not text.isdigit():
            raise ValueError("integer partition key text must be digits")
        return int(text)


class IntRangeDef(PartitionDef):
    """Integer keys with ranges; text is parsed only by parse_key."""

    supports_range = True

    @property
    def domain(self):
        return "custom:int-range"

    def normalize_key(self, key):
        if isinstance(key, bool) or not isinstance(key, int):
            raise ValueError("integer partition keys must be int")
        return key

    def parse_key(self, text):
        if not isinstance(text, str) or not text.isdigit():
            raise ValueError("integer partition key text must be digits")
        return int(text)

    def range(self, start, end):
        first, last = self.normalize_key(start), self.normalize_key(end)
        if first > last:
            raise ValueError("partition_range start is later than end")
        return tuple(range(first, last + 1))


class Tagged:
    """A key equal to others of the same value, but carrying a tag."""

    def __init__(self, value, tag):
        self.value, self.tag = value, tag

    def __eq__(self, other):
        return isinstance(other, Tagged) and other.value == self.value

    def __hash__(self):
        return hash(self.value)


def _single(partition_def, calls=None, name="daily"):
    registry = AssetRegistry()

    def body(context):
        if calls is not None:
            calls.append((name, context.partition_key))
        return context.partition_key

    body.__name__ = name
    asset(partition_def=partition_def, registry=registry)(body)
    return Flow([name], registry=registry), registry


def _plain(calls=None):
    registry = AssetRegistry()

    @asset(registry=registry)
    def setup():
        if calls is not None:
            calls.append("setup")
        return 1

    @asset(registry=registry)
    def report(setup):
        if calls is not None:
            calls.append("report")
        return setup

    return Flow(["report"], registry=registry), registry


# -- the three forms --------------------------------------------------------


def test_keys_form_selects_the_normalized_keys_in_order():
    flow, _ = _single(DatePartitionDef())
    plan = flow.plan({"partition_keys": ["2026-08-09", dt.date(2026, 8, 8)]})
    assert plan.selection_kind is SelectionKind.KEYS
    assert plan.domain == "date"
    assert plan.partition_keys == (dt.date(2026, 8, 9), dt.date(2026, 8, 8))
    assert plan.key_count == 2
    assert plan.attempt_count == 2


def test_range_form_selects_the_inclusive_normalized_range():
    flow, _ = _single(DatePartitionDef())
    plan = flow.plan({"partition_range": ("2026-08-08", "2026-08-10")})
    assert plan.selection_kind is SelectionKind.RANGE
    assert plan.partition_keys == (dt.date(2026, 8, 8), dt.date(2026, 8, 9), dt.date(2026, 8, 10))
    assert all(type(key) is dt.date for key in plan.partition_keys)


def test_range_form_with_equal_endpoints_selects_one_key():
    flow, _ = _single(DatePartitionDef())
    plan = flow.plan({"partition_range": (dt.date(2026, 8, 8), "2026-08-08")})
    assert plan.partition_keys == (dt.date(2026, 8, 8),)


def test_range_form_matches_the_definition_range_helper():
    definition = DatePartitionDef()
    flow, _ = _single(definition)
    keys = definition.range("2026-08-08", "2026-08-10")
    assert flow.plan({"partition_keys": keys}).partition_keys == flow.plan(
        {"partition_range": ("2026-08-08", "2026-08-10")}
    ).partition_keys


def test_hourly_range_crosses_midnight_inclusively():
    flow, _ = _single(HourlyPartitionDef())
    plan = flow.plan({"partition_range": ("2026-08-08T22", "2026-08-09T01")})
    assert plan.domain == "hour:UTC"
    assert [key.hour for key in plan.partition_keys] == [22, 23, 0, 1]


def test_empty_form_selects_zero_keys_and_skips_partitioned_work_with_no_partition_keys():
    calls = []
    flow, _ = _single(DatePartitionDef(), calls)
    plan = flow.plan({"empty_partitions": True})
    assert plan.selection_kind is SelectionKind.EMPTY
    assert plan.key_count == 0
    assert plan.attempt_count == 0
    result = flow.run(plan)
    assert calls == []
    task = result.tasks["daily"]
    assert task.attempts == ()
    assert task.status is AttemptStatus.SKIPPED
    assert task.reason is SkipReason.NO_PARTITION_KEYS


def test_unpartitioned_closure_without_a_selector_plans_one_attempt_per_asset():
    flow, _ = _plain()
    plan = flow.plan()
    assert plan.selection_kind is SelectionKind.UNPARTITIONED
    assert plan.domain is None
    assert plan.key_count == 0
    assert plan.attempt_count == 2


# -- combining forms --------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        {"partition_keys": ["2026-08-08"], "partition_range": ("2026-08-08", "2026-08-09")},
        {"partition_keys": ["2026-08-08"], "empty_partitions": True},
        {"partition_range": ("2026-08-08", "2026-08-09"), "empty_partitions": True},
        {
            "partition_keys": ["2026-08-08"],
            "partition_range": ("2026-08-08", "2026-08-09"),
            "empty_partitions": True,
        },
    ],
    ids=["keys+range", "keys+empty", "range+empty", "all-three"],
)
def test_combined_selection_forms_are_rejected_before_any_body_runs(config):
    calls = []
    flow, _ = _single(DatePartitionDef(), calls)
    with pytest.raises(SelectionError, match="exactly one selection form") as info:
        flow.run(config)
    for form in config:
        assert form in str(info.value)
    assert calls == []


def test_keys_and_range_together_are_rejected_before_any_body_runs():
    calls = []
    flow, _ = _single(DatePartitionDef(), calls)
    with pytest.raises(SelectionError, match="cannot be combined"):
        flow.run({"partition_keys": ["2026-08-08"], "partition_range": ("2026-08-08", "2026-08-08")})
    assert calls == []


# -- missing or superfluous selector ---------------------------------------


def test_no_selector_with_a_partitioned_closure_is_rejected_before_any_body_runs():
    calls = []
    registry = AssetRegistry()

    @asset(registry=registry)
    def setup():
        calls.append("setup")
        return 1

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def daily(setup):
        calls.append("daily")
        return setup

    flow = Flow(["daily"], registry=registry)
    for config in (None, {}, {"empty_partitions": False}, {"max_concurrency": 2}):
        with pytest.raises(SelectionError, match="'daily'") as info:
            flow.run(config)
        message = str(info.value)
        assert "partition_keys" in message and "partition_range" in message and "empty_partitions" in message
    assert calls == []


def test_no_selector_is_a_configuration_error_for_plan_as_well():
    flow, _ = _single(DatePartitionDef())
    with pytest.raises(ConfigurationError):
        flow.plan()


@pytest.mark.parametrize(
    "config",
    [
        {"partition_keys": ["2026-08-08"]},
        {"partition_range": ("2026-08-08", "2026-08-09")},
        {"empty_partitions": True},
    ],
    ids=["keys", "range", "empty"],
)
def test_any_selector_with_an_unpartitioned_closure_is_rejected_before_any_body_runs(config):
    calls = []
    flow, _ = _plain(calls)
    with pytest.raises(SelectionError, match="no selected asset is partitioned") as info:
        flow.run(config)
    assert next(iter(config)) in str(info.value)
    assert calls == []


def test_partitioned_asset_outside_the_closure_does_not_require_a_selector():
    registry = AssetRegistry()

    @asset(registry=registry)
    def plain():
        return 1

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def daily(plain):
        return plain

    assert Flow(["plain"], registry=registry).plan().selection_kind is SelectionKind.UNPARTITIONED


# -- one domain per closure -------------------------------------------------


def test_two_partition_domains_in_one_closure_are_a_planning_error_naming_the_assets():
    calls = []
    registry = AssetRegistry()

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def daily_sales():
        calls.append("daily_sales")
        return 1

    @asset(partition_def=StaticPartitionDef("region", ["eu", "us"]), registry=registry)
    def regional_report(daily_sales):
        calls.append("regional_report")
        return 2

    flow = Flow(["regional_report"], registry=registry)
    with pytest.raises(PlanningError) as info:
        flow.run({"partition_keys": ["eu"]})
    message = str(info.value)
    assert "daily_sales" in message
    assert "regional_report" in message
    assert "date" in message and "static:region" in message
    assert calls == []


def test_two_domains_across_separate_targets_are_a_planning_error():
    registry = AssetRegistry()

    @asset(partition_def=HourlyPartitionDef("UTC"), registry=registry)
    def hourly_utc():
        return 1

    @asset(partition_def=HourlyPartitionDef("Europe/Paris"), registry=registry)
    def hourly_paris():
        return 2

    with pytest.raises(PlanningError, match=r"hourly_utc.*hourly_paris|hourly_paris.*hourly_utc"):
        Flow(["hourly_utc", "hourly_paris"], registry=registry).plan({"empty_partitions": True})


def test_separate_definition_objects_of_one_domain_plan_together():
    registry = AssetRegistry()

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def raw():
        return 1

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def clean(raw):
        return raw

    plan = Flow(["clean"], registry=registry).plan({"partition_keys": ["2026-08-08"]})
    assert plan.domain == "date"
    assert plan.attempt_count == 2


def test_unpartitioned_assets_mix_with_one_partition_domain():
    registry = AssetRegistry()

    @asset(registry=registry)
    def lookup():
        return 1

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def daily(lookup):
        return lookup

    @asset(registry=registry)
    def summary(daily):
        return daily

    plan = Flow(["summary"], registry=registry).plan({"partition_keys": ["2026-08-08", "2026-08-09"]})
    assert plan.domain == "date"
    assert [(task.name, task.attempt_count) for task in plan.tasks] == [("lookup", 1), ("daily", 2), ("summary", 1)]
    assert plan.attempt_count == 4


# -- duplicates -------------------------------------------------------------


def test_duplicate_keys_after_normalization_are_selected_once_first_occurrence_wins():
    calls = []
    flow, _ = _single(DatePartitionDef(), calls)
    config = {"partition_keys": ["2026-08-09", "2026-08-08", dt.date(2026, 8, 8), dt.date(2026, 8, 9), "2026-08-08"]}
    plan = flow.plan(config)
    assert plan.partition_keys == (dt.date(2026, 8, 9), dt.date(2026, 8, 8))
    assert plan.key_count == 2
    flow.run(plan)
    assert sorted(calls) == [("daily", dt.date(2026, 8, 8)), ("daily", dt.date(2026, 8, 9))]


def test_text_and_date_of_the_same_day_are_one_key():
    flow, _ = _single(DatePartitionDef())
    plan = flow.plan({"partition_keys": ["2026-08-08", dt.date(2026, 8, 8)]})
    assert plan.partition_keys == (dt.date(2026, 8, 8),)


def test_hourly_text_and_aware_datetime_of_the_same_hour_are_one_key():
    flow, _ = _single(HourlyPartitionDef())
    plan = flow.plan({"partition_keys": [dt.datetime(2026, 8, 8, 5, tzinfo=UTC), "2026-08-08T05"]})
    assert plan.key_count == 1


def test_first_occurrence_object_is_the_one_kept_for_equal_keys():
    flow, _ = _single(AnyKeyDef())
    first, second = Tagged(1, "first"), Tagged(1, "second")
    plan = flow.plan({"partition_keys": [first, Tagged(2, "other"), second]})
    assert plan.key_count == 2
    assert plan.partition_keys[0] is first
    assert plan.partition_keys[0].tag == "first"


def test_custom_definition_treats_zero_and_false_as_two_keys_and_empty_text_as_present():
    calls = []
    flow, _ = _single(AnyKeyDef(), calls)
    plan = flow.plan({"partition_keys": [0, False, "", 0, False, ""]})
    assert plan.key_count == 3
    assert [type(key) for key in plan.partition_keys] == [int, bool, str]
    assert plan.partition_keys == (0, False, "")
    result = flow.run(plan)
    attempts = result.tasks["daily"].attempts
    assert len(attempts) == 3
    assert all(attempt.partition_key_present for attempt in attempts)
    assert all(attempt.status is AttemptStatus.SUCCESS for attempt in attempts)
    assert [(type(attempt.partition_key), attempt.partition_key) for attempt in attempts] == [
        (int, 0),
        (bool, False),
        (str, ""),
    ]
    assert len(calls) == 3


def test_custom_definition_treats_one_true_and_one_point_zero_as_three_keys():
    flow, _ = _single(AnyKeyDef())
    plan = flow.plan({"partition_keys": [1, True, 1.0]})
    assert [type(key) for key in plan.partition_keys] == [int, bool, float]


def test_custom_definition_empty_text_alone_is_a_present_key_not_omitted_work():
    calls = []
    flow, _ = _single(AnyKeyDef(), calls)
    plan = flow.plan({"partition_keys": [""]})
    assert plan.selection_kind is SelectionKind.KEYS
    assert plan.key_count == 1
    flow.run(plan)
    assert calls == [("daily", "")]


def test_custom_definition_rejects_unhashable_keys_as_a_selection_error():
    flow, _ = _single(AnyKeyDef())
    with pytest.raises(SelectionError, match="hashable"):
        flow.plan({"partition_keys": [["a", "list"]]})


# -- invalid keys and ranges ------------------------------------------------


def test_range_on_a_static_definition_is_rejected_naming_the_asset():
    calls = []
    flow, _ = _single(StaticPartitionDef("region", ["eu", "us"]), calls, name="regional")
    with pytest.raises(SelectionError, match=r"partition_range.*'regional'"):
        flow.run({"partition_range": ("eu", "us")})
    assert calls == []


def test_range_on_a_custom_definition_without_range_support_is_rejected():
    flow, _ = _single(AnyKeyDef())
    with pytest.raises(SelectionError, match="partition_range"):
        flow.plan({"partition_range": (1, 3)})


def test_reversed_range_is_rejected_before_any_body_runs():
    calls = []
    flow, _ = _single(DatePartitionDef(), calls)
    with pytest.raises(SelectionError, match="later than end"):
        flow.run({"partition_range": ("2026-08-10", "2026-08-08")})
    assert calls == []


@pytest.mark.parametrize(
    "bounds",
    [
        ("2026-8-8", "2026-08-10"),
        ("2026-08-08", "2026-02-30"),
        (dt.datetime(2026, 8, 8), "2026-08-10"),
        (None, "2026-08-10"),
        ("2026-08-08", None),
    ],
    ids=["non-canonical-start", "invalid-end", "datetime-start", "open-start", "open-end"],
)
def test_range_with_an_invalid_endpoint_is_rejected(bounds):
    flow, _ = _single(DatePartitionDef())
    with pytest.raises(SelectionError, match="partition_range"):
        flow.plan({"partition_range": bounds})


@pytest.mark.parametrize(
    "key",
    ["2026-8-8", "2026-02-30", dt.datetime(2026, 8, 8), 20260808, None, "08/08/2026"],
    ids=["non-canonical", "impossible-date", "datetime", "int", "none", "us-format"],
)
def test_invalid_date_key_is_rejected_naming_its_position_and_asset(key):
    calls = []
    flow, _ = _single(DatePartitionDef(), calls)
    with pytest.raises(SelectionError, match=r"partition_keys\[1\].*'daily'"):
        flow.run({"partition_keys": ["2026-08-08", key]})
    assert calls == []


def test_unknown_static_key_is_rejected():
    flow, _ = _single(StaticPartitionDef("region", ["eu", "us"]), name="regional")
    with pytest.raises(SelectionError, match="'regional'"):
        flow.plan({"partition_keys": ["apac"]})


def test_key_outside_the_definition_bounds_is_rejected():
    flow, _ = _single(DatePartitionDef(start="2026-01-01", end="2026-12-31"))
    with pytest.raises(SelectionError, match="earlier than the definition's start"):
        flow.plan({"partition_keys": ["2025-12-31"]})
    with pytest.raises(SelectionError, match="later than the definition's end"):
        flow.plan({"partition_range": ("2026-12-30", "2027-01-01")})


@pytest.mark.parametrize(
    "config",
    [
        {"partition_keys": ["tenant-secret-8841"]},
        {"partition_keys": ["eu", "tenant-secret-8841"]},
    ],
    ids=["first", "second"],
)
def test_rejected_static_key_is_not_repeated_in_the_error(config):
    flow, _ = _single(StaticPartitionDef("tenant", ["eu", "us"]))
    with pytest.raises(SelectionError) as info:
        flow.plan(config)
    assert "tenant-secret-8841" not in str(info.value)
    assert "tenant-secret-8841" not in repr(info.value)


@pytest.mark.parametrize(
    "config",
    [
        {"partition_keys": ["secret-7731-08-08"]},
        {"partition_keys": ["9731-02-31"]},
        {"partition_range": ("secret-7731-08-08", "2026-08-10")},
        {"partition_range": ("2026-08-08", "secret-7731-08-08")},
        {"partition_range": ("9731-08-10", "9731-08-08")},
    ],
    ids=["bad-key", "impossible-key", "bad-start", "bad-end", "reversed"],
)
def test_rejected_date_selection_is_not_repeated_in_the_error(config):
    flow, _ = _single(DatePartitionDef())
    with pytest.raises(SelectionError) as info:
        flow.plan(config)
    message = str(info.value) + repr(info.value)
    assert "7731" not in message
    assert "9731" not in message


def test_key_outside_another_assets_bounds_in_the_same_domain_is_rejected_naming_that_asset():
    calls = []
    registry = AssetRegistry()

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def raw(context):
        calls.append("raw")
        return 1

    @asset(partition_def=DatePartitionDef(end="2026-08-31"), registry=registry)
    def report(raw):
        calls.append("report")
        return raw

    flow = Flow(["report"], registry=registry)
    assert flow.plan({"partition_keys": ["2026-08-31"]}).key_count == 1
    for config in ({"partition_keys": ["2026-08-31", "2026-09-01"]}, {"partition_range": ("2026-08-30", "2026-09-02")}):
        with pytest.raises(SelectionError, match="'report'") as info:
            flow.run(config)
        assert "'raw'" not in str(info.value)
        assert "2026-09-01" not in str(info.value)
    assert calls == []


def test_static_key_missing_from_another_assets_declared_keys_is_rejected_naming_that_asset():
    registry = AssetRegistry()

    @asset(partition_def=StaticPartitionDef("tenant", ["acme", "tenant-hidden-991"]), registry=registry)
    def ingest():
        return 1

    @asset(partition_def=StaticPartitionDef("tenant", ["acme"]), registry=registry)
    def bill(ingest):
        return ingest

    flow = Flow(["bill"], registry=registry)
    assert flow.plan({"partition_keys": ["acme"]}).key_count == 1
    with pytest.raises(SelectionError, match="'bill'") as info:
        flow.plan({"partition_keys": ["tenant-hidden-991"]})
    assert "tenant-hidden-991" not in str(info.value)


def test_multi_partition_text_and_mapping_of_the_same_key_are_selected_once():
    definition = MultiPartitionDef({"date": DatePartitionDef(), "region": StaticPartitionDef("region", ["eu", "us"])})
    flow, _ = _single(definition)
    plan = flow.plan(
        {
            "partition_keys": [
                "2026-08-08|eu",
                {"region": "eu", "date": dt.date(2026, 8, 8)},
                MultiPartitionKey(date=dt.date(2026, 8, 8), region="us"),
            ]
        }
    )
    assert plan.key_count == 2
    assert plan.partition_keys[0] == MultiPartitionKey(date=dt.date(2026, 8, 8), region="eu")
    assert plan.domain == definition.domain


def test_a_multi_partition_range_walks_the_time_dimension_and_refuses_two_values():
    definition = MultiPartitionDef({"date": DatePartitionDef(), "region": StaticPartitionDef("region", ["eu", "us"])})
    flow, _ = _single(definition)
    assert flow.plan({"partition_range": ("2026-08-08|eu", "2026-08-09|eu")}).key_count == 2
    assert flow.plan_from_text({"partition_range": ("2026-08-08|us", "2026-08-10|us")}).key_count == 3
    with pytest.raises(SelectionError, match=r"partition_range is rejected by asset .* every other dimension must have the same value"):
        flow.plan({"partition_range": ("2026-08-08|eu", "2026-08-09|us")})


# -- text (CLI) path --------------------------------------------------------


def test_plan_from_text_parses_keys_with_parse_key():
    flow, _ = _single(IntTextDef())
    assert flow.plan_from_text({"partition_keys": ["7", "8", "07"]}).partition_keys == (7, 8)
    # The Python path keeps identity normalization: the text stays text.
    assert flow.plan({"partition_keys": ["7"]}).partition_keys == ("7",)


def test_plan_from_text_rejects_keys_that_are_not_text():
    flow, _ = _single(DatePartitionDef())
    with pytest.raises(SelectionError, match=r"partition_keys\[0\]"):
        flow.plan_from_text({"partition_keys": [dt.date(2026, 8, 8)]})


def test_plan_from_text_rejects_text_parse_key_refuses():
    flow, _ = _single(IntTextDef())
    with pytest.raises(SelectionError, match="digits"):
        flow.plan_from_text({"partition_keys": ["seven"]})


def test_plan_from_text_normalizes_canonical_date_text():
    flow, _ = _single(DatePartitionDef())
    plan = flow.plan_from_text({"partition_keys": ["2026-08-08", "2026-08-08", "2026-08-09"]})
    assert plan.partition_keys == (dt.date(2026, 8, 8), dt.date(2026, 8, 9))
    plan = flow.plan_from_text({"partition_range": ("2026-08-08", "2026-08-10")})
    assert plan.key_count == 3


def test_plan_from_text_applies_the_same_form_rules():
    flow, _ = _single(DatePartitionDef())
    with pytest.raises(SelectionError):
        flow.plan_from_text({})
    with pytest.raises(SelectionError, match="cannot be combined"):
        flow.plan_from_text({"partition_keys": ["2026-08-08"], "empty_partitions": True})


def test_plan_from_text_parses_range_endpoints_with_parse_key():
    flow, _ = _single(IntRangeDef())
    assert flow.plan({"partition_range": (1, 3)}).partition_keys == (1, 2, 3)
    assert flow.plan_from_text({"partition_range": ("1", "3")}).partition_keys == (1, 2, 3)
