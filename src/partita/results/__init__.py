"""Run outcomes and, later, their portable records."""
