"""Materialization identities: validation and the identity hash (SPEC §10, seed 003).

An identity is the asset name and version, the partition domain, the typed
key and whether it is present, and the ordered direct input materialization
ids. Bad identities are rejected with an error naming the field; the hash
distinguishes every part and never carries the raw key.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import subprocess
import sys
import textwrap

import pytest

from partita import (
    DefinitionError,
    FileMaterialization,
    Materialization,
    MaterializationCollection,
    MaterializationInvalidation,
    MaterializationRecord,
    PartitionDef,
)

ID_A = "0123456789abcdef0123456789abcdef"
ID_B = "fedcba9876543210fedcba9876543210"
IDENTITY_ERRORS = (ValueError, DefinitionError)


class AnyKey(PartitionDef):
    """A custom definition: int 1 and str "1" share the canonical text "1"."""

    @property
    def domain(self) -> str:
        return "custom:any"


def _record(**overrides):
    values = {
        "materialization_id": ID_A,
        "asset_name": "orders",
        "version": "1",
        "partition_domain": "static:tenants",
        "partition_key_text": "tenant-a",
        "partition_key_present": True,
        "input_materialization_ids": (),
    }
    values.update(overrides)
    return MaterializationRecord(**values)


# -- context validation ------------------------------------------------------------


def test_a_valid_context_keeps_its_fields(make_context):
    context = make_context(input_materialization_ids=[ID_A, ID_B])
    assert context.asset_name == "orders"
    assert context.version == "1"
    assert context.partition_domain == "static:tenants"
    assert context.partition_key == "tenant-a"
    assert context.partition_key_text == "tenant-a"
    assert context.partition_key_present is True
    # A list is accepted and normalized to a tuple, order kept.
    assert context.input_materialization_ids == (ID_A, ID_B)
    assert context.partition_key_type == "builtins.str"


def test_a_context_is_immutable(make_context):
    context = make_context()
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.version = "2"  # type: ignore[misc]


@pytest.mark.parametrize("asset_name", ["", None, 3])
def test_context_rejects_an_empty_or_non_text_asset_name(make_context, asset_name):
    with pytest.raises(IDENTITY_ERRORS, match="asset_name"):
        make_context(asset_name=asset_name)


@pytest.mark.parametrize("version", ["", " ", "   ", "\t", "\n", None, 1])
def test_context_rejects_an_empty_whitespace_or_non_text_version(make_context, version):
    with pytest.raises(IDENTITY_ERRORS, match="version"):
        make_context(version=version)


@pytest.mark.parametrize("version", [" 1", "1 ", "\t1"])
def test_context_rejects_a_version_with_surrounding_whitespace(make_context, version):
    with pytest.raises(IDENTITY_ERRORS, match="version"):
        make_context(version=version)


@pytest.mark.parametrize("domain", ["", None])
def test_context_rejects_an_empty_partition_domain(make_context, domain):
    with pytest.raises(IDENTITY_ERRORS, match="partition_domain"):
        make_context(partition_domain=domain)


@pytest.mark.parametrize("text", [None, 1])
def test_context_rejects_a_present_key_without_text(make_context, text):
    with pytest.raises(IDENTITY_ERRORS, match="key"):
        make_context(partition_key_text=text)


@pytest.mark.parametrize("text", ["tenant-a", ""])
def test_context_rejects_an_absent_key_with_text(make_context, text):
    with pytest.raises(IDENTITY_ERRORS, match="absent key"):
        make_context(partition_key=None, partition_key_present=False, partition_key_text=text)


@pytest.mark.parametrize("present", [1, 0, "yes", None])
def test_context_rejects_a_non_bool_presence(make_context, present):
    with pytest.raises(IDENTITY_ERRORS, match="partition_key_present"):
        make_context(partition_key_present=present)


def test_an_absent_key_without_text_is_a_valid_identity(make_context):
    context = make_context(partition_key=None, partition_key_text=None, partition_key_present=False)
    assert context.partition_key_present is False
    assert context.identity()["partition_key"] == {"present": False, "type": None, "text": None}


def test_a_present_empty_text_key_is_a_valid_identity(make_context):
    context = make_context(partition_key="", partition_key_text="")
    assert context.partition_key_text == ""


@pytest.mark.parametrize(
    "input_ids",
    [
        ID_A,  # one string is not a sequence of ids
        ID_A.encode(),
        (ID_A for _ in range(1)),  # not a sequence
        {ID_A},  # unordered
        5,
    ],
    ids=["str", "bytes", "generator", "set", "int"],
)
def test_context_rejects_input_ids_that_are_not_a_sequence(make_context, input_ids):
    with pytest.raises(IDENTITY_ERRORS, match="input_materialization_ids"):
        make_context(input_materialization_ids=input_ids)


@pytest.mark.parametrize(
    "bad",
    ["", "../escape", "a/b", "with space", "-leading-dash", "x" * 129, None, 7, b"abc"],
    ids=["empty", "dotdot", "slash", "space", "dash", "too-long", "none", "int", "bytes"],
)
def test_context_rejects_an_input_id_that_is_not_a_materialization_id(make_context, bad):
    with pytest.raises(IDENTITY_ERRORS, match=re.escape("input_materialization_ids[1]")):
        make_context(input_materialization_ids=[ID_A, bad])


# -- record validation ---------------------------------------------------------------


def test_a_valid_record_keeps_its_fields():
    record = _record(input_materialization_ids=[ID_B], committed_at=dt.datetime(2026, 8, 11, tzinfo=dt.UTC))
    assert record.materialization_id == ID_A
    assert record.input_materialization_ids == (ID_B,)
    assert record.metadata == {}


@pytest.mark.parametrize("materialization_id", ["", "../x", "a b", None, 5, "x" * 129])
def test_record_rejects_a_malformed_materialization_id(materialization_id):
    with pytest.raises(IDENTITY_ERRORS, match="materialization_id"):
        _record(materialization_id=materialization_id)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("asset_name", "", "asset_name"),
        ("version", "", "version"),
        ("version", "  ", "version"),
        ("partition_domain", "", "partition_domain"),
        ("partition_key_text", None, "key"),
        ("input_materialization_ids", "abc", "input_materialization_ids"),
        ("input_materialization_ids", ["../x"], "input_materialization_ids"),
    ],
)
def test_record_rejects_a_bad_identity_naming_the_field(field, value, named):
    with pytest.raises(IDENTITY_ERRORS, match=named):
        _record(**{field: value})


def test_record_rejects_an_absent_key_with_text():
    with pytest.raises(IDENTITY_ERRORS, match="absent key"):
        _record(partition_key_present=False, partition_key_text="tenant-a")


def test_record_matches_exactly_its_context(make_context):
    context = make_context(input_materialization_ids=(ID_A, ID_B))
    record = _record(materialization_id="c" * 32, input_materialization_ids=(ID_A, ID_B))
    assert record.matches(context)


@pytest.mark.parametrize(
    "overrides",
    [
        {"asset_name": "other"},
        {"version": "2"},
        {"partition_domain": "static:other"},
        {"partition_key": "tenant-b", "partition_key_text": "tenant-b"},
        {"partition_key": None, "partition_key_text": None, "partition_key_present": False},
        {"input_materialization_ids": (ID_B, ID_A)},
        {"input_materialization_ids": (ID_A,)},
    ],
    ids=["asset", "version", "domain", "key", "presence", "input-order", "input-count"],
)
def test_record_does_not_match_another_identity(make_context, overrides):
    record = _record(input_materialization_ids=(ID_A, ID_B))
    assert not record.matches(make_context(**{"input_materialization_ids": (ID_A, ID_B), **overrides}))


# -- the identity hash -------------------------------------------------------------------


def test_identity_hash_is_a_sha256_hex_digest_and_stable(make_context):
    first = make_context(input_materialization_ids=(ID_A,)).identity_hash()
    second = make_context(input_materialization_ids=[ID_A]).identity_hash()
    assert first == second
    assert re.fullmatch(r"[0-9a-f]{64}", first)
    assert make_context().identity_hash() == make_context().identity_hash()


def test_identity_hash_is_stable_across_processes(make_context):
    """No per-process salt (hash randomization) leaks into the identity."""
    context = make_context(input_materialization_ids=(ID_A, ID_B))
    script = textwrap.dedent(
        f"""
        from partita import MaterializationContext
        print(MaterializationContext(
            asset_name="orders", version="1", partition_domain="static:tenants",
            partition_key="tenant-a", partition_key_text="tenant-a", partition_key_present=True,
            input_materialization_ids=({ID_A!r}, {ID_B!r}),
        ).identity_hash())
        """
    )
    hashes = set()
    for seed in ("1", "2"):
        completed = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        )
        hashes.add(completed.stdout.strip())
    assert hashes == {context.identity_hash()}


@pytest.mark.parametrize(
    "overrides",
    [
        {"asset_name": "invoices"},
        {"version": "2"},
        {"version": "1.0"},
        {"partition_domain": "static:other"},
        {"partition_key": "tenant-b", "partition_key_text": "tenant-b"},
        {"partition_key": None, "partition_key_text": None, "partition_key_present": False},
        {"input_materialization_ids": (ID_B, ID_A)},
        {"input_materialization_ids": (ID_A,)},
        {"input_materialization_ids": ()},
        {"input_materialization_ids": (ID_A, ID_B, ID_A)},
    ],
    ids=[
        "asset",
        "version",
        "version-text",
        "domain",
        "key-text",
        "presence",
        "input-order",
        "input-subset",
        "no-inputs",
        "extra-input",
    ],
)
def test_identity_hash_differs_when_any_identity_part_differs(make_context, overrides):
    base = make_context(input_materialization_ids=(ID_A, ID_B))
    other = make_context(**{"input_materialization_ids": (ID_A, ID_B), **overrides})
    assert other.identity_hash() != base.identity_hash()


def test_identity_hash_separates_keys_of_different_types_with_the_same_text(make_context):
    definition = AnyKey()
    as_int, as_text = definition.normalize_key(1), definition.normalize_key("1")
    assert definition.format_key(as_int) == definition.format_key(as_text) == "1"
    contexts = [
        make_context(
            partition_domain=definition.domain,
            partition_key=key,
            partition_key_text=definition.format_key(key),
        )
        for key in (as_int, as_text)
    ]
    assert contexts[0].partition_key_text == contexts[1].partition_key_text
    assert contexts[0].partition_key_type != contexts[1].partition_key_type
    assert contexts[0].identity_hash() != contexts[1].identity_hash()


def test_identity_hash_separates_bool_and_int_keys_with_equal_values(make_context):
    one = make_context(partition_key=1, partition_key_text="x")
    true = make_context(partition_key=True, partition_key_text="x")
    assert one.identity_hash() != true.identity_hash()


def test_identity_hash_ignores_the_key_object_beyond_its_type_and_text(make_context):
    """Two equal keys of one type with the same text are one identity."""
    first = make_context(partition_key=dt.date(2026, 8, 11), partition_key_text="2026-08-11")
    second = make_context(partition_key=dt.date(2026, 8, 11), partition_key_text="2026-08-11")
    assert first.identity_hash() == second.identity_hash()


@pytest.mark.parametrize("secret", ["acme-private-4411", "Globex Tenant", "tenant/with/slashes", "ü-nicode-k€y"])
def test_identity_hash_never_contains_the_raw_key_text(make_context, secret):
    digest = make_context(partition_key=secret, partition_key_text=secret).identity_hash()
    assert secret not in digest
    assert secret.lower() not in digest
    assert re.fullmatch(r"[0-9a-f]{64}", digest)


def test_identity_mapping_names_every_part(make_context):
    identity = make_context(input_materialization_ids=(ID_B, ID_A)).identity()
    assert identity == {
        "asset": "orders",
        "version": "1",
        "partition_domain": "static:tenants",
        "partition_key": {"present": True, "type": "builtins.str", "text": "tenant-a"},
        "input_materialization_ids": [ID_B, ID_A],
    }


# -- protocols ---------------------------------------------------------------------------


class MinimalAdapter:
    """Only resolve/load/commit: the core protocol, no optional operations."""

    def resolve(self, context):
        return None

    def load(self, context, record):
        return None

    def commit(self, context, output):
        raise NotImplementedError


def test_file_materialization_implements_every_protocol(tmp_path):
    adapter = FileMaterialization(tmp_path)
    assert isinstance(adapter, Materialization)
    assert isinstance(adapter, MaterializationInvalidation)
    assert isinstance(adapter, MaterializationCollection)


def test_an_adapter_without_optional_operations_is_still_a_materialization():
    adapter = MinimalAdapter()
    assert isinstance(adapter, Materialization)
    assert not isinstance(adapter, MaterializationInvalidation)
    assert not isinstance(adapter, MaterializationCollection)
