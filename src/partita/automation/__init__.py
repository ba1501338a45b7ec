"""Event-driven consumers and schedules: triggers, partition mappers, the trigger daemon (SPEC §12)."""
