"""The JSON documents partita prints (``--json``) and serves (``/api/v1``).

One builder per document, used by the command line and the HTTP API alike,
so both speak one schema (``docs/schemas/``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["DOCUMENT_VERSION", "document"]

DOCUMENT_VERSION = 1


def document(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` under its envelope: ``{"schema": "partita.KIND", "version": 1, ...}``."""
    return {"schema": f"partita.{kind}", "version": DOCUMENT_VERSION, **body}
