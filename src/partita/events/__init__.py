"""Asset events: immediate emission, receipts, provenance and event logs (SPEC §8)."""
