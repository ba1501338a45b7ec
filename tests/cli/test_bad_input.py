"""Bad input that once escaped as a raw traceback (SPEC §1.4, §13).

Each case gets a clear message and its exit code (2 input, 3 entry, 4
store), never a ``Traceback``, and never the rejected key. Keys carry the
marker ``QQSECRET`` so a leak is easy to spot.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from partita.events.emission import MAX_EXTRA_DEPTH

MARKER = "QQSECRET"

ENTRY = """
from partita import PartitionDef


class TypeErrorDef(PartitionDef):
    def normalize_key(self, key):
        return len(key) + None  # TypeError, whose traceback would show the key


class CrashingDef(PartitionDef):
    @property
    def domain(self):
        return "crashing"

    def parse_key(self, text):
        raise RuntimeError(f"cannot parse {text}")


class EchoingDef(PartitionDef):
    @property
    def domain(self):
        return "echoing"

    def normalize_key(self, key):
        raise ValueError(f"bad key {key!r}")


class IdentityDef(PartitionDef):
    @property
    def domain(self):
        return "identity"


@asset(partition_def=HourlyPartitionDef("Europe/Berlin"))
def berlin(context):
    mark("berlin")


@asset(partition_def=HourlyPartitionDef())
def utc_hourly(context):
    mark("utc_hourly")


@asset(partition_def=DatePartitionDef())
def daily(context):
    mark("daily")


@asset(partition_def=TypeErrorDef())
def type_error(context):
    mark("type_error")


@asset(partition_def=CrashingDef())
def crashing(context):
    mark("crashing")


@asset(partition_def=EchoingDef())
def echoing(context):
    mark("echoing")


@asset(partition_def=IdentityDef())
def identity(context):
    mark("identity")


@asset
def plain():
    mark("plain")
"""


def _assert_clean(result, code: int, *, secret: str = MARKER) -> str:
    output = result.output
    assert result.exit_code == code, output
    assert "Traceback" not in output
    assert secret not in output
    return output


@pytest.fixture
def entry(write_entry) -> str:
    return write_entry(ENTRY)


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def test_extra_nested_deeper_than_the_limit_is_rejected_before_anything_is_stored(invoke, entry, tmp_path: Path):
    url = f"sqlite:///{tmp_path}/events.db"
    for depth in (MAX_EXTRA_DEPTH + 1, 5000):
        result = invoke("events", "emit", "plain", entry, "--extra", _nested(depth), "--store", url)
        output = _assert_clean(result, 2)
        assert f"deeper than {MAX_EXTRA_DEPTH} levels" in output
    listed = json.loads(invoke("events", "list", "--store", url, "--json").stdout)
    assert listed["events"] == []


def test_extra_nested_exactly_at_the_limit_is_published(invoke, entry, tmp_path: Path):
    url = f"sqlite:///{tmp_path}/events.db"
    result = invoke("events", "emit", "plain", entry, "--extra", _nested(MAX_EXTRA_DEPTH), "--store", url)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("text", ['{"a": "x\\u0000y"}', '{"a\\u0000": 1}', '{"a": "\\ud800"}'])
def test_extra_with_text_no_store_can_keep_is_rejected(invoke, entry, tmp_path: Path, text: str):
    url = f"sqlite:///{tmp_path}/events.db"
    output = _assert_clean(invoke("events", "emit", "plain", entry, "--extra", text, "--store", url), 2)
    assert "NUL" in output or "lone surrogate" in output


def test_the_first_hour_of_the_calendar_in_a_zone_east_of_utc_is_a_selection_error(invoke, entry):
    output = _assert_clean(invoke("plan", entry, "--target", "berlin", "--partition-key", "0001-01-01T00"), 2)
    assert "outside the calendar" in output
    assert "0001-01-01T00" not in output


@pytest.mark.parametrize("target", ["berlin", "utc_hourly"])
def test_an_hourly_range_ending_on_the_last_day_of_the_calendar_is_planned(invoke, entry, target: str):
    result = invoke("plan", entry, "--target", target, "--partition-range", "9999-12-31T00", "9999-12-31T23", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["selection"]["key_count"] == 24


def test_a_daily_range_ending_on_the_last_day_of_the_calendar_is_planned(invoke, entry):
    result = invoke("plan", entry, "--target", "daily", "--partition-range", "9999-12-25", "9999-12-31", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["selection"]["key_count"] == 7


@pytest.mark.parametrize(
    ("target", "method", "raised"),
    [("type_error", "TypeErrorDef.parse_key", "TypeError"), ("crashing", "CrashingDef.parse_key", "RuntimeError")],
)
def test_a_custom_definition_that_raises_is_a_selection_error_that_hides_the_key(invoke, entry, ran, target, method, raised):
    for command in (("plan",), ("run", "--yes")):
        result = invoke(*command, entry, "--target", target, "--partition-key", f"k-{MARKER}")
        output = _assert_clean(result, 2)
        assert f"{method} raised {raised}" in output
        assert "--partition-key #1" in output
    assert ran() == []


def test_a_custom_definition_whose_rejection_repeats_the_key_has_it_withheld(invoke, entry):
    output = _assert_clean(invoke("plan", entry, "--target", "echoing", "--partition-key", f"k-{MARKER}"), 2)
    assert "<rejected key>" in output


def test_a_custom_definition_that_raises_in_events_emit_is_an_emission_error(invoke, entry, tmp_path: Path):
    url = f"sqlite:///{tmp_path}/events.db"
    result = invoke("events", "emit", "type_error", entry, "--partition-key", f"k-{MARKER}", "--store", url)
    output = _assert_clean(result, 2)
    assert "TypeErrorDef.normalize_key raised TypeError" in output


@pytest.mark.parametrize("key", [f"\udcff{MARKER}", f"{MARKER}\x00"])
def test_a_key_no_store_can_keep_is_rejected_before_any_body_runs(invoke, entry, ran, tmp_path: Path, key: str):
    url = f"sqlite:///{tmp_path}/history.db"
    for command in (("plan",), ("run", "--yes", "--store", url)):
        output = _assert_clean(invoke(*command, entry, "--target", "identity", "--partition-key", key), 2)
        assert "NUL" in output or "lone surrogate" in output
    result = invoke("events", "emit", "identity", entry, "--partition-key", key, "--store", url)
    _assert_clean(result, 2)
    assert ran() == []
    listed = json.loads(invoke("runs", "list", "--store", url, "--json").stdout)
    assert listed["runs"] == []


def test_a_store_path_component_longer_than_the_filesystem_allows_is_a_store_error(invoke, entry, ran, tmp_path: Path):
    for path in (f"{tmp_path}/{'x' * 300}/history.db", f"{tmp_path}/{'y' * 300}.db"):
        for command in (("run", entry, "--yes", "--target", "plain"), ("runs", "list")):
            output = _assert_clean(invoke(*command, "--store", f"sqlite:///{path}"), 4)
            assert "File name too long" in output
    assert ran() == []


def test_a_malformed_postgresql_url_is_a_configuration_error_that_hides_the_password(invoke, entry, ran):
    url = f"postgresql://user:{MARKER}@[::1:5432/db"
    for command in (("run", entry, "--yes", "--target", "plain"), ("runs", "list"), ("events", "list")):
        output = _assert_clean(invoke(*command, "--store", url, "--json"), 2)
        assert "store URL is not a valid URL" in output
    assert ran() == []


def test_an_unexpected_exception_is_reported_without_its_message_or_a_traceback(invoke, entry, monkeypatch):
    def explode(*args, **kwargs):
        raise KeyError(f"k-{MARKER}")

    monkeypatch.setattr("partita.cli.render.render_plan", explode)
    output = _assert_clean(invoke("plan", entry, "--target", "plain"), 4)
    assert "unexpected KeyError" in output
