"""Declaration rules of `PartitionGroup` (SPEC §4, seed 003 "Bound progress")."""

import dataclasses

import pytest

from partita import AssetRegistry, DatePartitionDef, DefinitionError, Flow, PartitionGroup, asset


def test_group_keeps_member_order_and_defaults_to_one_active_key():
    group = PartitionGroup(["extract", "transform", "publish"])
    assert group.assets == ("extract", "transform", "publish")
    assert group.max_active_keys == 1


def test_group_accepts_a_tuple_and_a_larger_key_limit():
    group = PartitionGroup(("extract", "publish"), max_active_keys=3)
    assert group.assets == ("extract", "publish")
    assert group.max_active_keys == 3


def test_group_accepts_decorated_functions_and_uses_their_registered_names():
    registry = AssetRegistry()

    @asset(name="extract_daily", partition_def=DatePartitionDef(), registry=registry)
    def extract():
        return 1

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def transform(extract_daily):
        return extract_daily

    group = PartitionGroup([extract, transform])
    assert group.assets == ("extract_daily", "transform")


def test_group_is_immutable():
    group = PartitionGroup(["a", "b"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        group.max_active_keys = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        group.assets = ("b",)


@pytest.mark.parametrize("assets", [[], ()], ids=["list", "tuple"])
def test_empty_group_is_rejected(assets):
    with pytest.raises(DefinitionError, match="at least one asset"):
        PartitionGroup(assets)


def test_group_repeating_an_asset_is_rejected():
    with pytest.raises(DefinitionError, match="must not repeat"):
        PartitionGroup(["extract", "transform", "extract"])


def test_group_repeating_an_asset_by_name_and_by_function_is_rejected():
    registry = AssetRegistry()

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def extract():
        return 1

    with pytest.raises(DefinitionError, match="must not repeat"):
        PartitionGroup([extract, "extract"])


@pytest.mark.parametrize("limit", [0, -1, True, False, "2", 1.0, None], ids=["zero", "negative", "true", "false", "text", "float", "none"])
def test_group_max_active_keys_must_be_a_positive_int(limit):
    with pytest.raises(DefinitionError, match="max_active_keys"):
        PartitionGroup(["extract", "transform"], max_active_keys=limit)


@pytest.mark.parametrize("assets", ["extract", b"extract"], ids=["str", "bytes"])
def test_group_given_a_string_instead_of_a_list_is_rejected(assets):
    with pytest.raises(DefinitionError, match="ordered list"):
        PartitionGroup(assets)


@pytest.mark.parametrize("assets", [{"extract", "transform"}, 5], ids=["set", "int"])
def test_group_given_an_unordered_or_non_sequence_value_is_rejected(assets):
    with pytest.raises(DefinitionError, match="ordered list"):
        PartitionGroup(assets)


@pytest.mark.parametrize("member", [123, "", None], ids=["int", "empty-name", "none"])
def test_group_member_that_is_not_an_asset_reference_is_rejected(member):
    with pytest.raises(DefinitionError, match="PartitionGroup assets"):
        PartitionGroup(["extract", member])


def test_flow_rejects_partition_groups_that_are_not_partition_group_values():
    registry = AssetRegistry()

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def extract():
        return 1

    with pytest.raises(DefinitionError, match="PartitionGroup"):
        Flow(["extract"], registry=registry, partition_groups=[("extract",)])


def test_flow_given_a_single_group_instead_of_a_list_is_a_definition_error():
    registry = AssetRegistry()

    @asset(partition_def=DatePartitionDef(), registry=registry)
    def extract():
        return 1

    with pytest.raises(DefinitionError, match="partition_groups"):
        Flow(["extract"], registry=registry, partition_groups=PartitionGroup(["extract"]))
