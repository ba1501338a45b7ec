"""Promises of the `@asset` decorator (SPEC §1, §2, §14)."""

import functools

import pytest

import partita
from partita import (
    AssetContext,
    AssetRegistry,
    DatePartitionDef,
    DefinitionError,
    Flow,
    StaticPartitionDef,
    asset,
)
from partita.definitions.registry import fresh_default_registry

# -- plain Python stays plain ------------------------------------------------


def test_decorated_function_is_returned_unchanged_and_callable_directly():
    registry = AssetRegistry()

    def numbers():
        return [1, 2, 3]

    decorated = asset(registry=registry)(numbers)

    assert decorated is numbers
    assert numbers() == [1, 2, 3]
    assert numbers.__name__ == "numbers"


def test_decorated_function_with_inputs_is_unit_testable_without_partita():
    registry = AssetRegistry()

    @asset(registry=registry)
    def numbers():
        return [1, 2, 3]

    @asset(registry=registry)
    def total(numbers, context=None):
        return sum(numbers)

    assert total([4, 5]) == 9
    assert total(numbers=[1], context=None) == 1


def test_async_body_stays_an_awaitable_coroutine_function():
    import asyncio
    import inspect

    registry = AssetRegistry()

    @asset(registry=registry)
    async def fetched():
        return 42

    assert inspect.iscoroutinefunction(fetched)
    assert asyncio.run(fetched()) == 42


def test_bare_asset_decorator_registers_in_the_default_registry():
    # The bare form has no registry option; a fresh default keeps this isolated.
    with fresh_default_registry() as registry:

        @asset
        def bare():
            return "bare"

        assert "bare" in registry
        assert bare() == "bare"
        result = Flow(["bare"], registry=registry).run()
    assert result.succeeded
    assert result.output("bare") == "bare"


def test_asset_with_empty_parentheses_and_with_options_both_register():
    registry = AssetRegistry()

    @asset(registry=registry)
    def first():
        return 1

    @asset(registry=registry, partition_def=DatePartitionDef())
    def second():
        return 2

    assert list(registry) == ["first", "second"]
    assert registry["second"].partitioned
    assert not registry["first"].partitioned


def test_asset_is_importable_from_the_package_root():
    assert partita.asset is asset
    assert partita.AssetRegistry is AssetRegistry


# -- name option ------------------------------------------------------------


def test_name_option_registers_under_the_given_name_and_keeps_the_function_name():
    registry = AssetRegistry()

    @asset(name="daily_sales", registry=registry)
    def load():
        return "sales"

    assert "daily_sales" in registry
    assert "load" not in registry
    assert load.__name__ == "load"
    result = Flow(["daily_sales"], registry=registry).run()
    assert result.output("daily_sales") == "sales"


def test_decorated_function_can_be_used_as_a_flow_target():
    registry = AssetRegistry()

    @asset(name="renamed", registry=registry)
    def load():
        return "x"

    plan = Flow(load, registry=registry).plan()
    assert plan.targets == ("renamed",)


# -- dependencies -----------------------------------------------------------


def test_parameter_names_are_dependencies_that_receive_upstream_outputs():
    registry = AssetRegistry()

    @asset(registry=registry)
    def raw():
        return 20

    @asset(registry=registry)
    def doubled(raw):
        return raw * 2

    assert registry["doubled"].deps == ("raw",)
    result = Flow(["doubled"], registry=registry).run()
    assert result.output("doubled") == 40


def test_deps_by_name_are_ordering_only_and_pass_no_input():
    registry = AssetRegistry()
    calls = []

    @asset(registry=registry)
    def setup():
        calls.append("setup")
        return "ignored"

    @asset(deps=["setup"], registry=registry)
    def report():
        calls.append("report")
        return "done"

    assert registry["report"].deps == ("setup",)
    assert registry["report"].inputs == ()
    result = Flow(["report"], registry=registry).run()
    assert result.succeeded
    assert calls == ["setup", "report"]


def test_deps_by_decorated_function_resolve_to_its_registered_name_and_pass_no_input():
    registry = AssetRegistry()
    calls = []

    @asset(name="raw_table", registry=registry)
    def load():
        calls.append("load")
        return "table"

    @asset(deps=[load], registry=registry)
    def report():
        calls.append("report")
        return "done"

    assert registry["report"].deps == ("raw_table",)
    result = Flow(["report"], registry=registry).run()
    assert result.succeeded
    assert calls == ["load", "report"]
    plan = Flow(["report"], registry=registry).plan()
    assert [task.name for task in plan.tasks] == ["raw_table", "report"]


def test_deps_add_to_parameter_dependencies_without_repeats():
    registry = AssetRegistry()

    @asset(registry=registry)
    def a():
        return 1

    @asset(registry=registry)
    def b():
        return 2

    @asset(deps=["b", "a", a, "b"], registry=registry)
    def c(a):
        return a

    assert registry["c"].deps == ("a", "b")


@pytest.mark.parametrize("bad_deps", ["upstream", {"upstream"}, 5])
def test_deps_that_are_not_a_list_are_rejected(bad_deps):
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match="deps"):

        @asset(deps=bad_deps, registry=registry)
        def consumer():
            return None

    assert "consumer" not in registry


@pytest.mark.parametrize("bad_entry", [123, "", None])
def test_deps_entries_that_are_neither_names_nor_assets_are_rejected(bad_entry):
    registry = AssetRegistry()
    with pytest.raises(DefinitionError):

        @asset(deps=[bad_entry], registry=registry)
        def consumer():
            return None


def test_deps_entry_that_is_an_undecorated_function_is_rejected():
    registry = AssetRegistry()

    def plain():
        return None

    with pytest.raises(DefinitionError, match="deps"):

        @asset(deps=[plain], registry=registry)
        def consumer():
            return None


# -- the context parameter --------------------------------------------------


def test_parameter_named_context_receives_the_run_context_not_an_upstream():
    registry = AssetRegistry()
    seen = []

    @asset(registry=registry)
    def with_context(context):
        seen.append(context)
        return context.asset_name

    definition = registry["with_context"]
    assert definition.deps == ()
    assert definition.context_parameter == "context"
    result = Flow(["with_context"], registry=registry).run()
    assert result.output("with_context") == "with_context"
    assert isinstance(seen[0], AssetContext)
    assert seen[0].partition_key_present is False


def test_parameter_annotated_asset_context_receives_the_run_context():
    registry = AssetRegistry()
    seen = []

    @asset(registry=registry)
    def upstream():
        return 3

    @asset(registry=registry)
    def annotated(upstream, ctx: AssetContext):
        seen.append(ctx)
        return upstream

    definition = registry["annotated"]
    assert definition.deps == ("upstream",)
    assert definition.context_parameter == "ctx"
    result = Flow(["annotated"], registry=registry).run()
    assert result.output("annotated") == 3
    assert isinstance(seen[0], AssetContext)
    assert seen[0].asset_name == "annotated"


def test_string_annotation_asset_context_is_the_context_parameter():
    registry = AssetRegistry()

    @asset(registry=registry)
    def annotated(run_ctx: "AssetContext"):
        return run_ctx.asset_name

    assert registry["annotated"].context_parameter == "run_ctx"
    assert registry["annotated"].deps == ()


def test_partitioned_asset_context_carries_the_selected_key():
    registry = AssetRegistry()

    @asset(partition_def=StaticPartitionDef("region", ["eu", "us"]), registry=registry)
    def per_region(context):
        return context.partition_key

    result = Flow(["per_region"], registry=registry).run({"partition_keys": ["us"]})
    assert result.output("per_region", "us") == "us"


def test_two_context_parameters_are_rejected():
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match="more than one context parameter"):

        @asset(registry=registry)
        def confused(context, ctx: AssetContext):
            return None


# -- registration -----------------------------------------------------------


def test_duplicate_asset_name_is_rejected_at_registration_naming_the_asset():
    registry = AssetRegistry()

    @asset(registry=registry)
    def orders():
        return "first"

    with pytest.raises(DefinitionError, match="'orders'"):

        @asset(name="orders", registry=registry)
        def other_orders():
            return "second"

    assert len(registry) == 1
    assert registry["orders"].fn is orders


def test_same_name_in_two_separate_registries_is_allowed():
    first, second = AssetRegistry(), AssetRegistry()

    @asset(name="shared", registry=first)
    def one():
        return 1

    @asset(name="shared", registry=second)
    def two():
        return 2

    assert Flow(["shared"], registry=first).run().output("shared") == 1
    assert Flow(["shared"], registry=second).run().output("shared") == 2


# -- malformed definitions --------------------------------------------------


def test_variadic_positional_parameter_is_rejected_naming_asset_and_parameter():
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match=r"'spread'.*'inputs'.*variadic"):

        @asset(registry=registry)
        def spread(*inputs):
            return inputs

    assert "spread" not in registry


def test_variadic_keyword_parameter_is_rejected_naming_asset_and_parameter():
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match=r"'spread'.*'options'.*variadic"):

        @asset(registry=registry)
        def spread(**options):
            return options

    assert "spread" not in registry


def test_positional_only_parameter_is_rejected_naming_asset_and_parameter():
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match=r"'positional'.*'upstream'.*positional-only"):

        @asset(registry=registry)
        def positional(upstream, /):
            return upstream

    assert "positional" not in registry


def test_keyword_only_parameter_is_an_ordinary_dependency():
    registry = AssetRegistry()

    @asset(registry=registry)
    def upstream():
        return 5

    @asset(registry=registry)
    def keyword(*, upstream):
        return upstream + 1

    assert Flow(["keyword"], registry=registry).run().output("keyword") == 6


def test_generator_function_is_rejected():
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match=r"'rows'.*generator"):

        @asset(registry=registry)
        def rows():
            yield 1

    assert "rows" not in registry


def test_async_generator_function_is_rejected():
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match=r"'rows'.*generator"):

        @asset(registry=registry)
        async def rows():
            yield 1

    assert "rows" not in registry


@pytest.mark.parametrize("bad_name", ["", "1st", "has space", "with-dash", "dotted.name", "tab\t", 7, b"bytes_name"])
def test_invalid_asset_names_are_rejected(bad_name):
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match="asset name must be an identifier"):

        @asset(name=bad_name, registry=registry)
        def fine():
            return None

    assert len(registry) == 0


@pytest.mark.parametrize(
    "bad_partition_def",
    ["date", DatePartitionDef, object(), ["2026-08-08"]],
    ids=["text", "class-not-instance", "object", "list"],
)
def test_partition_def_that_is_not_a_partition_def_instance_is_rejected(bad_partition_def):
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match=r"'daily'.*partition_def"):

        @asset(partition_def=bad_partition_def, registry=registry)
        def daily():
            return None

    assert "daily" not in registry


def test_self_dependency_through_a_parameter_is_rejected():
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match=r"'loop'.*itself"):

        @asset(registry=registry)
        def loop(loop):
            return loop

    assert "loop" not in registry


def test_self_dependency_through_deps_is_rejected():
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match=r"'loop'.*itself"):

        @asset(deps=["loop"], registry=registry)
        def loop():
            return None


def test_self_dependency_through_a_renamed_parameter_match_is_rejected():
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match=r"'source'.*itself"):

        @asset(name="source", registry=registry)
        def load(source):
            return source


def test_decorating_something_that_is_not_callable_is_rejected():
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match="decorates a function"):
        asset(registry=registry)("not a function")


def test_rejected_definition_leaves_no_trace_on_the_function():
    registry = AssetRegistry()

    def rows():
        yield 1

    with pytest.raises(DefinitionError):
        asset(registry=registry)(rows)
    assert not hasattr(rows, "__partita_asset__")
    assert len(registry) == 0


def test_callable_with_explicit_name_is_accepted():
    registry = AssetRegistry()

    def scaled(factor):
        return 10 * factor

    @asset(registry=registry)
    def factor():
        return 3

    asset(name="scaled_value", registry=registry)(functools.partial(scaled))
    assert Flow(["scaled_value"], registry=registry).run().output("scaled_value") == 30


def test_nameless_callable_without_name_option_is_a_definition_error():
    registry = AssetRegistry()

    def scaled():
        return 1

    with pytest.raises(DefinitionError):
        asset(registry=registry)(functools.partial(scaled))


def test_registry_option_that_is_not_an_asset_registry_is_a_definition_error():
    with pytest.raises(DefinitionError, match="registry"):

        @asset(registry={})
        def orphan():
            return None
