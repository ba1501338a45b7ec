"""Alembic migrations of the run-history store, shipped with the package."""
