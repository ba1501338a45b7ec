"""A document as the response, encoded once.

A route that returns a dict has FastAPI walk it value by value
(``jsonable_encoder``) before encoding it; a partition status of 10,000
keys spends most of its time there. The documents are JSON-safe by
construction (the schema tests check it), so they are encoded directly.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from partita.documents import document

__all__ = ["document_response"]


def document_response(kind: str, body: dict[str, Any], *, status_code: int = 200) -> JSONResponse:
    """The ``partita.KIND`` document of ``body`` as a JSON response."""
    return JSONResponse(document(kind, body), status_code=status_code)
