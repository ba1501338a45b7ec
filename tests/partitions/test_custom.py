"""Custom PartitionDef subclasses keep identity normalization (SPEC §3, §14)."""

from __future__ import annotations

import json

import pytest

from partita import MultiPartitionDef, MultiPartitionKey, PartitionDef, StaticPartitionDef


class TenantPartitions(PartitionDef):
    """A custom definition that overrides nothing."""


class NamedPartitions(PartitionDef):
    """A custom definition with its own domain."""

    @property
    def domain(self) -> str:
        return "tenants"


@pytest.mark.parametrize("key", [0, "", False, None, 0.0, (), "tenant", 42])
def test_custom_definition_keeps_every_value_as_a_present_key(key):
    assert TenantPartitions().normalize_key(key) is key


@pytest.mark.parametrize("falsy", [0, "", False])
def test_falsy_values_are_keys_not_omitted_work(falsy):
    definition = TenantPartitions()
    key = definition.normalize_key(falsy)
    assert key is falsy
    assert definition.key_identity(key) is not None


def test_zero_and_false_are_two_distinct_keys():
    definition = TenantPartitions()
    assert 0 == False  # noqa: E712 - the point: equal values of different types
    assert definition.key_identity(0) != definition.key_identity(False)
    assert definition.key_identity(1) != definition.key_identity(True)


def test_zero_empty_string_and_false_have_three_distinct_identities():
    definition = TenantPartitions()
    identities = {definition.key_identity(definition.normalize_key(k)) for k in (0, "", False, 0, "", False)}
    assert len(identities) == 3


def test_equal_keys_of_the_same_type_share_an_identity():
    definition = TenantPartitions()
    assert definition.key_identity("acme") == definition.key_identity("ac" + "me")
    assert definition.key_identity((1, "a")) == definition.key_identity((1, "a"))
    assert definition.key_identity(0) == definition.key_identity(0)


def test_key_identity_uses_type_and_value():
    assert TenantPartitions().key_identity(0) == (int, 0)
    assert TenantPartitions().key_identity(False) == (bool, False)


@pytest.mark.parametrize("key", [[1], {"a": 1}, {1}, ([1],)])
def test_unhashable_key_in_key_identity_raises_value_error(key):
    with pytest.raises(ValueError):
        TenantPartitions().key_identity(key)


def test_default_domain_is_stable_and_starts_with_custom():
    first, second = TenantPartitions(), TenantPartitions()
    assert first.domain.startswith("custom:")
    assert first.domain == second.domain
    assert first.domain == TenantPartitions().domain
    assert "TenantPartitions" in first.domain


def test_different_custom_classes_have_different_default_domains():
    class Other(PartitionDef):
        pass

    assert Other().domain.startswith("custom:")
    assert Other().domain != TenantPartitions().domain


def test_custom_definition_may_name_its_own_domain():
    assert NamedPartitions().domain == "tenants"


def test_custom_definition_has_no_range_by_default():
    definition = TenantPartitions()
    assert definition.supports_range is False
    with pytest.raises(ValueError):
        definition.range(0, 1)


def test_custom_parse_key_takes_text_and_format_key_gives_text():
    definition = TenantPartitions()
    assert definition.parse_key("acme") == "acme"
    assert definition.parse_key("") == ""
    assert definition.format_key(0) == "0"
    with pytest.raises(ValueError):
        definition.parse_key(0)


def test_custom_describe_is_json_safe():
    description = TenantPartitions().describe()
    assert json.loads(json.dumps(description)) == description
    assert description["kind"] == "custom"
    assert description["domain"] == TenantPartitions().domain
    assert description["supports_range"] is False


def test_custom_definition_can_be_a_product_dimension_and_keeps_falsy_keys():
    product = MultiPartitionDef({"tenant": TenantPartitions(), "region": StaticPartitionDef("regions", ["eu"])})
    key = product.normalize_key({"region": "eu", "tenant": 0})
    assert key == MultiPartitionKey({"tenant": 0, "region": "eu"})
    assert product.key_identity(key) != product.key_identity(product.normalize_key({"tenant": False, "region": "eu"}))
    with pytest.raises(ValueError):
        product.key_identity(product.normalize_key({"tenant": [1], "region": "eu"}))
