"""The consolidation pass of one namespace: read, plan, apply (each action in a transaction of
its own, journaled), report. ``undo`` and ``history`` read and reverse the journal."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings import EmbeddingProvider
from gql_memory.memory.consolidation import journal
from gql_memory.memory.consolidation.digests import Turn, central_sentences, digest_text
from gql_memory.memory.consolidation.duplicates import (
    Candidate,
    PlannedMerge,
    PlannedUpdate,
    candidate,
    plan,
    statement_groups,
)
from gql_memory.memory.consolidation.entities import (
    EntityNode,
    PlannedEntityMerge,
    entity_groups,
    plan_entities,
)
from gql_memory.memory.consolidation.llm import ChatWriter
from gql_memory.memory.consolidation.types import (
    ActionKind,
    ConsolidationAction,
    ConsolidationReport,
    SupersessionReason,
    UndoResult,
)
from gql_memory.memory.consolidation.wording import SOFT_WORDS
from gql_memory.memory.context.tokens import EstimatingTokenizer
from gql_memory.memory.insights import InsightInput, Insights
from gql_memory.memory.offload import run_cpu
from gql_memory.memory.pagination import Page
from gql_memory.memory.validation import require_id, require_page_size
from gql_memory.memory.vectors import load_embeddings
from gql_memory.memory.waiting import vectors_or_wait

# Insights other tools key by name are theirs to change: the reference MCP tools'
# observations and LangGraph store items (their metadata says so). Digests are consolidation's.
CANDIDATES_SQL = """
SELECT i.id, i.content, i.valid_from, tsvector_to_array(i.content_tsv) AS lexemes
FROM insights i
WHERE i.namespace = :ns AND i.valid_to IS NULL AND i.digest_of IS NULL
  AND NOT jsonb_exists_any(coalesce(i.metadata, '{}'::jsonb), ARRAY['observation_of', 'langgraph'])
ORDER BY i.id
"""
UNDONE_SQL = """
SELECT kind, target_id, unnest(ids) AS id FROM consolidation_actions
WHERE namespace = :ns AND undone_at IS NOT NULL
"""
ENTITIES_SQL = """
SELECT n.id, n.name FROM nodes n
WHERE n.namespace = :ns AND n.label = 'Entity' AND n.properties @> '{"auto": true}'
  AND n.merged_into IS NULL
ORDER BY n.id
"""
# The valid edges of the entities that may be merged (to pick each group's survivor).
DEGREES_SQL = """
SELECT n.id, (SELECT count(*) FROM edges e WHERE e.namespace = :ns AND e.valid_to IS NULL
              AND (e.source_id = n.id OR e.target_id = n.id)) AS degree
FROM unnest(CAST(:ids AS bigint[])) AS n(id)
"""
# Sessions quiet since :quiet_before, long enough, whose valid digest (if any) does not cover
# their last turn.
QUIET_SESSIONS_SQL = """
SELECT s.session_id, s.last_turn, d.id AS digest_id
FROM (SELECT session_id, max(id) AS last_turn, count(*) AS turns, max(timestamp) AS last_at
      FROM raw_dialogue WHERE namespace = :ns GROUP BY session_id) s
LEFT JOIN LATERAL (
    SELECT i.id, i.source_ids FROM insights i
    WHERE i.namespace = :ns AND i.digest_of = s.session_id AND i.valid_to IS NULL
    ORDER BY i.id DESC LIMIT 1
) d ON true
WHERE s.last_at <= :quiet_before AND s.turns >= :min_turns
  AND (d.id IS NULL OR NOT s.last_turn = ANY(d.source_ids))
ORDER BY s.session_id
"""
SESSION_TURNS_SQL = """
SELECT id, speaker, content, timestamp FROM raw_dialogue
WHERE namespace = :ns AND session_id = :session ORDER BY timestamp, id
"""
MAX_DIGEST_SOURCES = 1000


@dataclass
class _Budget:
    left: int | None

    def spend(self) -> bool:
        if self.left is None:
            return True
        if self.left <= 0:
            return False
        self.left -= 1
        return True


class Consolidation:
    """Consolidation of one namespace: ``run`` a pass, ``undo`` an action, read the
    ``history``."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        namespace: str,
        embedder: EmbeddingProvider,
        insights: Insights,
    ) -> None:
        self.db = db
        self.settings = settings
        self.namespace = namespace
        self.embedder = embedder
        self.insights = insights
        self.tokenizer = EstimatingTokenizer()
        self.writer = ChatWriter.from_settings(settings)

    async def run(
        self, *, dry_run: bool = False, max_actions: int | None = None
    ) -> ConsolidationReport:
        """One pass: merge duplicates, supersede changed facts, merge duplicate automatic
        entities, digest quiet sessions. ``dry_run``: plan and report, change nothing.
        ``max_actions``: stop after so many (the report says it is not complete)."""
        budget = _Budget(max_actions)
        actions: list[ConsolidationAction] = []
        candidates, merges, updates = await self._plan_insights()
        for merge in merges:
            if not budget.spend():
                break
            action = self._merge_action(merge) if dry_run else await self._apply_merge(merge)
            if action is not None:
                actions.append(action)
        for update in updates:
            if not budget.spend():
                break
            action = self._update_action(update) if dry_run else await self._apply_update(update)
            if action is not None:
                actions.append(action)
        entities, entity_merges = await self._plan_entities()
        for entity_merge in entity_merges:
            if not budget.spend():
                break
            action = (
                self._entity_action(entity_merge, {})
                if dry_run
                else await self._apply_entity_merge(entity_merge)
            )
            if action is not None:
                actions.append(action)
        sessions = await self._quiet_sessions()
        for session_id, last_turn, digest_id in sessions:
            if not budget.spend():
                break
            action = await self._digest(session_id, last_turn, digest_id, dry_run)
            if action is not None:
                actions.append(action)
        return ConsolidationReport(
            actions=actions,
            dry_run=dry_run,
            insights_examined=len(candidates),
            entities_examined=len(entities),
            sessions_examined=len(sessions),
            complete=budget.left is None or budget.left > 0,
        )

    # --- insights -------------------------------------------------------------------------

    async def _plan_insights(
        self,
    ) -> tuple[list[Candidate], list[PlannedMerge], list[PlannedUpdate]]:
        async with self.db.read() as conn:
            rows = (await conn.execute(text(CANDIDATES_SQL), {"ns": self.namespace})).all()
            soft = await self._soft_lexemes(conn)
            undone = await self._undone(conn)
        candidates = await run_cpu(
            sum(len(r.content) for r in rows),
            lambda: [candidate(r.id, r.content, r.valid_from, r.lexemes or (), soft) for r in rows],
        )
        groups = await run_cpu(len(candidates) * 20, statement_groups, candidates)
        grouped = sorted({c.id for g in groups for c in g})
        vectors = await load_embeddings(self.db, "insights", self.namespace, grouped)
        unit = {i: _unit(v) for i, v in vectors.items()}

        def similarity(a: int, b: int) -> float | None:
            if a not in unit or b not in unit:
                return None
            return float(np.dot(unit[a], unit[b]))

        threshold = self.settings.consolidation_duplicate_similarity
        merges, updates = plan(candidates, groups, similarity, threshold, undone[ActionKind.MERGE])
        updates = [
            u
            for u in updates
            if all((u.newer.id, o.id) not in undone[ActionKind.SUPERSEDE] for o in u.older)
        ]
        return candidates, merges, updates

    async def _soft_lexemes(self, conn: AsyncConnection) -> frozenset[str]:
        lexemes = await conn.scalar(
            text("SELECT tsvector_to_array(to_tsvector(CAST(:cfg AS regconfig), :words))"),
            {"cfg": self.settings.text_search_config, "words": " ".join(sorted(SOFT_WORDS))},
        )
        return frozenset(lexemes or ())

    async def _undone(self, conn: AsyncConnection) -> dict[ActionKind, set[tuple[int, int]]]:
        undone: dict[ActionKind, set[tuple[int, int]]] = {kind: set() for kind in ActionKind}
        for kind, target, row_id in (
            await conn.execute(text(UNDONE_SQL), {"ns": self.namespace})
        ).all():
            undone[ActionKind(kind)].add((target, row_id))
        return undone

    def _merge_action(self, merge: PlannedMerge, **changes: Any) -> ConsolidationAction:
        ids = tuple(m.id for m in merge.members)
        words = sorted(merge.survivor.wording.words)
        evidence: dict[str, Any] = {
            "similarities": {str(i): round(merge.similarities[i], 4) for i in ids},
            "matched": {str(i): merge.matched[i] for i in ids},
            "words": words,
        }
        if merge.survivor.fact is not None:
            fact = merge.survivor.fact
            evidence["fact"] = {
                "subject": fact.subject,
                "attribute": fact.attribute,
                "value": fact.value,
            }
        lowest = min(merge.similarities.values())
        merged = ", ".join(str(i) for i in ids)
        similarity = f"{lowest:.3f}" if len(ids) == 1 else f"at least {lowest:.3f}"
        reason = (
            f"insight{'s' if len(ids) > 1 else ''} {merged} merged into insight "
            f"{merge.survivor.id}: {'the same fact' if 'fact' in evidence else 'the same words'}"
            f", cosine similarity {similarity}"
        )
        return ConsolidationAction(
            ActionKind.MERGE, merge.survivor.id, ids, reason, evidence, changes=changes
        )

    async def _apply_merge(self, merge: PlannedMerge) -> ConsolidationAction | None:
        ns = self.namespace
        async with self.db.write() as conn:
            everyone = [merge.survivor.id, *(m.id for m in merge.members)]
            valid = await journal.lock_valid_insights(conn, ns, everyone)
            survivor = valid.get(merge.survivor.id)
            members = [m for m in merge.members if m.id in valid]
            if survivor is None or not members:
                return None  # changed since the plan: the next pass sees it anew
            merge = PlannedMerge(
                merge.survivor,
                tuple(members),
                {m.id: merge.similarities[m.id] for m in members},
                {m.id: merge.matched[m.id] for m in members},
            )
            ids = [m.id for m in members]
            await journal.close_insights(
                conn, ns, ids, survivor.id, SupersessionReason.MERGED, "valid_from"
            )
            sources = sorted(set(survivor.source_ids).union(*(valid[i].source_ids for i in ids)))
            await conn.execute(
                text(
                    "UPDATE insights SET source_ids = CAST(:s AS bigint[]) "
                    "WHERE namespace = :ns AND id = :id"
                ),
                {"ns": ns, "id": survivor.id, "s": sources},
            )
            nodes = await journal.insight_nodes(conn, ns, everyone)
            moves = (
                {nodes[i]: nodes[survivor.id] for i in ids if i in nodes}
                if survivor.id in nodes
                else {}
            )
            moved, closed = await journal.move_edges(conn, ns, moves)
            working, relinked = await journal.move_references(conn, ns, ids, survivor.id)
            return await journal.record(
                conn,
                ns,
                self._merge_action(merge),
                {
                    "closed": ids,
                    "sources_before": list(survivor.source_ids),
                    "edges_moved": moved,
                    "edges_closed": closed,
                    "working_refs": working,
                    "node_links": relinked,
                },
            )

    def _update_action(self, update: PlannedUpdate) -> ConsolidationAction:
        fact = update.newer.fact
        assert fact is not None
        older = tuple(o.id for o in update.older)
        values = {str(o.id): o.fact.value for o in update.older if o.fact is not None}
        evidence = {
            "subject": fact.subject,
            "attribute": fact.attribute,
            "value": fact.value,
            "older_values": values,
        }
        reason = (
            f"insight {update.newer.id} updates {fact.subject}'s {fact.attribute} "
            f"to {fact.value!r} (was {', '.join(repr(v) for v in values.values())})"
        )
        return ConsolidationAction(ActionKind.SUPERSEDE, update.newer.id, older, reason, evidence)

    async def _apply_update(self, update: PlannedUpdate) -> ConsolidationAction | None:
        ns = self.namespace
        async with self.db.write() as conn:
            valid = await journal.lock_valid_insights(
                conn, ns, [update.newer.id, *(o.id for o in update.older)]
            )
            newer = valid.get(update.newer.id)
            older = (
                tuple(
                    o
                    for o in update.older
                    if o.id in valid and valid[o.id].valid_from < newer.valid_from
                )
                if newer is not None
                else ()
            )
            if newer is None or not older:
                return None
            update = PlannedUpdate(update.newer, older)
            ids = [o.id for o in older]
            await journal.close_insights(
                conn,
                ns,
                ids,
                newer.id,
                SupersessionReason.UPDATED,
                f"(SELECT valid_from FROM insights WHERE namespace = :ns AND id = {newer.id:d})",
            )
            return await journal.record(
                conn,
                ns,
                self._update_action(update),
                {"closed": ids},
            )

    # --- entities -------------------------------------------------------------------------

    async def _plan_entities(self) -> tuple[list[EntityNode], list[PlannedEntityMerge]]:
        async with self.db.read() as conn:
            rows = (await conn.execute(text(ENTITIES_SQL), {"ns": self.namespace})).all()
            found = [EntityNode(r.id, r.name) for r in rows]
            groups = entity_groups(found)
            if not groups:
                return found, []
            ids = [n.id for g in groups for n in g]
            degrees = {
                r.id: int(r.degree)
                for r in await conn.execute(text(DEGREES_SQL), {"ns": self.namespace, "ids": ids})
            }
            undone = (await self._undone(conn))[ActionKind.ENTITY_MERGE]
        return found, plan_entities(groups, degrees, undone)

    def _entity_action(
        self, merge: PlannedEntityMerge, changes: dict[str, Any]
    ) -> ConsolidationAction:
        names = {str(a.id): a.name for a in merge.aliases}
        reason = (
            f"entities {', '.join(repr(n) for n in names.values())} name "
            f"{merge.survivor.name!r}: made its aliases"
        )
        evidence = {"survivor": merge.survivor.name, "aliases": names}
        return ConsolidationAction(
            ActionKind.ENTITY_MERGE,
            merge.survivor.id,
            tuple(a.id for a in merge.aliases),
            reason,
            evidence,
            changes=changes,
        )

    async def _apply_entity_merge(self, merge: PlannedEntityMerge) -> ConsolidationAction | None:
        ns = self.namespace
        async with self.db.write() as conn:
            ids = [merge.survivor.id, *(a.id for a in merge.aliases)]
            rows = (
                (
                    await conn.execute(
                        text(
                            "SELECT id FROM nodes WHERE namespace = :ns "
                            "AND id = ANY(CAST(:ids AS bigint[])) AND merged_into IS NULL "
                            "ORDER BY id FOR UPDATE"
                        ),
                        {"ns": ns, "ids": ids},
                    )
                )
                .scalars()
                .all()
            )
            aliases = tuple(a for a in merge.aliases if a.id in rows)
            if merge.survivor.id not in rows or not aliases:
                return None
            merge = PlannedEntityMerge(merge.survivor, aliases)
            moved, closed = await journal.move_edges(
                conn, ns, {a.id: merge.survivor.id for a in aliases}
            )
            await conn.execute(
                text(
                    "UPDATE nodes SET merged_into = :s WHERE namespace = :ns "
                    "AND id = ANY(CAST(:ids AS bigint[]))"
                ),
                {"ns": ns, "s": merge.survivor.id, "ids": [a.id for a in aliases]},
            )
            return await journal.record(
                conn,
                ns,
                self._entity_action(merge, {}),
                {"edges_moved": moved, "edges_closed": closed},
            )

    # --- digests --------------------------------------------------------------------------

    async def _quiet_sessions(self) -> list[tuple[str, int, int | None]]:
        async with self.db.read() as conn:
            quiet_before = await conn.scalar(
                text("SELECT now() - make_interval(secs => :s)"),
                {"s": self.settings.consolidation_digest_quiet_s},
            )
            rows = (
                await conn.execute(
                    text(QUIET_SESSIONS_SQL),
                    {
                        "ns": self.namespace,
                        "quiet_before": quiet_before,
                        "min_turns": self.settings.consolidation_digest_min_turns,
                    },
                )
            ).all()
            undone = (await self._undone(conn))[ActionKind.DIGEST]
        undone_last_turns = {turn for _, turn in undone}
        return [
            (r.session_id, r.last_turn, r.digest_id)
            for r in rows
            if r.last_turn not in undone_last_turns
        ]

    async def _digest(
        self, session_id: str, last_turn: int, digest_id: int | None, dry_run: bool
    ) -> ConsolidationAction | None:
        async with self.db.read() as conn:
            turns = [
                Turn(r.id, r.speaker, r.content, r.timestamp)
                for r in (
                    await conn.execute(
                        text(SESSION_TURNS_SQL), {"ns": self.namespace, "session": session_id}
                    )
                ).all()
            ]
        if not turns:
            return None
        budget = self.settings.consolidation_digest_tokens
        written = await self.writer.digest(turns, budget) if self.writer else None
        if written is None:
            lines = await run_cpu(
                sum(len(t.content) for t in turns),
                central_sentences,
                turns,
                budget,
                self.tokenizer.count,
            )
            if not lines:
                return None
            content = digest_text(session_id, turns, lines)
        else:
            content = digest_text(session_id, turns, [("summary", written)])
        sources = [t.id for t in turns][-MAX_DIGEST_SOURCES:]
        superseded = [digest_id] if digest_id is not None else []
        evidence = {
            "session": session_id,
            "turns": len(turns),
            "last_turn": last_turn,
            "written_by": "model" if written is not None else "extractive",
        }
        reason = f"session {session_id!r} is quiet: digest of its {len(turns)} turns"
        if dry_run:
            return ConsolidationAction(ActionKind.DIGEST, None, (last_turn,), reason, evidence)
        row = self.insights.validated(InsightInput(content, sources))
        vectors = await vectors_or_wait(self.embedder, [content], "insights")
        async with self.db.write() as conn:
            # one digest per state of a session, whoever consolidates at the same time
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                {"key": f"gql-memory digest {self.namespace} {session_id}"},
            )
            current = await conn.scalar(
                text(
                    "SELECT id FROM insights WHERE namespace = :ns AND digest_of = :s "
                    "AND valid_to IS NULL AND :last = ANY(source_ids)"
                ),
                {"ns": self.namespace, "s": session_id, "last": last_turn},
            )
            if current is not None:
                return None
            [digest] = await self.insights.store(conn, [row], vectors, digest_of=session_id)
            if superseded:
                still = await journal.lock_valid_insights(conn, self.namespace, superseded)
                superseded = [i for i in superseded if i in still]
                if superseded:
                    await journal.close_insights(
                        conn,
                        self.namespace,
                        superseded,
                        digest.id,
                        SupersessionReason.UPDATED,
                        "greatest(valid_from, clock_timestamp())",
                    )
            planned = ConsolidationAction(
                ActionKind.DIGEST, digest.id, (last_turn,), reason, evidence
            )
            return await journal.record(
                conn,
                self.namespace,
                planned,
                {"superseded": superseded},
            )

    # --- the journal ----------------------------------------------------------------------

    async def undo(self, action_id: Any) -> UndoResult:
        """Undo one action: what stood before it stands again, where nothing else changed
        it since (the result lists what was left, and why)."""
        action_id = require_id(action_id, "actionId")
        async with self.db.write() as conn:
            return await journal.undo(conn, self.namespace, action_id)

    async def history(
        self, *, first: int | None = None, after: str | None = None
    ) -> Page[ConsolidationAction]:
        """The journal, newest first."""
        limit = require_page_size(
            first, self.settings.default_page_size, self.settings.max_page_size
        )
        before = None if after is None else require_id(after, "after")
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    text(
                        f"SELECT {journal.ACTION_COLUMNS} FROM consolidation_actions "
                        "WHERE namespace = :ns AND (CAST(:before AS bigint) IS NULL "
                        "OR id < :before) ORDER BY id DESC LIMIT :limit"
                    ).columns(evidence=JSONB, changes=JSONB),
                    {"ns": self.namespace, "before": before, "limit": limit + 1},
                )
            ).all()
        items = [journal.action_from_row(r) for r in rows[:limit]]
        return Page(
            items=items,
            cursors=[str(a.id) for a in items],
            has_next_page=len(rows) > limit,
            has_previous_page=after is not None,
        )


def _unit(vector: Sequence[float]) -> np.ndarray[Any, Any]:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


__all__: builtins.list[str] = ["Consolidation"]
