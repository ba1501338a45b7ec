"""The JSON API under ``/api/v1``: each module serves the CLI's documents for one area."""

__all__ = ["PREFIX"]

PREFIX = "/api/v1"
