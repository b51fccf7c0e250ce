"""Strawberry schema extensions, one per file: depth, aliases, cost, scope guard, validation
cache, operation log and metrics, read consistency, transport rules."""
