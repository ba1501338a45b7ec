"""Publishing an external event from the UI: the fields of ``partita events emit``, its validation and receipt.

`publish` is the one code path: the publish form calls it, and so can
``POST /api/v1/events``. The event is validated against the entry's
registry and deduplicated by ``dedupe_key`` exactly as ``events emit`` does.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from partita.documents import document
from partita.documents.emission import emission_body
from partita.events.external import parse_extra_text, parse_partition_date, publish_event
from partita.events.extra import MAX_EXTRA_BYTES
from partita.ui.context import UiContext

__all__ = ["EventForm", "publish", "publish_form"]


class EventForm(BaseModel):
    """An event as a person types it: key and date as text, ``extra`` as JSON text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    asset: str = Field(min_length=1, max_length=200)
    partition_key: str | None = Field(None, max_length=1000)
    partition_date: str | None = Field(None, max_length=100)
    extra: str | None = Field(None, max_length=MAX_EXTRA_BYTES)
    dedupe_key: str | None = Field(None, max_length=1000)

    @classmethod
    def of_form(cls, fields: dict[str, str]) -> EventForm:
        """Blank fields of an HTML form mean "not given"."""
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            value = fields.get(name) or ""
            values[name] = value if value.strip() else None  # kept as typed: a key is exact text
        values["asset"] = fields.get("asset", "")
        return cls(**values)


def publish(
    context: UiContext,
    asset: str,
    *,
    partition_key: Any = None,
    partition_date: Any = None,
    extra: Any = None,
    dedupe_key: str | None = None,
) -> dict[str, Any]:
    """Validate and publish one external event into the server's store; the ``partita.emission`` document."""
    receipt = publish_event(
        context.store,
        context.flow.registry,
        asset,
        partition_key=partition_key,
        partition_date=partition_date,
        extra=extra,
        dedupe_key=dedupe_key,
    )
    return document("emission", emission_body(receipt))


def publish_form(context: UiContext, form: EventForm) -> dict[str, Any]:
    """The form's text fields parsed as ``events emit`` parses its flags, then `publish`."""
    return publish(
        context,
        form.asset,
        partition_key=form.partition_key,
        partition_date=parse_partition_date(form.partition_date),
        extra=parse_extra_text(form.extra),
        dedupe_key=form.dedupe_key,
    )
