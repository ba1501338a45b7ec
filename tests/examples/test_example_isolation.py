"""Examples run side by side in one folder (one default store) without starting each other's consumers.

``partita run`` records every example's events into ``.partita/partita.db``
of the working directory, so an asset a triggered consumer listens to must
be declared by that consumer's example alone: another example's events for
an asset of the same name would start it.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from partita.automation.triggers import OnAssetEvents
from partita.entry import load_registry, load_trigger_flows
from partita.errors import EntryLoadError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@functools.cache
def _assets_by_example() -> dict[str, frozenset[str]]:
    """The asset names each example declares at module level (what `partita` commands load)."""
    found = {}
    for path in sorted(EXAMPLES.glob("*.py")):
        try:
            found[path.name] = frozenset(load_registry(str(path)))
        except EntryLoadError:  # defines its assets inside functions: nothing a command would load
            found[path.name] = frozenset()
    return found


def _listened_assets() -> list[tuple[str, str, str]]:
    """(example, consumer flow, upstream asset) for every OnAssetEvents trigger of every example."""
    found = []
    for path in sorted(EXAMPLES.glob("*.py")):
        try:
            flows = load_trigger_flows(str(path))
        except EntryLoadError:
            continue
        for flow in flows:
            if isinstance(flow.trigger, OnAssetEvents):
                found.extend((path.name, flow.name, asset) for asset in flow.trigger.assets)
    return found


def test_some_examples_declare_event_triggers():
    assert {example for example, _, _ in _listened_assets()} >= {"batch_validation.py", "hourly_rollup.py"}


@pytest.mark.parametrize(("example", "flow", "asset"), _listened_assets())
def test_no_other_example_declares_an_asset_a_consumer_listens_to(example: str, flow: str, asset: str):
    others = sorted(name for name, assets in _assets_by_example().items() if name != example and asset in assets)

    assert not others, f"{example}: consumer {flow!r} listens to {asset!r}, which {', '.join(others)} also declare"


def test_triggered_consumer_flow_names_are_unique_across_examples():
    """Trigger state is kept per flow name: two examples' consumers of one name would share it."""
    by_flow: dict[str, set[str]] = {}
    for example, flow, _ in _listened_assets():
        by_flow.setdefault(flow, set()).add(example)

    assert by_flow and all(len(examples) == 1 for examples in by_flow.values()), by_flow
