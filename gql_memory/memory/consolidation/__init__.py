"""Consolidation (issue 44): memory that tidies itself, without a model.

A pass over one namespace merges duplicate insights (``duplicates``: the same fact, or the
same words, near-identical embeddings), supersedes facts a newer value of the same subject and
attribute updated (``facts``), makes near-duplicate automatic entities aliases of one
(``entities``), and stores a digest of each quiet session (``digests``; a chat model may write
it, ``llm``). Every action is journaled with what stood before it and can be undone
(``journal``); ``service`` runs the pass, ``schedule`` runs it in the background.
Raw dialogue, and items other tools key by name, are never changed.
"""

from __future__ import annotations

from gql_memory.memory.consolidation.service import Consolidation
from gql_memory.memory.consolidation.types import (
    ActionKind,
    ConsolidationAction,
    ConsolidationReport,
    SupersessionReason,
    UndoResult,
)

__all__ = [
    "ActionKind",
    "Consolidation",
    "ConsolidationAction",
    "ConsolidationReport",
    "SupersessionReason",
    "UndoResult",
]
