"""``/api/v1`` routes of this area (see SPEC §16)."""

from __future__ import annotations

from fastapi import APIRouter

from partita.ui.api import PREFIX

router = APIRouter(prefix=PREFIX, tags=["plans"])
