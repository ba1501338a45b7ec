"""Readiness, admission and executors: how planned attempts run."""
