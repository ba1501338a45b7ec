"""A ``context.partition_keys = [...]`` assignment is accepted or rejected whole (SPEC §9; seed 000).

Every element is validated (type, emptiness, length, ``allowed``, ``extra``,
``max_keys`` after duplicates collapse) before any key is declared. A
rejected list declares nothing and does not use up the one assignment, so a
body that catches the `DiscoveryError` can assign a corrected list, and one
that swallows it discovers nothing from the rejected list.
"""

from __future__ import annotations

import pytest

import partita as p
from partita.partitions.runtime import MAX_RUNTIME_KEY_LENGTH

SECRET = "tenant-secret-9c41aa"


def _run(producer, **domain_options):
    """tenants (the producer) -> load, in one runtime domain; returns the result and load's keys."""
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants", **domain_options)
    p.asset(partition_def=domain, registry=registry, name="tenants")(producer)

    @p.asset(partition_def=domain, registry=registry)
    def load(context, tenants):
        return context.partition_key

    result = p.Flow(["load"], registry=registry, store=False).run()
    return result, [attempt.partition_key for attempt in result.tasks["load"].attempts]


REJECTED_LISTS = [
    ("empty-key", ["us", ""], {}),
    ("not-a-string", ["us", 7], {}),
    ("too-long", ["us", "x" * (MAX_RUNTIME_KEY_LENGTH + 1)], {}),
    ("control-character", ["us", "e\nu"], {}),
    ("not-allowed", ["us", SECRET], {"allowed": ["us", "eu"]}),
    ("predicate-rejects", ["us", SECRET], {"allowed": lambda key: key != SECRET}),
    ("over-max-keys", ["us", "eu", "ap"], {"max_keys": 2}),
    ("extra-not-a-mapping", ["us", p.PartitionKey("eu", extra=["rows"])], {}),
    ("extra-not-json", ["us", p.PartitionKey("eu", extra={"rows": float("nan")})], {}),
]


@pytest.mark.parametrize(("keys", "options"), [case[1:] for case in REJECTED_LISTS], ids=[c[0] for c in REJECTED_LISTS])
def test_a_rejected_list_declares_nothing_and_a_corrected_assignment_succeeds(keys, options):
    seen = {}

    def tenants(context):
        with pytest.raises(p.DiscoveryError) as caught:
            context.partition_keys = keys
        seen["message"] = str(caught.value)
        seen["declared"] = context.partition_keys
        context.partition_keys = ["us", "eu"]

    result, load_keys = _run(tenants, **options)

    assert seen["declared"] == ()
    assert SECRET not in seen["message"]
    assert result.status is p.RunStatus.SUCCESS
    assert load_keys == ["us", "eu"]
    assert result.discovered_partition_keys("tenants") == ("us", "eu")


def test_a_body_that_swallows_a_rejected_list_fans_out_none_of_it():
    def tenants(context):
        try:
            context.partition_keys = ["us", ""]
        except p.DiscoveryError:
            pass

    result, load_keys = _run(tenants)

    assert result.status is p.RunStatus.SUCCESS
    assert load_keys == []
    assert result.discovered_partition_keys("tenants") == ()


def test_the_rejection_names_the_position_in_the_list_and_says_nothing_was_declared():
    def tenants(context):
        context.partition_keys = ["us", "eu", ""]

    result, _ = _run(tenants)

    (attempt,) = result.tasks["tenants"].attempts
    assert isinstance(attempt.exception, p.DiscoveryError)
    message = str(attempt.exception)
    assert "partition_keys[2]" in message
    assert "nothing was declared" in message


def test_add_partition_after_a_rejected_list_declares_keys_one_at_a_time():
    def tenants(context):
        try:
            context.partition_keys = [SECRET, 7]
        except p.DiscoveryError:
            context.add_partition("us")

    result, load_keys = _run(tenants)

    assert result.status is p.RunStatus.SUCCESS
    assert load_keys == ["us"]


def test_duplicates_collapse_before_max_keys_is_checked_for_the_whole_list():
    def tenants(context):
        context.partition_keys = ["us", p.PartitionKey("eu", extra={"first": True}), "us", p.PartitionKey("eu")]

    result, load_keys = _run(tenants, max_keys=2)

    assert load_keys == ["us", "eu"]
    declared = result.discoveries["tenants"]
    assert [(key.key, key.extra) for key in declared] == [("us", None), ("eu", {"first": True})]


def test_a_generator_that_raises_midway_declares_nothing():
    def keys():
        yield "us"
        raise LookupError("catalog unavailable")

    seen = {}

    def tenants(context):
        with pytest.raises(LookupError):
            context.partition_keys = keys()
        seen["declared"] = context.partition_keys
        context.partition_keys = ["eu"]

    result, load_keys = _run(tenants)

    assert seen["declared"] == ()
    assert load_keys == ["eu"]


def test_an_endless_generator_stops_at_max_keys_and_declares_nothing():
    def endless():
        index = 0
        while True:
            yield f"t{index}"
            index += 1

    def tenants(context):
        context.partition_keys = endless()

    result, load_keys = _run(tenants, max_keys=3)

    (attempt,) = result.tasks["tenants"].attempts
    assert "max_keys=3" in str(attempt.exception)
    assert result.discoveries.get("tenants", ()) == ()
    assert load_keys == []


def test_an_accepted_assignment_is_still_the_only_one():
    def tenants(context):
        context.partition_keys = ["us"]
        context.partition_keys = ["eu"]

    result, load_keys = _run(tenants)

    (attempt,) = result.tasks["tenants"].attempts
    assert attempt.status is p.AttemptStatus.FAILED
    assert "twice" in str(attempt.exception)
    assert load_keys == []
