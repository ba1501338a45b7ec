"""`PartitionAtRuntime` and `PartitionKey` as definitions (SPEC §3, §9; seed 000).

A runtime domain has no catalog: the definition validates names, ``allowed``
and ``max_keys`` at definition time, and keys (non-empty strings of at most
`MAX_RUNTIME_KEY_LENGTH` characters, inside ``allowed``) when they are
declared or selected. Rejections are ``ValueError`` messages that never
repeat the rejected key.
"""

from __future__ import annotations

import dataclasses

import pytest

import partita as p
from partita.partitions.runtime import MAX_RUNTIME_KEY_LENGTH

SECRET = "tenant-secret-7f3a9c"


# -- the definition ------------------------------------------------------------------


def test_runtime_definition_publishes_kind_domain_and_key_format():
    definition = p.PartitionAtRuntime("tenants")

    assert definition.kind == "runtime"
    assert definition.domain == "runtime:tenants"
    assert definition.name == "tenants"
    assert definition.supports_range is False
    assert definition.max_keys is None
    assert str(MAX_RUNTIME_KEY_LENGTH) in definition.key_format
    described = definition.describe()
    assert described["kind"] == "runtime"
    assert described["domain"] == "runtime:tenants"
    assert described["supports_range"] is False
    assert described["max_keys"] is None
    assert described["allowed"] is None


def test_two_definitions_with_the_same_name_share_a_domain():
    assert p.PartitionAtRuntime("tenants").domain == p.PartitionAtRuntime("tenants", max_keys=3).domain
    assert p.PartitionAtRuntime("tenants").domain != p.PartitionAtRuntime("regions").domain


@pytest.mark.parametrize("name", ["tenants", "t1", "_tenants", "tenants.eu", "tenant-ids", "A_b-c.9"])
def test_valid_names(name):
    assert p.PartitionAtRuntime(name).domain == f"runtime:{name}"


@pytest.mark.parametrize(
    "name", ["", " ", "two words", "a/b", "a:b", "-leading", ".leading", "tab\tname", None, 3, b"tenants"]
)
def test_bad_names_are_definition_errors(name):
    with pytest.raises(p.DefinitionError, match="name"):
        p.PartitionAtRuntime(name)


@pytest.mark.parametrize("allowed", ["abc", b"abc", 5, 1.5, object()])
def test_allowed_must_be_a_collection_or_a_predicate(allowed):
    with pytest.raises(p.DefinitionError, match="allowed"):
        p.PartitionAtRuntime("tenants", allowed=allowed)


@pytest.mark.parametrize("allowed", [[1, 2], ["a", None], {"a", 3}, ("a", b"b")])
def test_allowed_keys_must_be_strings(allowed):
    with pytest.raises(p.DefinitionError, match="allowed"):
        p.PartitionAtRuntime("tenants", allowed=allowed)


@pytest.mark.parametrize("allowed", [["a", "b"], ("a", "b"), {"a", "b"}, frozenset({"a", "b"})])
def test_allowed_collections_are_accepted(allowed):
    definition = p.PartitionAtRuntime("tenants", allowed=allowed)
    assert definition.normalize_key("a") == "a"
    assert definition.describe()["allowed"] == "keys"


def test_an_allowed_collection_is_copied_at_definition_time():
    keys = ["a"]
    definition = p.PartitionAtRuntime("tenants", allowed=keys)
    keys.append("b")
    with pytest.raises(ValueError):
        definition.normalize_key("b")


@pytest.mark.parametrize("max_keys", [0, -1, True, False, 1.0, 2.5, "3", [3]])
def test_max_keys_must_be_a_positive_integer(max_keys):
    with pytest.raises(p.DefinitionError, match="max_keys"):
        p.PartitionAtRuntime("tenants", max_keys=max_keys)


@pytest.mark.parametrize("max_keys", [1, 2, 10_000])
def test_positive_max_keys_are_accepted(max_keys):
    definition = p.PartitionAtRuntime("tenants", max_keys=max_keys)
    assert definition.max_keys == max_keys
    assert definition.describe()["max_keys"] == max_keys


# -- keys --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    ["a", "tenant-42", "EU/west 1", "münchen", "0", "x" * MAX_RUNTIME_KEY_LENGTH, "é" * MAX_RUNTIME_KEY_LENGTH],
)
def test_non_empty_strings_up_to_the_documented_length_are_keys(key):
    definition = p.PartitionAtRuntime("tenants")
    assert definition.normalize_key(key) == key
    assert definition.format_key(key) == key
    assert definition.parse_key(key) == key


def test_a_partition_key_normalizes_to_its_string():
    definition = p.PartitionAtRuntime("tenants")
    assert definition.normalize_key(p.PartitionKey("acme", extra={"rows": 3})) == "acme"


def test_the_empty_key_is_rejected():
    with pytest.raises(ValueError, match="empty"):
        p.PartitionAtRuntime("tenants").normalize_key("")


def test_a_key_one_character_too_long_is_rejected_without_repeating_it():
    key = SECRET + "x" * (MAX_RUNTIME_KEY_LENGTH + 1 - len(SECRET))
    assert len(key) == MAX_RUNTIME_KEY_LENGTH + 1
    with pytest.raises(ValueError) as caught:
        p.PartitionAtRuntime("tenants").normalize_key(key)
    assert str(MAX_RUNTIME_KEY_LENGTH) in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize("key", [1, 0, None, False, b"acme", 1.5, ("a",), ["a"]])
def test_non_string_keys_are_rejected(key):
    with pytest.raises(ValueError, match="string"):
        p.PartitionAtRuntime("tenants").normalize_key(key)


@pytest.mark.parametrize("key", ["a\nb", "tab\there", "nul\x00", "del\x7f", "\r"])
def test_keys_with_control_characters_are_rejected(key):
    with pytest.raises(ValueError):
        p.PartitionAtRuntime("tenants").normalize_key(key)


def test_parse_key_rejects_bad_text_too():
    definition = p.PartitionAtRuntime("tenants")
    with pytest.raises(ValueError):
        definition.parse_key("")
    with pytest.raises(ValueError):
        definition.parse_key("x" * (MAX_RUNTIME_KEY_LENGTH + 1))


def test_runtime_definitions_do_not_support_ranges():
    with pytest.raises(ValueError):
        p.PartitionAtRuntime("tenants").range("a", "b")


# -- allowed ----------------------------------------------------------------------------


def test_a_key_outside_an_allowed_collection_is_rejected_without_repeating_it():
    definition = p.PartitionAtRuntime("tenants", allowed=["acme", "globex"])

    assert definition.normalize_key("acme") == "acme"
    with pytest.raises(ValueError) as caught:
        definition.normalize_key(SECRET)
    assert "runtime:tenants" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_an_empty_allowed_collection_rejects_every_key():
    definition = p.PartitionAtRuntime("tenants", allowed=[])
    with pytest.raises(ValueError):
        definition.normalize_key("acme")


def test_allowed_as_a_predicate_receives_the_key_and_decides():
    seen = []

    def only_eu(key):
        seen.append(key)
        return key.startswith("eu-")

    definition = p.PartitionAtRuntime("regions", allowed=only_eu)

    assert definition.describe()["allowed"] == "predicate"
    assert definition.normalize_key("eu-west") == "eu-west"
    with pytest.raises(ValueError) as caught:
        definition.normalize_key("us-" + SECRET)
    assert SECRET not in str(caught.value)
    assert "runtime:regions" in str(caught.value)
    assert seen == ["eu-west", "us-" + SECRET]


def test_a_predicate_receives_the_key_of_a_partition_key_value():
    seen = []
    definition = p.PartitionAtRuntime("tenants", allowed=lambda key: seen.append(key) or True)
    definition.normalize_key(p.PartitionKey("acme", {"rows": 1}))
    assert seen == ["acme"]


def test_a_predicate_is_not_asked_about_keys_that_break_the_basic_rules():
    seen = []
    definition = p.PartitionAtRuntime("tenants", allowed=lambda key: seen.append(key) or True)
    for bad in ("", "x" * (MAX_RUNTIME_KEY_LENGTH + 1), 7):
        with pytest.raises(ValueError):
            definition.normalize_key(bad)
    assert seen == []


def test_a_predicate_result_is_read_as_truthiness():
    assert p.PartitionAtRuntime("t", allowed=lambda key: 1).normalize_key("a") == "a"
    with pytest.raises(ValueError):
        p.PartitionAtRuntime("t", allowed=lambda key: None).normalize_key("a")
    with pytest.raises(ValueError):
        p.PartitionAtRuntime("t", allowed=lambda key: "").normalize_key("a")


def test_a_predicate_that_raises_rejects_the_key_with_a_value_error_naming_the_rule():
    def broken(key):
        raise RuntimeError(f"lookup failed for {key}")

    definition = p.PartitionAtRuntime("tenants", allowed=broken)

    with pytest.raises(ValueError) as caught:
        definition.normalize_key(SECRET)
    message = str(caught.value)
    assert "predicate" in message
    assert "RuntimeError" in message
    assert SECRET not in message
    # The predicate's own error (which repeats the key) is not chained in.
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__ is True


# -- products ---------------------------------------------------------------------------------


def test_a_runtime_dimension_is_rejected_inside_a_multi_partition_def():
    with pytest.raises(p.DefinitionError) as caught:
        p.MultiPartitionDef({"tenant": p.PartitionAtRuntime("tenants"), "day": p.DatePartitionDef()})
    assert "tenant" in str(caught.value)
    assert "runtime" in str(caught.value)


def test_a_runtime_dimension_is_rejected_in_any_position_of_a_product():
    with pytest.raises(p.DefinitionError):
        p.MultiPartitionDef({"day": p.DatePartitionDef(), "tenant": p.PartitionAtRuntime("tenants", max_keys=3)})


def test_a_runtime_domain_is_a_valid_asset_partition_def_and_the_function_stays_plain():
    registry = p.AssetRegistry()
    definition = p.PartitionAtRuntime("tenants")

    @p.asset(partition_def=definition, registry=registry)
    def tenants():
        return {"acme": 1}

    assert tenants() == {"acme": 1}
    assert registry.get("tenants").partition_def is definition


# -- PartitionKey --------------------------------------------------------------------------------


def test_partition_key_carries_a_key_and_optional_extra():
    plain = p.PartitionKey("acme")
    rich = p.PartitionKey("globex", extra={"rows": 12})
    keyword = p.PartitionKey(key="initech", extra=None)

    assert (plain.key, plain.extra) == ("acme", None)
    assert (rich.key, rich.extra) == ("globex", {"rows": 12})
    assert (keyword.key, keyword.extra) == ("initech", None)


def test_partition_key_is_immutable():
    key = p.PartitionKey("acme")
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.key = "other"  # type: ignore[misc]


def test_partition_keys_with_the_same_key_are_equal_whatever_their_extra():
    assert p.PartitionKey("acme", {"rows": 1}) == p.PartitionKey("acme", {"rows": 2}) == p.PartitionKey("acme")
    assert p.PartitionKey("acme") != p.PartitionKey("globex")
