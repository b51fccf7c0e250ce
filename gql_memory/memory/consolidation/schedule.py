"""Consolidation in the background: every GQL_MEMORY_CONSOLIDATION_INTERVAL_S (0: off), over
each namespace with insights newer than its cursor, or quiet sessions, in bounded work.

One process per database works at a time (an advisory lock, as the embedding backfill's).
A namespace's pass stops after GQL_MEMORY_CONSOLIDATION_MAX_ACTIONS actions, each its own
short transaction; a pass that finished moves the namespace's cursor to the newest insight
it saw, and one that stopped early leaves it, so the next pass resumes there (what it already
did is not planned again). The worker sleeps between namespaces, yielding to requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.tables import ALL_NAMESPACES
from gql_memory.embeddings import EmbeddingProvider
from gql_memory.memory.consolidation.service import Consolidation
from gql_memory.memory.insights import Insights

log = logging.getLogger(__name__)

ADVISORY_LOCK_KEY = 0x67716C_636F6E73  # "gql" "cons"
# Namespaces with an insight past their cursor, or a session that may be quiet now and
# undigested (its last turn is newer than the cursor's last look).
DUE_SQL = f"""
SELECT n.namespace {ALL_NAMESPACES}
FROM (SELECT namespace, max(id) AS newest FROM insights GROUP BY namespace
      UNION
      SELECT namespace, NULL FROM raw_dialogue GROUP BY namespace
      HAVING max(timestamp) <= now() - make_interval(secs => :quiet)) n
LEFT JOIN consolidation_cursors c ON c.namespace = n.namespace
WHERE c.namespace IS NULL OR n.newest IS NULL OR n.newest > c.insight_id
   OR c.updated_at < now() - make_interval(secs => :quiet)
GROUP BY n.namespace ORDER BY n.namespace
"""
CURSOR_SQL = """
INSERT INTO consolidation_cursors (namespace, insight_id, updated_at)
SELECT CAST(:ns AS varchar), coalesce(max(id), 0), now() FROM insights WHERE namespace = :ns
ON CONFLICT (namespace) DO UPDATE SET insight_id = EXCLUDED.insight_id,
    updated_at = EXCLUDED.updated_at
"""


class ConsolidationWorker:
    """Runs consolidation passes in the background. ``db`` reads every namespace (the
    owner)."""

    def __init__(self, db: Database, embedder: EmbeddingProvider, settings: Settings) -> None:
        self.db = db
        self.embedder = embedder
        self.settings = settings
        self.interval_s = settings.consolidation_interval_s
        self.pause_s = min(1.0, self.interval_s / 10)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.interval_s > 0:
            self._task = asyncio.create_task(self._run(), name="gql-memory consolidation")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.run_once()
            except Exception as exc:  # the worker must outlive a bad pass; say what it was
                log.warning("scheduled consolidation failed: %s", type(exc).__name__)

    async def run_once(self) -> dict[str, int] | None:
        """One round over the due namespaces, if this process gets the lock: the actions
        taken per namespace (None: not this process's turn)."""
        async with self.db.engine.connect() as lock:
            got = await lock.scalar(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": ADVISORY_LOCK_KEY}
            )
            await lock.commit()
            if not got:
                return None
            try:
                return await self._round()
            finally:
                await lock.execute(
                    text("SELECT pg_advisory_unlock(:key)"), {"key": ADVISORY_LOCK_KEY}
                )
                await lock.commit()

    async def _round(self) -> dict[str, int]:
        async with self.db.read() as conn:
            due = (
                (
                    await conn.execute(
                        text(DUE_SQL), {"quiet": self.settings.consolidation_digest_quiet_s}
                    )
                )
                .scalars()
                .all()
            )
        taken: dict[str, int] = {}
        for namespace in due:
            insights = Insights(self.db, self.settings, namespace, self.embedder)
            consolidation = Consolidation(
                self.db, self.settings, namespace, self.embedder, insights
            )
            report = await consolidation.run(max_actions=self.settings.consolidation_max_actions)
            taken[namespace] = len(report.actions)
            if report.complete:
                async with self.db.write() as conn:
                    await conn.execute(text(CURSOR_SQL), {"ns": namespace})
            if report.actions:
                log.info(
                    "scheduled consolidation took %d actions in a namespace",
                    len(report.actions),
                    extra={"event": "consolidation", "actions": len(report.actions)},
                )
            await asyncio.sleep(self.pause_s)  # yield to requests between namespaces
        return taken
