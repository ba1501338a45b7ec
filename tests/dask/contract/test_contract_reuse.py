"""A committed output is reused, not recomputed, by the next run on every executor (SPEC §10, §11).

The first run executes the materialized asset's bodies and commits their
outputs; the second resolves the same identities, loads what was committed
and runs no body of it, while a plain consumer still runs on the loaded
outputs. The bodies are module level (worker processes find them by
name); each test registers them with its own FileMaterialization root.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import partita as p

MARKS = "PARTITA_TEST_DASK_MARKS"
LETTERS = p.StaticPartitionDef("contract_letters", ["a", "b"])


def committed_letter(context):
    (Path(os.environ[MARKS]) / f"body-{context.partition_key}-{uuid.uuid4().hex}").write_text("")
    return {"letter": context.partition_key, "pid": os.getpid()}


def shouted_letter(committed_letter):
    return committed_letter["letter"].upper()


def _flow(executor, root: Path) -> p.Flow:
    registry = p.AssetRegistry()
    files = p.FileMaterialization(root)
    p.asset(partition_def=LETTERS, materialization=files, version="1", registry=registry)(committed_letter)
    p.asset(partition_def=LETTERS, registry=registry)(shouted_letter)
    return p.Flow(["shouted_letter"], registry=registry, executor=executor)


def test_a_materialized_output_committed_by_one_run_is_loaded_by_the_next_without_running_its_body(
    executor_kind, marks, tmp_path
):
    flow = _flow(executor_kind, tmp_path / "outputs")
    config = {"partition_keys": ["a", "b"]}

    first = flow.run(config)
    bodies_after_first = sorted(path.name.rsplit("-", 1)[0] for path in marks.glob("body-*"))
    second = flow.run(config)

    assert first.status is second.status is p.RunStatus.SUCCESS, [a.failure for a in (*first.attempts(), *second.attempts())]
    assert bodies_after_first == ["body-a", "body-b"]
    assert len(list(marks.glob("body-*"))) == 2, "the second run ran a body it could have loaded"
    before, after = first.tasks["committed_letter"].attempts, second.tasks["committed_letter"].attempts
    assert [a.resolution for a in before] == [p.Resolution.EXECUTED] * 2
    assert [a.resolution for a in after] == [p.Resolution.MATERIALIZED] * 2
    assert [a.materialization_id for a in after] == [a.materialization_id for a in before]
    assert all(a.materialization_id is not None for a in before)
    assert [a.output for a in after] == [a.output for a in before]
    assert [a.invocations for a in after] == [(), ()]
    assert (before[0].output["pid"] == os.getpid()) is (executor_kind == "thread")
    assert [a.resolution for a in second.tasks["shouted_letter"].attempts] == [p.Resolution.EXECUTED] * 2
    assert [second.output("shouted_letter", key) for key in ("a", "b")] == ["A", "B"]
