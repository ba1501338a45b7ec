"""A program opting in to the project configuration (docs/operations.md#project-configuration).

Flows created in Python ignore partita.toml and [tool.partita] unless the
program loads the configuration and passes its values on, as here. The
project folder is a temporary one so that the example leaves nothing behind.
"""

import tempfile
from pathlib import Path

import partita

registry = partita.AssetRegistry()


@partita.asset(registry=registry)
def daily_total() -> int:
    return 42


def run_in(project: Path) -> partita.RunResult:
    config = partita.load_project_config(project)  # from this folder upward
    flow = partita.Flow(
        ["daily_total"],
        registry=registry,
        store=config.store,  # None when the file names no store
        record_partition_keys=bool(config.record_partition_keys),
        tags={"team": "data"},
    )
    return flow.run()


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "partita.toml").write_text('store = "sqlite:///.partita/history.db"\n')
        (project / "jobs").mkdir()
        result = run_in(project / "jobs")
        print("run status:", result.status.value)
        print("store file created next to partita.toml:", (project / ".partita" / "history.db").exists())
        store = partita.open_store(partita.load_project_config(project).store)
        try:
            run = store.get_run(result.run_id)
            print("launched by:", run.launched_by, "flow:", run.flow_name, "tags:", dict(run.tags))
        finally:
            store.close()


if __name__ == "__main__":
    main()
