"""The ``partita.assets`` document: a flow's closure, each asset with its partition definition and dependencies."""

from __future__ import annotations

from typing import Any

from partita.flow import Flow
from partita.planning.plan import describe_asset

__all__ = ["assets_body"]


def assets_body(flow: Flow) -> dict[str, Any]:
    closure = flow.closure()
    described = [{**describe_asset(definition), "target": definition.name in flow.targets} for definition in closure]
    return {"targets": list(flow.targets), "assets": described}
