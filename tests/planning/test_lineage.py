"""The lineage as Mermaid and Graphviz text: exact output, deterministic order, escaped names (issue 14, item 11)."""

from __future__ import annotations

from partita import AssetRegistry, DatePartitionDef, Flow, PartitionDef, asset
from partita.planning.lineage import GraphFormat, Lineage, render_lineage


def _flow() -> Flow:
    registry = AssetRegistry()
    days = DatePartitionDef()

    @asset(partition_def=days, registry=registry)
    def raw(context):
        return 1

    @asset(partition_def=days, registry=registry)
    def cleaned(raw):
        return raw

    @asset(registry=registry)
    def lookup():
        return {}

    @asset(registry=registry)
    def report(cleaned, lookup):
        return len(cleaned)

    return Flow(["report"], registry=registry, store=False)


def test_the_closure_as_a_mermaid_flowchart():
    text = render_lineage(Lineage.of_closure(_flow().closure()), GraphFormat.MERMAID)

    assert text == (
        "flowchart LR\n"
        '    n0["raw<br/>date"]\n'
        '    n1["cleaned<br/>date"]\n'
        '    n2["lookup"]\n'
        '    n3["report"]\n'
        "    n0 --> n1\n"
        "    n1 --> n3\n"
        "    n2 --> n3\n"
        "    classDef partitioned stroke-dasharray: 5 3\n"
        "    class n0,n1 partitioned\n"
    )


def test_a_plan_as_a_graphviz_digraph_with_its_attempts():
    plan = _flow().plan({"partition_range": ("2026-08-08", "2026-08-10")})

    text = render_lineage(Lineage.of_plan(plan), GraphFormat.DOT)

    assert text == (
        "digraph lineage {\n"
        "    rankdir=LR;\n"
        "    node [shape=box];\n"
        '    n0 [label="raw\\ndate, 3 attempts", style=dashed];\n'
        '    n1 [label="cleaned\\ndate, 3 attempts", style=dashed];\n'
        '    n2 [label="lookup\\n1 attempt"];\n'
        '    n3 [label="report\\n1 attempt"];\n'
        "    n0 -> n1;\n"
        "    n1 -> n3;\n"
        "    n2 -> n3;\n"
        "}\n"
    )


def test_the_same_flow_always_renders_the_same_text():
    texts = {render_lineage(Lineage.of_closure(_flow().closure()), form) for form in GraphFormat for _ in range(3)}

    assert len(texts) == len(GraphFormat)


class _OddDomain(PartitionDef):
    """A custom definition may name its domain with any text; labels must survive it."""

    @property
    def domain(self) -> str:
        return 'say "hi" <b>#1;& back\\slash\nnew'


def _awkward_closure():
    registry = AssetRegistry()
    odd = _OddDomain()

    @asset(partition_def=odd, registry=registry)
    def first(context):
        return 1

    @asset(partition_def=odd, registry=registry)
    def second(first):
        return first

    return Flow(["second"], registry=registry, store=False).closure()


def test_mermaid_labels_escape_quotes_brackets_and_entity_signs():
    text = render_lineage(Lineage.of_closure(_awkward_closure()), GraphFormat.MERMAID)

    assert text.splitlines()[1:4] == [
        '    n0["first<br/>say #quot;hi#quot; #lt;b#gt;#35;1;#amp; back\\slash new"]',
        '    n1["second<br/>say #quot;hi#quot; #lt;b#gt;#35;1;#amp; back\\slash new"]',
        "    n0 --> n1",
    ]


def test_dot_labels_escape_backslashes_and_quotes():
    text = render_lineage(Lineage.of_closure(_awkward_closure()), GraphFormat.DOT)

    assert text.splitlines()[3:6] == [
        '    n0 [label="first\\nsay \\"hi\\" <b>#1;& back\\\\slash new", style=dashed];',
        '    n1 [label="second\\nsay \\"hi\\" <b>#1;& back\\\\slash new", style=dashed];',
        "    n0 -> n1;",
    ]
