"""A LlamaIndex ``Memory`` block over our context (extra ``llama-index``).

    block = MemoryBlock(store=store, max_tokens=800)   # a MemoryStore or AsyncMemoryStore
    memory = Memory.from_defaults(session_id="chat-42", memory_blocks=[block])

What ``Memory`` flushes out of its short-term queue into the block is stored as raw
dialogue turns of the session (speaker = the message's role); what the block gives back is
``store.context(...)`` for the latest messages, packed within ``max_tokens``: working
memory, the best insights, turns and episodes of the whole namespace (the session's own
boosted), and the facts, each with why it was chosen.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory.memory import BaseMemoryBlock

from gql_memory.integrations.bridge import Store, StoreBridge
from gql_memory.memory.raw import RawDialogueInput

QUERY_MAX_CHARS = 2000  # the end of the latest messages is what the context is sought for
DEFAULT_SESSION = "default"


def message_text(message: ChatMessage) -> str:
    """A message's text blocks (images, audio and tool calls carry none)."""
    return message.content or ""


class MemoryBlock(BaseMemoryBlock[str]):
    """gql_memory as a block of LlamaIndex's ``Memory``: stores the messages it is given,
    returns the token-budgeted context for the latest ones."""

    name: str = Field(default="gql_memory", description="The name of the memory block.")
    description: str | None = Field(
        default="Relevant memories from gql_memory: working memory, insights, past turns.",
        description="A description of the memory block.",
    )
    store: Store = Field(description="A gql_memory MemoryStore or AsyncMemoryStore.")
    session_id: str | None = Field(
        default=None, description="The session to use; default: the Memory's session id."
    )
    max_tokens: int = Field(default=1000, description="The context's token budget.")
    query_messages: int = Field(
        default=3, description="How many of the latest messages the context is sought for."
    )
    _bridge: StoreBridge = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._bridge = StoreBridge(self.store)

    def _session(self, given: Any) -> str:
        return self.session_id or (given if isinstance(given, str) and given else DEFAULT_SESSION)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        latest = [message_text(m) for m in (messages or [])[-self.query_messages :]]
        query = "\n".join(t for t in latest if t.strip())[-QUERY_MAX_CHARS:].strip()
        if not query:
            return ""
        session = self._session(block_kwargs.get("session_id"))
        context = await self._bridge.run(
            lambda s: s.context(query, session_id=session, max_tokens=self.max_tokens)
        )
        return context.text

    async def _aput(self, messages: list[ChatMessage]) -> None:
        turns = [
            RawDialogueInput(
                self._session(m.additional_kwargs.get("session_id")),
                str(getattr(m.role, "value", m.role)),
                message_text(m),
            )
            for m in messages
            if message_text(m).strip()
        ]
        if turns:
            await self._bridge.run(lambda s: s.raw.store_many(turns))

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop the context's last lines (the lowest-ranked) until about ``tokens_to_truncate``
        tokens are gone (four characters a token: Memory's own estimate is its tokenizer's)."""
        lines = content.splitlines()
        budget = len(content) - 4 * tokens_to_truncate
        while lines and len("\n".join(lines)) > budget:
            lines.pop()
        return "\n".join(lines) or None
