"""Packages depend one way, in the order `docs/architecture.md` gives: lower layers never import higher ones."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_import_cycles import _graph  # noqa: E402 - the same import graph, read once

#: Layer of each top-level part of the package (``partita`` is the package root, the public API).
LAYERS = {
    "errors": 0,
    "version": 0,
    "partitions": 1,
    "materialization": 1,
    "definitions": 2,
    "planning": 3,
    "events": 4,
    "results": 5,
    "execution": 6,
    "store": 7,
    "flow": 8,
    "config": 8,
    "automation": 9,
    "operations": 9,
    "entry": 10,
    "documents": 10,
    "cli": 11,
    "ui": 11,
    "__main__": 12,
    "partita": 12,
}
#: The references that point upward, each narrow (see docs/architecture.md).
UPWARD = {
    ("partita.events.emission", "partita.store"),
    ("partita.events.emission", "partita.store.events"),
    ("partita.flow", "partita.automation.triggers"),
}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "partita"


def test_every_part_of_the_package_has_a_layer() -> None:
    assert {_part(module) for module in _graph()} <= set(LAYERS)


def test_no_module_imports_a_higher_layer_except_the_listed_references() -> None:
    upward = sorted(
        (module, target)
        for module, targets in _graph().items()
        for target in targets
        if LAYERS[_part(target)] > LAYERS[_part(module)] and (module, target) not in UPWARD
    )
    assert not upward, upward


def test_each_listed_upward_reference_still_exists() -> None:
    graph = _graph()
    assert all(target in graph[module] for module, target in UPWARD)
