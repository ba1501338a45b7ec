"""The lineage graph's geometry for the assets page: layers by longest path, boxes, and edge paths.

Only numbers are computed here; the template draws the SVG with every name
escaped, and CSS classes style it (the Content-Security-Policy refuses
style attributes). An asset sits one layer right of its deepest upstream
(longest-path layering), so every edge points right. Within a layer, assets
are ordered by the mean position of their upstreams (a few barycentre
sweeps), which keeps edges short and crossings few; 30 or more assets stay
readable because a layer grows downwards, not wider.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from partita.planning.lineage import Lineage

__all__ = ["LineageDrawing", "NodeBox", "EdgePath", "draw_lineage"]

BOX_WIDTH = 190
BOX_HEIGHT = 44
LAYER_GAP = 70  # between a layer's right edge and the next one's left edge
ROW_GAP = 16
MARGIN = 12
#: Names longer than this are shortened in the box (the full name is in its title and on the asset page).
MAX_LABEL = 24
_SWEEPS = 4
#: Assets without edges are packed this many (or as many as the graph has layers) to a row.
MIN_ALONE_COLUMNS = 4


@dataclass(frozen=True, slots=True)
class NodeBox:
    name: str
    #: The name as the box shows it (shortened when long).
    label: str
    domain: str | None
    layer: int
    x: int
    y: int
    target: bool


@dataclass(frozen=True, slots=True)
class EdgePath:
    upstream: str
    downstream: str
    #: The SVG path (a cubic curve from the upstream's right side to the downstream's left side).
    d: str


@dataclass(frozen=True, slots=True)
class LineageDrawing:
    nodes: tuple[NodeBox, ...]
    edges: tuple[EdgePath, ...]
    width: int
    height: int
    box_width: int = BOX_WIDTH
    box_height: int = BOX_HEIGHT


def _layers(lineage: Lineage) -> dict[str, int]:
    """Each asset's longest-path depth: 0 without upstreams in the graph, else one more than its deepest upstream."""
    upstreams: dict[str, list[str]] = {node.name: [] for node in lineage.nodes}
    for upstream, downstream in lineage.edges:
        upstreams[downstream].append(upstream)
    depth: dict[str, int] = {}
    for node in lineage.nodes:  # an explicit stack: a long chain must not reach the recursion limit
        stack = [node.name]
        while stack:
            name = stack[-1]
            waiting = [up for up in upstreams[name] if up not in depth]
            if waiting:
                stack.extend(waiting)
                continue
            stack.pop()
            depth[name] = 1 + max((depth[up] for up in upstreams[name]), default=-1)
    return depth


def _centre(name: str, neighbours: dict[str, list[str]], row: dict[str, int], fallback: int) -> float:
    """The mean row of ``name``'s neighbours in the adjacent layer (its own row when it has none)."""
    near = [row[other] for other in neighbours.get(name, ()) if other in row]
    return sum(near) / len(near) if near else float(fallback)


def _ordered(columns: list[list[str]], lineage: Lineage) -> list[list[str]]:
    """Each layer ordered by the mean row of its neighbours, sweeping right then left a few times."""
    ups: dict[str, list[str]] = {}
    downs: dict[str, list[str]] = {}
    for upstream, downstream in lineage.edges:
        ups.setdefault(downstream, []).append(upstream)
        downs.setdefault(upstream, []).append(downstream)
    for sweep in range(_SWEEPS):
        forward = sweep % 2 == 0
        neighbours = ups if forward else downs
        indexes = range(1, len(columns)) if forward else range(len(columns) - 2, -1, -1)
        for index in indexes:
            row = {name: number for column in columns for number, name in enumerate(column)}
            ranked = [(_centre(name, neighbours, row, number), number, name) for number, name in enumerate(columns[index])]
            columns[index] = [name for _, _, name in sorted(ranked)]
    return columns


def _label(name: str) -> str:
    return name if len(name) <= MAX_LABEL else name[: MAX_LABEL - 1] + "…"


def _edge(source: NodeBox, sink: NodeBox) -> str:
    x1, y1 = source.x + BOX_WIDTH, source.y + BOX_HEIGHT // 2
    x2, y2 = sink.x, sink.y + BOX_HEIGHT // 2
    bend = max(30, (x2 - x1) // 2)
    return f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2 - 6},{y2}"


def draw_lineage(lineage: Lineage, targets: Sequence[str] = ()) -> LineageDrawing:
    """Boxes and edges of ``lineage`` laid out left (upstream) to right (downstream).

    Assets with no edge at all are packed in rows under the graph, so a
    catalog of many independent assets does not stretch its first layer.
    """
    depth = _layers(lineage)
    linked = {name for edge in lineage.edges for name in edge}
    count = 1 + max((depth[name] for name in linked), default=-1)
    columns: list[list[str]] = [[] for _ in range(count)]
    for node in lineage.nodes:
        if node.name in linked:
            columns[depth[node.name]].append(node.name)
    columns = _ordered(columns, lineage)
    domains = {node.name: node.domain for node in lineage.nodes}
    wanted = set(targets)
    boxes: dict[str, NodeBox] = {}
    for layer, column in enumerate(columns):
        for row, name in enumerate(column):
            x = MARGIN + layer * (BOX_WIDTH + LAYER_GAP)
            y = MARGIN + row * (BOX_HEIGHT + ROW_GAP)
            boxes[name] = NodeBox(name, _label(name), domains[name], layer, x, y, name in wanted)
    rows = max((len(column) for column in columns), default=0)
    alone = [node.name for node in lineage.nodes if node.name not in linked]
    across = max(count, MIN_ALONE_COLUMNS)
    top = MARGIN + rows * (BOX_HEIGHT + ROW_GAP) + (ROW_GAP if rows else 0)
    for number, name in enumerate(alone):
        x = MARGIN + (number % across) * (BOX_WIDTH + LAYER_GAP)
        y = top + (number // across) * (BOX_HEIGHT + ROW_GAP)
        boxes[name] = NodeBox(name, _label(name), domains[name], 0, x, y, name in wanted)
    edges = tuple(EdgePath(up, down, _edge(boxes[up], boxes[down])) for up, down in lineage.edges)
    used = max(count, min(len(alone), across))
    width = 2 * MARGIN + max(used, 1) * BOX_WIDTH + max(used - 1, 0) * LAYER_GAP
    height = max((box.y + BOX_HEIGHT for box in boxes.values()), default=BOX_HEIGHT) + MARGIN
    ordered = tuple(boxes[name] for column in columns for name in column) + tuple(boxes[name] for name in alone)
    return LineageDrawing(ordered, edges, width, height)
