"""How a run was launched, and the user tags it carries: plain values, validated once.

A run's launch is recorded with it so that history can say which flow ran
and what started it (the CLI, a program, a trigger or a schedule), and so
that runs can be filtered by the tags a team puts on them.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from partita.errors import ConfigurationError, DefinitionError, PartitaError
from partita.partitions.base import storable_text_problem

__all__ = ["LaunchKind", "RunLaunch", "Tags", "check_tags", "parse_tag"]

#: Tags as stored: (key, value) pairs sorted by key, one value per key.
Tags = tuple[tuple[str, str], ...]

_TAG_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]{0,63}")
_TAG_KEY_RULE = "1 to 64 letters, digits, '_', '.', '-' or '/', starting with a letter or digit"
MAX_TAG_VALUE = 256
MAX_TAGS = 32


class LaunchKind(enum.Enum):
    """What started a run."""

    CLI = "cli"
    PYTHON = "python"
    TRIGGER = "trigger"
    SCHEDULE = "schedule"
    BACKFILL = "backfill"
    UI = "ui"


@dataclass(frozen=True, slots=True)
class RunLaunch:
    """A run's launch as it is recorded: who started it, its flow's name and its tags."""

    kind: LaunchKind = LaunchKind.PYTHON
    flow_name: str | None = None
    tags: Tags = ()


def _tag_problem(key: Any, value: Any) -> str | None:
    """Why (key, value) cannot be a tag, without repeating either; None when it can."""
    if not isinstance(key, str) or not _TAG_KEY.fullmatch(key):
        return f"a tag key must be {_TAG_KEY_RULE}"
    if not isinstance(value, str):
        return f"the value of tag {key!r} must be a string"
    if len(value) > MAX_TAG_VALUE:
        return f"the value of tag {key!r} is longer than {MAX_TAG_VALUE} characters"
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        return f"the value of tag {key!r} contains a control character"
    problem = storable_text_problem(value)
    return None if problem is None else f"the value of tag {key!r} {problem}"


def check_tags(value: Any, field: str = "Flow tags", error: type[PartitaError] = DefinitionError) -> Tags:
    """``value`` (a mapping of tag key to value, or None) as sorted pairs; ``error`` naming ``field`` otherwise."""
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise error(f"{field} must be a mapping of tag key to string value")
    if len(value) > MAX_TAGS:
        raise error(f"{field} holds more than {MAX_TAGS} tags")
    for key, text in value.items():
        problem = _tag_problem(key, text)
        if problem is not None:
            raise error(f"{field}: {problem}")
    return tuple(sorted(value.items()))


def parse_tag(text: str, flag: str = "--tag") -> tuple[str, str]:
    """``KEY=VALUE`` as a (key, value) pair; ConfigurationError naming ``flag`` and the rule otherwise."""
    key, sep, value = text.partition("=")
    if not sep:
        raise ConfigurationError(f"{flag} must be KEY=VALUE (no '=' was given)")
    problem = _tag_problem(key, value)
    if problem is not None:
        raise ConfigurationError(f"{flag}: {problem}")
    return key, value
