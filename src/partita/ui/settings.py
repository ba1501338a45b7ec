"""What ``partita ui`` is started with, and the one token that guards every mutation.

The token comes from ``PARTITA_UI_TOKEN`` or, when that is unset, from a file
in the user's configuration directory, generated (and printed) on the first
start and reused after, mode 0600. Exposing the server beyond loopback needs
an explicit ``PARTITA_UI_TOKEN``: there, reading needs the token too.
"""

from __future__ import annotations

import enum
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from partita.errors import ConfigurationError

__all__ = [
    "TOKEN_ENVIRONMENT", "TokenSource", "UiSettings", "check_exposure", "default_token_path", "is_loopback",
    "resolve_token",
]  # fmt: skip

TOKEN_ENVIRONMENT = "PARTITA_UI_TOKEN"
#: A token shorter than this is too easy to guess.
MIN_TOKEN_LENGTH = 16


class TokenSource(enum.Enum):
    ENVIRONMENT = "environment"
    GENERATED = "generated"  # created by this start, in the token file
    FILE = "file"  # created by an earlier start


@dataclass(frozen=True)
class UiSettings:
    """A UI server's settings: the entry it shows, its store, where it listens, and who may change things."""

    entry: str
    store_url: str
    token: str
    token_source: TokenSource = TokenSource.ENVIRONMENT
    host: str = "127.0.0.1"
    port: int = 3000
    read_only: bool = False

    def __post_init__(self) -> None:
        if len(self.token) < MIN_TOKEN_LENGTH:
            raise ConfigurationError(f"the UI token must be at least {MIN_TOKEN_LENGTH} characters long")
        check_exposure(self.host, self.token_source)

    @property
    def loopback(self) -> bool:
        """Whether only this machine can connect: reading then needs no token."""
        return is_loopback(self.host)


def check_exposure(host: str, source: TokenSource | None) -> None:
    """Serving beyond loopback needs an explicit ``PARTITA_UI_TOKEN`` (``source`` None: none is set yet)."""
    if not is_loopback(host) and source is not TokenSource.ENVIRONMENT:
        raise ConfigurationError(
            f"--host {host} serves beyond this machine; set {TOKEN_ENVIRONMENT} to a secret token first "
            "(every request, reading included, then needs it)"
        )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def default_token_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "partita" / "ui-token"


def resolve_token(environment: dict[str, str] | os._Environ[str], path: Path) -> tuple[str, TokenSource]:
    """``PARTITA_UI_TOKEN`` if set, else the token file's token, else a new one written there (0600)."""
    given = environment.get(TOKEN_ENVIRONMENT)
    if given:
        return given, TokenSource.ENVIRONMENT
    try:
        stored = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        stored = ""
    except OSError as exc:
        raise ConfigurationError(f"cannot read the UI token file {path}: {exc.strerror}; set {TOKEN_ENVIRONMENT}") from exc
    if len(stored) >= MIN_TOKEN_LENGTH:
        return stored, TokenSource.FILE
    token = secrets.token_urlsafe(24)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(token + "\n")
    except OSError as exc:
        raise ConfigurationError(f"cannot write the UI token file {path}: {exc.strerror}; set {TOKEN_ENVIRONMENT}") from exc
    return token, TokenSource.GENERATED
