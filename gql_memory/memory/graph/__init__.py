"""The memory graph: labelled nodes (optionally tied to an insight, episode or raw turn) and
typed, weighted edges valid over time; breadth-first traversal in one recursive CTE.

- ``nodes`` and ``edges`` write and read them, ``traversal`` walks them with the statements
  of ``traversal_sql``; ``memory_graph.Graph`` is all three for one namespace.
- ``autograph``: the graph the memories build by themselves (turn and insight nodes, NEXT,
  DERIVED_FROM, the entities they mention), and its clean-up when they are erased.

The reference MCP memory server's entities, relations and observations over this graph are
memory/knowledge_graph.py (they are insights too, and searched).
"""
