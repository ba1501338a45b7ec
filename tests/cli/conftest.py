"""Shared helpers for the CLI and entry-loading tests.

Entry files are written into pytest's ``tmp_path``. Asset bodies record that
they ran by writing a file into ``tmp_path / "out"``, so a test can prove a
body ran (or did not) without sleeping or patching the engine.
"""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from partita.cli.main import cli

from ._sources import HEADER


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    return tmp_path / "out"


@pytest.fixture(autouse=True)
def _work_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Anything the CLI might write relative to the working directory stays here.
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def write_entry(tmp_path: Path, out_dir: Path) -> Callable[..., str]:
    """Write an entry file (with the shared HEADER) and return its path."""

    def write(source: str, name: str = "entry.py", *, header: bool = True) -> str:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = textwrap.dedent(source)
        if header:
            text = HEADER.format(out=str(out_dir)) + text
        path.write_text(text)
        return str(path)

    return write


@pytest.fixture
def ran(out_dir: Path) -> Callable[[], list[str]]:
    """Names of the marks asset bodies wrote, sorted."""

    def marks() -> list[str]:
        if not out_dir.exists():
            return []
        return sorted(path.name for path in out_dir.iterdir())

    return marks


@pytest.fixture
def package(tmp_path: Path, out_dir: Path) -> Iterator[Callable[[dict[str, str]], str]]:
    """Create an importable package with a unique name under tmp_path.

    Returns a function taking ``{module_name: source}`` and returning the
    package name. Imported modules are removed from ``sys.modules`` afterwards.
    """
    names: list[str] = []

    def create(modules: dict[str, str]) -> str:
        name = f"partita_cli_pkg_{uuid.uuid4().hex[:12]}"
        names.append(name)
        root = tmp_path / name
        root.mkdir()
        (root / "__init__.py").write_text("")
        for module, source in modules.items():
            (root / f"{module}.py").write_text(HEADER.format(out=str(out_dir)) + textwrap.dedent(source))
        return name

    yield create
    for name in names:
        for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[module]


@pytest.fixture
def invoke() -> Callable[..., Result]:
    """Invoke the click group in-process with CliRunner."""
    runner = CliRunner()

    def call(*args: str, input: str | None = None) -> Result:
        return runner.invoke(cli, list(args), input=input)

    return call


@pytest.fixture(autouse=True)
def _isolated_run_history(tmp_path_factory, monkeypatch):
    """CLI runs record history by default: keep each test's store private."""
    folder = tmp_path_factory.mktemp("history")
    monkeypatch.setenv("PARTITA_STORE", f"sqlite:///{folder}/partita.db")
