"""How large one piece of work is: CPU-bound work inline or in a worker thread
(gql_memory.memory.offload), transcript imports in batches (gql_memory.memory.importer)."""

from __future__ import annotations

# Packing, truncation, summarizing and redaction are linear in their input; up to this many
# characters they run inline (a thread hop costs more), above it in a worker thread, so that
# one large input never stalls the event loop and every other request with it.
INLINE_CPU_CHARS = 64 * 1024
# A traversal's result of up to this many neighbours is built inline (a fraction of a
# millisecond); a larger one (up to GQL_MEMORY_MAX_PAGE_SIZE) in the worker thread.
INLINE_NEIGHBORS = 200

# Turns stored per storeRawDialogue batch (one transaction each).
IMPORT_BATCH_SIZE = 500
