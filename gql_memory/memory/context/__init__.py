"""Context assembly (SPEC §3.9): what an agent should see next, under a token budget.

- ``assembly``: the four sections (working memory, search hits, graph facts, lessons), found;
- ``packing``: the candidates packed into the budget (no SQL);
- ``tokens``: token counting for the budgets.
"""
