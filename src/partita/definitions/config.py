"""`RunConfig`: the validated run configuration mapping (SPEC §2).

Unknown fields are errors, every field is type-checked, and the three
selection forms are kept apart here; whether they fit the selected assets is
decided by planning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from partita.errors import ConfigurationError, SelectionError

__all__ = ["RunConfig", "check_positive_int"]

_FIELDS = ("partition_keys", "partition_range", "empty_partitions", "max_concurrency")


def check_positive_int(value: Any, field_name: str) -> int:
    """Accept a positive ``int`` (not ``bool``) or raise ConfigurationError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{field_name} must be a positive integer")
    if value < 1:
        raise ConfigurationError(f"{field_name} must be at least 1")
    return value


@dataclass(frozen=True, slots=True)
class RunConfig:
    """One run's selection and options.

    Exactly one of ``partition_keys``, ``partition_range`` and
    ``empty_partitions=True`` selects partitioned work; all absent is valid
    only for a closure without partitioned assets.
    """

    partition_keys: tuple[Any, ...] | None = None
    partition_range: tuple[Any, Any] | None = None
    empty_partitions: bool = False
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        if self.partition_keys is not None:
            keys = self.partition_keys
            if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
                raise SelectionError("partition_keys must be a list or tuple of keys")
            if len(keys) == 0:
                raise SelectionError(
                    "partition_keys is empty; pass empty_partitions=True to select no partitions deliberately"
                )
            object.__setattr__(self, "partition_keys", tuple(keys))
        if self.partition_range is not None:
            bounds = self.partition_range
            if isinstance(bounds, (str, bytes)) or not isinstance(bounds, Sequence) or len(bounds) != 2:
                raise SelectionError("partition_range must be a (start, end) pair")
            object.__setattr__(self, "partition_range", (bounds[0], bounds[1]))
        if not isinstance(self.empty_partitions, bool):
            raise SelectionError("empty_partitions must be True or False")
        if self.max_concurrency is not None:
            check_positive_int(self.max_concurrency, "max_concurrency")

    @classmethod
    def coerce(cls, config: RunConfig | Mapping[str, Any] | None) -> RunConfig:
        """Build a RunConfig from a mapping, rejecting unknown fields."""
        if config is None:
            return cls()
        if isinstance(config, RunConfig):
            return config
        if not isinstance(config, Mapping):
            raise ConfigurationError("config must be a mapping of run options or a RunConfig")
        unknown = sorted(str(name) for name in config if name not in _FIELDS)
        if unknown:
            raise ConfigurationError(
                f"unknown config field(s): {', '.join(unknown)}; allowed fields are {', '.join(_FIELDS)}"
            )
        values = dict(config)
        if values.get("empty_partitions") is None:
            values.pop("empty_partitions", None)
        return cls(**values)

    def selection_forms(self) -> tuple[str, ...]:
        """Names of the selection forms this configuration uses."""
        forms = []
        if self.partition_keys is not None:
            forms.append("partition_keys")
        if self.partition_range is not None:
            forms.append("partition_range")
        if self.empty_partitions:
            forms.append("empty_partitions")
        return tuple(forms)
