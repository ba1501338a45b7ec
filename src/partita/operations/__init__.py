"""Operating partitions over the store: each key's status, and backfills of missing or failed keys.

These read what runs recorded (outlet events, attempts) and turn it into a
status report or a run selection; they plan through `Flow` and never run
anything themselves.
"""
