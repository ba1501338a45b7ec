"""Resource and retry policies as validated values, and how plans show them (SPEC §5, §14)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import types

import pytest

import partita as p

NAN = float("nan")
INF = float("inf")


def _raises_naming(owner: str, field: str, build):
    with pytest.raises(p.DefinitionError) as caught:
        build()
    message = str(caught.value)
    assert owner in message, message
    assert field in message, message
    return message


# -- defaults ------------------------------------------------------------------


def test_policy_defaults_match_the_specified_signatures():
    resource = p.ResourcePolicy()
    assert resource.max_concurrency is None
    assert resource.rate_limit is None
    assert resource.max_attempts == 1
    assert resource.classify_failure is None

    retry = p.Retry()
    assert retry.after_seconds == 0.0
    assert retry.cooldown_resource is False

    policy = p.RetryPolicy()
    assert policy.max_attempts == 3
    assert policy.delay == 0.0
    assert policy.backoff == 2.0
    assert policy.max_delay is None
    assert policy.jitter == 0.0


def test_valid_policies_keep_their_values_and_seconds_become_floats():
    rate = p.RateLimit(requests=5, per_seconds=2)
    assert rate.requests == 5
    assert rate.per_seconds == 2.0 and isinstance(rate.per_seconds, float)

    classify = lambda exc: p.Fail()  # noqa: E731
    resource = p.ResourcePolicy(max_concurrency=4, rate_limit=rate, max_attempts=3, classify_failure=classify)
    assert (resource.max_concurrency, resource.rate_limit, resource.max_attempts) == (4, rate, 3)
    assert resource.classify_failure is classify

    retry = p.Retry(after_seconds=3, cooldown_resource=True)
    assert retry.after_seconds == 3.0 and isinstance(retry.after_seconds, float)
    assert retry.cooldown_resource is True

    policy = p.RetryPolicy(max_attempts=5, delay=1, backoff=1, max_delay=0, jitter=1)
    assert (policy.max_attempts, policy.delay, policy.backoff, policy.max_delay, policy.jitter) == (5, 1.0, 1.0, 0.0, 1.0)
    assert all(isinstance(value, float) for value in (policy.delay, policy.backoff, policy.max_delay, policy.jitter))


@pytest.mark.parametrize(
    "value",
    [p.RateLimit(1, 1.0), p.Retry(), p.RetryPolicy(), p.ResourcePolicy()],
    ids=lambda value: type(value).__name__,
)
def test_policies_are_immutable_values(value):
    field = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, 7)


def test_failure_actions_compare_by_value():
    assert p.Fail() == p.Fail()
    assert p.OpenCircuit() == p.OpenCircuit()
    assert p.Retry(2.0, True) == p.Retry(after_seconds=2, cooldown_resource=True)
    assert p.Retry(1.0) != p.Retry(2.0)


# -- ResourcePolicy ------------------------------------------------------------

BAD_POSITIVE_INTS = [0, -1, -10, True, False, 1.5, 2.0, "2", NAN, INF, -INF, [1]]


@pytest.mark.parametrize("value", BAD_POSITIVE_INTS, ids=repr)
def test_resource_policy_rejects_bad_max_concurrency(value):
    _raises_naming("ResourcePolicy", "max_concurrency", lambda: p.ResourcePolicy(max_concurrency=value))


@pytest.mark.parametrize("value", [*BAD_POSITIVE_INTS, None], ids=repr)
def test_resource_policy_rejects_bad_max_attempts(value):
    _raises_naming("ResourcePolicy", "max_attempts", lambda: p.ResourcePolicy(max_attempts=value))


@pytest.mark.parametrize(
    "value", ["1/s", (1, 1.0), {"requests": 1, "per_seconds": 1.0}, 5, p.Retry(), True], ids=repr
)
def test_resource_policy_rejects_a_rate_limit_that_is_not_a_rate_limit(value):
    _raises_naming("ResourcePolicy", "rate_limit", lambda: p.ResourcePolicy(rate_limit=value))


@pytest.mark.parametrize("value", ["Fail", 3, p.Fail(), p.Retry(), True], ids=repr)
def test_resource_policy_rejects_a_classifier_that_is_not_callable(value):
    _raises_naming("ResourcePolicy", "classify_failure", lambda: p.ResourcePolicy(classify_failure=value))


def test_resource_policy_accepts_large_limits_and_any_callable_classifier():
    class Classifier:
        def __call__(self, exc):
            return p.Fail()

    policy = p.ResourcePolicy(max_concurrency=10**6, max_attempts=10**6, classify_failure=Classifier())
    assert policy.max_concurrency == 10**6
    assert p.ResourcePolicy(classify_failure=p.Fail).classify_failure is p.Fail  # a class is callable too


# -- RateLimit -----------------------------------------------------------------


@pytest.mark.parametrize("value", [*BAD_POSITIVE_INTS, None], ids=repr)
def test_rate_limit_rejects_bad_requests(value):
    _raises_naming("RateLimit", "requests", lambda: p.RateLimit(requests=value, per_seconds=1.0))


BAD_POSITIVE_SECONDS = [0, 0.0, -0.0, -1, -1e-9, NAN, INF, -INF, True, False, "1", None, [1.0]]


@pytest.mark.parametrize("value", BAD_POSITIVE_SECONDS, ids=repr)
def test_rate_limit_rejects_bad_per_seconds(value):
    _raises_naming("RateLimit", "per_seconds", lambda: p.RateLimit(requests=1, per_seconds=value))


def test_rate_limit_accepts_tiny_and_huge_finite_windows():
    assert p.RateLimit(1, 1e-9).per_seconds == 1e-9
    assert p.RateLimit(1, 1e9).per_seconds == 1e9


# -- Retry ---------------------------------------------------------------------

BAD_NONNEGATIVE_SECONDS = [-1, -1e-9, NAN, INF, -INF, True, False, "1", None, [0.0]]


@pytest.mark.parametrize("value", BAD_NONNEGATIVE_SECONDS, ids=repr)
def test_retry_rejects_bad_after_seconds(value):
    _raises_naming("Retry", "after_seconds", lambda: p.Retry(after_seconds=value))


@pytest.mark.parametrize("value", [1, 0, "yes", "False", None, 1.0], ids=repr)
def test_retry_rejects_a_cooldown_flag_that_is_not_a_bool(value):
    _raises_naming("Retry", "cooldown_resource", lambda: p.Retry(cooldown_resource=value))


def test_retry_allows_zero_seconds():
    assert p.Retry(0).after_seconds == 0.0
    assert p.Retry(0.0, False) == p.Retry()


# -- RetryPolicy ---------------------------------------------------------------


@pytest.mark.parametrize("value", [*BAD_POSITIVE_INTS, None], ids=repr)
def test_retry_policy_rejects_bad_max_attempts(value):
    _raises_naming("RetryPolicy", "max_attempts", lambda: p.RetryPolicy(max_attempts=value))


@pytest.mark.parametrize("value", BAD_NONNEGATIVE_SECONDS, ids=repr)
def test_retry_policy_rejects_bad_delay(value):
    _raises_naming("RetryPolicy", "delay", lambda: p.RetryPolicy(delay=value))


@pytest.mark.parametrize("value", [0, 0.0, -1, 0.5, 0.999, NAN, INF, -INF, True, False, "2", None], ids=repr)
def test_retry_policy_rejects_a_backoff_below_one_or_not_a_finite_number(value):
    _raises_naming("RetryPolicy", "backoff", lambda: p.RetryPolicy(backoff=value))


@pytest.mark.parametrize("value", [-1, -1e-9, NAN, INF, -INF, True, False, "5", [5]], ids=repr)
def test_retry_policy_rejects_bad_max_delay(value):
    _raises_naming("RetryPolicy", "max_delay", lambda: p.RetryPolicy(max_delay=value))


@pytest.mark.parametrize("value", [-0.1, -1, 1.0001, 2, NAN, INF, -INF, True, False, "0.1", None], ids=repr)
def test_retry_policy_rejects_jitter_outside_zero_to_one(value):
    _raises_naming("RetryPolicy", "jitter", lambda: p.RetryPolicy(jitter=value))


@pytest.mark.parametrize(
    "owner, field, build",
    [
        ("RetryPolicy", "delay", lambda: p.RetryPolicy(delay=10**400)),
        ("RetryPolicy", "max_delay", lambda: p.RetryPolicy(max_delay=10**400)),
        ("Retry", "after_seconds", lambda: p.Retry(after_seconds=10**400)),
        ("RateLimit", "per_seconds", lambda: p.RateLimit(1, 10**400)),
    ],
    ids=["delay", "max_delay", "after_seconds", "per_seconds"],
)
def test_seconds_given_as_an_int_too_large_for_a_float_are_a_definition_error(owner, field, build):
    _raises_naming(owner, field, build)


# -- RetryPolicy.delay_before ----------------------------------------------------


def test_delay_before_follows_delay_times_backoff_to_the_retry_index():
    policy = p.RetryPolicy(max_attempts=6, delay=2.0, backoff=3.0)
    # Invocation n (n >= 2) waits delay * backoff ** (n - 2).
    assert [policy.delay_before(n) for n in range(2, 7)] == [2.0, 6.0, 18.0, 54.0, 162.0]


def test_delay_before_with_fractional_backoff():
    policy = p.RetryPolicy(delay=0.5, backoff=1.5)
    for n in range(2, 12):
        assert policy.delay_before(n) == pytest.approx(0.5 * 1.5 ** (n - 2))


def test_delay_before_with_backoff_one_is_constant():
    policy = p.RetryPolicy(delay=4.0, backoff=1.0)
    assert {policy.delay_before(n) for n in range(2, 50)} == {4.0}


def test_delay_before_is_capped_by_max_delay():
    policy = p.RetryPolicy(delay=1.0, backoff=2.0, max_delay=5.0)
    assert [policy.delay_before(n) for n in range(2, 8)] == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_delay_before_with_max_delay_zero_never_waits():
    policy = p.RetryPolicy(delay=3.0, backoff=2.0, max_delay=0.0)
    assert [policy.delay_before(n) for n in range(2, 10)] == [0.0] * 8


def test_delay_before_zero_delay_is_always_zero():
    policy = p.RetryPolicy(delay=0.0, backoff=5.0, jitter=0.5)
    assert [policy.delay_before(n, lambda: 0.9) for n in range(2, 30)] == [0.0] * 28


@pytest.mark.parametrize("draw, expected", [(0.0, 10.0), (0.2, 9.0), (0.5, 7.5), (0.999, 10.0 * (1 - 0.4995))])
def test_jitter_shortens_the_wait_by_jitter_times_the_injected_draw(draw, expected):
    policy = p.RetryPolicy(delay=10.0, backoff=2.0, jitter=0.5)
    assert policy.delay_before(2, lambda: draw) == pytest.approx(expected)
    assert policy.delay_before(3, lambda: draw) == pytest.approx(2 * expected)


def test_full_jitter_with_a_draw_of_one_waits_nothing():
    policy = p.RetryPolicy(delay=8.0, jitter=1.0)
    assert policy.delay_before(2, lambda: 1.0) == 0.0


def test_jitter_applies_after_the_max_delay_cap():
    policy = p.RetryPolicy(delay=100.0, backoff=2.0, max_delay=10.0, jitter=0.5)
    assert policy.delay_before(5, lambda: 1.0) == pytest.approx(5.0)
    assert policy.delay_before(5, lambda: 0.0) == pytest.approx(10.0)


def test_jitter_accepts_a_random_instance_and_is_reproducible_with_a_seed():
    policy = p.RetryPolicy(delay=10.0, backoff=2.0, jitter=0.3)
    expected_draws = [random.Random(42).random()]
    waited = policy.delay_before(3, random.Random(42))
    assert waited == pytest.approx(20.0 * (1 - 0.3 * expected_draws[0]))


def test_jitter_without_a_source_stays_within_its_bounds():
    policy = p.RetryPolicy(delay=10.0, jitter=0.25)
    for _ in range(200):
        assert 7.5 <= policy.delay_before(2) <= 10.0


def test_without_jitter_the_random_source_is_ignored():
    def explode():
        raise AssertionError("no jitter, no draw")

    assert p.RetryPolicy(delay=3.0).delay_before(2, explode) == 3.0


@pytest.mark.parametrize("invocation", [1_100, 10_000, 10**9])
def test_huge_retry_indexes_do_not_overflow(invocation):
    uncapped = p.RetryPolicy(delay=1.0, backoff=2.0)
    wait = uncapped.delay_before(invocation)
    assert isinstance(wait, float) and math.isfinite(wait) and wait > 0

    capped = p.RetryPolicy(delay=1.0, backoff=2.0, max_delay=60.0)
    assert capped.delay_before(invocation) == 60.0

    jittered = p.RetryPolicy(delay=1.0, backoff=10.0, max_delay=60.0, jitter=0.5)
    assert jittered.delay_before(invocation, lambda: 1.0) == pytest.approx(30.0)

    unjittered_huge = p.RetryPolicy(delay=1.0, backoff=10.0, jitter=0.5)
    assert math.isfinite(unjittered_huge.delay_before(invocation, lambda: 0.5))


def test_zero_delay_stays_zero_even_for_huge_retry_indexes():
    policy = p.RetryPolicy(max_attempts=5_000, delay=0.0, backoff=2.0)
    assert policy.delay_before(2_000) == 0.0


# -- Flow(resources=...) ---------------------------------------------------------


def _registry_with(resource: str | None = "api"):
    registry = p.AssetRegistry()
    calls: list[str] = []

    @p.asset(resource=resource, registry=registry)
    def fetch():
        calls.append("fetch")
        return 1

    return registry, calls


@pytest.mark.parametrize(
    "value",
    [[("api", p.ResourcePolicy())], "api", p.ResourcePolicy(), 3, (p.ResourcePolicy(),)],
    ids=["list", "str", "policy", "int", "tuple"],
)
def test_flow_resources_must_be_a_mapping(value):
    registry, _ = _registry_with()
    _raises_naming("Flow", "resources", lambda: p.Flow(["fetch"], registry=registry, resources=value))


@pytest.mark.parametrize(
    "value", [{"max_concurrency": 1}, None, p.RateLimit(1, 1.0), p.RetryPolicy(), "policy", p.ResourcePolicy],
    ids=["dict", "None", "RateLimit", "RetryPolicy", "str", "class"],
)
def test_flow_resources_values_must_be_resource_policies(value):
    registry, _ = _registry_with()
    message = _raises_naming(
        "Flow", "resources", lambda: p.Flow(["fetch"], registry=registry, resources={"api": value})
    )
    assert "'api'" in message
    assert "ResourcePolicy" in message


@pytest.mark.parametrize("name", ["", "   ", "\t", 3, None, ("api",)], ids=repr)
def test_flow_resource_names_must_be_non_empty_strings(name):
    registry, _ = _registry_with()
    _raises_naming(
        "Flow", "resources", lambda: p.Flow(["fetch"], registry=registry, resources={name: p.ResourcePolicy()})
    )


def test_flow_resources_accept_none_empty_and_read_only_mappings():
    registry, _ = _registry_with(resource=None)
    assert p.Flow(["fetch"], registry=registry, resources=None).run().succeeded
    assert p.Flow(["fetch"], registry=registry, resources={}).run().succeeded
    registry, _ = _registry_with()
    proxy = types.MappingProxyType({"api": p.ResourcePolicy(max_concurrency=1)})
    assert p.Flow(["fetch"], registry=registry, resources=proxy).run().succeeded


def test_asset_resource_and_retry_options_are_validated_at_decoration():
    registry = p.AssetRegistry()

    def body():
        return 1

    for bad in ("", "  ", 3):
        with pytest.raises(p.DefinitionError, match="resource"):
            p.asset(resource=bad, registry=registry)(body)
    for bad in (3, p.ResourcePolicy(), {"max_attempts": 3}):
        with pytest.raises(p.DefinitionError, match="retry"):
            p.asset(retry=bad, registry=registry)(body)
    assert "body" not in registry


def test_an_asset_naming_an_undeclared_resource_fails_planning_before_any_body_runs():
    registry, calls = _registry_with(resource="warehouse")
    flow = p.Flow(["fetch"], registry=registry, resources={"api": p.ResourcePolicy()})
    with pytest.raises(p.PlanningError) as caught:
        flow.plan()
    message = str(caught.value)
    assert "'fetch'" in message
    assert "'warehouse'" in message
    with pytest.raises(p.PlanningError, match="warehouse"):
        flow.run()
    assert calls == []


def test_an_undeclared_resource_on_an_upstream_asset_fails_planning_too():
    registry = p.AssetRegistry()
    calls: list[str] = []

    @p.asset(resource="db", registry=registry)
    def upstream():
        calls.append("upstream")
        return 1

    @p.asset(registry=registry)
    def downstream(upstream):
        calls.append("downstream")
        return upstream

    with pytest.raises(p.PlanningError) as caught:
        p.Flow(["downstream"], registry=registry).run()
    assert "'upstream'" in str(caught.value) and "'db'" in str(caught.value)
    assert calls == []


def test_an_undeclared_resource_outside_the_closure_does_not_matter():
    registry = p.AssetRegistry()

    @p.asset(resource="nowhere", registry=registry)
    def unrelated():
        return 0

    @p.asset(registry=registry)
    def wanted():
        return 1

    result = p.Flow(["wanted"], registry=registry).run()
    assert result.succeeded
    assert dict(result.resources) == {}


# -- the plan document -------------------------------------------------------------


def test_plan_document_lists_each_used_resource_with_its_assets_and_limits():
    registry = p.AssetRegistry()

    @p.asset(resource="api", registry=registry)
    def first():
        return 1

    @p.asset(resource="db", registry=registry)
    def second(first):
        return first

    @p.asset(resource="api", registry=registry)
    def third(second):
        return second

    @p.asset(resource="unused_by_closure", registry=registry)
    def elsewhere():
        return 0

    flow = p.Flow(
        ["third"],
        registry=registry,
        resources={
            "api": p.ResourcePolicy(
                max_concurrency=2,
                rate_limit=p.RateLimit(requests=5, per_seconds=1),
                max_attempts=3,
                classify_failure=lambda exc: p.Fail(),
            ),
            "db": p.ResourcePolicy(),
            "unused_by_closure": p.ResourcePolicy(max_concurrency=9),
            "declared_only": p.ResourcePolicy(max_concurrency=1),
        },
    )
    plan = flow.plan()
    document = plan.to_dict()
    by_name = {entry["name"]: entry for entry in document["resources"]}
    assert set(by_name) == {"api", "db"}
    assert by_name["api"] == {
        "name": "api",
        "assets": ["first", "third"],
        "max_concurrency": 2,
        "rate_limit": {"requests": 5, "per_seconds": 1.0},
        "max_attempts": 3,
        "classifies_failures": True,
    }
    assert by_name["db"] == {
        "name": "db",
        "assets": ["second"],
        "max_concurrency": None,
        "rate_limit": None,
        "max_attempts": 1,
        "classifies_failures": False,
    }
    assert json.loads(plan.to_json())["resources"] == document["resources"]


def test_plan_task_entries_show_resource_and_retry_policy():
    registry = p.AssetRegistry()

    @p.asset(resource="api", retry=p.RetryPolicy(max_attempts=4, delay=0.5, backoff=3, max_delay=10, jitter=0.1),
             registry=registry)
    def fetch():
        return 1

    @p.asset(registry=registry)
    def plain(fetch):
        return fetch

    plan = p.Flow(["plain"], registry=registry, resources={"api": p.ResourcePolicy()}).plan()
    tasks = {task["name"]: task for task in plan.to_dict()["tasks"]}
    assert tasks["fetch"]["resource"] == "api"
    assert tasks["fetch"]["retry"] == {
        "max_attempts": 4,
        "delay": 0.5,
        "backoff": 3.0,
        "max_delay": 10.0,
        "jitter": 0.1,
    }
    assert tasks["plain"]["resource"] is None
    assert tasks["plain"]["retry"] is None
    json.loads(plan.to_json())  # JSON-safe


def test_plan_without_resources_has_an_empty_resource_list():
    registry, _ = _registry_with(resource=None)
    assert p.Flow(["fetch"], registry=registry).plan().to_dict()["resources"] == []
