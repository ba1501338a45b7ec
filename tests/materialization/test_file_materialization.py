"""FileMaterialization: commits, generations, schema versions, invalidation,
inspection and collection (seed 003, SPEC §10 and §14).

Layout (documented in partita.materialization.file; ``<h>`` is the identity
hash's first hex digit)::

    objects/<h>/<identity>.<materialization id>   manifest (one line of JSON), newline, payload
    refs/<h>/<identity>.json
    invalidations/<h>/<identity>.json

Tests reach these files through the ``files`` fixture (conftest.StoreFiles).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from partita import (
    AssetRegistry,
    FileMaterialization,
    FileMaterializationError,
    Flow,
    InspectionState,
    JsonCodec,
    MaterializationError,
    MaterializationInspection,
    MaterializationRecord,
    Resolution,
    StaticPartitionDef,
    asset,
)

TENANTS = StaticPartitionDef("tenants", ["tenant-a", "tenant-b", "tenant-c"])


def _hash(context) -> str:
    return context.identity_hash()


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text("utf-8"))


def _write(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document), "utf-8")


def _full_snapshot(folder: Path) -> dict[str, Any]:
    """Paths, contents, sizes and modification times: any mutation shows up."""
    state: dict[str, Any] = {}
    if not folder.exists():
        return state
    for path in sorted(folder.rglob("*")):
        info = path.stat()
        relative = str(path.relative_to(folder))
        if path.is_dir():
            state[relative] = ("dir", info.st_mtime_ns)
        else:
            state[relative] = (hashlib.sha256(path.read_bytes()).hexdigest(), info.st_size, info.st_mtime_ns)
    return state


def _temporary_files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file() and (path.name.startswith(".") or path.suffix == ".tmp")]


# -- round trip ------------------------------------------------------------------------


def test_commit_resolve_load_round_trip(root, make_context):
    store = FileMaterialization(root)
    context = make_context()
    output = {"rows": [1, 2.5, "three", None, True], "meta": {"n": 3}}

    committed = store.commit(context, output)
    assert isinstance(committed, MaterializationRecord)
    assert committed.matches(context)
    assert committed.committed_at is not None and committed.committed_at.tzinfo is not None

    resolved = store.resolve(context)
    assert resolved is not None
    assert resolved.materialization_id == committed.materialization_id
    assert resolved.matches(context)
    assert resolved.metadata["size"] == committed.metadata["size"]
    assert resolved.metadata["sha256"] == committed.metadata["sha256"]
    assert store.load(context, resolved) == output
    assert store.load(context, committed) == output


def test_a_relative_root_keeps_naming_the_same_folder_after_a_change_of_directory(
    tmp_path, make_context, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    store = FileMaterialization("materialized")
    context = make_context()
    record = store.commit(context, {"n": 1})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    second = store.commit(make_context(partition_key="tenant-b", partition_key_text="tenant-b"), {"n": 2})

    assert store.resolve(context) == record
    assert store.load(context, record) == {"n": 1}
    assert not (elsewhere / "materialized").exists()
    assert second.materialization_id in {path.name.split(".")[1] for path in (tmp_path / "materialized").rglob("*.*")}
    assert repr(store) == "FileMaterialization(root='materialized', codec=JsonCodec())"


def test_round_trip_with_input_ids_and_an_absent_key(root, make_context):
    store = FileMaterialization(root)
    upstream = store.commit(make_context(asset_name="raw"), [1])
    context = make_context(
        partition_key=None,
        partition_key_text=None,
        partition_key_present=False,
        input_materialization_ids=(upstream.materialization_id,),
    )
    record = store.commit(context, "value")
    assert record.input_materialization_ids == (upstream.materialization_id,)
    assert store.load(context, store.resolve(context)) == "value"


def test_a_new_adapter_on_the_same_root_sees_committed_outputs(root, make_context):
    context = make_context()
    record = FileMaterialization(root).commit(context, [1, 2])
    other = FileMaterialization(str(root))  # str and PathLike roots are both accepted
    resolved = other.resolve(context)
    assert resolved is not None and resolved.materialization_id == record.materialization_id
    assert other.load(context, resolved) == [1, 2]


def test_resolve_on_an_empty_root_is_a_miss(root, make_context):
    store = FileMaterialization(root)
    context = make_context()
    assert store.resolve(context) is None
    inspection = store.inspect(context)
    assert isinstance(inspection, MaterializationInspection)
    assert inspection.state is InspectionState.MISSING
    assert inspection.record is None
    assert store.available([context]) == []
    assert not root.exists()  # reading never creates the root


def test_resolve_misses_for_another_identity(root, make_context):
    store = FileMaterialization(root)
    store.commit(make_context(), 1)
    assert store.resolve(make_context(version="2")) is None
    assert store.resolve(make_context(partition_key="tenant-b", partition_key_text="tenant-b")) is None
    assert store.resolve(make_context(asset_name="other")) is None
    assert store.resolve(make_context(input_materialization_ids=("a" * 32,))) is None


def test_load_rejects_a_record_of_another_identity(root, make_context):
    store = FileMaterialization(root)
    first, second = make_context(), make_context(partition_key="tenant-b", partition_key_text="tenant-b")
    store.commit(first, 1)
    other_record = store.commit(second, 2)
    with pytest.raises(FileMaterializationError):
        store.load(first, other_record)


def test_an_older_generation_stays_loadable_after_a_newer_commit(root, make_context):
    # Generations are immutable and a newer commit revokes nothing: only
    # invalidation makes a collected record unloadable.
    store = FileMaterialization(root)
    context = make_context()
    old = store.commit(context, "old")
    store.commit(context, "new")
    assert store.load(context, old) == "old"
    assert store.load(context, store.resolve(context)) == "new"


def test_a_vanished_reference_is_a_miss_but_the_record_in_hand_still_loads(root, make_context, files):
    # The generation is immutable and not revoked: the record stays loadable.
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, 1)
    files.reference(context).unlink()
    assert store.resolve(context) is None
    assert store.load(context, record) == 1


# -- resolve hands its checked manifest to the load that follows ------------------------------


def test_a_load_right_after_resolve_still_checks_the_ledger_and_the_payload(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    committed = store.commit(context, {"rows": 3})
    record = store.resolve(context)
    generation = files.generation(context, committed.materialization_id)
    manifest, payload = files.read(generation)
    damaged = payload.replace(b"3", b"4")
    assert damaged != payload and len(damaged) == len(payload)  # same size, other bytes
    files.write(generation, manifest, damaged)  # the manifest line is unchanged
    with pytest.raises(FileMaterializationError, match="SHA-256"):
        store.load(context, record)

    fresh = make_context(version="2")
    store.commit(fresh, [1])
    resolved = store.resolve(fresh)
    store.invalidate(fresh, reason="revoked between resolve and load")
    with pytest.raises(FileMaterializationError, match="invalidated"):
        store.load(fresh, resolved)


def test_the_hand_over_is_used_once_and_ignores_changes_to_the_records_metadata(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    committed = store.commit(context, {"a": 1})
    record = store.resolve(context)
    record.metadata["size"] = 0  # the caller's dict: the adapter kept its own copy
    assert store.load(context, record) == {"a": 1}
    # The second load reads the manifest again: damage since the resolve is found.
    generation = files.generation(context, committed.materialization_id)
    data = generation.read_bytes()
    offset = files.payload_offset(generation)
    generation.write_bytes(data[:20] + b"\n" + data[offset:])  # a truncated manifest line, the payload intact
    with pytest.raises(FileMaterializationError, match="manifest"):
        store.load(context, record)


def test_resolving_many_records_without_loading_them_keeps_a_bounded_hand_over(root, make_context):
    store = FileMaterialization(root)
    contexts = [
        make_context(partition_key=f"tenant-{number}", partition_key_text=f"tenant-{number}") for number in range(1100)
    ]
    for context in contexts:
        store.commit(context, 1)
        store.resolve(context)
    assert len(store._resolved) <= 1024  # noqa: SLF001
    assert store.load(contexts[0], store.resolve(contexts[0])) == 1


@pytest.mark.parametrize("bad_root", ["", None, 5])
def test_root_must_be_a_folder_path(bad_root):
    with pytest.raises(FileMaterializationError, match="root"):
        FileMaterialization(bad_root)  # type: ignore[arg-type]


def test_codec_must_have_a_name_and_encode(tmp_path):
    with pytest.raises(FileMaterializationError, match="codec"):
        FileMaterialization(tmp_path, codec=object())  # type: ignore[arg-type]


def test_default_codec_is_json(tmp_path):
    assert isinstance(FileMaterialization(tmp_path).codec, JsonCodec)


# -- layout, manifests, generations ------------------------------------------------------


def test_commit_writes_the_documented_layout_with_schema_version_2(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, {"a": [1, 2]})
    identity = _hash(context)

    # Exactly one generation file and one reference, each in the folder named
    # by the identity hash's first hex digit.
    generation = files.generation(context, record.materialization_id)
    reference_path = files.reference(context)
    assert generation.relative_to(root).parts == ("objects", identity[0], f"{identity}.{record.materialization_id}")
    assert reference_path.relative_to(root).parts == ("refs", identity[0], f"{identity}.json")
    assert sorted(path for path in root.rglob("*") if path.is_file()) == sorted([generation, reference_path])
    assert sorted(path.relative_to(root) for path in root.rglob("*") if path.is_dir()) == sorted(
        Path(part) for part in ("objects", f"objects/{identity[0]}", "refs", f"refs/{identity[0]}")
    )
    assert files.generations() == [generation]

    reference = _read(reference_path)
    assert reference["version"] == 2
    assert reference["materialization_id"] == record.materialization_id
    assert reference["identity_hash"] == identity
    assert reference["epoch"] == 0

    # The generation is the manifest as one line of compact JSON, a newline,
    # then exactly the payload's bytes.
    raw = generation.read_bytes()
    manifest, payload = files.read(generation)
    assert raw == json.dumps(manifest, separators=(",", ":")).encode("utf-8") + b"\n" + payload
    assert files.payload_offset(generation) == len(raw) - len(payload)
    assert manifest["version"] == 2
    assert manifest["materialization_id"] == record.materialization_id
    assert manifest["identity_hash"] == identity
    assert manifest["identity"] == context.identity()
    assert manifest["epoch"] == 0
    assert manifest["codec"] == JsonCodec.name
    assert manifest["payload"] == {"size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
    assert payload == JsonCodec().encode({"a": [1, 2]})
    assert JsonCodec().decode(payload) == {"a": [1, 2]}
    assert record.metadata["size"] == len(payload)
    assert record.metadata["sha256"] == hashlib.sha256(payload).hexdigest()
    assert record.metadata["schema_version"] == 2


def test_no_file_name_contains_the_raw_key(root, make_context):
    secret = "acme-private-4411"
    store = FileMaterialization(root)
    context = make_context(partition_key=secret, partition_key_text=secret)
    store.commit(context, 1)
    store.invalidate(context, reason="test")
    store.commit(context, 2)
    for path in root.rglob("*"):
        assert secret not in str(path.relative_to(root))


def test_a_second_commit_makes_a_new_generation_and_keeps_the_old_one_byte_for_byte(
    root, make_context, snapshot, files
):
    store = FileMaterialization(root)
    context = make_context()
    first = store.commit(context, {"generation": 1})
    objects_before = snapshot(root / "objects")

    second = store.commit(context, {"generation": 2})

    assert second.materialization_id != first.materialization_id
    objects_after = snapshot(root / "objects")
    for path, digest in objects_before.items():
        assert objects_after[path] == digest, f"{path} changed"
    assert files.generations() == sorted(
        files.generation(context, record.materialization_id) for record in (first, second)
    )
    assert files.read(files.generation(context, first.materialization_id))[1] == JsonCodec().encode({"generation": 1})
    assert store.resolve(context).materialization_id == second.materialization_id
    assert store.load(context, store.resolve(context)) == {"generation": 2}


def test_committing_the_same_output_twice_still_makes_two_generations(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    first = store.commit(context, [1])
    second = store.commit(context, [1])
    assert first.materialization_id != second.materialization_id
    assert first.metadata["sha256"] == second.metadata["sha256"]
    assert files.generations(context) == sorted(
        files.generation(context, record.materialization_id) for record in (first, second)
    )


def test_the_reference_is_replaced_by_an_atomic_rename(root, make_context, monkeypatch, files):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, 1)
    renames: list[tuple[Path, Path]] = []
    generations_at_rename: list[list[Path]] = []
    real_replace = os.replace

    def recording_replace(source, destination, *args, **kwargs):
        renames.append((Path(source), Path(destination)))
        generations_at_rename.append(files.generations(context))
        return real_replace(source, destination, *args, **kwargs)

    monkeypatch.setattr(os, "replace", recording_replace)
    record = store.commit(context, 2)

    reference = files.reference(context)
    assert [destination for _, destination in renames] == [reference]
    source = renames[0][0]
    assert source == reference.with_name(f"{reference.name}.{record.materialization_id}.tmp")
    assert source.parent == reference.parent  # same folder: a rename, not a copy across filesystems
    assert not source.exists()
    assert _read(reference)["materialization_id"] == record.materialization_id
    # The new generation was complete before the reference was renamed over the old one.
    generation = files.generation(context, record.materialization_id)
    assert generation in generations_at_rename[0]
    assert files.read(generation)[1] == JsonCodec().encode(2)


def test_commits_and_invalidations_leave_no_temporary_files(root, make_context, files):
    store = FileMaterialization(root)
    contexts = [make_context(partition_key=k, partition_key_text=k) for k in ("tenant-a", "tenant-b")]
    for context in contexts:
        store.commit(context, 1)
        store.commit(context, 2)
        store.invalidate(context, reason="rebuild")
        store.commit(context, 3)
        store.invalidate(context, reason="again")
    assert _temporary_files(root) == []
    refs = [path for path in (root / "refs").rglob("*") if path.is_file()]
    assert sorted(refs) == sorted(files.reference(context) for context in contexts)
    assert len(files.generations()) == 6
    ledgers = [path for path in (root / "invalidations").rglob("*") if path.is_file()]
    assert sorted(ledgers) == sorted(files.ledger(context) for context in contexts)


# -- schema version 1 ----------------------------------------------------------------------


def _downgrade_to_version_1(files, context, materialization_id: str) -> None:
    """Rewrite the reference and the generation's manifest line as schema version 1 (no epoch)."""
    reference_path = files.reference(context)
    reference = _read(reference_path)
    reference["version"] = 1
    del reference["epoch"]
    _write(reference_path, reference)
    generation = files.generation(context, materialization_id)
    manifest, payload = files.read(generation)
    manifest["version"] = 1
    del manifest["epoch"]
    files.write(generation, manifest, payload)


def test_schema_version_1_is_readable_while_no_ledger_exists(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, {"legacy": True})
    _downgrade_to_version_1(files, context, record.materialization_id)

    resolved = store.resolve(context)
    assert resolved is not None
    assert resolved.materialization_id == record.materialization_id
    assert resolved.metadata["schema_version"] == 1
    assert store.load(context, resolved) == {"legacy": True}
    inspection = store.inspect(context)
    assert inspection.state is InspectionState.AVAILABLE
    assert inspection.record.materialization_id == record.materialization_id
    assert [r.materialization_id for r in store.available([context])] == [record.materialization_id]


def test_schema_version_1_is_invalidated_once_a_ledger_exists(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, {"legacy": True})
    _downgrade_to_version_1(files, context, record.materialization_id)

    store.invalidate(context, reason="upgrade")

    assert store.resolve(context) is None
    assert store.inspect(context).state is InspectionState.INVALIDATED
    assert store.available([context]) == []
    with pytest.raises(FileMaterializationError):
        store.load(context, record)


def test_a_version_1_reference_is_invalidated_by_a_ledger_written_before_it_was_restored(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, 1)
    _downgrade_to_version_1(files, context, record.materialization_id)
    legacy_reference = files.reference(context).read_bytes()
    store.invalidate(context, reason="rebuild")
    new = store.commit(context, 2)
    assert store.resolve(context).materialization_id == new.materialization_id
    files.reference(context).write_bytes(legacy_reference)
    assert store.resolve(context) is None
    assert store.inspect(context).state is InspectionState.INVALIDATED


# -- invalidation --------------------------------------------------------------------------


def test_invalidate_revokes_exactly_one_identity(root, make_context, snapshot, files):
    store = FileMaterialization(root)
    context = make_context()
    record = store.commit(context, "target")
    sibling = make_context(partition_key="tenant-b", partition_key_text="tenant-b")
    other_version = make_context(version="2")
    other_asset = make_context(asset_name="invoices")
    downstream = make_context(asset_name="report", input_materialization_ids=(record.materialization_id,))
    others = [sibling, other_version, other_asset, downstream]
    other_records = {_hash(c): store.commit(c, _hash(c)) for c in others}
    objects_before = snapshot(root / "objects")
    refs_before = snapshot(root / "refs")

    epoch = store.invalidate(context, reason="bad source file")

    assert epoch == 1
    assert store.resolve(context) is None
    inspection = store.inspect(context)
    assert inspection.state is InspectionState.INVALIDATED
    assert inspection.record is None
    # No cascade: the downstream identity that consumed it stays available.
    for other in others:
        resolved = store.resolve(other)
        assert resolved is not None
        assert resolved.materialization_id == other_records[_hash(other)].materialization_id
        assert store.inspect(other).state is InspectionState.AVAILABLE
        assert store.load(other, resolved) == _hash(other)
    # No file is deleted or changed: the ledger is written separately.
    assert snapshot(root / "objects") == objects_before
    assert snapshot(root / "refs") == refs_before
    assert files.generation(context, record.materialization_id).is_file()
    assert files.ledger(context).is_file()


def test_repeating_invalidation_creates_a_fresh_epoch(root, make_context, snapshot, files):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, 1)
    objects_before = snapshot(root / "objects")

    assert store.invalidate(context, reason="first reason") == 1
    assert store.invalidate(context, reason="second reason") == 2

    ledger = _read(files.ledger(context))
    assert ledger["version"] == 2
    assert ledger["identity_hash"] == _hash(context)
    revocations = ledger["revocations"]
    assert len(revocations) == 2
    assert [entry["epoch"] for entry in revocations] == [1, 2]
    assert [entry["reason"] for entry in revocations] == ["first reason", "second reason"]
    for entry in revocations:
        assert dt.datetime.fromisoformat(entry["revoked_at"]).tzinfo is not None
    assert store.resolve(context) is None
    assert snapshot(root / "objects") == objects_before


def test_invalidating_a_missing_identity_revokes_nothing_and_later_commits_are_available(root, make_context):
    store = FileMaterialization(root)
    context = make_context()
    assert store.invalidate(context, reason="pre-emptive") == 1
    assert store.inspect(context).state is InspectionState.MISSING
    record = store.commit(context, "fresh")
    assert store.resolve(context).materialization_id == record.materialization_id
    assert record.metadata["epoch"] == 1


def test_a_commit_after_invalidation_is_available_again(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    old = store.commit(context, "old")
    store.invalidate(context, reason="rebuild")

    new = store.commit(context, "new")

    assert new.materialization_id != old.materialization_id
    assert new.metadata["epoch"] == 1
    resolved = store.resolve(context)
    assert resolved is not None and resolved.materialization_id == new.materialization_id
    assert store.load(context, resolved) == "new"
    inspection = store.inspect(context)
    assert inspection.state is InspectionState.AVAILABLE
    assert inspection.record.materialization_id == new.materialization_id
    assert _read(files.reference(context))["epoch"] == 1
    # The revoked generation is still on disk.
    assert files.generation(context, old.materialization_id).is_file()


def test_a_commit_after_invalidation_is_reused_by_a_later_run(root):
    store = FileMaterialization(root)
    registry = AssetRegistry()
    calls: list[str] = []

    @asset(partition_def=TENANTS, materialization=store, version="1", registry=registry)
    def orders(context):
        calls.append(context.partition_key)
        return {"tenant": context.partition_key, "build": len(calls)}

    flow = Flow(["orders"], registry=registry)
    config = {"partition_keys": ["tenant-a"]}
    first = flow.run(config).tasks["orders"].attempts[0]
    assert first.resolution is Resolution.EXECUTED

    context = _engine_context(first)
    store.invalidate(context, reason="rebuild tenant-a")

    rebuilt = flow.run(config).tasks["orders"].attempts[0]
    assert rebuilt.resolution is Resolution.EXECUTED
    assert rebuilt.materialization_id != first.materialization_id
    assert rebuilt.output == {"tenant": "tenant-a", "build": 2}

    reused = flow.run(config).tasks["orders"].attempts[0]
    assert reused.resolution is Resolution.MATERIALIZED
    assert reused.materialization_id == rebuilt.materialization_id
    assert reused.output == {"tenant": "tenant-a", "build": 2}
    assert calls == ["tenant-a", "tenant-a"]


def _engine_context(attempt, version="1", inputs=()):
    from partita import MaterializationContext

    return MaterializationContext(
        asset_name=attempt.asset_name,
        version=version,
        partition_domain=TENANTS.domain,
        partition_key=attempt.partition_key,
        partition_key_text=TENANTS.format_key(attempt.partition_key),
        partition_key_present=True,
        input_materialization_ids=inputs,
    )


@pytest.mark.parametrize("reason", ["", "   ", "\n", None, 5])
def test_invalidate_requires_a_non_empty_reason(root, make_context, reason, snapshot):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, 1)
    before = snapshot(root)
    with pytest.raises(FileMaterializationError, match="reason"):
        store.invalidate(context, reason=reason)  # type: ignore[arg-type]
    assert snapshot(root) == before
    assert store.inspect(context).state is InspectionState.AVAILABLE


def test_invalidate_takes_the_reason_by_keyword_only(root, make_context):
    store = FileMaterialization(root)
    with pytest.raises(TypeError):
        store.invalidate(make_context(), "positional")  # type: ignore[misc]


def test_restoring_an_old_reference_does_not_revive_it(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, "revoked")
    reference = files.reference(context)
    saved = root.parent / "saved-reference.json"
    shutil.copy2(reference, saved)

    store.invalidate(context, reason="bad")
    shutil.copy2(saved, reference)

    assert store.resolve(context) is None
    assert store.inspect(context).state is InspectionState.INVALIDATED
    assert store.available([context]) == []


def test_restoring_a_reference_of_an_earlier_epoch_does_not_revive_it(root, make_context, files):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, "epoch 0")
    store.invalidate(context, reason="first")
    store.commit(context, "epoch 1")
    saved = files.reference(context).read_bytes()
    store.invalidate(context, reason="second")

    files.reference(context).write_bytes(saved)

    assert store.resolve(context) is None
    assert store.inspect(context).state is InspectionState.INVALIDATED


def test_restoring_old_refs_and_objects_while_keeping_the_ledger_does_not_revive_them(root, make_context):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, "old")
    backup = root.parent / "backup"
    shutil.copytree(root, backup)
    store.invalidate(context, reason="bad")
    store.commit(context, "new")

    for part in ("refs", "objects"):
        shutil.rmtree(root / part)
        shutil.copytree(backup / part, root / part)

    assert store.resolve(context) is None
    assert store.inspect(context).state is InspectionState.INVALIDATED


def test_copying_the_complete_root_preserves_revocation(root, make_context, tmp_path):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, 1)
    store.invalidate(context, reason="bad")
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    assert FileMaterialization(copy).resolve(context) is None
    assert FileMaterialization(copy).inspect(context).state is InspectionState.INVALIDATED


# -- inspection ------------------------------------------------------------------------------


def _corrupt_payload(files, context, record) -> None:
    """Flip one bit of the payload's first byte; the manifest line is untouched."""
    generation = files.generation(context, record.materialization_id)
    data = bytearray(generation.read_bytes())
    data[files.payload_offset(generation)] ^= 0x01
    generation.write_bytes(bytes(data))


def _make_incompatible(files, context, record) -> None:
    """Rewrite the manifest line with a future schema version; the payload is untouched."""
    generation = files.generation(context, record.materialization_id)
    manifest, payload = files.read(generation)
    manifest["version"] = 99
    files.write(generation, manifest, payload)


def test_inspect_reports_every_state_without_mutating_the_root(root, make_context, files):
    store = FileMaterialization(root)
    available = make_context(partition_key="a", partition_key_text="a")
    missing = make_context(partition_key="b", partition_key_text="b")
    invalidated = make_context(partition_key="c", partition_key_text="c")
    corrupt = make_context(partition_key="d", partition_key_text="d")
    incompatible = make_context(partition_key="e", partition_key_text="e")
    available_record = store.commit(available, "ok")
    store.commit(invalidated, "revoked")
    store.invalidate(invalidated, reason="bad")
    _corrupt_payload(files, corrupt, store.commit(corrupt, "damaged"))
    _make_incompatible(files, incompatible, store.commit(incompatible, "future"))
    before = _full_snapshot(root)

    states = {
        name: store.inspect(context)
        for name, context in [
            ("available", available),
            ("missing", missing),
            ("invalidated", invalidated),
            ("corrupt", corrupt),
            ("incompatible", incompatible),
        ]
    }

    assert {name: inspection.state.value for name, inspection in states.items()} == {
        "available": "available",
        "missing": "missing",
        "invalidated": "invalidated",
        "corrupt": "corrupt",
        "incompatible": "incompatible",
    }
    assert states["available"].record is not None
    assert states["available"].record.materialization_id == available_record.materialization_id
    for name in ("missing", "invalidated", "corrupt", "incompatible"):
        assert states[name].record is None, name
    assert _full_snapshot(root) == before


def test_inspect_verifies_but_never_decodes_the_payload(root, make_context):
    class UndecodableCodec(JsonCodec):
        def decode(self, payload):
            raise AssertionError("inspect must not decode")

    context = make_context()
    FileMaterialization(root).commit(context, {"a": 1})
    inspection = FileMaterialization(root, codec=UndecodableCodec()).inspect(context)
    assert inspection.state is InspectionState.AVAILABLE


def test_inspect_does_not_create_the_root_or_any_folder(root, make_context):
    store = FileMaterialization(root)
    assert store.inspect(make_context()).state is InspectionState.MISSING
    assert not root.exists()


# -- collection -------------------------------------------------------------------------------


def test_available_preserves_order_and_skips_missing_and_invalidated(root, make_context):
    store = FileMaterialization(root)
    contexts = [make_context(partition_key=k, partition_key_text=k) for k in ("k1", "k2", "k3", "k4", "k5")]
    records = {}
    for index in (0, 2, 3, 4):
        records[index] = store.commit(contexts[index], index)
    store.invalidate(contexts[3], reason="revoked")

    collected = store.available(contexts)
    assert [r.materialization_id for r in collected] == [records[i].materialization_id for i in (0, 2, 4)]

    reversed_order = store.available(list(reversed(contexts)))
    assert [r.materialization_id for r in reversed_order] == [records[i].materialization_id for i in (4, 2, 0)]
    for record, context in zip(collected, [contexts[0], contexts[2], contexts[4]], strict=True):
        assert record.matches(context)
        assert store.load(context, record) == int(context.partition_key_text[1]) - 1


def test_available_of_nothing_is_empty(root):
    assert FileMaterialization(root).available([]) == []


def test_available_inspects_only_the_given_contexts(root, make_context):
    store = FileMaterialization(root)
    selected = make_context(partition_key="k1", partition_key_text="k1")
    unselected = make_context(partition_key="k2", partition_key_text="k2")
    record = store.commit(selected, 1)
    store.commit(unselected, 2)
    assert [r.materialization_id for r in store.available([selected])] == [record.materialization_id]


def test_available_raises_on_a_corrupt_selected_record(root, make_context, files):
    store = FileMaterialization(root)
    good = make_context(partition_key="k1", partition_key_text="k1")
    bad = make_context(partition_key="k2", partition_key_text="k2")
    store.commit(good, 1)
    _corrupt_payload(files, bad, store.commit(bad, 2))
    with pytest.raises(FileMaterializationError, match=r"contexts\[1\]"):
        store.available([good, bad])


def test_available_raises_on_an_incompatible_selected_record(root, make_context, files):
    store = FileMaterialization(root)
    good = make_context(partition_key="k1", partition_key_text="k1")
    bad = make_context(partition_key="k2", partition_key_text="k2")
    store.commit(good, 1)
    _make_incompatible(files, bad, store.commit(bad, 2))
    with pytest.raises(FileMaterializationError, match="incompatible"):
        store.available([bad, good])


def test_available_raises_on_a_codec_mismatch(root, make_context):
    class OtherCodec(JsonCodec):
        name = "other/1"

    context = make_context()
    FileMaterialization(root).commit(context, 1)
    with pytest.raises(FileMaterializationError):
        FileMaterialization(root, codec=OtherCodec()).available([context])


def test_load_after_invalidation_rejects_a_collected_record(root, make_context):
    store = FileMaterialization(root)
    context = make_context()
    store.commit(context, "collected")
    (record,) = store.available([context])

    store.invalidate(context, reason="changed between collection and load")

    with pytest.raises(FileMaterializationError, match="invalidated"):
        store.load(context, record)


def test_file_materialization_error_is_a_materialization_error():
    assert issubclass(FileMaterializationError, MaterializationError)
