"""A chat model, when one is configured, writes session digests (the ``openai`` client against
any OpenAI-compatible endpoint). Optional: without one, or when it fails, the extractive
digest (digests.py) is used, and consolidation never waits on a model for long."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

import openai

from gql_memory.config import Settings
from gql_memory.embeddings.openai import public_url
from gql_memory.memory.consolidation.digests import Turn

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0
MAX_INPUT_CHARS = 24_000  # the turns given to the model: the session's end if longer
SYSTEM = (
    "You write the digest of a conversation for an AI agent's long-term memory: the facts, "
    "decisions, plans and preferences it holds, with names, dates and numbers, in plain "
    "sentences. No preamble, no advice."
)


class ChatWriter:
    """Writes digests with a chat model."""

    def __init__(self, base_url: str, model: str, api_key: str | None) -> None:
        self.model = model
        self.where = f"{public_url(base_url)} (model {model})"
        self.client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=TIMEOUT_S, max_retries=1
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> ChatWriter | None:
        """The writer of these settings (one client per endpoint and process), or None."""
        if not settings.consolidation_llm_base_url or not settings.consolidation_llm_model:
            return None
        return _writer(
            settings.consolidation_llm_base_url,
            settings.consolidation_llm_model,
            settings.consolidation_llm_api_key,
        )

    async def digest(self, turns: Sequence[Turn], budget_tokens: int) -> str | None:
        """The model's digest of the turns, or None when it gives none (then: extractive)."""
        lines = [f"{t.speaker}: {t.content}" for t in turns]
        transcript = "\n".join(lines)[-MAX_INPUT_CHARS:]
        try:
            response = await self.client.chat.completions.create(
                model=self.model,
                messages=[
                    {"role": "system", "content": SYSTEM},
                    {
                        "role": "user",
                        "content": f"Digest in at most {budget_tokens} tokens:\n\n{transcript}",
                    },
                ],
                max_tokens=budget_tokens,
                temperature=0,
            )
        except openai.OpenAIError as exc:
            log.warning(
                "consolidation: the chat model at %s failed (%s)", self.where, type(exc).__name__
            )
            return None
        text = (response.choices[0].message.content or "").strip() if response.choices else ""
        return " ".join(text.split()) or None


@functools.cache
def _writer(base_url: str, model: str, api_key: str | None) -> ChatWriter:
    return ChatWriter(base_url, model, api_key)
