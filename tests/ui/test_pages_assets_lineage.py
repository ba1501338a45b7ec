"""The lineage graph's layout: longest-path layers, edges pointing downstream, no overlapping boxes at 40 assets."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient

from partita.planning.lineage import Lineage, LineageNode
from partita.ui.lineage_svg import BOX_HEIGHT, BOX_WIDTH, MAX_LABEL, draw_lineage


def _random_dag(count: int, seed: int) -> Lineage:
    chooser = random.Random(seed)
    names = [f"asset_{number:02d}" for number in range(count)]
    edges = []
    for index, name in enumerate(names[1:], start=1):
        for upstream in chooser.sample(names[:index], k=min(index, chooser.randint(0, 3))):
            edges.append((upstream, name))
    return Lineage(tuple(LineageNode(name, "date" if index % 2 else None) for index, name in enumerate(names)), tuple(edges))


def _longest_paths(lineage: Lineage) -> dict[str, int]:
    depth: dict[str, int] = {}
    for node in lineage.nodes:  # upstream first
        ups = [up for up, down in lineage.edges if down == node.name]
        depth[node.name] = 1 + max((depth[up] for up in ups), default=-1)
    return depth


def test_forty_assets_are_layered_by_longest_path_without_overlaps() -> None:
    lineage = _random_dag(40, seed=7)
    drawing = draw_lineage(lineage, targets=["asset_39"])
    boxes = {node.name: node for node in drawing.nodes}
    assert len(boxes) == 40
    assert {name: node.layer for name, node in boxes.items()} == _longest_paths(lineage)
    for upstream, downstream in lineage.edges:
        assert boxes[upstream].x + BOX_WIDTH < boxes[downstream].x  # every edge points right
    placed = sorted((node.x, node.y) for node in drawing.nodes)
    assert len(set(placed)) == 40
    for node in drawing.nodes:
        assert 0 <= node.x and node.x + BOX_WIDTH <= drawing.width
        assert 0 <= node.y and node.y + BOX_HEIGHT <= drawing.height
    assert len(drawing.edges) == len(lineage.edges)
    assert boxes["asset_39"].target and not boxes["asset_00"].target


def test_a_long_name_is_shortened_in_its_box_and_a_long_chain_is_drawn() -> None:
    long_name = "a_rather_long_asset_name_that_does_not_fit"
    chain = [f"step_{number:04d}" for number in range(2000)]
    lineage = Lineage(
        (LineageNode(long_name, None), *(LineageNode(name, None) for name in chain)),
        ((long_name, chain[0]), *zip(chain, chain[1:], strict=False)),
    )
    drawing = draw_lineage(lineage)
    first = drawing.nodes[0]
    assert first.name == long_name and len(first.label) == MAX_LABEL and first.label.endswith("…")
    assert max(node.layer for node in drawing.nodes) == 2000  # no recursion limit on a deep chain


def test_the_assets_page_draws_every_asset_of_a_large_entry(tmp_path: Path, ui_client: Callable[..., TestClient]) -> None:
    lines = ["from partita import DatePartitionDef, Flow, asset", "days = DatePartitionDef(start='2026-01-01')"]
    for number in range(35):
        ups = [f"n{number - step:02d}" for step in (1, 3) if number - step >= 0]
        lines += ["", "", "@asset(partition_def=days)", f"def n{number:02d}({', '.join(ups)}) -> None:", "    pass"]
    lines += ["", "", "flow = Flow(['n34'], name='big')"]
    entry = tmp_path / "big.py"
    entry.write_text("\n".join(lines) + "\n", encoding="utf-8")
    page = ui_client(entry=str(entry)).get("/assets", headers={"accept": "text/html"}).text
    layers = dict(re.findall(r'data-asset="(n\d+)" data-layer="(\d+)"', page))
    assert len(layers) == 35 and layers["n34"] == "34"
    assert page.count('class="lineage-edge"') == 34 + 32
    assert 'style="' not in page
