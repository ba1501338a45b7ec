"""The lineage of a closure or a plan as Mermaid or Graphviz text.

A plan should be reviewable where people review things: pasted into a pull
request, a README or an issue. Both renderings are pure functions of the
definitions (no I/O), list nodes in the closure's topological order and
edges in declared dependency order, so the same flow always prints the
same text. Asset names and domains are user text: nodes get generated ids
(``n0``, ``n1`` ...) and names appear only inside escaped, quoted labels.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from partita.definitions.assets import AssetDefinition
from partita.planning.plan import FlowPlan, TaskPlan

__all__ = ["GraphFormat", "Lineage", "LineageNode", "render_lineage"]


class GraphFormat(enum.Enum):
    MERMAID = "mermaid"
    DOT = "dot"


@dataclass(frozen=True, slots=True)
class LineageNode:
    name: str
    #: The partition domain, or None for an unpartitioned asset.
    domain: str | None
    #: A plan's attempts for this asset ("3 attempts"); None for a bare closure.
    attempts: str | None = None

    def label_lines(self) -> tuple[str, ...]:
        detail = [part for part in (self.domain, self.attempts) if part is not None]
        return (self.name, ", ".join(detail)) if detail else (self.name,)


@dataclass(frozen=True, slots=True)
class Lineage:
    """Assets upstream first and (upstream, downstream) edges."""

    nodes: tuple[LineageNode, ...]
    edges: tuple[tuple[str, str], ...]

    @classmethod
    def of_closure(cls, closure: Sequence[AssetDefinition]) -> Lineage:
        nodes = tuple(LineageNode(definition.name, _domain(definition)) for definition in closure)
        return cls(nodes, _edges(closure))

    @classmethod
    def of_plan(cls, plan: FlowPlan) -> Lineage:
        nodes = tuple(LineageNode(task.name, _domain(task.definition), _attempts(task)) for task in plan.tasks)
        return cls(nodes, _edges([task.definition for task in plan.tasks]))


def _domain(definition: AssetDefinition) -> str | None:
    return None if definition.partition_def is None else definition.partition_def.domain


def _attempts(task: TaskPlan) -> str:
    if task.discovers:
        return "discovers keys"
    if task.attempt_count is None:
        return "attempts at run time"
    return f"{task.attempt_count} attempt{'' if task.attempt_count == 1 else 's'}"


def _edges(closure: Sequence[AssetDefinition]) -> tuple[tuple[str, str], ...]:
    names = {definition.name for definition in closure}
    return tuple((dep, definition.name) for definition in closure for dep in definition.deps if dep in names)


def render_lineage(lineage: Lineage, form: GraphFormat) -> str:
    """The whole graph as text, ending in a newline."""
    render = _mermaid if form is GraphFormat.MERMAID else _dot
    return "\n".join(render(lineage)) + "\n"


def _ids(lineage: Lineage) -> dict[str, str]:
    return {node.name: f"n{index}" for index, node in enumerate(lineage.nodes)}


# Mermaid reads entity codes (#quot;) inside quoted labels; `#` itself starts one.
_MERMAID_ESCAPES = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;"}


def _mermaid_text(text: str) -> str:
    return "".join(_MERMAID_ESCAPES.get(char, " " if char in "\r\n\t" else char) for char in text)


def _mermaid(lineage: Lineage) -> list[str]:
    ids = _ids(lineage)
    lines = ["flowchart LR"]
    for node in lineage.nodes:
        label = "<br/>".join(_mermaid_text(line) for line in node.label_lines())
        lines.append(f'    {ids[node.name]}["{label}"]')
    lines.extend(f"    {ids[upstream]} --> {ids[downstream]}" for upstream, downstream in lineage.edges)
    partitioned = [ids[node.name] for node in lineage.nodes if node.domain is not None]
    if partitioned:
        lines.append("    classDef partitioned stroke-dasharray: 5 3")
        lines.append(f"    class {','.join(partitioned)} partitioned")
    return lines


def _dot_text(text: str) -> str:
    # In a quoted DOT string a backslash starts an escape (\n, \l, \N ...): double it first.
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return escaped.replace("\r", " ").replace("\n", " ")


def _dot(lineage: Lineage) -> list[str]:
    ids = _ids(lineage)
    lines = ["digraph lineage {", "    rankdir=LR;", "    node [shape=box];"]
    for node in lineage.nodes:
        label = "\\n".join(_dot_text(line) for line in node.label_lines())
        style = ", style=dashed" if node.domain is not None else ""
        lines.append(f'    {ids[node.name]} [label="{label}"{style}];')
    lines.extend(f"    {ids[upstream]} -> {ids[downstream]};" for upstream, downstream in lineage.edges)
    lines.append("}")
    return lines
