"""Project configuration: found from a folder upward, validated, by precedence (partita.config)."""

from __future__ import annotations

from pathlib import Path

import pytest

import partita
from partita.config import resolve_store_url


def test_nearest_partita_toml_wins_over_a_pyproject_further_up(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.partita]\nstore = "sqlite:///outer.db"\n')
    inner = tmp_path / "inner"
    (inner / "deep").mkdir(parents=True)
    (inner / "partita.toml").write_text('store = "sqlite:///inner.db"\nrecord_partition_keys = true\n')
    config = partita.load_project_config(inner / "deep")
    assert config.path == inner / "partita.toml"
    assert config.store == f"sqlite:///{inner}/inner.db"
    assert config.record_partition_keys is True


def test_a_relative_sqlite_store_is_relative_to_the_configuration_files_folder(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.partita]\nstore = "sqlite:///.partita/partita.db"\n')
    (tmp_path / "sub").mkdir()
    assert partita.load_project_config(tmp_path / "sub").store == f"sqlite:///{tmp_path}/.partita/partita.db"


def test_absolute_and_postgresql_store_urls_are_kept_as_written(tmp_path: Path) -> None:
    (tmp_path / "partita.toml").write_text('store = "postgresql://u@localhost/db"\n')
    assert partita.load_project_config(tmp_path).store == "postgresql://u@localhost/db"
    (tmp_path / "partita.toml").write_text('store = "sqlite:////var/lib/p.db"\n')
    assert partita.load_project_config(tmp_path).store == "sqlite:////var/lib/p.db"


def test_a_pyproject_without_a_partita_table_is_not_a_configuration(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert partita.load_project_config(tmp_path) == partita.ProjectConfig()


def test_one_folder_with_both_files_is_an_error_naming_the_folder(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.partita]\n")
    (tmp_path / "partita.toml").write_text("")
    with pytest.raises(partita.ConfigurationError, match="holds both partita.toml and a \\[tool.partita\\]"):
        partita.load_project_config(tmp_path)


def test_an_unknown_key_names_the_file_the_key_and_the_known_keys(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.partita]\nui = "on"\n')
    with pytest.raises(partita.ConfigurationError) as caught:
        partita.load_project_config(tmp_path)
    message = str(caught.value)
    assert str(tmp_path / "pyproject.toml") in message
    assert "tool.partita.ui is not a known key" in message
    assert "store, record_partition_keys, log_capture, executor" in message


@pytest.mark.parametrize("value", ["thread", "process", "dask", "dask://127.0.0.1:8786"])
def test_the_executor_key_names_where_cli_runs_run_their_bodies(tmp_path: Path, value: str) -> None:
    (tmp_path / "partita.toml").write_text(f'executor = "{value}"\n')
    assert partita.load_project_config(tmp_path).executor == value


@pytest.mark.parametrize("value", ['"cluster"', '"dask://no-port"', "3"])
def test_a_bad_executor_key_names_the_key_and_the_accepted_forms(tmp_path: Path, value: str) -> None:
    (tmp_path / "partita.toml").write_text(f"executor = {value}\n")
    with pytest.raises(partita.ConfigurationError, match="executor must be thread, process, dask, or dask://HOST:PORT"):
        partita.load_project_config(tmp_path)


@pytest.mark.parametrize("key", ["record_partition_keys", "log_capture"])
def test_a_flag_of_the_wrong_type_names_the_key_and_the_rule(tmp_path: Path, key: str) -> None:
    (tmp_path / "partita.toml").write_text(f'{key} = "yes"\n')
    with pytest.raises(partita.ConfigurationError, match=f"partita.toml: {key} must be true or false"):
        partita.load_project_config(tmp_path)


def test_a_store_that_is_not_a_url_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "partita.toml").write_text("store = 3\n")
    with pytest.raises(partita.ConfigurationError, match="partita.toml: store must be a store URL"):
        partita.load_project_config(tmp_path)
    (tmp_path / "partita.toml").write_text('store = "mysql://h/db"\n')
    with pytest.raises(partita.ConfigurationError, match="partita.toml: store: store URL scheme"):
        partita.load_project_config(tmp_path)


def test_a_file_that_does_not_parse_is_an_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "partita.toml").write_text("store = \n")
    with pytest.raises(partita.ConfigurationError, match="partita.toml is not valid TOML"):
        partita.load_project_config(tmp_path)


def test_the_flag_beats_the_environment_beats_the_file_beats_the_default() -> None:
    config = partita.ProjectConfig(store="sqlite:///file.db")
    assert resolve_store_url("sqlite:///flag.db", "sqlite:///env.db", config, "d") == "sqlite:///flag.db"
    assert resolve_store_url(None, "sqlite:///env.db", config, "d") == "sqlite:///env.db"
    assert resolve_store_url(None, None, config, "d") == "sqlite:///file.db"
    assert resolve_store_url(None, None, partita.ProjectConfig(), "d") == "d"


def test_a_flow_created_in_python_ignores_the_configuration_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "partita.toml").write_text('store = "sqlite:///configured.db"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    registry = partita.AssetRegistry()

    @partita.asset(registry=registry)
    def one() -> int:
        return 1

    partita.Flow([one], registry=registry).run()
    assert not (tmp_path / "configured.db").exists()
