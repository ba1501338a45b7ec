"""Promises of the run configuration (SPEC §2, §4, seed 003)."""

import dataclasses

import pytest

from partita import (
    AssetRegistry,
    ConfigurationError,
    DatePartitionDef,
    Flow,
    RunConfig,
    SelectionError,
    SelectionKind,
    asset,
    run,
)


def _daily_flow(calls=None, **flow_options):
    registry = AssetRegistry()

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def daily(context):
        if calls is not None:
            calls.append(context.partition_key)
        return context.partition_key

    return Flow(["daily"], registry=registry, **flow_options), registry


def _plain_flow(calls=None, **flow_options):
    registry = AssetRegistry()

    @asset(registry=registry)
    def plain():
        if calls is not None:
            calls.append("plain")
        return 1

    return Flow(["plain"], registry=registry, **flow_options), registry


# -- unknown fields ---------------------------------------------------------


def test_unknown_config_field_is_an_error_naming_the_field():
    flow, _ = _daily_flow()
    with pytest.raises(ConfigurationError, match="partition_kyes"):
        flow.plan({"partition_kyes": ["2026-08-08"]})


def test_every_unknown_config_field_is_named_and_allowed_fields_are_listed():
    flow, _ = _plain_flow()
    with pytest.raises(ConfigurationError) as info:
        flow.plan({"today": True, "all_history": True})
    message = str(info.value)
    assert "today" in message
    assert "all_history" in message
    for allowed in ("partition_keys", "partition_range", "empty_partitions", "max_concurrency"):
        assert allowed in message


def test_unknown_config_field_is_rejected_by_run_before_any_body_runs():
    calls = []
    flow, _ = _plain_flow(calls)
    with pytest.raises(ConfigurationError, match="retries"):
        flow.run({"retries": 3})
    assert calls == []


def test_module_level_run_rejects_unknown_config_fields_before_any_body_runs():
    calls = []
    _, registry = _plain_flow(calls)
    with pytest.raises(ConfigurationError, match="dry_run"):
        run(["plain"], {"dry_run": True}, registry=registry)
    assert calls == []


def test_config_that_is_not_a_mapping_is_rejected():
    flow, _ = _plain_flow()
    with pytest.raises(ConfigurationError, match="mapping"):
        flow.plan(["partition_keys", "2026-08-08"])


def test_run_config_object_and_mapping_plan_the_same_selection():
    flow, _ = _daily_flow()
    from_mapping = flow.plan({"partition_keys": ["2026-08-08"]})
    from_object = flow.plan(RunConfig(partition_keys=["2026-08-08"]))
    assert from_mapping.partition_keys == from_object.partition_keys


def test_run_config_is_immutable():
    config = RunConfig(partition_keys=["2026-08-08"])
    assert config.partition_keys == ("2026-08-08",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.partition_keys = ("2026-08-09",)


def test_no_config_and_empty_mapping_mean_no_selector():
    flow, _ = _plain_flow()
    assert flow.plan().selection_kind is SelectionKind.UNPARTITIONED
    assert flow.plan({}).selection_kind is SelectionKind.UNPARTITIONED


# -- partition_keys ---------------------------------------------------------


@pytest.mark.parametrize("keys", [["2026-08-08"], ("2026-08-08",)], ids=["list", "tuple"])
def test_partition_keys_accepts_a_list_or_tuple(keys):
    flow, _ = _daily_flow()
    assert flow.plan({"partition_keys": keys}).key_count == 1


def test_partition_keys_as_a_single_string_is_rejected_not_split_into_characters():
    calls = []
    flow, _ = _daily_flow(calls)
    with pytest.raises(SelectionError, match="partition_keys must be a list or tuple"):
        flow.run({"partition_keys": "2026-08-08"})
    assert calls == []


@pytest.mark.parametrize(
    "keys",
    [{"2026-08-08"}, frozenset({"2026-08-08"}), {"2026-08-08": 1}, b"2026-08-08", 20260808],
    ids=["set", "frozenset", "dict", "bytes", "int"],
)
def test_partition_keys_that_are_not_an_ordered_sequence_are_rejected(keys):
    flow, _ = _daily_flow()
    with pytest.raises(SelectionError, match="partition_keys must be a list or tuple"):
        flow.plan({"partition_keys": keys})


def test_empty_partition_keys_are_rejected_and_suggest_empty_partitions():
    calls = []
    flow, _ = _daily_flow(calls)
    with pytest.raises(SelectionError, match="empty_partitions") as info:
        flow.run({"partition_keys": []})
    assert "partition_keys" in str(info.value)
    assert calls == []


def test_empty_partition_keys_are_rejected_by_run_config_directly():
    with pytest.raises(SelectionError, match="empty_partitions"):
        RunConfig(partition_keys=())


# -- partition_range --------------------------------------------------------


@pytest.mark.parametrize(
    "bounds",
    [("2026-08-08",), ("2026-08-08", "2026-08-09", "2026-08-10"), (), "ab", "2026-08-08", 5, {"2026-08-08", "x"}],
    ids=["one", "three", "empty", "two-char-string", "string", "int", "set"],
)
def test_partition_range_must_be_a_start_end_pair(bounds):
    calls = []
    flow, _ = _daily_flow(calls)
    with pytest.raises(SelectionError, match=r"partition_range must be a \(start, end\) pair"):
        flow.run({"partition_range": bounds})
    assert calls == []


@pytest.mark.parametrize("bounds", [("2026-08-08", "2026-08-09"), ["2026-08-08", "2026-08-09"]], ids=["tuple", "list"])
def test_partition_range_accepts_a_list_or_tuple_pair(bounds):
    flow, _ = _daily_flow()
    assert flow.plan({"partition_range": bounds}).key_count == 2


# -- empty_partitions -------------------------------------------------------


@pytest.mark.parametrize("value", [1, 0, "yes", "false", []], ids=["one", "zero", "yes", "false-text", "list"])
def test_empty_partitions_must_be_a_bool(value):
    flow, _ = _daily_flow()
    with pytest.raises(SelectionError, match="empty_partitions must be True or False"):
        flow.plan({"empty_partitions": value})


def test_empty_partitions_false_is_not_a_selector():
    flow, _ = _plain_flow()
    assert flow.plan({"empty_partitions": False}).selection_kind is SelectionKind.UNPARTITIONED


# -- max_concurrency --------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, True, False, 1.5, "2", 2.0], ids=["zero", "negative", "true", "false", "float", "text", "integral-float"])
def test_max_concurrency_must_be_a_positive_int(value):
    calls = []
    flow, _ = _plain_flow(calls)
    with pytest.raises(ConfigurationError, match="max_concurrency"):
        flow.run({"max_concurrency": value})
    assert calls == []


def test_max_concurrency_one_is_accepted_and_recorded_in_the_plan():
    flow, _ = _plain_flow()
    plan = flow.plan({"max_concurrency": 1})
    assert plan.options.max_concurrency == 1
    assert plan.to_dict()["options"] == {"max_concurrency": 1}


@pytest.mark.parametrize("value", [0, -1, True, 1.5], ids=["zero", "negative", "true", "float"])
def test_flow_max_concurrency_must_be_a_positive_int(value):
    registry = AssetRegistry()

    @asset(registry=registry)
    def plain():
        return 1

    with pytest.raises(ConfigurationError, match="max_concurrency"):
        Flow(["plain"], registry=registry, max_concurrency=value)


def test_run_config_max_concurrency_overrides_the_flow_default():
    flow, _ = _plain_flow(max_concurrency=4)
    assert flow.plan().options.max_concurrency == 4
    assert flow.plan({"max_concurrency": 2}).options.max_concurrency == 2


def test_module_level_run_rejects_flow_max_concurrency_zero():
    calls = []
    _, registry = _plain_flow(calls)
    with pytest.raises(ConfigurationError, match="max_concurrency"):
        run(["plain"], registry=registry, max_concurrency=0)
    assert calls == []
