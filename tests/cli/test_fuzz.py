"""Property-based fuzzing of the command line (SPEC §1.4, §13).

Arbitrary keys, ranges, ``--extra`` documents and ``--store`` strings drive
the click app in-process (``catch_exceptions=False``: a raw exception fails
the test). Every outcome is a documented exit code, no output holds a
``Traceback`` or the last-resort "unexpected" report (which would mean an
input no rule anticipated), and a rejected command never repeats a key:
fuzzed keys carry ``MARKER``. A few subprocess cases pass non-UTF-8 bytes in
argv, which CliRunner cannot express.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from partita.cli.main import cli
from partita.errors import ConfigurationError
from partita.store.location import StoreBackend, parse_store_url

MARKER = "QQFUZZ"
#: What the last-resort guard prints: its presence means an exception escaped every rule.
UNANTICIPATED = "This is a defect"
EXIT_CODES = {0, 1, 2, 3, 4}

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

ENTRY = """
from partita import (
    DatePartitionDef, HourlyPartitionDef, MonthlyPartitionDef, MultiPartitionDef,
    PartitionAtRuntime, PartitionDef, StaticPartitionDef, asset,
)


class IdentityDef(PartitionDef):
    @property
    def domain(self):
        return "identity"


class TypeErrorDef(PartitionDef):
    @property
    def domain(self):
        return "type-error"

    def normalize_key(self, key):
        return len(key) + None


class EchoingDef(PartitionDef):
    @property
    def domain(self):
        return "echoing"

    def normalize_key(self, key):
        if not str(key).isdigit():
            raise ValueError(f"key {key!r} is not digits")
        return key


@asset(partition_def=DatePartitionDef())
def daily(context):
    return 1


@asset(partition_def=DatePartitionDef(start="2026-01-01", end="2026-12-31"))
def bounded(context):
    return 1


@asset(partition_def=HourlyPartitionDef("Europe/Berlin"))
def berlin(context):
    return 1


@asset(partition_def=HourlyPartitionDef("America/Los_Angeles"))
def los_angeles(context):
    return 1


@asset(partition_def=MonthlyPartitionDef())
def monthly(context):
    return 1


@asset(partition_def=StaticPartitionDef("regions", ["eu", "us"]))
def regional(context):
    return 1


@asset(partition_def=MultiPartitionDef({"day": DatePartitionDef(), "region": StaticPartitionDef("r", ["eu", "us"])}))
def product(context):
    return 1


@asset(partition_def=PartitionAtRuntime("tenants"))
def tenants(context):
    context.add_partition("acme")


@asset(partition_def=PartitionAtRuntime("tenants"))
def per_tenant(context, tenants):
    return 1


@asset(partition_def=IdentityDef())
def identity(context):
    return 1


@asset(partition_def=TypeErrorDef())
def type_error(context):
    return 1


@asset(partition_def=EchoingDef())
def echoing(context):
    return 1


@asset
def plain():
    return 1
"""

PARTITIONED = [
    "daily", "bounded", "berlin", "los_angeles", "monthly", "regional", "product",
    "per_tenant", "identity", "type_error", "echoing",
]  # fmt: skip
RANGED = ["daily", "bounded", "berlin", "los_angeles", "monthly"]
EDGES = [
    "0001-01-01", "0001-01-01T00", "0001-01-01T23", "0001-01", "9999-12-31", "9999-12-31T23", "9999-12-31T00",
    "9999-12", "9999-12-30", "2026-02-29", "2026-10-25T02", "2026-10-25T02+01:00", "2026-03-29T02", "2026-08-08",
    "2026-08-08T10", "2026-08", "0000-01-01", "10000-01-01", "eu", "us", "2026-08-08|eu", "", " ", "\x00", "\udcff",
]  # fmt: skip

_special = st.sampled_from(["\x00", "\udcff", "\ud800", "\n", "|", "T", "-", ":", "+", " ", "'", '"', "\\", "[", "{"])
_fragment = st.text(alphabet=st.one_of(st.characters(exclude_categories=()), _special, st.sampled_from("0123456789")), max_size=10)
#: Every generated key contains MARKER, so an echo of it is detectable.
marked_keys = st.one_of(
    st.builds(lambda head, tail: head + MARKER + tail, _fragment, _fragment),
    st.builds(lambda edge, tail: edge + MARKER + tail, st.sampled_from(EDGES), _fragment),
)
keys = st.one_of(marked_keys, st.sampled_from(EDGES))


def _nested(depth: int, opener: str) -> str:
    closer = {"[": "]", '{"a":': "}"}[opener]
    return "{" + '"x":' + opener * depth + "1" + closer * depth + "}"


_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8)),
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(st.text(max_size=5), children, max_size=3)),
    max_leaves=10,
)
extras = st.one_of(
    st.text(max_size=40),
    st.builds(json.dumps, st.dictionaries(st.text(alphabet=st.one_of(st.characters(exclude_categories=()), _special), max_size=6), _json_values, max_size=4)),
    st.builds(_nested, st.integers(0, 3000), st.sampled_from(["[", '{"a":'])),
    st.sampled_from(['{"a": "\\u0000"}', '{"\\ud800": 1}', '{"a": NaN}', "[]", "null", '{"a": 1e999}', "{"]),
)

_path_text = st.text(
    alphabet=st.one_of(st.characters(exclude_categories=(), exclude_characters="/%?#"), _special),
    min_size=1,
    max_size=12,
)
STORE_SAMPLES = [
    "sqlite://", "sqlite:///", "sqlite:///:memory:", "sqlite:///fuzz.db?mode=ro", "sqlite:///fuzz.db?mode=rw",
    "sqlite:///fuzz.db?journal=off", "postgresql://u:p@[::1:5432/db", f"postgresql://u:{MARKER}@[::1/db",
    "postgresql://u:p@127.0.0.1:notaport/db", "mysql://u@h/db", "", "not a url", "sqlite:/relative",
    "sqlite:///" + "x" * 300 + ".db", "sqlite:///d/" + "y" * 300 + "/h.db", "sqlite:///fuzz.db/inner.db",
]  # fmt: skip
stores = st.one_of(
    st.sampled_from(STORE_SAMPLES),
    st.builds(lambda name, suffix: f"sqlite:///{name}{suffix}", _path_text, st.sampled_from(["", ".db", "?mode=ro", "?x=1"])),
    st.text(max_size=30),
)


def _safe_store(url: str) -> bool:
    """Stores the fuzzer may touch: nothing outside the working folder, no server contacted."""
    if url in STORE_SAMPLES:
        return True
    try:
        location = parse_store_url(url)
    except ConfigurationError:
        return True
    if location.backend is StoreBackend.POSTGRESQL:
        return False
    path = location.path
    return path is None or (not path.is_absolute() and ".." not in path.parts)


@pytest.fixture(scope="module")
def fuzz_entry(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("fuzz") / "fuzz_entry.py"
    path.write_text(ENTRY)
    return str(path)


@pytest.fixture(scope="module")
def fuzz_store(tmp_path_factory: pytest.TempPathFactory, fuzz_entry: str) -> str:
    """One store shared by the examples, created once (creating a schema is the slowest step)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('fuzz-store')}/history.db"
    result = _invoke("run", fuzz_entry, "--yes", "--target", "plain", "--store", url)
    assert result.exit_code == 0, result.output
    return url


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _check(result: Result, *, rejected_marker: bool = True) -> None:
    output = result.output
    assert result.exit_code in EXIT_CODES, output
    assert "Traceback" not in output, output
    assert UNANTICIPATED not in output, output
    if rejected_marker and result.exit_code != 0:
        assert MARKER not in output, output


@FUZZ
@given(target=st.sampled_from(PARTITIONED), chosen=st.lists(keys, min_size=1, max_size=3), as_json=st.booleans())
def test_fuzzed_keys_on_plan_exit_with_a_documented_code_and_never_echo_a_rejected_key(fuzz_entry, target, chosen, as_json):
    arguments = ["plan", fuzz_entry, "--target", target]
    for key in chosen:
        arguments += ["--partition-key", key]
    _check(_invoke(*arguments, *(["--json"] if as_json else [])))


@FUZZ
@given(target=st.sampled_from(RANGED + ["regional", "identity"]), start=keys, end=keys)
def test_fuzzed_ranges_on_plan_exit_with_a_documented_code_and_never_echo_a_rejected_key(fuzz_entry, target, start, end):
    # A range between two distant edges would select millions of keys: that is a size, not a fault.
    assume(not (start[:4].isdigit() and end[:4].isdigit() and abs(int(start[:4]) - int(end[:4])) > 1))
    _check(_invoke("plan", fuzz_entry, "--target", target, "--partition-range", start, end))


@settings(FUZZ, max_examples=30)
@given(target=st.sampled_from(PARTITIONED), key=keys)
def test_fuzzed_keys_on_run_exit_with_a_documented_code_and_never_echo_a_rejected_key(fuzz_entry, fuzz_store, target, key):
    result = _invoke("run", fuzz_entry, "--yes", "--target", target, "--partition-key", key, "--store", fuzz_store)
    _check(result)
    assert result.exit_code in (0, 2), result.output


@settings(FUZZ, max_examples=40)
@given(
    asset=st.sampled_from(["plain", "identity", "daily", "regional", "type_error", "echoing", "berlin", "missing"]),
    key=st.one_of(st.none(), keys),
    extra=st.one_of(st.none(), extras),
    dedupe=st.one_of(st.none(), marked_keys),
)
def test_fuzzed_events_emit_exits_with_a_documented_code_and_never_echoes_a_rejected_key(
    fuzz_entry, fuzz_store, asset, key, extra, dedupe
):
    arguments = ["events", "emit", asset, fuzz_entry, "--store", fuzz_store]
    if key is not None:
        arguments += ["--partition-key", key]
    if extra is not None:
        arguments += ["--extra", extra]
    if dedupe is not None:
        arguments += ["--dedupe-key", dedupe]
    result = _invoke(*arguments)
    _check(result)
    assert result.exit_code in (0, 2), result.output


@settings(FUZZ, max_examples=50)
@given(
    store=stores,
    command=st.sampled_from(["runs list", "events list", "runs show", "plan pending", "flows pause", "run", "events emit"]),
)
def test_fuzzed_store_urls_exit_with_a_documented_code(fuzz_entry, tmp_path, store, command):
    assume(_safe_store(store))
    arguments: list[str] = {
        "runs list": ["runs", "list"],
        "events list": ["events", "list"],
        "runs show": ["runs", "show", "abc"],
        "plan pending": ["plan", fuzz_entry, "--pending"],
        "flows pause": ["flows", "pause", "some_flow"],
        "run": ["run", fuzz_entry, "--yes", "--target", "plain"],
        "events emit": ["events", "emit", "plain", fuzz_entry],
    }[command]
    result = _invoke(*arguments, "--store", store)
    _check(result, rejected_marker=False)
    assert f"u:{MARKER}" not in result.output  # a password is never shown
    assert str(Path.cwd()).startswith(str(tmp_path))  # stores were created in the test's folder only


@FUZZ
@given(
    command=st.sampled_from(["events list", "runs show", "runs compare", "partitions retire", "flows pause", "assets"]),
    text=marked_keys,
)
def test_fuzzed_lookups_exit_with_a_documented_code_and_never_echo_a_rejected_key(fuzz_entry, fuzz_store, command, text):
    arguments: list[str] = {
        "events list": ["events", "list", "--partition-key", text, "--asset", text],
        "runs show": ["runs", "show", text],
        "runs compare": ["runs", "compare", text, text],
        "partitions retire": ["partitions", "retire", "tenants", text],
        "flows pause": ["flows", "pause", "some_flow", "--entry", fuzz_entry],
        "assets": ["assets", fuzz_entry, "--target", text],
    }[command]
    result = _invoke(*arguments, *(["--store", fuzz_store] if command != "assets" else []))
    # Run ids and asset names are not partition keys: only a rejected key must stay unsaid.
    _check(result, rejected_marker=command in ("events list", "partitions retire"))


# -- argv bytes CliRunner cannot express -----------------------------------------------

NON_UTF8 = b"\xff\xfe" + MARKER.encode() + b"\xc3"


def _partita(*arguments: str | bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "partita", *arguments],
        capture_output=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("target", ["identity", "regional", "per_tenant"])
def test_a_non_utf8_key_in_argv_is_rejected_with_exit_2_before_any_body_runs(fuzz_entry, tmp_path: Path, target: str):
    store = f"sqlite:///{tmp_path}/history.db"
    for command in (["plan"], ["run", "--yes", "--store", store]):
        completed = _partita(command[0], fuzz_entry, "--target", target, "--partition-key", NON_UTF8, *command[1:], cwd=tmp_path)
        output = completed.stdout + completed.stderr
        assert completed.returncode == 2, output
        assert b"Traceback" not in output
        assert MARKER.encode() not in output
        assert b"lone surrogate" in output or b"declared" in output


def test_non_utf8_argv_in_events_emit_and_store_urls_is_rejected_without_a_traceback(fuzz_entry, tmp_path: Path):
    store = f"sqlite:///{tmp_path}/history.db"
    emitted = _partita("events", "emit", "identity", fuzz_entry, "--partition-key", NON_UTF8, "--store", store, cwd=tmp_path)
    assert emitted.returncode == 2, emitted.stderr
    assert MARKER.encode() not in emitted.stdout + emitted.stderr
    listed = _partita("runs", "list", "--store", b"sqlite:///" + NON_UTF8 + b".db", cwd=tmp_path)
    assert listed.returncode == 2, listed.stderr
    assert b"Traceback" not in listed.stdout + listed.stderr
