"""Text parameters every API route takes: storable text only, refused as a 422 naming the parameter.

A store can only look up text it could keep: PostgreSQL text cannot hold
NUL and no backend takes a lone surrogate. Asking for such a run id, asset
or key is bad input, never a store failure, so it is refused before any
query runs, on every backend alike (the CLI's ``STORABLE_TEXT`` rule).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from partita.partitions.base import storable_text_problem

__all__ = ["Storable"]


def _storable(text: str) -> str:
    problem = storable_text_problem(text)
    if problem is not None:
        raise ValueError(f"the value {problem}")
    return text


#: A ``str`` parameter that a store can compare: ``Annotated[Storable, Query(...)]``.
Storable = Annotated[str, AfterValidator(_storable)]
