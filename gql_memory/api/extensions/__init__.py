"""Strawberry schema extensions, one per file: limits, cost, caches, logs, metrics, guards."""
