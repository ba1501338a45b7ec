"""Shared fixtures for the output-reuse tests (SPEC §10, seed 003).

Helpers are fixtures (not importable functions) because the suite runs with
``--import-mode=importlib``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from partita import MaterializationContext


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An explicitly supplied (not yet existing) materialization root."""
    return tmp_path / "materialized"


@pytest.fixture
def make_context() -> Callable[..., MaterializationContext]:
    """Build a context with sensible defaults; keyword arguments override them."""

    def build(**overrides: Any) -> MaterializationContext:
        values: dict[str, Any] = {
            "asset_name": "orders",
            "version": "1",
            "partition_domain": "static:tenants",
            "partition_key": "tenant-a",
            "partition_key_text": "tenant-a",
            "partition_key_present": True,
            "input_materialization_ids": (),
        }
        values.update(overrides)
        return MaterializationContext(**values)

    return build


@pytest.fixture
def snapshot() -> Callable[[Path], dict[str, Any]]:
    """Every path under a folder mapped to the SHA-256 of its bytes (folders to 'dir')."""

    def take(folder: Path) -> dict[str, Any]:
        if not folder.exists():
            return {}
        state: dict[str, Any] = {}
        for path in sorted(folder.rglob("*")):
            relative = str(path.relative_to(folder))
            state[relative] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        return state

    return take


class StoreFiles:
    """The documented FileMaterialization layout under one root, for tests that read or damage files.

    A generation is one file: the manifest as one line of JSON, a newline,
    then the payload.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def at(self, root: Path) -> StoreFiles:
        return StoreFiles(root)

    def reference(self, context: MaterializationContext) -> Path:
        identity = context.identity_hash()
        return self.root / "refs" / identity[0] / f"{identity}.json"

    def ledger(self, context: MaterializationContext) -> Path:
        identity = context.identity_hash()
        return self.root / "invalidations" / identity[0] / f"{identity}.json"

    def generation(self, context: MaterializationContext, materialization_id: str) -> Path:
        identity = context.identity_hash()
        return self.root / "objects" / identity[0] / f"{identity}.{materialization_id}"

    def generations(self, context: MaterializationContext | None = None) -> list[Path]:
        """Every generation file under the root (of one identity when ``context`` is given), sorted."""
        pattern = f"{context.identity_hash()}.*" if context is not None else "*"
        return sorted(path for path in (self.root / "objects").glob(f"*/{pattern}") if path.is_file())

    def current_id(self, context: MaterializationContext) -> str:
        return json.loads(self.reference(context).read_text("utf-8"))["materialization_id"]

    @staticmethod
    def read(generation: Path) -> tuple[dict[str, Any], bytes]:
        """A generation file's manifest and payload."""
        line, _, payload = generation.read_bytes().partition(b"\n")
        return json.loads(line), payload

    @staticmethod
    def write(generation: Path, manifest: dict[str, Any], payload: bytes) -> None:
        """Rewrite a generation file (tests that tamper with one)."""
        generation.write_bytes(json.dumps(manifest, separators=(",", ":")).encode("utf-8") + b"\n" + payload)

    @staticmethod
    def payload_offset(generation: Path) -> int:
        """Where the payload starts in a generation file."""
        return generation.read_bytes().index(b"\n") + 1


@pytest.fixture
def files(root: Path) -> StoreFiles:
    """The layout of the default ``root`` (``files.at(other)`` for another root)."""
    return StoreFiles(root)
