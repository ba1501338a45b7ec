"""``partita plan|assets ENTRY --format mermaid|dot`` prints the lineage on stdout (issue 14, item 11)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from partita.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
README_EXAMPLE = str(REPO / "examples" / "readme_example.py")


def _cli(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_plan_as_mermaid_marks_partitioned_assets_with_their_domain_and_attempts():
    result = _cli("plan", README_EXAMPLE, "--partition-range", "2026-08-08", "2026-08-10", "--format", "mermaid")

    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "flowchart LR\n"
        '    n0["raw_events<br/>date, 3 attempts"]\n'
        '    n1["daily_total<br/>date, 3 attempts"]\n'
        '    n2["report<br/>1 attempt"]\n'
        "    n0 --> n1\n"
        "    n1 --> n2\n"
        "    classDef partitioned stroke-dasharray: 5 3\n"
        "    class n0,n1 partitioned\n"
    )


def test_assets_as_dot_needs_no_selection():
    result = _cli("assets", README_EXAMPLE, "--format", "dot")

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("digraph lineage {\n")
    assert '    n0 [label="raw_events\\ndate", style=dashed];\n' in result.stdout
    assert '    n2 [label="report"];\n' in result.stdout
    assert result.stdout.endswith("    n1 -> n2;\n}\n")


@pytest.mark.parametrize("command", [["assets"], ["plan", "--partition-key", "2026-08-08"]])
def test_a_graph_format_and_json_together_are_a_usage_error(command):
    result = _cli(command[0], README_EXAMPLE, *command[1:], "--format", "dot", "--json")

    assert result.exit_code == 2
    assert "--format dot and --json cannot be combined" in result.output


def test_an_unknown_format_is_a_usage_error():
    result = _cli("assets", README_EXAMPLE, "--format", "svg")

    assert result.exit_code == 2
    assert "Traceback" not in result.output
