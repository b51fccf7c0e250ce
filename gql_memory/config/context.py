"""Context assembly (SPEC §3.9; gql_memory.memory.context): the token budget's bounds,
its split between sections, the candidates read per section, and truncation."""

from __future__ import annotations

# maxTokens bounds: below the minimum not even one section header and item fit; above the
# maximum the caller wants a dump, not a context.
CONTEXT_DEFAULT_MAX_TOKENS = 2000
CONTEXT_MIN_TOKENS = 32
CONTEXT_MAX_TOKENS = 100_000
# First-pass share of the budget per section (renormalised over the included sections);
# whatever a section leaves unused is handed on in a second pass, in section order.
CONTEXT_SHARES = {"WORKING": 0.30, "SEARCH": 0.40, "EPISODES": 0.15, "GRAPH": 0.15}
# Candidates fetched per section: search hits, similar episodes, graph facts, and the number
# of top hits (and similar episodes) whose graph neighbourhood is read.
CONTEXT_SEARCH_TOP_K = 20
CONTEXT_EPISODES_TOP_K = 3
CONTEXT_GRAPH_FACTS = 30
CONTEXT_GRAPH_SEED_HITS = 5
# An item that does not fit is cut to the remaining budget (with a marker) only if at least
# this many tokens remain; otherwise it is skipped.
CONTEXT_MIN_TRUNCATED_TOKENS = 12
CONTEXT_TRUNCATION_MARKER = " … [truncated]"
