"""`FileMaterialization`: committed outputs in a local folder.

Layout under ``root`` (identities are SHA-256 hashes, so no raw key becomes a
file name; ``<h>`` is the hash's first hex digit, spreading files over 16
folders)::

    objects/<h>/<identity>.<materialization id>   a generation: manifest line + payload, immutable
    refs/<h>/<identity>.json                      small, replaced atomically
    invalidations/<h>/<identity>.json             the revocation ledger

A generation is one file: the manifest as one line of JSON (identity, codec,
epoch, payload size and SHA-256), a newline, then the payload's bytes. A
commit creates the generation and fsyncs it and its folder, and only then
renames a new reference into place. A reader therefore sees the old
generation or the new one, never half of one; a process killed midway leaves
an unreferenced generation behind. Generations are never deleted. Atomic
rename gives visibility on a local filesystem; durability across power loss
and network filesystem semantics are not guaranteed. Several writers may
race: each keeps its generation and the last reference replacement wins.

Invalidation appends to the identity's ledger: each revocation starts a new
epoch, and a reference whose epoch is older than the ledger's is revoked,
even if old files are restored later. References and manifests are written
with schema version 2; version 1 (no epochs) is still read, as epoch 0, while
no ledger exists for the identity.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from partita.errors import FileMaterializationError
from partita.materialization.codecs import Codec, JsonCodec
from partita.materialization.durable_files import create_exclusive, make_folders, read_file, replace_durably
from partita.materialization.durable_files import fsync_all as _fsync_all  # looked up per commit: fault tests wrap it
from partita.materialization.file_format import (
    LEDGER,
    MANIFEST,
    MAX_METADATA_BYTES,
    READABLE_VERSIONS,
    REFERENCE,
    SCHEMA_VERSION,
    InspectionState,
    MaterializationInspection,
    Revoked,
    corrupt,
    incompatible,
    parse_document,
    read_generation_file,
    verify_payload,
)
from partita.materialization.protocol import MaterializationContext, MaterializationRecord

__all__ = ["FileMaterialization", "InspectionState", "MaterializationInspection"]

_SEP = os.sep
_MAX_HANDED_OVER = 1024  # resolved records whose checked manifest entries wait for their load


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


class FileMaterialization:
    """Commit, resolve and load outputs under an explicitly supplied local ``root``.

    The codec (default `JsonCodec`) is part of the stored contract: payloads
    written by another codec are incompatible. The root holds raw outputs and
    canonical key text: treat it as sensitive, and use a trusted root and codec.
    """

    def __init__(self, root: str | os.PathLike[str], codec: Codec | None = None) -> None:
        if not isinstance(root, (str, os.PathLike)) or not str(root):
            raise FileMaterializationError("FileMaterialization root must be a folder path")
        codec = codec if codec is not None else JsonCodec()
        if not isinstance(getattr(codec, "name", None), str) or not callable(getattr(codec, "encode", None)):
            raise FileMaterializationError("FileMaterialization codec must have a name, encode() and decode()")
        self.root = Path(root)
        self._objects, self._refs, self._invalidations = (
            # Absolute: the adapter keeps meaning the same folder if the working directory changes.
            os.path.join(os.path.abspath(self.root), folder, "")
            for folder in ("objects", "refs", "invalidations")
        )
        self.codec = codec
        # (identity hash, materialization id) -> the manifest entries resolve checked, until load uses them.
        self._resolved: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}

    def __repr__(self) -> str:
        return f"FileMaterialization(root={str(self.root)!r}, codec={self.codec!r})"

    # -- paths -------------------------------------------------------------------

    # Plain strings: these run several times per load and commit, where
    # pathlib's object construction is a measurable share of the cost.

    def _generation_path(self, identity_hash: str, materialization_id: str) -> str:
        return f"{self._objects}{identity_hash[0]}{_SEP}{identity_hash}.{materialization_id}"

    def _reference_path(self, identity_hash: str) -> str:
        return f"{self._refs}{identity_hash[0]}{_SEP}{identity_hash}.json"

    def _ledger_path(self, identity_hash: str) -> str:
        return f"{self._invalidations}{identity_hash[0]}{_SEP}{identity_hash}.json"

    # -- reading -------------------------------------------------------------------

    def _read_json(self, path: str, what: str) -> dict[str, Any] | None:
        """The JSON object in ``path``, or None when the file does not exist."""
        try:
            data = read_file(path, MAX_METADATA_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise corrupt(f"{what} cannot be read: {exc.strerror}") from None
        return parse_document(data, what)

    def _read_generation(
        self, identity_hash: str, materialization_id: str, *, whole: bool, missing: str
    ) -> tuple[bytes, bytes]:
        try:
            return read_generation_file(self._generation_path(identity_hash, materialization_id), whole=whole)
        except FileNotFoundError:
            raise corrupt(missing) from None
        except OSError as exc:
            raise corrupt(f"generation cannot be read: {exc.strerror}") from None

    def _check_schema(self, document: dict[str, Any], kind: str, what: str) -> int:
        version = document.get("version")
        if document.get("schema", kind) != kind:
            raise incompatible(f"{what} has schema {document.get('schema')!r}, expected {kind!r}")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            raise incompatible(
                f"{what} has schema version {version!r}; this reader understands versions "
                f"{', '.join(map(str, READABLE_VERSIONS))} (upgrade partita to read newer stores)"
            )
        return int(version)

    def _ledger(self, identity_hash: str) -> dict[str, Any] | None:
        """The identity's checked revocation ledger (None: it has none)."""
        ledger = self._read_json(self._ledger_path(identity_hash), "revocation ledger")
        if ledger is None:
            return None
        self._check_schema(ledger, LEDGER, "revocation ledger")
        if ledger.get("identity_hash") != identity_hash or not isinstance(ledger.get("revocations"), list):
            raise corrupt("revocation ledger does not describe this identity")
        return ledger

    def _current_epoch(self, identity_hash: str) -> int | None:
        """Revocations so far (None: no ledger exists for the identity)."""
        ledger = self._ledger(identity_hash)
        return None if ledger is None else len(ledger["revocations"])

    def _resolve(self, context: MaterializationContext, *, verify_payload: bool) -> MaterializationRecord:
        """The referenced, current record; raises Revoked, FileNotFoundError or a typed error."""
        identity_hash = context.identity_hash()
        reference = self._read_json(self._reference_path(identity_hash), "reference")
        if reference is None:
            raise FileNotFoundError
        reference_version = self._check_schema(reference, REFERENCE, "reference")
        if reference.get("identity_hash") != identity_hash:
            raise corrupt("reference names another identity")
        materialization_id = reference.get("materialization_id")
        if not isinstance(materialization_id, str) or not materialization_id.isalnum():
            raise corrupt("reference has no valid materialization id")
        epoch = reference.get("epoch", 0) if reference_version >= 2 else 0
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise corrupt("reference has an invalid epoch")
        current = self._current_epoch(identity_hash)
        if epoch < (current or 0):
            raise Revoked
        if epoch > (current or 0):
            raise incompatible(
                "reference is from a newer revocation epoch than the ledger (was the ledger rolled back?)"
            )
        return self._manifest_record(context, identity_hash, materialization_id, epoch, verify_payload)

    def _manifest_record(
        self, context: MaterializationContext, identity_hash: str, materialization_id: str, epoch: int, verify: bool
    ) -> MaterializationRecord:
        line, rest = self._read_generation(
            identity_hash, materialization_id, whole=verify, missing="reference points to a generation that is missing"
        )
        manifest = parse_document(line, "manifest")
        manifest_version, manifest_epoch, payload = self._checked_manifest(
            context, identity_hash, materialization_id, manifest
        )
        if manifest_epoch != epoch:
            raise corrupt("manifest epoch differs from its reference")
        if verify:
            verify_payload(rest, payload)
        committed = manifest.get("committed_at")
        try:
            committed_at = dt.datetime.fromisoformat(committed) if isinstance(committed, str) else None
        except ValueError:
            raise corrupt("manifest has a malformed commit time") from None
        return context.record(
            materialization_id,
            committed_at=committed_at,
            metadata={
                "epoch": epoch,
                "schema_version": manifest_version,
                "size": payload["size"],
                "sha256": payload["sha256"],
            },
        )

    def _checked_manifest(
        self, context: MaterializationContext, identity_hash: str, materialization_id: str, manifest: dict[str, Any]
    ) -> tuple[int, int, dict[str, Any]]:
        """Validate a manifest against the requested identity; returns its version, epoch and payload entry."""
        version = self._check_schema(manifest, MANIFEST, "manifest")
        if manifest.get("materialization_id") != materialization_id or manifest.get("identity_hash") != identity_hash:
            raise corrupt("manifest does not match its reference")
        if manifest.get("identity") != context.identity():
            raise incompatible("manifest identity differs from the requested identity")
        epoch = manifest.get("epoch", 0) if version >= 2 else 0
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise corrupt("manifest has an invalid epoch")
        if manifest.get("codec") != self.codec.name:
            raise incompatible(f"payload was written by codec {manifest.get('codec')!r}, not {self.codec.name!r}")
        payload = manifest.get("payload")
        if not isinstance(payload, dict) or not isinstance(payload.get("sha256"), str):
            raise corrupt("manifest does not describe its payload")
        size = payload.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise corrupt("manifest does not describe its payload size")
        return version, epoch, payload

    # -- the protocol ----------------------------------------------------------------

    def resolve(self, context: MaterializationContext) -> MaterializationRecord | None:
        """The current committed record, or None (nothing committed, or revoked)."""
        try:
            record = self._resolve(context, verify_payload=False)
        except (FileNotFoundError, Revoked):
            return None
        # An attempt loads what it just resolved: hand the checked manifest
        # entries over once (generations are immutable), so load need not
        # parse and check the manifest line again. The ledger and the
        # payload are still checked.
        handed = self._resolved
        metadata = record.metadata  # a copy of its values: the caller may change the record's dict
        handed[(context.identity_hash(), record.materialization_id)] = (
            metadata["epoch"],
            {"size": metadata["size"], "sha256": metadata["sha256"]},
        )
        if len(handed) > _MAX_HANDED_OVER:
            with contextlib.suppress(StopIteration, KeyError, RuntimeError):
                del handed[next(iter(handed))]  # the oldest: resolved but never loaded
        return record

    def load(self, context: MaterializationContext, record: MaterializationRecord) -> Any:
        """Decode the record's payload after checking it is not revoked and is intact.

        The record need not be the identity's newest generation (generations
        are immutable), but a revocation since it was resolved or collected
        makes loading fail.
        """
        if not record.matches(context):
            raise FileMaterializationError("the record does not belong to the requested identity")
        identity_hash = context.identity_hash()
        materialization_id = record.materialization_id
        if not materialization_id.isalnum():
            raise FileMaterializationError("the record has no valid materialization id")
        line, data = self._read_generation(
            identity_hash, materialization_id, whole=True, missing="the record's generation is missing"
        )
        checked = self._resolved.pop((identity_hash, materialization_id), None)
        if checked is not None:
            epoch, payload = checked
        else:
            manifest = parse_document(line, "manifest")
            _, epoch, payload = self._checked_manifest(context, identity_hash, materialization_id, manifest)
        if epoch < (self._current_epoch(identity_hash) or 0):
            raise FileMaterializationError("the record was invalidated after it was resolved or collected")
        verify_payload(data, payload)
        try:
            return self.codec.decode(data)
        except Exception as exc:  # noqa: BLE001 - any codec failure is a corrupt payload here
            raise corrupt(f"payload cannot be decoded by {self.codec.name}: {exc}") from None

    def commit(self, context: MaterializationContext, output: Any) -> MaterializationRecord:
        """Write a new immutable generation, then point the reference at it."""
        try:
            data = self.codec.encode(output)
        except Exception as exc:  # noqa: BLE001 - reported as the commit's failure
            raise FileMaterializationError(f"codec {self.codec.name} cannot encode the output: {exc}") from exc
        if not isinstance(data, bytes):
            raise FileMaterializationError(f"codec {self.codec.name} returned {type(data).__name__}, not bytes")
        identity_hash = context.identity_hash()
        epoch = self._current_epoch(identity_hash) or 0
        materialization_id = uuid.uuid4().hex
        committed_at = _now()
        sha256 = hashlib.sha256(data).hexdigest()
        manifest = {
            "schema": MANIFEST,
            "version": SCHEMA_VERSION,
            "materialization_id": materialization_id,
            "identity_hash": identity_hash,
            "identity": context.identity(),
            "epoch": epoch,
            "codec": self.codec.name,
            "payload": {"size": len(data), "sha256": sha256},
            "committed_at": committed_at,
        }
        reference = {
            "schema": REFERENCE,
            "version": SCHEMA_VERSION,
            "identity_hash": identity_hash,
            "materialization_id": materialization_id,
            "epoch": epoch,
        }
        self._write_generation(
            identity_hash,
            materialization_id,
            data,
            json.dumps(manifest, separators=(",", ":")).encode("utf-8"),  # one line: no newline inside
            json.dumps(reference).encode("utf-8"),
        )
        return context.record(
            materialization_id,
            committed_at=dt.datetime.fromisoformat(committed_at),
            metadata={"epoch": epoch, "schema_version": SCHEMA_VERSION, "size": len(data), "sha256": sha256},
        )

    def _write_generation(
        self, identity_hash: str, materialization_id: str, payload: bytes, manifest: bytes, reference: bytes
    ) -> None:
        """Write the generation, make it durable, then publish it by renaming the new reference into place.

        The generation file and its folder are fsynced (see `_fsync_all`)
        before the rename, so a reference never names a generation that is
        not on disk. Neither the reference nor its folder is fsynced: the
        rename is atomic, and after an operating-system crash the previous
        reference may be back (power loss is outside the guarantee).
        """
        generation = self._generation_path(identity_hash, materialization_id)
        reference_path = self._reference_path(identity_hash)
        temporary = f"{reference_path}.{materialization_id}.tmp"
        descriptors: list[int] = []
        try:
            try:
                descriptors.append(create_exclusive(generation, manifest, b"\n", payload))
            except FileNotFoundError:
                make_folders(os.path.dirname(generation))
                descriptors.append(create_exclusive(generation, manifest, b"\n", payload))
            descriptors.append(os.open(os.path.dirname(generation), os.O_RDONLY))
            try:
                os.close(create_exclusive(temporary, reference))
            except FileNotFoundError:
                make_folders(os.path.dirname(reference_path))
                os.close(create_exclusive(temporary, reference))
            _fsync_all(descriptors)
            os.replace(temporary, reference_path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise FileMaterializationError(f"cannot write under the materialization root: {exc.strerror}") from exc
        finally:
            for descriptor in descriptors:
                os.close(descriptor)

    # -- invalidation, inspection, collection -----------------------------------------

    def invalidate(self, context: MaterializationContext, *, reason: str) -> int:
        """Revoke this exact identity; returns the new revocation epoch.

        Nothing cascades downstream and no generation is deleted. Repeating
        it starts another epoch. Quiesce every user of the identity first:
        there is no cross-process lock.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise FileMaterializationError("invalidate needs a non-empty reason")
        identity_hash = context.identity_hash()
        ledger = self._ledger(identity_hash)
        if ledger is None:
            ledger = {"schema": LEDGER, "version": SCHEMA_VERSION, "identity_hash": identity_hash, "revocations": []}
        epoch = len(ledger["revocations"]) + 1
        ledger["version"] = SCHEMA_VERSION
        ledger["revocations"].append({"epoch": epoch, "reason": reason, "revoked_at": _now()})
        try:
            replace_durably(self._ledger_path(identity_hash), json.dumps(ledger, indent=1).encode("utf-8"))
        except OSError as exc:
            raise FileMaterializationError(f"cannot write the revocation ledger: {exc.strerror}") from exc
        return epoch

    def inspect(self, context: MaterializationContext) -> MaterializationInspection:
        """Diagnose the identity's stored state without decoding or changing anything."""
        try:
            record = self._resolve(context, verify_payload=True)
        except FileNotFoundError:
            return MaterializationInspection(InspectionState.MISSING, detail="no reference for this identity")
        except Revoked:
            return MaterializationInspection(InspectionState.INVALIDATED, detail="revoked by the ledger")
        except FileMaterializationError as exc:
            return MaterializationInspection(InspectionState(exc.state or "corrupt"), detail=str(exc))
        return MaterializationInspection(InspectionState.AVAILABLE, record=record)

    def available(self, contexts: Sequence[MaterializationContext]) -> list[MaterializationRecord]:
        """Records currently available for exactly these contexts, in their order.

        Missing and invalidated identities are skipped; a corrupt or
        incompatible one raises instead of silently shrinking the result.
        """
        records = []
        for position, context in enumerate(contexts):
            inspection = self.inspect(context)
            if inspection.state is InspectionState.AVAILABLE:
                assert inspection.record is not None
                records.append(inspection.record)
            elif inspection.state in (InspectionState.CORRUPT, InspectionState.INCOMPATIBLE):
                raise FileMaterializationError(
                    f"contexts[{position}] ({context.asset_name}) is {inspection.state.value}: {inspection.detail}"
                )
        return records
