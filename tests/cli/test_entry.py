"""Loading CLI entries into a Flow (SPEC §2 "Entries for the CLI", §13 exit codes)."""

from __future__ import annotations

import json
import sys

import pytest

from partita import DefinitionError, EntryLoadError, Flow, default_registry
from partita.entry import load_entry

from ._sources import DAILY_PIPELINE, UNPARTITIONED_PIPELINE

# --- path/file.py ------------------------------------------------------------


def test_file_entry_returns_the_module_level_flow_named_flow(write_entry):
    path = write_entry(DAILY_PIPELINE)

    flow = load_entry(path)

    assert isinstance(flow, Flow)
    assert flow.targets == ("publish",)
    assert [definition.name for definition in flow.closure()] == ["settings", "extract", "publish"]


def test_file_entry_without_flow_targets_the_terminal_registered_assets(write_entry):
    path = write_entry(
        """
        @asset
        def a():
            return 1

        @asset
        def b(a):
            return a

        @asset
        def c():
            return 3
        """
    )

    flow = load_entry(path)

    assert flow.targets == ("b", "c")
    assert sorted(flow.registry) == ["a", "b", "c"]
    assert [definition.name for definition in flow.closure()] == ["a", "b", "c"]


def test_file_entry_flow_named_flow_wins_over_other_flows(write_entry):
    path = write_entry(
        """
        @asset
        def a():
            return 1

        @asset
        def b():
            return 2

        other = Flow(["b"])
        flow = Flow(["a"])
        """
    )

    assert load_entry(path).targets == ("a",)


def test_file_entry_whose_flow_attribute_is_not_a_flow_falls_back_to_terminal_assets(write_entry):
    path = write_entry(
        """
        flow = "not a Flow"

        @asset
        def only():
            return 1
        """
    )

    assert load_entry(path).targets == ("only",)


def test_relative_file_entry_is_resolved_from_the_working_directory(write_entry, tmp_path):
    write_entry(UNPARTITIONED_PIPELINE, name="sub/pipeline.py")

    flow = load_entry("sub/pipeline.py")

    assert flow.targets == ("total",)


def test_file_entry_can_import_a_sibling_module_while_loading(write_entry, tmp_path):
    helper = "partita_cli_helper_sibling_7f3a"
    (tmp_path / f"{helper}.py").write_text("NAMES = ['from_helper']\n")
    path = write_entry(
        f"""
        import {helper}

        @asset(name={helper}.NAMES[0])
        def anything():
            return 1
        """
    )
    try:
        assert load_entry(path).targets == ("from_helper",)
    finally:
        sys.modules.pop(helper, None)


def test_loading_a_file_entry_leaves_sys_path_unchanged(write_entry):
    path = write_entry(UNPARTITIONED_PIPELINE)
    before = list(sys.path)

    load_entry(path)

    assert sys.path == before


def test_loading_an_entry_does_not_register_into_the_global_default_registry(write_entry):
    path = write_entry(UNPARTITIONED_PIPELINE)
    registry = default_registry()
    size = len(registry)

    flow = load_entry(path)

    assert default_registry() is registry
    assert len(registry) == size
    assert flow.registry is not registry
    assert "raw" in flow.registry


def test_loading_the_same_file_twice_uses_a_fresh_registry_each_time(write_entry):
    path = write_entry(DAILY_PIPELINE)

    first = load_entry(path)
    second = load_entry(path)

    assert first is not second
    assert first.registry is not second.registry
    assert sorted(first.registry) == sorted(second.registry) == ["extract", "publish", "settings"]
    config = {"partition_keys": ["2026-08-08"]}
    assert first.plan(config).attempt_count == second.plan(config).attempt_count == 3


def test_loading_a_file_without_flow_twice_works(write_entry):
    path = write_entry(UNPARTITIONED_PIPELINE)

    assert load_entry(path).targets == load_entry(path).targets == ("total",)


# --- path/file.py:name -------------------------------------------------------


def test_file_entry_with_name_returns_that_flow(write_entry):
    path = write_entry(
        """
        @asset
        def a():
            return 1

        @asset
        def b():
            return 2

        nightly = Flow(["a"])
        hourly = Flow(["b"])
        """
    )

    assert load_entry(f"{path}:hourly").targets == ("b",)
    assert load_entry(f"{path}:nightly").targets == ("a",)


def test_file_entry_with_name_calls_a_zero_argument_factory_once(write_entry, ran):
    path = write_entry(
        """
        REGISTRY = AssetRegistry()

        @asset(registry=REGISTRY)
        def a():
            return 1

        def make_flow():
            mark("factory", "called")
            return Flow(["a"], registry=REGISTRY)
        """
    )

    flow = load_entry(f"{path}:make_flow")

    assert isinstance(flow, Flow)
    assert flow.targets == ("a",)
    assert ran() == ["factory-called"]


def test_factory_whose_parameters_all_have_defaults_is_called(write_entry):
    path = write_entry(
        """
        REGISTRY = AssetRegistry()

        @asset(registry=REGISTRY)
        def a():
            return 1

        def make_flow(targets=("a",), *args, **kwargs):
            return Flow(list(targets), registry=REGISTRY)
        """
    )

    assert load_entry(f"{path}:make_flow").targets == ("a",)


def test_file_factory_building_a_flow_over_the_entry_assets_can_be_planned(write_entry):
    path = write_entry(
        """
        @asset
        def cli_factory_only_asset_q7():
            return 1

        def make_flow():
            return Flow(["cli_factory_only_asset_q7"])
        """
    )

    flow = load_entry(f"{path}:make_flow")

    assert "cli_factory_only_asset_q7" in flow.registry
    assert flow.plan().attempt_count == 1


def test_module_factory_building_a_flow_over_the_module_assets_can_be_planned(package):
    name = package(
        {
            "flows": """
            @asset
            def cli_factory_only_asset_q7():
                return 1

            def make_flow():
                return Flow(["cli_factory_only_asset_q7"])
            """
        }
    )

    flow = load_entry(f"{name}.flows:make_flow")

    assert flow.plan().attempt_count == 1


def test_factory_requiring_arguments_is_an_entry_load_error(write_entry):
    path = write_entry(
        """
        @asset
        def a():
            return 1

        def make_flow(environment):
            return Flow(["a"])
        """
    )

    with pytest.raises(EntryLoadError, match="make_flow") as caught:
        load_entry(f"{path}:make_flow")
    assert "argument" in str(caught.value)


def test_factory_raising_is_an_entry_load_error_naming_the_exception(write_entry):
    path = write_entry(
        """
        @asset
        def a():
            return 1

        def make_flow():
            raise RuntimeError("factory is broken")
        """
    )

    with pytest.raises(EntryLoadError) as caught:
        load_entry(f"{path}:make_flow")
    assert "make_flow" in str(caught.value)
    assert "RuntimeError" in str(caught.value)
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_factory_returning_a_non_flow_is_an_entry_load_error(write_entry):
    path = write_entry(
        """
        def make_flow():
            return 42
        """
    )

    with pytest.raises(EntryLoadError, match="not a Flow") as caught:
        load_entry(f"{path}:make_flow")
    assert "int" in str(caught.value)


def test_missing_attribute_is_an_entry_load_error_naming_it(write_entry):
    path = write_entry(UNPARTITIONED_PIPELINE)

    with pytest.raises(EntryLoadError, match="no_such_flow"):
        load_entry(f"{path}:no_such_flow")


def test_named_asset_function_is_not_a_factory(write_entry, ran):
    path = write_entry(UNPARTITIONED_PIPELINE)

    with pytest.raises(EntryLoadError, match="'raw' is not a Flow"):
        load_entry(f"{path}:raw")
    assert ran() == []


def test_named_non_callable_value_is_an_entry_load_error(write_entry):
    path = write_entry(UNPARTITIONED_PIPELINE + "\nVERSION = 3\n")

    with pytest.raises(EntryLoadError, match="VERSION"):
        load_entry(f"{path}:VERSION")


# --- pkg.module:name ---------------------------------------------------------


def test_module_entry_returns_the_named_flow(package):
    name = package(
        {
            "flows": """
            @asset
            def a():
                return 1

            @asset
            def b(a):
                return a

            daily = Flow(["b"])
            """
        }
    )

    flow = load_entry(f"{name}.flows:daily")

    assert flow.targets == ("b",)
    assert [definition.name for definition in flow.closure()] == ["a", "b"]


def test_module_entry_is_found_on_an_explicit_sys_path(package, tmp_path, monkeypatch):
    name = package(
        {
            "flows": """
            @asset
            def a():
                return 1

            flow = Flow(["a"])
            """
        }
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.syspath_prepend(str(tmp_path))

    assert load_entry(f"{name}.flows:flow").targets == ("a",)


def test_module_entry_does_not_register_into_the_global_default_registry(package):
    name = package(
        {
            "flows": """
            @asset
            def module_only_asset():
                return 1

            flow = Flow(["module_only_asset"])
            """
        }
    )

    flow = load_entry(f"{name}.flows:flow")

    assert "module_only_asset" in flow.registry
    assert "module_only_asset" not in default_registry()


def test_missing_module_is_an_entry_load_error(package):
    name = package({"flows": UNPARTITIONED_PIPELINE})

    with pytest.raises(EntryLoadError, match="could not be imported"):
        load_entry(f"{name}.missing_module:flow")


def test_module_with_syntax_error_is_an_entry_load_error_naming_the_line(package, tmp_path):
    name = package({"flows": "x = 1\n"})
    (tmp_path / name / "broken.py").write_text("a = 1\nb = 2\ndef (:\n")

    with pytest.raises(EntryLoadError, match="line 3"):
        load_entry(f"{name}.broken:flow")


def test_module_raising_at_import_is_an_entry_load_error(package):
    name = package({"flows": "raise LookupError('no config for this environment')\n"})

    with pytest.raises(EntryLoadError, match="LookupError"):
        load_entry(f"{name}.flows:flow")


# --- failures ----------------------------------------------------------------


def test_missing_file_is_an_entry_load_error_naming_the_path(tmp_path):
    missing = tmp_path / "nowhere" / "missing.py"

    with pytest.raises(EntryLoadError, match="does not exist") as caught:
        load_entry(str(missing))
    assert "missing.py" in str(caught.value)


def test_missing_file_with_name_is_an_entry_load_error(tmp_path):
    with pytest.raises(EntryLoadError, match="does not exist"):
        load_entry(str(tmp_path / "missing.py") + ":flow")


def test_empty_entry_is_an_entry_load_error():
    with pytest.raises(EntryLoadError):
        load_entry("")


def test_entry_that_is_neither_file_nor_module_path_is_an_entry_load_error():
    with pytest.raises(EntryLoadError, match="neither a Python file nor a module path"):
        load_entry("not a/valid entry")


def test_syntax_error_is_an_entry_load_error_naming_the_line(write_entry):
    path = write_entry("x = 1\ny = 2\ndef broken(:\n    pass\n", header=False)

    with pytest.raises(EntryLoadError, match="syntax error") as caught:
        load_entry(path)
    assert "line 3" in str(caught.value)


def test_module_raising_at_import_is_an_entry_load_error_naming_the_exception(write_entry):
    path = write_entry(
        """
        @asset
        def a():
            return 1

        1 / 0
        """
    )

    with pytest.raises(EntryLoadError, match="ZeroDivisionError") as caught:
        load_entry(path)
    assert isinstance(caught.value.__cause__, ZeroDivisionError)


def test_failed_load_does_not_leave_a_registry_behind(write_entry):
    registry = default_registry()
    size = len(registry)
    path = write_entry(
        """
        @asset
        def leaked():
            return 1

        raise RuntimeError("boom")
        """
    )

    with pytest.raises(EntryLoadError):
        load_entry(path)

    assert default_registry() is registry
    assert len(registry) == size


def test_two_flows_neither_named_flow_is_ambiguous_and_names_both(write_entry):
    path = write_entry(
        """
        @asset
        def a():
            return 1

        @asset
        def b():
            return 2

        morning = Flow(["a"])
        evening = Flow(["b"])
        """
    )

    with pytest.raises(EntryLoadError) as caught:
        load_entry(path)
    message = str(caught.value)
    assert "morning" in message
    assert "evening" in message
    assert "'flow'" in message


def test_entry_registering_no_assets_is_an_entry_load_error(write_entry):
    path = write_entry("VALUE = 1\n")

    with pytest.raises(EntryLoadError, match="registers no assets"):
        load_entry(path)


def test_duplicate_asset_name_in_one_file_is_a_definition_error(write_entry):
    path = write_entry(
        """
        @asset
        def same():
            return 1

        @asset(name="same")
        def other():
            return 2
        """
    )

    with pytest.raises(DefinitionError, match="same") as caught:
        load_entry(path)
    assert not isinstance(caught.value, EntryLoadError)


# --- the same rules through the CLI (exit codes, SPEC §13) -------------------

COMMANDS = ["assets", "partitions", "plan"]


def _entry_load_cases() -> dict[str, tuple[str, str]]:
    """id -> (source written to entry.py, suffix appended to its path)."""
    return {
        "syntax-error": ("x = 1\ndef broken(:\n", ""),
        "import-raises": ("raise RuntimeError('cannot import')\n", ""),
        "ambiguous": (
            "from partita import Flow, asset\n"
            "@asset\ndef a():\n    return 1\n"
            "first = Flow(['a'])\nsecond = Flow(['a'])\n",
            "",
        ),
        "no-assets": ("VALUE = 1\n", ""),
        "missing-attribute": ("from partita import asset\n@asset\ndef a():\n    return 1\n", ":nope"),
        "factory-needs-arguments": (
            "from partita import Flow, asset\n@asset\ndef a():\n    return 1\n"
            "def make(x):\n    return Flow(['a'])\n",
            ":make",
        ),
        "factory-raises": ("def make():\n    raise ValueError('bad factory')\n", ":make"),
        "factory-returns-non-flow": ("def make():\n    return None\n", ":make"),
    }


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", list(_entry_load_cases()))
def test_cli_entry_load_failures_exit_3_with_a_message_on_stderr(invoke, write_entry, command, case):
    source, suffix = _entry_load_cases()[case]
    path = write_entry(source, header=False)

    result = invoke(command, path + suffix)

    assert result.exit_code == 3, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("error:")
    assert "Traceback" not in result.stderr


def test_cli_missing_entry_file_exits_3(invoke, tmp_path):
    result = invoke("plan", str(tmp_path / "missing.py"))

    assert result.exit_code == 3
    assert "does not exist" in result.stderr


def test_cli_missing_module_exits_3(invoke):
    result = invoke("plan", "partita_cli_no_such_package_x9.flows:flow")

    assert result.exit_code == 3
    assert "could not be imported" in result.stderr


def test_cli_syntax_error_message_names_the_line(invoke, write_entry):
    path = write_entry("a = 1\nb = 2\nc = 3\nd = (\n", header=False)

    result = invoke("plan", path)

    assert result.exit_code == 3
    assert "syntax error" in result.stderr
    assert "line 4" in result.stderr


def test_cli_ambiguous_entry_names_the_flows(invoke, write_entry):
    path = write_entry(
        """
        @asset
        def a():
            return 1

        backfill = Flow(["a"])
        incremental = Flow(["a"])
        """
    )

    result = invoke("plan", path)

    assert result.exit_code == 3
    assert "backfill" in result.stderr
    assert "incremental" in result.stderr


def test_cli_duplicate_asset_name_exits_2(invoke, write_entry):
    path = write_entry(
        """
        @asset
        def twice():
            return 1

        @asset(name="twice")
        def again():
            return 2
        """
    )

    result = invoke("plan", path)

    assert result.exit_code == 2
    assert "twice" in result.stderr
    assert "already registered" in result.stderr


def test_cli_module_entry_plans(invoke, package):
    name = package({"flows": UNPARTITIONED_PIPELINE + "\nflow = Flow(['total'])\n"})

    result = invoke("plan", f"{name}.flows:flow", "--json")

    assert result.exit_code == 0, result.stderr
    assert [task["name"] for task in json.loads(result.stdout)["tasks"]] == ["raw", "total"]


def test_cli_loads_the_same_entry_in_consecutive_invocations(invoke, write_entry):
    path = write_entry(DAILY_PIPELINE)

    first = invoke("assets", path)
    second = invoke("assets", path)

    assert first.exit_code == second.exit_code == 0
    assert first.stdout == second.stdout


def test_cli_factory_entry_runs(invoke, write_entry, ran):
    path = write_entry(
        """
        REGISTRY = AssetRegistry()

        @asset(registry=REGISTRY)
        def a():
            mark("a")
            return 1

        def make():
            return Flow(["a"], registry=REGISTRY)
        """
    )

    result = invoke("run", f"{path}:make", "--yes")

    assert result.exit_code == 0, result.stderr
    assert ran() == ["a"]

