"""Dedupe identities: the payload hash a reused dedupe key is checked against, and a producer's default identities.

Both are stored, so both are computed exactly as they always were: a store
written by an earlier version recognizes a repeated emission. Emission
computes them on every call, so each is built from parts prepared once: the
payload hash from the canonical ``extra`` text `encode_extra` already made,
a default identity from a hash of the producer's fixed fields.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from json.encoder import encode_basestring_ascii
from typing import Any

__all__ = ["DefaultIdentities", "payload_digest", "payload_hash"]


def payload_hash(asset: str, key: str | None, date: dt.datetime | None, extra: dict[str, Any]) -> str:
    """SHA-256 of the event's canonical JSON: what a reused dedupe key must match."""
    canonical = json.dumps(
        {"asset": asset, "partition_key": key, "partition_date": None if date is None else date.isoformat(), "extra": extra},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def payload_digest(asset: str, key: str | None, date: dt.datetime | None, canonical_extra: str) -> str:
    """`payload_hash` from ``extra``'s canonical text (`EncodedExtra.canonical`), without encoding it again.

    The same text `payload_hash` hashes: its keys sorted, so ``asset``,
    ``extra``, ``partition_date``, ``partition_key``.
    """
    canonical = "".join(
        (
            '{"asset":',
            encode_basestring_ascii(asset),
            ',"extra":',
            canonical_extra,
            ',"partition_date":',
            "null" if date is None else encode_basestring_ascii(date.isoformat()),
            ',"partition_key":',
            "null" if key is None else encode_basestring_ascii(key),
            "}",
        )
    )
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


class DefaultIdentities:
    """A producer's default dedupe identities: ``auto:`` and the SHA-256 of its fields and a sequence number.

    The fields never change for one producer, so their part of the hash is
    computed once and copied for each number.
    """

    __slots__ = ("_prefix",)

    def __init__(self, fields: list[Any]) -> None:
        text = json.dumps(fields)  # "[f1, f2, ...]": the number follows as the last item
        self._prefix = hashlib.sha256((text[:-1] + ", " if fields else "[").encode("utf-8"))

    def identity(self, number: int) -> str:
        digest = self._prefix.copy()
        digest.update(b"%d]" % number)
        return "auto:" + digest.hexdigest()
