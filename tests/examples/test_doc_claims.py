"""What the docs claim about partita matches partita (issue 14: the doc drift a new user hit)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import partita
from partita.errors import MissingStoreError
from partita.store import open_store

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def _shell_blocks(text: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            if current is None and stripped in ("```bash", "```sh", "```console"):
                current = []
            elif current is not None:
                blocks.append(current)
                current = None
            continue
        if current is not None:
            current.append(stripped)
    return blocks


def test_readme_runs_partita_only_from_the_virtualenv_or_after_activating_it():
    activated = False
    for block in _shell_blocks((REPO / "README.md").read_text()):
        for line in block:
            if re.search(r"(^|&&\s*|\.\s+)(\.venv/bin/activate|source\s+\.venv/bin/activate)", line):
                activated = True
            for match in re.finditer(r"(\S*)partita\s", line):
                if match.group(1) in ("", "$ ") and not activated:
                    pytest.fail(f"README runs a bare `partita` before activating .venv: {line}")


def test_the_trigger_types_the_docs_import_from_partita_are_exported():
    text = (DOCS / "triggers.md").read_text()
    assert "not exported" not in text
    imported = re.findall(r"from partita import ([\w, ]+)", text)
    names = {name.strip() for line in imported for name in line.split(",")}
    assert {"CronPartitions", "OnAssetEvents", "IdentityMapper"} <= names
    assert names <= set(partita.__all__)


def test_the_events_page_points_to_triggers_for_flows_started_by_events():
    text = (DOCS / "events.md").read_text()
    assert "not part of partita" not in text
    assert "(triggers.md)" in text
    assert hasattr(partita, "OnAssetEvents")


def test_reading_a_missing_store_raises_instead_of_creating_it_as_the_docs_say(tmp_path: Path):
    path = tmp_path / "never.db"
    with pytest.raises(MissingStoreError):
        open_store(f"sqlite:///{path}", create=False)
    assert not path.exists()
    text = (DOCS / "results-and-history.md").read_text()
    assert "MissingStoreError" in text
    assert "automatically when a\nstore is opened (" not in text
