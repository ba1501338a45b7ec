"""The ``partita.assets`` document (a flow's closure, each asset with its partition definition and dependencies).

And ``partita.asset``: one asset of that closure with the assets that depend on it.
"""

from __future__ import annotations

from typing import Any

from partita.definitions.assets import AssetDefinition
from partita.flow import Flow
from partita.planning.plan import describe_asset

__all__ = ["asset_body", "assets_body"]


def assets_body(flow: Flow) -> dict[str, Any]:
    closure = flow.closure()
    described = [{**describe_asset(definition), "target": definition.name in flow.targets} for definition in closure]
    return {"targets": list(flow.targets), "assets": described}


def asset_body(flow: Flow, definition: AssetDefinition) -> dict[str, Any]:
    """``definition`` (an asset of ``flow``'s closure) described as in ``partita.assets``, with its dependents."""
    dependents = [other.name for other in flow.closure() if definition.name in other.deps]
    return {
        "asset": {**describe_asset(definition), "target": definition.name in flow.targets},
        "dependents": dependents,
    }
