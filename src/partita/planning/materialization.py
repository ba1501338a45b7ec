"""Planning rules for output reuse (seed 003, "Reuse committed partition outputs").

Checked from declarations alone: no adapter is contacted, and a plan never
claims that a reusable output exists.
"""

from __future__ import annotations

from collections.abc import Mapping

from partita.definitions.assets import AssetDefinition
from partita.errors import PlanningError

__all__ = ["check_materialization"]


def check_materialization(closure: Mapping[str, AssetDefinition]) -> None:
    for definition in closure.values():
        if definition.materialization is None:
            continue
        name = definition.name
        if definition.version is None:
            raise PlanningError(
                f"asset {name!r} has a materialization but no version; reuse needs an explicit, non-empty "
                "version (bump it whenever the output's meaning changes)"
            )
        if definition.partition_def is None:
            raise PlanningError(f"asset {name!r} is materialized but not partitioned; materialization reuses outputs per key")
        domain = definition.partition_def.domain
        for dep in definition.deps:
            upstream = closure[dep]
            if upstream.materialization is None or upstream.version is None:
                raise PlanningError(
                    f"asset {name!r} is materialized, so its direct dependency {dep!r} must be materialized "
                    "with a version too (input materialization ids are part of its identity)"
                )
            mapped = bool(definition.mappers) and dep in definition.mappers
            if upstream.partition_def is None or (upstream.partition_def.domain != domain and not mapped):
                raise PlanningError(
                    f"asset {name!r} is materialized, so its direct dependency {dep!r} must share its partition "
                    f"domain {domain}, or be read through a partition mapper"
                )
