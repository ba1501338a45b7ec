"""The file format of committed outputs: schema markers, inspection states, typed format errors, and parsing.

Kept apart from `FileMaterialization` so what a generation, reference and
ledger must look like is stated in one place, independent of how they are written.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from partita.errors import FileMaterializationError
from partita.materialization.durable_files import O_CLOEXEC
from partita.materialization.protocol import MaterializationRecord

__all__ = [
    "LEDGER",
    "MANIFEST",
    "MAX_METADATA_BYTES",
    "READABLE_VERSIONS",
    "REFERENCE",
    "SCHEMA_VERSION",
    "InspectionState",
    "MaterializationInspection",
    "Revoked",
    "corrupt",
    "incompatible",
    "parse_document",
    "read_generation_file",
    "verify_payload",
]

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
REFERENCE = "partita.file-materialization.reference"
MANIFEST = "partita.file-materialization.manifest"
LEDGER = "partita.file-materialization.revocations"
MAX_METADATA_BYTES = 1 << 20
HEAD_BYTES = 1 << 16  # the first read of a generation: the whole file, when it is small


class InspectionState(enum.Enum):
    AVAILABLE = "available"
    MISSING = "missing"
    INVALIDATED = "invalidated"
    INCOMPATIBLE = "incompatible"
    CORRUPT = "corrupt"


@dataclass(frozen=True, slots=True)
class MaterializationInspection:
    """What `FileMaterialization.inspect` found; ``record`` only when available."""

    state: InspectionState
    record: MaterializationRecord | None = None
    detail: str = ""


def corrupt(message: str) -> FileMaterializationError:
    return FileMaterializationError(message, state=InspectionState.CORRUPT.value)


def incompatible(message: str) -> FileMaterializationError:
    return FileMaterializationError(message, state=InspectionState.INCOMPATIBLE.value)


class Revoked(Exception):
    """Internal: the reference's epoch is older than the ledger's."""


def read_generation_file(path: str, *, whole: bool) -> tuple[bytes, bytes]:
    """A generation file's manifest line, and the bytes after it.

    With ``whole`` the file is read to its end (the payload, for a load or
    a verifying inspection); otherwise reading stops once the manifest line
    is complete, so a resolve does not read a large payload. A small
    generation takes one read either way. Raises FileNotFoundError when the
    file is absent.
    """
    descriptor = os.open(path, os.O_RDONLY | O_CLOEXEC)
    try:
        head = os.read(descriptor, HEAD_BYTES)
        end = head.find(b"\n")
        while end < 0 and len(head) <= MAX_METADATA_BYTES:
            chunk = os.read(descriptor, HEAD_BYTES)
            if not chunk:
                break
            head += chunk
            end = head.find(b"\n", len(head) - len(chunk))
        if end < 0:
            raise corrupt("generation has no complete manifest line (truncated or damaged)")
        line, rest = head[:end], head[end + 1 :]
        if whole:
            chunks = [rest]
            while chunk := os.read(descriptor, 1 << 20):
                chunks.append(chunk)
            rest = b"".join(chunks)
        return line, rest
    finally:
        os.close(descriptor)


def parse_document(data: bytes, what: str) -> dict[str, Any]:
    if len(data) > MAX_METADATA_BYTES:
        raise corrupt(f"{what} is implausibly large")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise corrupt(f"{what} is not valid JSON (truncated or damaged)") from None
    if not isinstance(document, dict):
        raise corrupt(f"{what} is not a JSON object")
    return document


def verify_payload(data: bytes, payload: dict[str, Any]) -> None:
    """The bytes after the manifest line must be exactly the payload it describes."""
    if len(data) != payload["size"]:
        raise corrupt("payload size differs from its manifest")
    if hashlib.sha256(data).hexdigest() != payload["sha256"]:
        raise corrupt("payload SHA-256 differs from its manifest")
