"""Output reuse: the materialization protocol, FileMaterialization and codecs."""

from partita.materialization.codecs import Codec, JsonCodec
from partita.materialization.file import FileMaterialization, InspectionState, MaterializationInspection
from partita.materialization.protocol import (
    Materialization,
    MaterializationCollection,
    MaterializationContext,
    MaterializationInvalidation,
    MaterializationRecord,
)

__all__ = [
    "Codec",
    "FileMaterialization",
    "InspectionState",
    "JsonCodec",
    "Materialization",
    "MaterializationCollection",
    "MaterializationContext",
    "MaterializationInspection",
    "MaterializationInvalidation",
    "MaterializationRecord",
]
