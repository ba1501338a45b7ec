"""StaticPartitionDef (SPEC §3): a declared set of string keys, domain static:<name>."""

from __future__ import annotations

import pytest

from partita import DefinitionError, PartitionDef, StaticPartitionDef

SECRET = "tenant-acme-4711"


def regions() -> StaticPartitionDef:
    return StaticPartitionDef("regions", ["eu", "us", "apac"])


def test_static_definition_publishes_its_contract():
    definition = regions()
    assert isinstance(definition, PartitionDef)
    assert definition.domain == "static:regions"
    assert definition.name == "regions"
    assert definition.supports_range is False
    assert isinstance(definition.key_format, str) and definition.key_format


def test_static_domain_depends_only_on_the_name():
    assert StaticPartitionDef("regions", ["a"]).domain == StaticPartitionDef("regions", ["b", "c"]).domain
    assert StaticPartitionDef("regions", ["a"]).domain != StaticPartitionDef("zones", ["a"]).domain


def test_static_keys_keep_declaration_order():
    assert regions().keys == ("eu", "us", "apac")
    assert StaticPartitionDef("letters", iter(["z", "a", "m"])).keys == ("z", "a", "m")


@pytest.mark.parametrize("key", ["eu", "us", "apac"])
def test_declared_key_is_accepted_and_is_its_own_text(key):
    definition = regions()
    assert definition.normalize_key(key) == key
    assert definition.format_key(key) == key
    assert definition.parse_key(key) == key
    assert definition.key_identity(key) == key


def test_static_keys_may_contain_spaces_unicode_and_pipes_outside_a_product():
    definition = StaticPartitionDef("names", ["São Paulo", "a|b", " padded "])
    for key in definition.keys:
        assert definition.parse_key(definition.format_key(key)) == key


def test_unknown_static_key_is_rejected_without_echoing_it():
    with pytest.raises(ValueError) as info:
        regions().normalize_key(SECRET)
    assert SECRET not in str(info.value)
    assert str(info.value)


@pytest.mark.parametrize("key", ["EU", "eu ", " eu", "e", "", "eu\n"])
def test_near_miss_static_key_is_rejected(key):
    with pytest.raises(ValueError):
        regions().normalize_key(key)
    with pytest.raises(ValueError):
        regions().parse_key(key)


@pytest.mark.parametrize("key", [None, 0, 1, False, b"eu", ["eu"], ("eu",), {"eu": 1}])
def test_non_string_static_key_is_rejected(key):
    with pytest.raises(ValueError):
        regions().normalize_key(key)


def test_parse_key_rejects_non_text():
    with pytest.raises(ValueError):
        regions().parse_key(1)


@pytest.mark.parametrize("name", ["regions", "r", "_x", "0day", "a.b", "a-b", "A_b.c-9"])
def test_valid_static_names_are_accepted(name):
    assert StaticPartitionDef(name, ["k"]).domain == f"static:{name}"


@pytest.mark.parametrize("name", ["", " ", "a b", "-lead", ".lead", "a:b", "a/b", "a|b", "régions", "x\n", None, 1, b"regions"])
def test_invalid_static_name_is_a_definition_error(name):
    with pytest.raises(DefinitionError):
        StaticPartitionDef(name, ["k"])


def test_empty_key_list_is_a_definition_error():
    with pytest.raises(DefinitionError):
        StaticPartitionDef("regions", [])
    with pytest.raises(DefinitionError):
        StaticPartitionDef("regions", iter(()))


def test_duplicate_keys_are_a_definition_error_without_echoing_the_key():
    with pytest.raises(DefinitionError) as info:
        StaticPartitionDef("tenants", ["a", SECRET, "b", SECRET])
    assert SECRET not in str(info.value)


def test_empty_string_key_is_a_definition_error():
    with pytest.raises(DefinitionError):
        StaticPartitionDef("regions", ["eu", ""])


@pytest.mark.parametrize("key", ["eu\n", "\teu", "e\x00u", "e\x7fu"])
def test_key_with_control_character_is_a_definition_error(key):
    with pytest.raises(DefinitionError):
        StaticPartitionDef("regions", [key])


@pytest.mark.parametrize("key", [None, 1, b"eu", ("eu",)])
def test_non_string_declared_key_is_a_definition_error(key):
    with pytest.raises(DefinitionError):
        StaticPartitionDef("regions", ["us", key])


@pytest.mark.parametrize("keys", ["eu", "", b"eu"])
def test_single_string_instead_of_a_key_list_is_a_definition_error(keys):
    with pytest.raises(DefinitionError):
        StaticPartitionDef("regions", keys)


@pytest.mark.parametrize("keys", [None, 5])
def test_non_iterable_key_collection_is_a_definition_error(keys):
    with pytest.raises(DefinitionError):
        StaticPartitionDef("regions", keys)


def test_static_definition_has_no_range():
    definition = regions()
    with pytest.raises(ValueError):
        definition.range("eu", "us")


def test_static_describe_counts_keys_without_listing_them():
    description = StaticPartitionDef("tenants", [SECRET, "other"]).describe()
    assert description["domain"] == "static:tenants"
    assert description["supports_range"] is False
    assert description["key_count"] == 2
    assert SECRET not in repr(description)
    assert SECRET not in repr(StaticPartitionDef("tenants", [SECRET]))
