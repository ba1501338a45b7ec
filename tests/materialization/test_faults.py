"""FileMaterialization under damage, crashes and races (seed 003, storage boundary).

A missing reference is a cache miss; a malformed or incompatible reference,
manifest or payload raises FileMaterializationError instead of silently
rerunning the producer. A commit publishes by replacing a small reference to
an immutable generation: a crash leaves the previous state visible plus an
orphan generation, and racing writers each keep their generation while the
last reference replacement wins.

Layout (``<h>`` is the identity hash's first hex digit; tests reach these
files through the ``files`` fixture, conftest.StoreFiles)::

    objects/<h>/<identity>.<materialization id>   manifest (one line of JSON), newline, payload
    refs/<h>/<identity>.json
    invalidations/<h>/<identity>.json
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import partita.materialization.file as file_module
from partita import (
    AssetRegistry,
    AttemptStatus,
    FileMaterialization,
    FileMaterializationError,
    Flow,
    InspectionState,
    JsonCodec,
    MaterializationContext,
    Resolution,
    RunStatus,
    SkipReason,
    StaticPartitionDef,
    asset,
)

TENANTS = StaticPartitionDef("tenants", ["tenant-a", "tenant-b"])


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text("utf-8"))


def _write(path: Path, document: Any) -> None:
    path.write_text(json.dumps(document), "utf-8")


def _tamper_manifest(files: Any, generation: Path, change: Any) -> None:
    """Rewrite a generation's manifest line through ``change(manifest)``, keeping its payload bytes."""
    manifest, payload = files.read(generation)
    change(manifest)
    files.write(generation, manifest, payload)
    assert files.read(generation)[1] == payload


def _load_by_manifest(files: Any, generation: Path, codec: Any = None) -> Any:
    """Verify one generation file from its own manifest line and decode it (no reference involved)."""
    manifest, payload = files.read(generation)
    assert generation.name == f"{manifest['identity_hash']}.{manifest['materialization_id']}"
    assert manifest["payload"] == {"size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
    return (codec or JsonCodec()).decode(payload)


def _temporary_reference(files: Any, context: MaterializationContext, materialization_id: str) -> Path:
    """Where a commit writes its new reference before renaming it into place."""
    reference = files.reference(context)
    return reference.with_name(f"{reference.name}.{materialization_id}.tmp")


def _flip_payload_byte(files: Any, generation: Path, position: int = 0) -> None:
    """Flip one byte of the payload part (``position`` counts within the payload), leaving the manifest line."""
    data = bytearray(generation.read_bytes())
    offset = files.payload_offset(generation)
    index = offset + position if position >= 0 else len(data) + position
    assert offset <= index < len(data), "the flipped byte must lie in the payload part"
    data[index] ^= 0x20
    generation.write_bytes(bytes(data))


def _tenant_context(asset_name: str, key: str, inputs: tuple[str, ...] = ()) -> MaterializationContext:
    return MaterializationContext(
        asset_name=asset_name,
        version="1",
        partition_domain=TENANTS.domain,
        partition_key=key,
        partition_key_text=TENANTS.format_key(key),
        partition_key_present=True,
        input_materialization_ids=inputs,
    )


class Pipeline:
    """A materialized producer and consumer, counting body calls."""

    def __init__(self, store: FileMaterialization) -> None:
        self.calls: list[tuple[str, str]] = []
        self.registry = AssetRegistry()
        calls = self.calls

        @asset(partition_def=TENANTS, materialization=store, version="1", registry=self.registry)
        def producer(context):
            calls.append(("producer", context.partition_key))
            return {"tenant": context.partition_key}

        @asset(partition_def=TENANTS, materialization=store, version="1", registry=self.registry)
        def consumer(context, producer):
            calls.append(("consumer", context.partition_key))
            return [producer["tenant"]]

        self.flow = Flow(["consumer"], registry=self.registry)

    def run(self, keys=("tenant-a",)):
        return self.flow.run({"partition_keys": list(keys)})


def _assert_failed_without_body(result, pipeline: Pipeline, calls_before: int) -> None:
    assert result.status is RunStatus.FAILED
    attempt = result.tasks["producer"].attempts[0]
    assert attempt.status is AttemptStatus.FAILED
    assert isinstance(attempt.exception, FileMaterializationError)
    assert attempt.failure is not None
    assert attempt.invocations == ()
    assert attempt.resolution is None and attempt.materialization_id is None
    assert len(pipeline.calls) == calls_before, "the producer body must not be rerun silently"
    downstream = result.tasks["consumer"].attempts[0]
    assert downstream.status is AttemptStatus.SKIPPED
    assert downstream.reason is SkipReason.DEPENDENCY_FAILED


# -- damaged payloads, manifests, references and ledgers -------------------------------------


@pytest.mark.parametrize("position", [0, -1, 5])
def test_a_flipped_payload_byte_is_corrupt(root, make_context, files, position):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, {"value": "some committed output"})
    generation = files.generation(context, record.materialization_id)
    manifest_before = files.read(generation)[0]
    _flip_payload_byte(files, generation, position)
    assert files.read(generation)[0] == manifest_before  # only the payload part changed

    with pytest.raises(FileMaterializationError, match="SHA-256") as raised:
        store.load(context, store.resolve(context))
    assert raised.value.state == "corrupt"
    inspection = store.inspect(context)
    assert inspection.state is InspectionState.CORRUPT
    assert inspection.record is None
    assert "SHA-256" in inspection.detail
    with pytest.raises(FileMaterializationError, match="corrupt"):
        store.available([context])


def test_a_flipped_payload_byte_fails_the_run_attempt_without_rerunning_the_body(root, files):
    store = FileMaterialization(root)
    pipeline = Pipeline(store)
    first = pipeline.run()
    assert first.status is RunStatus.SUCCESS
    produced = first.tasks["producer"].attempts[0]
    context = _tenant_context("producer", "tenant-a")
    _flip_payload_byte(files, files.generation(context, produced.materialization_id))
    calls_before = len(pipeline.calls)

    second = pipeline.run()

    _assert_failed_without_body(second, pipeline, calls_before)


@pytest.mark.parametrize(
    "keep",
    [
        lambda data, offset: data[:-1],
        lambda data, offset: data[:offset],  # the file ends right after the manifest line's newline
    ],
    ids=["one-byte-short", "payload-part-missing"],
)
def test_a_truncated_payload_is_corrupt(root, make_context, files, keep):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, [1, 2, 3])
    generation = files.generation(context, record.materialization_id)
    manifest_before = files.read(generation)[0]
    generation.write_bytes(keep(generation.read_bytes(), files.payload_offset(generation)))
    assert files.read(generation)[0] == manifest_before  # the manifest line is intact

    inspection = store.inspect(context)
    assert inspection.state is InspectionState.CORRUPT
    assert inspection.detail == "payload size differs from its manifest"
    with pytest.raises(FileMaterializationError, match="payload size differs") as raised:
        store.load(context, record)
    assert raised.value.state == "corrupt"
    with pytest.raises(FileMaterializationError, match="corrupt"):
        store.available([context])


@pytest.mark.parametrize("extra", [b"x", b"\n", b"[1,2,3]"], ids=["one-byte", "newline", "a-second-payload"])
def test_bytes_appended_after_the_payload_are_corrupt(root, make_context, files, extra):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, [1, 2, 3])
    generation = files.generation(context, record.materialization_id)
    with generation.open("ab") as appending:
        appending.write(extra)

    inspection = store.inspect(context)
    assert inspection.state is InspectionState.CORRUPT
    assert inspection.detail == "payload size differs from its manifest"
    with pytest.raises(FileMaterializationError, match="payload size differs"):
        store.load(context, record)


@pytest.mark.parametrize(
    "damage, message",
    [
        # The file ends inside the manifest line: no newline and no payload.
        (lambda data, offset: data[: (offset - 1) // 2], "no complete manifest line"),
        # The manifest line is cut short but still ends in a newline before an intact payload.
        (lambda data, offset: data[: (offset - 1) // 2] + b"\n" + data[offset:], "manifest is not valid JSON"),
        # The newline between the manifest line and the payload is lost.
        (lambda data, offset: data[: offset - 1] + data[offset:], "no complete manifest line"),
    ],
    ids=["file-ends-inside-the-line", "line-cut-payload-kept", "newline-lost"],
)
def test_a_truncated_or_unterminated_manifest_line_is_corrupt(root, make_context, files, damage, message):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, {"a": 1})
    generation = files.generation(context, record.materialization_id)
    generation.write_bytes(damage(generation.read_bytes(), files.payload_offset(generation)))

    with pytest.raises(FileMaterializationError, match=message) as raised:
        store.resolve(context)
    assert raised.value.state == "corrupt"
    with pytest.raises(FileMaterializationError, match=message):
        store.load(context, record)
    inspection = store.inspect(context)
    assert inspection.state is InspectionState.CORRUPT
    assert message in inspection.detail


def test_a_truncated_manifest_fails_the_run_attempt(root, files):
    store = FileMaterialization(root)
    pipeline = Pipeline(store)
    produced = pipeline.run().tasks["producer"].attempts[0]
    generation = files.generation(_tenant_context("producer", "tenant-a"), produced.materialization_id)
    generation.write_bytes(generation.read_bytes()[:10])  # the file ends inside the manifest line
    calls_before = len(pipeline.calls)
    _assert_failed_without_body(pipeline.run(), pipeline, calls_before)


@pytest.mark.parametrize(
    "damage",
    [
        lambda m: m["payload"].update(size="12"),
        lambda m: m["payload"].pop("sha256"),
        lambda m: m.update(payload=None),
        lambda m: m.update(materialization_id="0" * 32),
        lambda m: m.update(identity_hash="0" * 64),
        lambda m: m.update(epoch=7),
    ],
    ids=["size-type", "no-sha", "no-payload", "other-id", "other-identity", "other-epoch"],
)
def test_a_manifest_that_does_not_describe_its_generation_is_corrupt(root, make_context, files, damage):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, 1)
    _tamper_manifest(files, files.generation(context, record.materialization_id), damage)
    assert store.inspect(context).state is InspectionState.CORRUPT
    with pytest.raises(FileMaterializationError) as raised:
        store.resolve(context)
    assert raised.value.state == "corrupt"


def test_a_manifest_with_a_malformed_commit_time_is_corrupt(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, 1)
    _tamper_manifest(
        files, files.generation(context, record.materialization_id), lambda m: m.update(committed_at="not a timestamp")
    )
    assert store.inspect(context).state is InspectionState.CORRUPT
    with pytest.raises(FileMaterializationError, match="commit time"):
        store.resolve(context)


def test_a_reference_to_a_missing_generation_is_corrupt_not_a_miss(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, 1)
    reference_path = files.reference(context)
    reference = _read(reference_path)
    reference["materialization_id"] = "f" * 32
    _write(reference_path, reference)
    assert not files.generation(context, "f" * 32).exists()

    with pytest.raises(FileMaterializationError, match="reference points to a generation that is missing") as raised:
        store.resolve(context)
    assert raised.value.state == "corrupt"
    inspection = store.inspect(context)
    assert inspection.state is InspectionState.CORRUPT
    assert inspection.detail == "reference points to a generation that is missing"


@pytest.mark.parametrize("removed", ["generation-file", "objects-folder"])
def test_a_reference_whose_generation_file_was_removed_is_corrupt(root, make_context, files, removed):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, 1)
    generation = files.generation(context, record.materialization_id)
    if removed == "generation-file":
        generation.unlink()
    else:
        shutil.rmtree(generation.parent)  # objects/<h>: every generation of the identities sharing the digit
    assert files.reference(context).exists()

    with pytest.raises(FileMaterializationError, match="reference points to a generation that is missing"):
        store.resolve(context)
    assert store.inspect(context).state is InspectionState.CORRUPT
    with pytest.raises(FileMaterializationError, match="the record's generation is missing") as raised:
        store.load(context, record)
    assert raised.value.state == "corrupt"


@pytest.mark.parametrize(
    "reference",
    [
        b"",
        b"{not json",
        b"[]",
        b"\xff\xfe",
        None,  # filled in: another identity's hash
        "bad-id",
        "bad-epoch",
    ],
    ids=["empty", "truncated", "array", "not-utf8", "other-identity", "bad-id", "bad-epoch"],
)
def test_a_malformed_reference_is_corrupt(root, make_context, files, reference):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, 1)
    path = files.reference(context)
    document = _read(path)
    if reference is None:
        document["identity_hash"] = "0" * 64
        _write(path, document)
    elif reference == "bad-id":
        document["materialization_id"] = "../../escape"
        _write(path, document)
    elif reference == "bad-epoch":
        document["epoch"] = -1
        _write(path, document)
    else:
        path.write_bytes(reference)
    with pytest.raises(FileMaterializationError) as raised:
        store.resolve(context)
    assert raised.value.state == "corrupt"
    assert store.inspect(context).state is InspectionState.CORRUPT


def test_a_manifest_with_an_unknown_schema_version_is_incompatible(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, 1)
    _tamper_manifest(files, files.generation(context, record.materialization_id), lambda m: m.update(version=99))

    with pytest.raises(FileMaterializationError, match="99") as raised:
        store.resolve(context)
    assert raised.value.state == "incompatible"
    with pytest.raises(FileMaterializationError, match="99"):
        store.load(context, record)
    inspection = store.inspect(context)
    assert inspection.state is InspectionState.INCOMPATIBLE
    assert inspection.record is None


@pytest.mark.parametrize("version", [99, 0, "2", None, True])
def test_a_reference_with_an_unknown_schema_version_is_incompatible(root, make_context, files, version):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, 1)
    path = files.reference(context)
    reference = _read(path)
    reference["version"] = version
    _write(path, reference)
    with pytest.raises(FileMaterializationError) as raised:
        store.resolve(context)
    assert raised.value.state == "incompatible"
    assert store.inspect(context).state is InspectionState.INCOMPATIBLE


def test_a_manifest_of_another_schema_kind_is_incompatible(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, 1)
    _tamper_manifest(
        files, files.generation(context, record.materialization_id), lambda m: m.update(schema="somebody.else")
    )
    inspection = store.inspect(context)
    assert inspection.state is InspectionState.INCOMPATIBLE
    assert "somebody.else" in inspection.detail


def test_a_ledger_that_is_not_valid_json_is_an_error(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, 1)
    store.invalidate(context, reason="bad")
    files.ledger(context).write_bytes(b'{"revocations": [')

    with pytest.raises(FileMaterializationError, match="ledger"):
        store.resolve(context)
    assert store.inspect(context).state is InspectionState.CORRUPT
    with pytest.raises(FileMaterializationError):
        store.available([context])
    generations_before = files.generations(context)
    with pytest.raises(FileMaterializationError, match="ledger"):
        store.commit(context, 2)
    assert files.generations(context) == generations_before  # the failed commit wrote no generation
    with pytest.raises(FileMaterializationError, match="ledger"):
        store.invalidate(context, reason="again")


def test_a_ledger_of_an_unknown_schema_version_is_incompatible(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, 1)
    store.invalidate(context, reason="bad")
    ledger = _read(files.ledger(context))
    ledger["version"] = 99
    _write(files.ledger(context), ledger)
    with pytest.raises(FileMaterializationError, match="99") as raised:
        store.resolve(context)
    assert raised.value.state == "incompatible"
    assert store.inspect(context).state is InspectionState.INCOMPATIBLE


def test_a_broken_ledger_fails_the_run_attempt(root, files):
    store = FileMaterialization(root)
    pipeline = Pipeline(store)
    pipeline.run()
    context = _tenant_context("producer", "tenant-a")
    path = files.ledger(context)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not json at all")
    calls_before = len(pipeline.calls)
    _assert_failed_without_body(pipeline.run(), pipeline, calls_before)


# -- crashes ------------------------------------------------------------------------------------

# A commit creates the generation file, opens its objects/<h> folder, writes the
# temporary reference refs/<h>/<identity>.json.<id>.tmp, fsyncs the generation
# and the folder together (one `_fsync_all` call), then renames the temporary
# reference over refs/<h>/<identity>.json. The child is killed either just after
# that fsync ("adapter") or at the rename itself ("os"); each reports what it saw.
_KILLED_COMMIT = textwrap.dedent(
    """
    import json
    import os
    import sys
    import partita.materialization.file as file_module
    from partita import FileMaterialization, MaterializationContext

    root, mode = sys.argv[1], sys.argv[2]
    context = MaterializationContext(
        asset_name="orders", version="1", partition_domain="static:tenants",
        partition_key="tenant-a", partition_key_text="tenant-a", partition_key_present=True,
    )

    def report(**facts):
        sys.stdout.write(json.dumps(facts) + "\\n")
        sys.stdout.flush()

    if mode == "adapter":
        real = file_module._fsync_all
        def dying(descriptors):
            real(descriptors)
            report(fsynced=[[os.fstat(d).st_dev, os.fstat(d).st_ino] for d in descriptors])
            os._exit(9)  # killed once the generation is durable, before the reference is replaced
        file_module._fsync_all = dying
    else:
        real_replace = os.replace
        def dying_replace(source, destination, *args, **kwargs):
            if os.path.basename(os.path.dirname(os.path.dirname(os.fspath(destination)))) == "refs":
                report(renaming=[os.fspath(source), os.fspath(destination)])
                os._exit(9)  # the new reference is written to a temporary file, never renamed
            return real_replace(source, destination, *args, **kwargs)
        os.replace = dying_replace
    FileMaterialization(root).commit(context, {"from": "the killed process"})
    print("the commit finished")
    """
)


def _killed_commit(root: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _KILLED_COMMIT, str(root), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _check_killed_commit(
    files: Any, context: MaterializationContext, completed: subprocess.CompletedProcess[str], mode: str, orphan: Path
) -> None:
    """The child died where ``mode`` says, after the orphan generation was complete and durable."""
    assert completed.returncode == 9, completed.stderr
    assert "the commit finished" not in completed.stdout
    (line,) = completed.stdout.splitlines()
    facts = json.loads(line)
    orphan_id = files.read(orphan)[0]["materialization_id"]
    if mode == "adapter":
        # One fsync call covered exactly the generation file and its objects/<h> folder.
        assert facts["fsynced"] == [[os.stat(path).st_dev, os.stat(path).st_ino] for path in (orphan, orphan.parent)]
    else:
        # The only rename attempted was the temporary reference over the reference.
        assert [Path(path) for path in facts["renaming"]] == [
            _temporary_reference(files, context, orphan_id),
            files.reference(context),
        ]
    # Either way the temporary reference is left behind, naming the orphan, never renamed.
    stray = _temporary_reference(files, context, orphan_id)
    assert _read(stray)["materialization_id"] == orphan_id


@pytest.mark.parametrize("mode", ["adapter", "os"])
def test_a_process_killed_before_the_reference_keeps_the_previous_generation(root, make_context, files, mode):
    store = FileMaterialization(root)
    context = make_context()
    previous = store.commit(context, {"from": "the previous commit"})
    previous_generation = files.generation(context, previous.materialization_id)

    completed = _killed_commit(root, mode)

    orphans = [path for path in files.generations(context) if path != previous_generation]
    assert len(orphans) == 1
    (orphan,) = orphans
    _check_killed_commit(files, context, completed, mode, orphan)
    assert files.current_id(context) == previous.materialization_id
    resolved = store.resolve(context)
    assert resolved is not None and resolved.materialization_id == previous.materialization_id
    assert store.load(context, resolved) == {"from": "the previous commit"}
    assert store.inspect(context).state is InspectionState.AVAILABLE
    assert _load_by_manifest(files, orphan) == {"from": "the killed process"}
    # A later commit works normally despite the orphan and the stray temporary reference.
    later = store.commit(context, "later")
    assert store.load(context, store.resolve(context)) == "later"
    assert files.generation(context, later.materialization_id) not in orphans
    assert _load_by_manifest(files, orphan) == {"from": "the killed process"}


@pytest.mark.parametrize("mode", ["adapter", "os"])
def test_a_process_killed_before_the_first_reference_leaves_a_miss(root, make_context, files, mode):
    store = FileMaterialization(root)
    context = make_context()

    completed = _killed_commit(root, mode)

    generations = files.generations(context)
    assert len(generations) == 1
    _check_killed_commit(files, context, completed, mode, generations[0])
    assert not files.reference(context).exists()
    assert store.resolve(context) is None
    assert store.inspect(context).state is InspectionState.MISSING
    assert store.available([context]) == []
    assert _load_by_manifest(files, generations[0]) == {"from": "the killed process"}


# -- racing writers -------------------------------------------------------------------------------


def test_the_last_reference_replacement_wins_between_threads(root, make_context, files, monkeypatch):
    """The slow writer finishes its generation first but replaces the reference last."""
    store = FileMaterialization(root)
    context = make_context()
    reached, release = threading.Event(), threading.Event()
    real = file_module._fsync_all

    def ordered(descriptors):
        real(descriptors)  # the slow writer's generation is durable ...
        if threading.current_thread().name == "slow-writer":  # ... but its reference waits
            reached.set()
            assert release.wait(timeout=60), "the test never released the slow writer"

    monkeypatch.setattr(file_module, "_fsync_all", ordered)
    results: dict[str, Any] = {}

    def slow() -> None:
        try:
            results["slow"] = store.commit(context, {"writer": "slow"})
        except BaseException as exc:  # pragma: no cover - reported below
            results["slow"] = exc

    thread = threading.Thread(target=slow, name="slow-writer")
    thread.start()
    try:
        assert reached.wait(timeout=60)
        (slow_generation,) = files.generations(context)  # durable, not yet referenced
        fast = store.commit(context, {"writer": "fast"})
        assert files.current_id(context) == fast.materialization_id
        # The slow writer's temporary reference is its own: the fast commit neither used nor removed it.
        slow_id = files.read(slow_generation)[0]["materialization_id"]
        assert list(files.reference(context).parent.glob("*.tmp")) == [_temporary_reference(files, context, slow_id)]
    finally:
        release.set()
        thread.join(timeout=60)
    slow_record = results["slow"]
    assert not isinstance(slow_record, BaseException), slow_record
    assert slow_record.materialization_id == slow_id

    resolved = store.resolve(context)
    assert resolved.materialization_id == slow_record.materialization_id
    assert store.load(context, resolved) == {"writer": "slow"}
    assert files.generations(context) == sorted(
        files.generation(context, record.materialization_id) for record in (fast, slow_record)
    )
    assert _load_by_manifest(files, files.generation(context, fast.materialization_id)) == {"writer": "fast"}
    assert _load_by_manifest(files, slow_generation) == {"writer": "slow"}
    assert list(root.rglob("*.tmp")) == []


def test_many_threads_racing_on_one_identity_keep_every_generation(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    writers = 8
    barrier = threading.Barrier(writers)
    records: dict[int, Any] = {}

    def write(number: int) -> None:
        barrier.wait(timeout=60)
        records[number] = store.commit(context, {"writer": number})

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(records) == list(range(writers))
    by_id = {record.materialization_id: number for number, record in records.items()}
    assert len(by_id) == writers
    resolved = store.resolve(context)
    assert resolved.materialization_id in by_id
    assert store.load(context, resolved) == {"writer": by_id[resolved.materialization_id]}
    assert files.generations(context) == sorted(files.generation(context, i) for i in by_id)
    for materialization_id, number in by_id.items():
        assert _load_by_manifest(files, files.generation(context, materialization_id)) == {"writer": number}
    assert [p for p in root.rglob("*") if p.is_file() and p.name.endswith(".tmp")] == []


_WRITER = textwrap.dedent(
    """
    import json
    import sys
    from partita import FileMaterialization, MaterializationContext

    root, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    context = MaterializationContext(
        asset_name="orders", version="1", partition_domain="static:tenants",
        partition_key="tenant-a", partition_key_text="tenant-a", partition_key_present=True,
    )
    store = FileMaterialization(root)
    sys.stdin.readline()  # start together
    ids = [store.commit(context, {"writer": name, "n": n}).materialization_id for n in range(count)]
    print(json.dumps(ids))
    """
)


def test_two_processes_racing_on_one_identity(root, make_context, files):
    context = make_context()
    count = 5
    processes = {
        name: subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(root), name, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("first", "second")
    }
    outputs = {}
    for process in processes.values():
        process.stdin.write("go\n")
        process.stdin.flush()
    for name, process in processes.items():
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
        outputs[name] = json.loads(stdout)

    store = FileMaterialization(root)
    resolved = store.resolve(context)
    # Each writer's commits are sequential, so the winner is one writer's last commit.
    assert resolved.materialization_id in {ids[-1] for ids in outputs.values()}
    winner = next(name for name, ids in outputs.items() if ids[-1] == resolved.materialization_id)
    assert store.load(context, resolved) == {"writer": winner, "n": count - 1}
    assert len(files.generations(context)) == 2 * count
    assert files.generations(context) == sorted(
        files.generation(context, materialization_id) for ids in outputs.values() for materialization_id in ids
    )
    for name, ids in outputs.items():
        for n, materialization_id in enumerate(ids):
            assert _load_by_manifest(files, files.generation(context, materialization_id)) == {"writer": name, "n": n}
    assert list(root.rglob("*.tmp")) == []


# -- codecs ---------------------------------------------------------------------------------------


class ExplodingCodec:
    name = "exploding/1"

    def encode(self, value: Any) -> bytes:
        raise RuntimeError("cannot encode this")

    def decode(self, payload: bytes) -> Any:
        raise AssertionError("never reached")


class TextCodec:
    name = "text/1"

    def encode(self, value: Any) -> Any:
        return json.dumps(value)  # str, not bytes

    def decode(self, payload: bytes) -> Any:
        return json.loads(payload)


class OtherJsonCodec(JsonCodec):
    name = "other-json/1"


def test_a_codec_that_raises_on_encode_fails_the_commit(root, make_context, files):
    store = FileMaterialization(root, codec=ExplodingCodec())
    context = make_context()
    with pytest.raises(FileMaterializationError, match="encode"):
        store.commit(context, {"a": 1})
    assert store.resolve(context) is None
    assert not files.reference(context).exists()
    assert files.generations() == []  # nothing was written: encoding comes before any file


def test_json_codec_rejection_fails_the_commit(root, make_context):
    store = FileMaterialization(root)
    context = make_context()
    with pytest.raises(FileMaterializationError, match="tuple"):
        store.commit(context, (1, 2))
    assert store.resolve(context) is None


def test_a_codec_that_returns_text_fails_the_commit(root, make_context):
    store = FileMaterialization(root, codec=TextCodec())
    context = make_context()
    with pytest.raises(FileMaterializationError, match="bytes"):
        store.commit(context, [1])
    assert store.resolve(context) is None


def test_an_encode_failure_fails_the_run_attempt_after_one_body_call(root):
    store = FileMaterialization(root, codec=ExplodingCodec())
    pipeline = Pipeline(store)
    result = pipeline.run()
    assert result.status is RunStatus.FAILED
    attempt = result.tasks["producer"].attempts[0]
    assert attempt.status is AttemptStatus.FAILED
    assert isinstance(attempt.exception, FileMaterializationError)
    assert pipeline.calls == [("producer", "tenant-a")]
    assert result.tasks["consumer"].attempts[0].reason is SkipReason.DEPENDENCY_FAILED


def test_a_codec_with_another_name_finds_existing_payloads_incompatible(root, make_context):
    context = make_context()
    record = FileMaterialization(root).commit(context, {"a": 1})
    reader = FileMaterialization(root, codec=OtherJsonCodec())

    inspection = reader.inspect(context)
    assert inspection.state is InspectionState.INCOMPATIBLE
    assert "codec" in inspection.detail
    with pytest.raises(FileMaterializationError, match="codec"):
        reader.resolve(context)
    with pytest.raises(FileMaterializationError):
        reader.load(context, record)
    # The original codec still reads it: nothing was changed.
    assert FileMaterialization(root).load(context, record) == {"a": 1}


def test_a_codec_mismatch_fails_the_run_attempt_without_rerunning_the_body(root):
    Pipeline(FileMaterialization(root)).run()
    pipeline = Pipeline(FileMaterialization(root, codec=OtherJsonCodec()))
    _assert_failed_without_body(pipeline.run(), pipeline, 0)


def test_a_decode_failure_is_a_corrupt_payload(root, make_context):
    class BrokenDecoder(JsonCodec):
        def decode(self, payload):
            raise ValueError("cannot decode")

    context = make_context()
    FileMaterialization(root).commit(context, 1)
    reader = FileMaterialization(root, codec=BrokenDecoder())
    with pytest.raises(FileMaterializationError, match="decode"):
        reader.load(context, reader.resolve(context))


def test_an_unwritable_root_fails_the_commit(tmp_path, make_context):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the root should be")
    store = FileMaterialization(blocker)
    with pytest.raises(FileMaterializationError):
        store.commit(make_context(), 1)


def test_a_healthy_run_after_fault_free_commits_reuses(root):
    """Control: without damage the same pipeline reuses both assets."""
    store = FileMaterialization(root)
    pipeline = Pipeline(store)
    pipeline.run(("tenant-a", "tenant-b"))
    again = pipeline.run(("tenant-a", "tenant-b"))
    assert again.status is RunStatus.SUCCESS
    assert {a.resolution for t in again.tasks.values() for a in t.attempts} == {Resolution.MATERIALIZED}
    assert len(pipeline.calls) == 4
