"""Launch metadata in the run history contract: kind, flow name and tags, recorded and filtered (SQLite and PostgreSQL)."""

from __future__ import annotations

import datetime as dt
import os
import socket

import pytest

from partita.definitions.launch import LaunchKind, RunLaunch
from partita.errors import UnknownRunError
from partita.store.liveness import current_owner_token
from partita.store.protocol import RunFilter, RunStart

from .conftest import NOW, plan_document


def _start(history, run_id: str, started_at: dt.datetime, launch: RunLaunch) -> None:
    history.record_run_started(
        RunStart(
            run_id=run_id,
            started_at=started_at,
            plan=plan_document(),
            record_partition_keys=False,
            owner_host=socket.gethostname(),
            owner_pid=os.getpid(),
            owner_token=current_owner_token(),
            launch=launch,
        )
    )


def _ids(history, **where) -> list[str]:
    return [run.run_id for run in history.list_runs(limit=50, where=RunFilter(**where))]


def _three_runs(history) -> None:
    _start(history, "a" * 32, NOW, RunLaunch(LaunchKind.CLI, "daily", (("env", "prod"), ("team", "data"))))
    _start(history, "b" * 32, NOW + dt.timedelta(hours=2), RunLaunch(LaunchKind.PYTHON, "daily", (("env", "dev"),)))
    _start(history, "c" * 32, NOW + dt.timedelta(hours=4), RunLaunch(LaunchKind.TRIGGER, "hourly"))


def test_a_run_reads_back_with_how_it_was_launched_its_flow_and_its_tags(run_history) -> None:
    _three_runs(run_history)
    run = run_history.get_run("a" * 32)
    assert (run.launched_by, run.flow_name, run.tags) == ("cli", "daily", (("env", "prod"), ("team", "data")))
    assert run_history.get_run("c" * 32).tags == ()


def test_runs_filter_by_flow_by_every_given_tag_and_by_start_time(run_history) -> None:
    _three_runs(run_history)
    assert _ids(run_history, flow_name="daily") == ["b" * 32, "a" * 32]
    assert _ids(run_history, tags=(("env", "prod"),)) == ["a" * 32]
    assert _ids(run_history, tags=(("env", "prod"), ("team", "data"))) == ["a" * 32]
    assert _ids(run_history, tags=(("env", "dev"), ("team", "data"))) == []
    assert _ids(run_history, since=(NOW + dt.timedelta(hours=1)).timestamp()) == ["c" * 32, "b" * 32]
    assert _ids(run_history, flow_name="daily", since=(NOW + dt.timedelta(hours=1)).timestamp()) == ["b" * 32]


def test_tags_with_the_same_value_under_another_key_do_not_match(run_history) -> None:
    _three_runs(run_history)
    assert _ids(run_history, tags=(("team", "prod"),)) == []


def test_a_filtered_list_still_honours_status_and_limit(run_history) -> None:
    _three_runs(run_history)
    assert len(run_history.list_runs(limit=1, where=RunFilter(flow_name="daily"))) == 1
    assert run_history.list_runs(limit=5, status="success", where=RunFilter(flow_name="daily")) == []


def test_runs_filter_by_how_they_were_launched(run_history) -> None:
    _three_runs(run_history)
    assert _ids(run_history, launched_by="cli") == ["a" * 32]
    assert _ids(run_history, launched_by="trigger", flow_name="hourly") == ["c" * 32]
    assert _ids(run_history, launched_by="ui") == []


def test_a_page_of_runs_continues_after_the_run_it_names(run_history) -> None:
    _three_runs(run_history)
    _start(run_history, "d" * 32, NOW + dt.timedelta(hours=4), RunLaunch(LaunchKind.CLI, "hourly"))  # same start as c
    assert _ids(run_history) == ["d" * 32, "c" * 32, "b" * 32, "a" * 32]  # a tie is ordered by id, descending
    assert _ids(run_history, before_run_id="d" * 32) == ["c" * 32, "b" * 32, "a" * 32]
    assert _ids(run_history, before_run_id="c" * 32) == ["b" * 32, "a" * 32]
    assert _ids(run_history, before_run_id="cccc") == ["b" * 32, "a" * 32]  # a unique prefix names the run too
    assert _ids(run_history, before_run_id="a" * 32) == []
    assert _ids(run_history, before_run_id="c" * 32, flow_name="daily", launched_by="cli") == ["a" * 32]


def test_a_page_after_an_unknown_run_is_an_unknown_run_error(run_history) -> None:
    _three_runs(run_history)
    with pytest.raises(UnknownRunError):
        run_history.list_runs(where=RunFilter(before_run_id="f" * 32))
