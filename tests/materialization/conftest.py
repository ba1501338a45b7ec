"""Shared fixtures for the output-reuse tests (SPEC §10, seed 003).

Helpers are fixtures (not importable functions) because the suite runs with
``--import-mode=importlib``.
"""

from __future__ import annotations

import hashlib
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
