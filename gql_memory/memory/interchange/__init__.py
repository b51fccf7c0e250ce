"""Moving memory out and in.

A namespace's own format: the export format (format.py), export (export.py) and the import
of an export (load.py), with its id remapping (ids.py) and --merge's matching (merge.py).

Memories of other systems: mem0's ``get_all`` output (mem0.py), the reference MCP memory
server's memory file (mcp_memory.py) and Letta's Agent File (letta.py); foreign.py detects
the format and dispatches. Each parses and validates the whole file first (a malformed
record is one ValidationError naming its line, and nothing is written), then applies it
idempotently: every record gets a deterministic key, so the same import again adds nothing.

docs/interchange.md describes the format and what each import maps.
"""
