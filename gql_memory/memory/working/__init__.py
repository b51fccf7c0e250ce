"""Working memory and what it leaves behind:

- ``working_memory``: the small, bounded, per-session context (capacity, LRU eviction);
- ``archive``: the one way out of it, into stale memory (why, and the stale item);
- ``stale``: the unlimited archive, read and restored;
- ``decay``: event-based decay of attention;
- ``sessions``: per-session serialization and the session's event counter.
"""
