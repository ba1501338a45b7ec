"""Runs record how they were launched, their flow and their tags; `runs list` filters on them."""

from __future__ import annotations

import json

import pytest

import partita

from ._sources import DAILY_PIPELINE

TAGGED = DAILY_PIPELINE + """

tagged = Flow(["publish"], name="tagged-daily", tags={"team": "data", "env": "dev"})
"""


def _run(invoke, entry: str, *args: str):
    result = invoke("run", entry, "--partition-key", "2026-01-01", "--yes", *args)
    assert result.exit_code == 0, result.output
    return result


def _listed(invoke, *args: str) -> list[dict]:
    result = invoke("runs", "list", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["runs"]


def test_a_cli_run_records_its_launch_its_flow_and_the_flow_tags_merged_with_tag_options(invoke, write_entry) -> None:
    entry = write_entry(TAGGED)
    _run(invoke, f"{entry}:tagged", "--tag", "env=prod", "--tag", "ticket=OPS-12")
    (run,) = _listed(invoke)
    assert run["launched_by"] == "cli"
    assert run["flow"] == "tagged-daily"
    assert run["tags"] == {"env": "prod", "team": "data", "ticket": "OPS-12"}
    shown = json.loads(invoke("runs", "show", run["run_id"], "--json").output)
    assert (shown["launched_by"], shown["flow"], shown["tags"]) == ("cli", "tagged-daily", run["tags"])
    assert shown["trigger_request"] is None and shown["launch"] is None
    text = invoke("runs", "show", run["run_id"]).output
    assert "launched by cli of flow tagged-daily" in text
    assert "tags: env=prod, team=data, ticket=OPS-12" in text


def test_runs_list_filters_by_flow_tag_status_and_since(invoke, write_entry) -> None:
    entry = write_entry(TAGGED)
    _run(invoke, f"{entry}:tagged", "--tag", "env=prod")
    _run(invoke, f"{entry}:flow")
    assert [run["flow"] for run in _listed(invoke, "--flow", "tagged-daily")] == ["tagged-daily"]
    assert [run["tags"].get("env") for run in _listed(invoke, "--tag", "env=prod", "--tag", "team=data")] == ["prod"]
    assert _listed(invoke, "--tag", "env=dev") == []
    assert len(_listed(invoke, "--since", "1h")) == 2
    assert _listed(invoke, "--since", "2999-01-01") == []
    assert len(_listed(invoke, "--since", "2000-01-01T00:00+02:00", "--status", "success")) == 2
    assert "No runs match" in invoke("runs", "list", "--flow", "absent").output


@pytest.mark.parametrize(
    ("tag", "message"),
    [
        ("novalue", "--tag must be KEY=VALUE"),
        ("=x", "--tag: a tag key must be 1 to 64 letters"),
        ("bad key=x", "--tag: a tag key must be 1 to 64 letters"),
        ("k=" + "v" * 300, "longer than 256 characters"),
        ("k=a\tb", "contains a control character"),
    ],
)
def test_a_malformed_tag_is_exit_2_naming_the_flag_before_anything_runs(invoke, write_entry, ran, tag, message) -> None:
    entry = write_entry(DAILY_PIPELINE)
    result = invoke("run", f"{entry}:flow", "--partition-key", "2026-01-01", "--yes", "--tag", tag)
    assert result.exit_code == 2
    assert message in result.output
    assert ran() == []


def test_a_tag_key_given_twice_is_exit_2(invoke, write_entry) -> None:
    entry = write_entry(DAILY_PIPELINE)
    result = invoke("run", f"{entry}:flow", "--yes", "--tag", "a=1", "--tag", "a=2")
    assert result.exit_code == 2
    assert "--tag a is given twice" in result.output


def test_runs_list_rejects_a_malformed_tag_filter_and_since_with_exit_2(invoke) -> None:
    assert invoke("runs", "list", "--tag", "x").exit_code == 2
    result = invoke("runs", "list", "--since", "yesterday")
    assert result.exit_code == 2
    assert "--since must be an ISO 8601 time" in result.output


def test_a_python_run_records_python_and_the_flow_name(tmp_path) -> None:
    registry = partita.AssetRegistry()

    @partita.asset(registry=registry)
    def one() -> int:
        return 1

    url = f"sqlite:///{tmp_path}/python.db"
    result = partita.Flow([one], registry=registry, store=url, tags={"owner": "ana"}).run()
    store = partita.open_store(url)
    try:
        run = store.get_run(result.run_id)
    finally:
        store.close()
    assert (run.launched_by, run.flow_name, run.tags) == ("python", "one", (("owner", "ana"),))


@pytest.mark.parametrize("tags", [{"": "x"}, {"ok": 1}, ["a=b"], {"k": "\x00"}])
def test_flow_tags_are_validated_when_the_flow_is_created(tags) -> None:
    with pytest.raises(partita.DefinitionError, match="Flow tags"):
        partita.Flow(["anything"], tags=tags)
