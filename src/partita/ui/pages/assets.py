"""Pages of this area (see SPEC §16)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(include_in_schema=False)
