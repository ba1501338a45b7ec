"""Requests generated from the OpenAPI document (schemathesis) never get a server error, on both backends.

Every operation of ``/api/v1/openapi.json`` (routes other modules add
included) is called with values its schema allows and values near its
edges, with the token, so mutations run too. Derandomized: the same cases
each run, so a failure is reproducible.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings

from partita.ui import create_app

from .support import auth, make_settings
from .test_api_documents import run_entry

schemathesis = pytest.importorskip("schemathesis")

#: Cases per operation: enough to reach each parameter's edges, few enough for a quick suite.
EXAMPLES = 25
#: The live stream never ends on its own: it is swept by its own tests.
UNENDING = ("/api/v1/stream",)


@pytest.fixture
def app(store_url: str) -> Iterator[FastAPI]:
    run_entry(store_url)
    application = create_app(make_settings(store_url))
    yield application
    application.state.context.close()


def test_generated_requests_never_get_a_server_error(app: FastAPI) -> None:
    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", app)
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 11
    for operation in operations:
        if operation.path.startswith(UNENDING):
            continue

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
            suppress_health_check=list(HealthCheck),
        )  # fmt: skip
        def call(case: object) -> None:
            response = case.call(headers=auth())  # type: ignore[attr-defined]
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} {case.query} {case.body!r:.200}: {response.text[:200]}")  # type: ignore[attr-defined]

        call()
    assert failures == []
