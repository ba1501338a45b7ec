"""Run history: the `Store` protocol, its SQL implementation and the run journal."""

from __future__ import annotations

import os

from partita.store.protocol import RunEnd, RunStart, Store, StoredRun
from partita.store.sql import SqlStore

__all__ = ["DEFAULT_STORE_URL", "STORE_ENVIRONMENT_VARIABLE", "RunEnd", "RunStart", "SqlStore", "Store", "StoredRun", "open_store", "store_url_from_environment"]

#: Where the CLI records runs unless told otherwise (relative to the working directory).
DEFAULT_STORE_URL = "sqlite:///.partita/partita.db"
STORE_ENVIRONMENT_VARIABLE = "PARTITA_STORE"


def open_store(url: str, *, create: bool = True) -> SqlStore:
    """Open the store at ``url``, upgrading its schema as needed.

    With ``create=False`` a SQLite file that does not exist yet is not
    created: `MissingStoreError` is raised instead (readers use this).
    """
    return SqlStore(url, create=create)


def store_url_from_environment() -> str | None:
    value = os.environ.get(STORE_ENVIRONMENT_VARIABLE, "").strip()
    return value or None
