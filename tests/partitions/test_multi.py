"""MultiPartitionKey and MultiPartitionDef (SPEC §3): products of named dimensions."""

from __future__ import annotations

import datetime as dt
from collections.abc import Hashable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partita import (
    DatePartitionDef,
    DefinitionError,
    HourlyPartitionDef,
    MonthlyPartitionDef,
    MultiPartitionDef,
    MultiPartitionKey,
    PartitionDef,
    StaticPartitionDef,
)

SECRET = "tenant-acme-4711"


def product() -> MultiPartitionDef:
    return MultiPartitionDef({"date": DatePartitionDef(), "region": StaticPartitionDef("regions", ["eu", "us"])})


# --------------------------------------------------------------------------- key


def test_multi_partition_key_is_a_hashable_mapping():
    key = MultiPartitionKey({"date": dt.date(2026, 8, 8), "region": "eu"})
    assert isinstance(key, Mapping)
    assert isinstance(key, Hashable)
    assert key["date"] == dt.date(2026, 8, 8)
    assert key["region"] == "eu"
    assert len(key) == 2
    assert "region" in key
    assert "tenant" not in key
    assert dict(key) == {"date": dt.date(2026, 8, 8), "region": "eu"}
    assert key.get("tenant") is None


def test_multi_partition_key_accepts_keyword_components():
    assert MultiPartitionKey(date="2026-08-08", region="eu") == MultiPartitionKey({"date": "2026-08-08", "region": "eu"})


def test_multi_partition_key_keeps_component_order():
    key = MultiPartitionKey({"b": 1, "a": 2})
    assert list(key) == ["b", "a"]
    assert list(key.items()) == [("b", 1), ("a", 2)]
    assert list(key.values()) == [1, 2]


def test_multi_partition_key_missing_dimension_raises_key_error():
    with pytest.raises(KeyError):
        MultiPartitionKey({"a": 1})["b"]


def test_equal_multi_partition_keys_hash_equal_and_deduplicate():
    first = MultiPartitionKey({"date": dt.date(2026, 8, 8), "region": "eu"})
    second = MultiPartitionKey({"date": dt.date(2026, 8, 8), "region": "eu"})
    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1
    assert {first: "x"}[second] == "x"


def test_multi_partition_key_equality_is_ordered():
    assert MultiPartitionKey({"a": 1, "b": 2}) != MultiPartitionKey({"b": 2, "a": 1})


def test_multi_partition_keys_with_different_components_differ():
    assert MultiPartitionKey({"a": 1, "b": 2}) != MultiPartitionKey({"a": 1, "b": 3})


def test_multi_partition_key_is_immutable():
    key = MultiPartitionKey({"a": 1, "b": 2})
    with pytest.raises(TypeError):
        key["a"] = 5  # type: ignore[index]
    with pytest.raises(TypeError):
        del key["a"]  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        key.update({"a": 5})  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        key.extra = 1  # type: ignore[attr-defined]
    assert key == MultiPartitionKey({"a": 1, "b": 2})


def test_multi_partition_key_does_not_follow_later_changes_to_its_source():
    source = {"a": 1, "b": 2}
    key = MultiPartitionKey(source)
    source["a"] = 99
    assert key["a"] == 1


# --------------------------------------------------------------------------- definition


def test_multi_definition_publishes_its_contract():
    definition = product()
    assert isinstance(definition, PartitionDef)
    assert definition.supports_range is True  # one time dimension
    assert list(definition.dimensions) == ["date", "region"]
    assert "date" in definition.key_format and "region" in definition.key_format


def test_mapping_in_any_order_is_normalized_into_dimension_order():
    definition = product()
    key = definition.normalize_key({"region": "eu", "date": "2026-08-08"})
    assert isinstance(key, MultiPartitionKey)
    assert list(key) == ["date", "region"]
    assert key == MultiPartitionKey({"date": dt.date(2026, 8, 8), "region": "eu"})


def test_multi_partition_key_in_another_order_is_normalized_into_dimension_order():
    definition = product()
    key = definition.normalize_key(MultiPartitionKey({"region": "us", "date": dt.date(2026, 8, 8)}))
    assert list(key.items()) == [("date", dt.date(2026, 8, 8)), ("region", "us")]


def test_components_are_normalized_by_their_dimension():
    definition = product()
    key = definition.normalize_key({"date": "2026-08-08", "region": "eu"})
    assert type(key["date"]) is dt.date


def test_multi_text_is_parsed_and_formatted_in_dimension_order():
    definition = product()
    key = definition.parse_key("2026-08-08|eu")
    assert key == MultiPartitionKey({"date": dt.date(2026, 8, 8), "region": "eu"})
    assert definition.format_key(key) == "2026-08-08|eu"
    assert definition.normalize_key("2026-08-08|us")["region"] == "us"


def test_multi_text_carries_hourly_offset_text_through():
    definition = MultiPartitionDef(
        {"hour": HourlyPartitionDef("Europe/Berlin"), "region": StaticPartitionDef("regions", ["eu"])}
    )
    key = definition.parse_key("2026-10-25T02+01:00|eu")
    assert key["hour"].utcoffset() == dt.timedelta(hours=1)
    assert definition.format_key(key) == "2026-10-25T02+01:00|eu"
    first = definition.parse_key("2026-10-25T02|eu")
    assert definition.key_identity(first) != definition.key_identity(key)


@pytest.mark.parametrize("text", ["2026-08-08", "2026-08-08|eu|us", "|", "", "2026-08-08||eu"])
def test_multi_text_with_wrong_part_count_is_rejected(text):
    with pytest.raises(ValueError):
        product().parse_key(text)


@pytest.mark.parametrize(
    "key",
    [
        {"date": "2026-08-08"},
        {"region": "eu"},
        {"date": "2026-08-08", "region": "eu", "tenant": "x"},
        {"day": "2026-08-08", "region": "eu"},
        {},
    ],
)
def test_multi_mapping_with_unknown_or_missing_dimensions_is_rejected(key):
    with pytest.raises(ValueError):
        product().normalize_key(key)


@pytest.mark.parametrize("key", [None, 5, ("2026-08-08", "eu"), ["2026-08-08", "eu"], dt.date(2026, 8, 8)])
def test_multi_key_of_the_wrong_type_is_rejected(key):
    with pytest.raises(ValueError):
        product().normalize_key(key)


def test_component_rejection_names_the_dimension_not_the_value():
    definition = MultiPartitionDef(
        {"date": DatePartitionDef(), "tenant": StaticPartitionDef("tenants", ["known"])}
    )
    with pytest.raises(ValueError) as info:
        definition.normalize_key({"date": "2026-08-08", "tenant": SECRET})
    assert "tenant" in str(info.value)
    assert SECRET not in str(info.value)

    with pytest.raises(ValueError) as info:
        definition.parse_key(f"2026-08-08|{SECRET}")
    assert "tenant" in str(info.value)
    assert SECRET not in str(info.value)


def test_component_text_rejection_names_the_dimension_not_the_value():
    with pytest.raises(ValueError) as info:
        product().parse_key("2026-8-8|eu")
    assert "'date'" in str(info.value)
    assert "2026-8-8" not in str(info.value)


def test_wrong_part_count_rejection_does_not_echo_the_text():
    with pytest.raises(ValueError) as info:
        product().parse_key(f"2026-08-08|eu|{SECRET}")
    assert SECRET not in str(info.value)


def test_a_multi_range_walks_its_time_dimension_with_the_other_fixed():
    definition = product()
    keys = definition.range("2026-08-08|eu", "2026-08-10|eu")
    assert [definition.format_key(key) for key in keys] == ["2026-08-08|eu", "2026-08-09|eu", "2026-08-10|eu"]
    assert definition.range("2026-08-08|eu", "2026-08-08|eu") == (definition.parse_key("2026-08-08|eu"),)
    with pytest.raises(ValueError, match="every other dimension must have the same value at both ends"):
        definition.range("2026-08-08|eu", "2026-08-09|us")
    with pytest.raises(ValueError, match="later than"):
        definition.range("2026-08-09|eu", "2026-08-08|eu")


def test_a_product_without_one_time_dimension_has_no_ranges():
    static = MultiPartitionDef({"a": StaticPartitionDef("a", ["x", "y"]), "b": StaticPartitionDef("b", ["z"])})
    assert static.supports_range is False
    with pytest.raises(ValueError, match="has none"):
        static.range("x|z", "y|z")
    two_times = MultiPartitionDef({"day": DatePartitionDef(), "hour": HourlyPartitionDef()})
    assert two_times.supports_range is False


def test_a_bounded_product_lists_its_keys_first_dimension_slowest():
    definition = MultiPartitionDef(
        {"date": DatePartitionDef(start="2026-08-08", end="2026-08-09"), "region": StaticPartitionDef("r", ["us", "eu"])}
    )
    assert definition.bounded
    assert [definition.format_key(key) for key in definition.all_keys()] == [
        "2026-08-08|us", "2026-08-08|eu", "2026-08-09|us", "2026-08-09|eu",
    ]
    assert list(definition.all_keys()) == sorted(definition.all_keys(), key=lambda key: (key["date"], ["us", "eu"].index(key["region"])))
    assert not product().bounded
    with pytest.raises(ValueError, match="dimension 'date' has no finite list of keys"):
        product().all_keys()


@settings(max_examples=50, deadline=None)
@given(
    first=st.dates(min_value=dt.date(2026, 1, 1), max_value=dt.date(2026, 12, 31)),
    days=st.integers(0, 40),
    region=st.sampled_from(["eu", "us"]),
)
def test_a_range_is_the_listing_filtered_to_one_value_and_each_key_round_trips(first, days, region):
    definition = MultiPartitionDef(
        {"date": DatePartitionDef(start="2026-01-01", end="2027-02-28"), "region": StaticPartitionDef("r", ["eu", "us"])}
    )
    last = first + dt.timedelta(days=days)
    start, end = f"{first.isoformat()}|{region}", f"{last.isoformat()}|{region}"
    ranged = definition.range(start, end)
    listed = [key for key in definition.all_keys() if key["region"] == region and first <= key["date"] <= last]
    assert list(ranged) == listed
    for key in ranged:
        assert definition.parse_key(definition.format_key(key)) == key


def test_a_range_over_an_hourly_dimension_crosses_a_daylight_saving_day():
    definition = MultiPartitionDef({"hour": HourlyPartitionDef("Europe/Berlin"), "meter": StaticPartitionDef("m", ["a", "b"])})
    keys = definition.range("2026-10-25T01|a", "2026-10-25T03|a")
    assert [definition.format_key(key) for key in keys] == [
        "2026-10-25T01|a", "2026-10-25T02|a", "2026-10-25T02+01:00|a", "2026-10-25T03|a",
    ]


def test_multi_key_identity_distinguishes_components():
    definition = product()
    a = definition.parse_key("2026-08-08|eu")
    b = definition.normalize_key({"region": "eu", "date": dt.date(2026, 8, 8)})
    c = definition.parse_key("2026-08-08|us")
    assert definition.key_identity(a) == definition.key_identity(b)
    assert definition.key_identity(a) != definition.key_identity(c)


# --------------------------------------------------------------------------- definition errors


@pytest.mark.parametrize(
    "dimensions",
    [
        {},
        {"date": DatePartitionDef()},
        None,
        [("date", DatePartitionDef()), ("month", MonthlyPartitionDef())],
    ],
)
def test_fewer_than_two_dimensions_or_not_a_mapping_is_a_definition_error(dimensions):
    with pytest.raises(DefinitionError):
        MultiPartitionDef(dimensions)


def test_nested_multi_dimension_is_a_definition_error():
    with pytest.raises(DefinitionError):
        MultiPartitionDef({"inner": product(), "month": MonthlyPartitionDef()})


def test_static_keys_containing_the_separator_are_a_definition_error():
    with pytest.raises(DefinitionError) as info:
        MultiPartitionDef({"date": DatePartitionDef(), "region": StaticPartitionDef("regions", ["eu", "us|ca"])})
    assert "us|ca" not in str(info.value)


@pytest.mark.parametrize("name", ["", "1date", "a-b", "a|b", "a b", "région", 1, None])
def test_invalid_dimension_name_is_a_definition_error(name):
    with pytest.raises(DefinitionError):
        MultiPartitionDef({name: DatePartitionDef(), "region": StaticPartitionDef("regions", ["eu"])})


@pytest.mark.parametrize("dimension", [DatePartitionDef, "date", None, {"a": 1}])
def test_dimension_that_is_not_a_partition_definition_is_a_definition_error(dimension):
    with pytest.raises(DefinitionError):
        MultiPartitionDef({"date": dimension, "region": StaticPartitionDef("regions", ["eu"])})


def test_multi_domain_is_deterministic():
    first = product()
    second = MultiPartitionDef({"date": DatePartitionDef(), "region": StaticPartitionDef("regions", ["us", "eu"])})
    assert first.domain == second.domain
    assert first.domain == product().domain
    assert "date" in first.domain and "static:regions" in first.domain


def test_multi_domain_reflects_dimension_names_and_domains():
    base = product().domain
    renamed = MultiPartitionDef({"day": DatePartitionDef(), "region": StaticPartitionDef("regions", ["eu"])}).domain
    other_static = MultiPartitionDef({"date": DatePartitionDef(), "region": StaticPartitionDef("zones", ["eu"])}).domain
    hourly = MultiPartitionDef(
        {"date": HourlyPartitionDef("Europe/Berlin"), "region": StaticPartitionDef("regions", ["eu"])}
    ).domain
    assert len({base, renamed, other_static, hourly}) == 4
    assert "hour:Europe/Berlin" in hourly


def test_multi_definition_keeps_a_copy_of_its_dimensions():
    dimensions = {"date": DatePartitionDef(), "region": StaticPartitionDef("regions", ["eu"])}
    definition = MultiPartitionDef(dimensions)
    domain = definition.domain
    dimensions["extra"] = MonthlyPartitionDef()
    definition.dimensions["other"] = MonthlyPartitionDef()  # type: ignore[index]
    assert list(definition.dimensions) == ["date", "region"]
    assert definition.domain == domain


def test_multi_describe_lists_dimensions():
    description = product().describe()
    assert description["domain"] == product().domain
    assert list(description["dimensions"]) == ["date", "region"]
    assert description["dimensions"]["region"]["domain"] == "static:regions"
