"""The OpenAI Agents SDK's ``Session`` over raw dialogue (extra ``openai-agents``).

    session = MemorySession("chat-42", store)          # a MemoryStore or AsyncMemoryStore
    result = await Runner.run(agent, "Hello", session=session)

Each item is one raw dialogue turn of the session: speaker = the item's role (or its type:
``function_call``, ``function_call_output`` ...), content = its text (what search and
``context`` see), and the item itself, verbatim, in the turn's metadata, so items come back
exactly as given. The transcript is never changed: ``pop_item`` and ``clear_session``
archive turns to stale memory (MANUAL_ARCHIVE, ref RAW = the turn), and the session reads on
without them. ``store.forget_session(session_id)`` erases it all.
"""

from __future__ import annotations

import json
from typing import Any, cast

from agents.items import TResponseInputItem
from agents.memory.session_settings import SessionSettings, resolve_session_limit

from gql_memory.integrations.bridge import Store, StoreBridge
from gql_memory.memory.raw import RawDialogue, RawDialogueInput
from gql_memory.store import AsyncMemoryStore

ITEM_KEY = "openai_agents_item"  # the metadata key that holds the verbatim item
ROLES = frozenset({"user", "assistant", "system", "developer"})
PAGE = 1000  # the raw and stale layers' largest page
MAX_SPEAKER = 50


def turn_of(session_id: str, item: TResponseInputItem) -> RawDialogueInput:
    """The raw turn that stores ``item``."""
    fields = cast(dict[str, Any], item)
    speaker = str(fields.get("role") or fields.get("type") or "item")[:MAX_SPEAKER]
    return RawDialogueInput(session_id, speaker, item_text(fields), {ITEM_KEY: fields})


def item_text(item: dict[str, Any]) -> str:
    """The item as text for search: a message's text, a call with its arguments, a tool's
    output; the item's JSON for anything else."""
    content = item.get("content")
    if isinstance(content, str) and content.strip():
        return content
    if isinstance(content, list):
        parts = [p.get("text") or p.get("refusal") for p in content if isinstance(p, dict)]
        text = "\n".join(p for p in parts if isinstance(p, str) and p)
        if text.strip():
            return text
    if item.get("type") == "function_call":
        return f"{item.get('name')}({item.get('arguments', '')})"
    output = item.get("output")
    if isinstance(output, str) and output.strip():
        return output
    return json.dumps(item, ensure_ascii=False, sort_keys=True)


def item_of(turn: RawDialogue) -> TResponseInputItem:
    """The item a turn holds; a turn stored otherwise (``store.raw.store``) reads as a
    message of its speaker's role, or a user message naming the speaker."""
    stored = (turn.metadata or {}).get(ITEM_KEY)
    if isinstance(stored, dict):
        return cast(TResponseInputItem, stored)
    if turn.speaker in ROLES:
        return cast(TResponseInputItem, {"role": turn.speaker, "content": turn.content})
    return cast(TResponseInputItem, {"role": "user", "content": f"{turn.speaker}: {turn.content}"})


async def live_turns(
    store: AsyncMemoryStore, session_id: str, limit: int | None
) -> list[RawDialogue]:
    """The session's newest ``limit`` turns (all when None) that are not archived, oldest
    first."""
    archived: set[int] = set()
    after = None
    while True:
        page = await store.stale.list(session_id=session_id, first=PAGE, after=after)
        archived.update(i.archived_turn_id for i in page.items if i.archived_turn_id)
        if not page.has_next_page:
            break
        after = page.end_cursor
    newest: list[RawDialogue] = []
    after = None
    while limit is None or len(newest) < limit:
        turns = await store.raw.list(session_id=session_id, first=PAGE, after=after)
        newest.extend(t for t in turns.items if t.id not in archived)
        if not turns.has_next_page:
            break
        after = turns.end_cursor
    return list(reversed(newest if limit is None else newest[:limit]))


class MemorySession:
    """An OpenAI Agents SDK session (the ``agents.memory.Session`` protocol) kept in
    gql_memory's raw dialogue, in the store's namespace."""

    def __init__(
        self,
        session_id: str,
        store: Store,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings or SessionSettings()
        self._bridge = StoreBridge(store)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The newest ``limit`` items (all when None), in the order they were added."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit <= 0:
            return []
        turns = await self._bridge.run(lambda s: live_turns(s, self.session_id, limit))
        return [item_of(t) for t in turns]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Store the items as turns of the session, in one transaction."""
        if items:
            turns = [turn_of(self.session_id, item) for item in items]
            await self._bridge.run(lambda s: s.raw.store_many(turns))

    async def pop_item(self) -> TResponseInputItem | None:
        """Archive the newest item and return it; None when the session is empty."""

        async def pop(store: AsyncMemoryStore) -> RawDialogue | None:
            archived = await store.stale.archive_turns(self.session_id, newest=1)
            return await store.raw.get(archived[0].ref_id) if archived else None

        turn = await self._bridge.run(pop)
        return None if turn is None else item_of(turn)

    async def clear_session(self) -> None:
        """Archive every item: the session reads empty, the transcript keeps them."""
        await self._bridge.run(lambda s: s.stale.archive_turns(self.session_id))
