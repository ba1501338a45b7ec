"""`--executor dask` and `--executor dask://HOST:PORT` on the real console script (SPEC §13 exit codes)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).with_name("partita")

ENTRY = """
import os

from partita import Flow, StaticPartitionDef, asset

LETTERS = StaticPartitionDef("letters", ["a", "b"])


@asset(partition_def=LETTERS)
def source(context):
    return context.partition_key * 2


@asset(partition_def=LETTERS)
def shout(context, source):
    print(f"{context.partition_key}: {source.upper()} from {os.getpid()}")
    return source.upper()


flow = Flow([shout])
"""


def _partita(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_run_with_executor_dask_runs_an_entry_file_on_a_local_cluster_and_exits_0(tmp_path):
    (tmp_path / "pipeline.py").write_text(ENTRY)

    result = _partita(
        "run", "pipeline.py", "--partition-key", "a", "--partition-key", "b", "--yes", "--executor", "dask",
        "--store", f"sqlite:///{tmp_path}/p.db", "--capture-output", cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    body_pids = re.findall(r"[AB]{2} from (\d+)", result.stderr)  # a worker's lines, shown live
    assert body_pids and str(os.getpid()) not in body_pids  # (the run id's hex may hold the pid's digits)


def test_the_project_configuration_executor_key_is_used_and_the_flag_wins(tmp_path):
    (tmp_path / "pipeline.py").write_text(ENTRY)
    (tmp_path / "partita.toml").write_text('executor = "dask://127.0.0.1:1"\n')

    refused = _partita("run", "pipeline.py", "--partition-key", "a", "--yes", "--no-store", cwd=tmp_path,
                       DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="1s")
    flagged = _partita("run", "pipeline.py", "--partition-key", "a", "--yes", "--no-store", "--executor", "thread",
                       cwd=tmp_path)

    assert refused.returncode == 4, refused.stderr
    assert flagged.returncode == 0, flagged.stderr


def test_run_with_an_unreachable_scheduler_exits_4_naming_it_and_records_no_run(tmp_path):
    (tmp_path / "pipeline.py").write_text(ENTRY)

    # Port 1 on loopback refuses at once; Dask's connect timeout bounds the retries.
    result = _partita(
        "run", "pipeline.py", "--partition-key", "a", "--yes", "--executor", "dask://127.0.0.1:1",
        "--store", f"sqlite:///{tmp_path}/p.db", cwd=tmp_path, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="1s",
    )

    assert result.returncode == 4, result.stderr
    assert "cannot reach the scheduler at tcp://127.0.0.1:1" in result.stderr
    assert "Traceback" not in result.stderr
    runs = _partita("runs", "list", "--store", f"sqlite:///{tmp_path}/p.db", "--json", cwd=tmp_path)
    assert runs.returncode == 0, runs.stderr
    assert json.loads(runs.stdout)["runs"] == []


def test_a_bad_executor_value_exits_2_naming_the_option_and_the_accepted_forms(tmp_path):
    (tmp_path / "pipeline.py").write_text(ENTRY)

    for command in (["run", "pipeline.py", "--yes"], ["serve", "pipeline.py"], ["trigger", "pipeline.py", "--once"]):
        result = _partita(*command, "--executor", "cluster", cwd=tmp_path)

        assert result.returncode == 2, (command, result.stderr)
        assert "--executor" in result.stderr
        assert "thread, process, dask, or dask://HOST:PORT" in result.stderr


def test_a_sqlite_store_with_a_remote_scheduler_exits_2_before_anything_runs(tmp_path):
    (tmp_path / "pipeline.py").write_text(ENTRY)

    result = _partita(
        "run", "pipeline.py", "--partition-key", "a", "--yes", "--executor", "dask://scheduler.example:8786",
        "--store", f"sqlite:///{tmp_path}/p.db", cwd=tmp_path,
    )

    assert result.returncode == 2, result.stderr
    assert "SQLite file on this machine" in result.stderr
    assert "scheduler.example:8786" in result.stderr


TRIGGERED = """
import os

from partita import DatePartitionDef, Flow, OnAssetEvents, asset


@asset(partition_def=DatePartitionDef())
def raw():
    return 1


@asset(partition_def=DatePartitionDef())
def consumer(context):
    return [len(context.triggering_events), os.getpid()]


consumer_flow = Flow(["consumer"], name="consumer_flow", trigger=OnAssetEvents(["raw"]))
"""


def test_trigger_once_with_executor_dask_runs_the_due_consumer_run_on_a_local_cluster(tmp_path):
    (tmp_path / "entry.py").write_text(TRIGGERED)
    store = f"sqlite:///{tmp_path}/p.db"
    emitted = _partita("events", "emit", "raw", "entry.py", "--partition-key", "2026-08-08", "--store", store,
                       cwd=tmp_path)
    assert emitted.returncode == 0, emitted.stderr

    result = _partita("trigger", "entry.py", "--once", "--executor", "dask", "--store", store, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "1 succeeded" in result.stdout + result.stderr


SCHEDULER_MARKS = """
import os
from pathlib import Path

from distributed import get_worker

from partita import DatePartitionDef, Flow, OnAssetEvents, asset


@asset(partition_def=DatePartitionDef())
def raw():
    return 1


@asset(partition_def=DatePartitionDef())
def consumer(context):
    mark = Path(os.environ["SCHEDULER_MARKS"]) / context.partition_key.isoformat()
    mark.write_text(get_worker().scheduler.address)
    return 1


consumer_flow = Flow(["consumer"], name="consumer_flow", trigger=OnAssetEvents(["raw"]))
"""


def test_a_daemon_with_executor_dask_runs_every_consumer_run_on_one_local_cluster(tmp_path):
    (tmp_path / "entry.py").write_text(SCHEDULER_MARKS)
    marks = tmp_path / "marks"
    marks.mkdir()
    store = f"sqlite:///{tmp_path}/p.db"
    for key in ("2026-08-08", "2026-08-09", "2026-08-10"):
        emitted = _partita("events", "emit", "raw", "entry.py", "--partition-key", key, "--store", store, cwd=tmp_path)
        assert emitted.returncode == 0, emitted.stderr

    result = _partita(
        "trigger", "entry.py", "--once", "--executor", "dask", "--store", store, cwd=tmp_path,
        SCHEDULER_MARKS=str(marks),
    )

    assert result.returncode == 0, result.stderr
    assert "3 succeeded" in result.stdout + result.stderr
    addresses = {path.name: path.read_text() for path in marks.iterdir()}
    assert sorted(addresses) == ["2026-08-08", "2026-08-09", "2026-08-10"]
    assert len(set(addresses.values())) == 1, addresses  # one scheduler: one cluster for the three runs
