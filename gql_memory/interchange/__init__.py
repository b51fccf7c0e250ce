"""Memories brought in from other systems: mem0's ``get_all`` output (mem0.py), the reference
MCP memory server's memory file (mcp_memory.py) and Letta's Agent File (letta.py).

Each importer parses and validates the whole file first (a malformed record is one
ValidationError naming its line, and nothing is written), then applies it idempotently: every
record gets a deterministic key, so running the same import again adds nothing.
foreign.py detects the format and dispatches; docs/interchange.md says what each maps.
"""
