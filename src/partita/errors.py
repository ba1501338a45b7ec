"""One exception hierarchy for everything partita raises on purpose.

Each class maps to one CLI exit code (SPEC §13), so callers can tell a bad
configuration from a broken entry file or a failing store without parsing
messages. Messages name the field and the rule, never a raw partition key.
"""

from __future__ import annotations

__all__ = [
    "PartitaError",
    "DefinitionError",
    "DiscoveryError",
    "SelectionError",
    "PlanningError",
    "ConfigurationError",
    "EmissionError",
    "EntryLoadError",
    "ExecutionError",
    "PolicyError",
    "FileMaterializationError",
    "MaterializationError",
    "MissingStoreError",
    "StoreError",
    "UnknownPartitionError",
    "UnknownRunError",
]


class PartitaError(Exception):
    """Root of every error partita raises deliberately."""

    exit_code: int = 2


class DefinitionError(PartitaError):
    """An asset, partition definition, registry or group is malformed."""

    exit_code = 2


class ConfigurationError(PartitaError):
    """Run configuration (RunConfig fields, flow options) breaks a rule."""

    exit_code = 2


class SelectionError(ConfigurationError):
    """Partition selection is missing, ambiguous, malformed or out of bounds."""


class PlanningError(ConfigurationError):
    """The selected closure cannot be planned (domains, groups, targets)."""


class EntryLoadError(PartitaError):
    """A CLI entry (file, module, factory) could not be loaded."""

    exit_code = 3


class ExecutionError(PartitaError):
    """The engine or an executor failed outside of asset bodies."""

    exit_code = 4


class PolicyError(PartitaError):
    """A user-supplied policy hook (``classify_failure``) broke its contract.

    Recorded as the failure of the attempt it was classifying.
    """

    exit_code = 1


class StoreError(PartitaError):
    """The run-history store cannot be opened, read or written."""

    exit_code = 4


class MissingStoreError(StoreError):
    """A reading command found no store at the configured location (nothing was created)."""


class UnknownRunError(ConfigurationError):
    """A run id names no run in the store."""


class MaterializationError(PartitaError):
    """Resolving, loading or committing a materialized output failed."""

    exit_code = 4


class FileMaterializationError(MaterializationError):
    """A FileMaterialization root holds something malformed, incompatible or corrupt.

    ``state`` says which (``"corrupt"``, ``"incompatible"``) when it is known.
    """

    def __init__(self, message: str, *, state: str | None = None) -> None:
        super().__init__(message)
        self.state = state


class EmissionError(PartitaError):
    """An asset event cannot be published: bad arguments, wrong place, or a dedupe conflict."""

    exit_code = 2


class DiscoveryError(PartitaError):
    """A discovering producer declared keys against its domain's rules (``allowed``, ``max_keys``, outputs).

    Raised inside the producer's attempt, which fails; no downstream work starts.
    """

    exit_code = 1


class UnknownPartitionError(ConfigurationError):
    """A runtime domain's registry does not know the given key."""
