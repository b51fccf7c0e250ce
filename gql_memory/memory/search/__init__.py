"""Graph-aware hybrid search, one step per module, run top to bottom by ``pipeline``:

``request`` (validation) → ``period`` (the period a query names) → ``legs`` (vector and text,
their SQL in ``legs_sql``, the nearest rows of a namespace in ``nearest``) → ``fusion`` →
``boosts`` (sessions, speakers, the graph) → ``hits`` with ``relevance`` → ``period_ranking``.

``types`` holds what the steps share (layers, requests, candidates, hits, periods); every
step imports it, and no step imports the module that calls it.
"""
