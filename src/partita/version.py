"""partita's version, in a module of its own so the CLI can name it without importing the public API's package root."""

__version__ = "0.1.0"
