"""Pure values that describe assets and flows; nothing here performs I/O."""
