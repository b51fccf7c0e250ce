"""The embedding signature is fixed per database; reembed switches it (own database)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings import Asymmetry, TextRole
from gql_memory.embeddings.hashed import HashEmbedder
from gql_memory.errors import ConfigurationError
from gql_memory.memory import Memory
from gql_memory.memory.embedding_config import (
    reembed,
    stored_config,
    stored_signature,
    verify_embedding_config,
)
from gql_memory.memory.raw import RawDialogueInput
from gql_memory.memory.turn_embedding import TurnRecipe, turn_text
from gql_memory.memory.vectors import vector_literal
from tests.conftest import truncate_all


async def test_dimension_guard_then_reembed(db: Database, settings: Settings) -> None:
    old = HashEmbedder(384)
    await verify_embedding_config(db, old)  # first start records the provider
    assert await stored_config(db) == ("hash", old.model, 384)

    memory = Memory(db, settings, embedder=old)
    turn = await memory.raw.store("s", "user", "hello")
    await memory.insights.add("The user likes green tea", [turn.id])
    await memory.insights.add("The user dislikes coffee")
    async with db.write() as conn:  # give the raw turn an embedding too
        await conn.execute(
            text("UPDATE raw_dialogue SET embedding = (SELECT embedding FROM insights LIMIT 1)")
        )
    await memory.episodes.store("brew tea", 1.0, "steep for three minutes")

    new = HashEmbedder(16)
    with pytest.raises(ConfigurationError, match="gql-memory reembed") as refused:
        await verify_embedding_config(db, new)
    assert "384-dimensional" in str(refused.value) and "16-dimensional" in str(refused.value)

    seen: list[tuple[str, int, int]] = []
    counts = await reembed(db, new, batch_size=1, progress=lambda *a: seen.append(a))
    assert counts == {"insights": 2, "episodes": 1, "raw_dialogue": 1}
    assert ("insights", 2, 2) in seen
    assert await stored_config(db) == ("hash", new.model, 16)
    await verify_embedding_config(db, new)
    with pytest.raises(ConfigurationError):
        await verify_embedding_config(db, old)

    after = Memory(db, settings, embedder=new)
    hits = await after.insights.search("green tea", top_k=1)
    assert hits[0].insight.content == "The user likes green tea"
    assert len((await after.insights.embeddings([hits[0].insight.id]))[hits[0].insight.id]) == 16
    async with db.read() as conn:
        indexes = set((await conn.execute(text("SELECT indexname FROM pg_indexes"))).scalars())
    assert {"ix_insights_embedding_hnsw", "ix_episodes_embedding_hnsw"} <= indexes


async def test_changing_how_queries_or_documents_are_marked_needs_a_reembed(
    db: Database, settings: Settings
) -> None:
    """Same provider, model and dimension, other prefixes or input types: not comparable."""
    await truncate_all(db)
    async with db.write() as conn:
        await conn.execute(text("UPDATE embedding_config SET provider = 'unset'"))
    plain = HashEmbedder(16)
    await verify_embedding_config(db, plain)
    marked = HashEmbedder(16)
    marked.asymmetry = Asymmetry(query_prefix="query: ", document_input_type="passage")
    with pytest.raises(ConfigurationError) as refused:
        await verify_embedding_config(db, marked)
    message = str(refused.value)
    assert "gql-memory reembed" in message and "query prefix='query: '" in message
    assert "GQL_MEMORY_EMBEDDING_QUERY_PREFIX" in message
    await reembed(db, marked)
    assert (await stored_signature(db)).asymmetry == marked.asymmetry
    await verify_embedding_config(db, marked)


async def test_changing_the_recipe_of_raw_turns_needs_a_reembed(
    db: Database, settings: Settings
) -> None:
    """Turns embedded after their context and turns embedded alone are not comparable: a
    server configured with the other recipe is refused, naming both and the settings, and
    reembed re-embeds the turns by the configured recipe."""
    await truncate_all(db)
    async with db.write() as conn:
        await conn.execute(text("UPDATE embedding_config SET provider = 'unset'"))
    _, _, dim = await stored_config(db)  # whatever the tests before left
    provider = HashEmbedder(dim)
    in_context = TurnRecipe.from_settings(settings)
    assert in_context == TurnRecipe(96, pooled_alone=False, short_only=True)  # the defaults
    await verify_embedding_config(db, provider, in_context)
    memory = Memory(db, settings, embedder=provider)
    first, second = await memory.raw.store_many(
        [RawDialogueInput("s", "user", "I bought a smoker"), RawDialogueInput("s", "me", "nice")]
    )
    alone = TurnRecipe.from_settings(settings.with_overrides(embed_raw_context=False))
    assert alone == TurnRecipe(0)
    with pytest.raises(ConfigurationError) as refused:
        await verify_embedding_config(db, provider, alone)
    message = str(refused.value)
    assert "raw turns embedded after the previous turn when both are at most 96 tokens" in message
    assert "raw turns embedded alone" in message and "gql-memory reembed" in message
    assert "GQL_MEMORY_EMBED_RAW_CONTEXT" in message

    await reembed(db, provider, turns=alone, embed_all_raw=True)
    assert (await stored_signature(db)).turns == alone
    await verify_embedding_config(db, provider, alone)
    [expected] = await provider.embed([turn_text("me", "nice")], role=TextRole.DOCUMENT)
    async with db.read() as conn:
        similarity = await conn.scalar(
            text("SELECT 1 - (embedding <=> CAST(:v AS vector)) FROM raw_dialogue WHERE id = :id"),
            {"id": second.id, "v": vector_literal(expected)},
        )
    assert similarity == pytest.approx(1.0, abs=1e-6)  # the turn alone now


class Refusing(HashEmbedder):
    """A provider that refuses texts longer than ``max_chars``, as e5 and openai now do."""

    max_chars = 60

    async def embed(self, texts: list[str], **kwargs: object) -> list[list[float]]:
        assert all(len(t) <= self.max_chars for t in texts), "a text over the bound"
        return await super().embed(texts)


async def test_a_row_longer_than_the_new_bound_does_not_stop_a_reembed(
    db: Database, settings: Settings
) -> None:
    """Stored when longer texts were still cut, not refused: embedded by its beginning."""
    await truncate_all(db)
    _, _, dim = await stored_config(db)  # whatever the tests before left
    memory = Memory(db, settings, embedder=HashEmbedder(dim))
    await memory.insights.add("The user likes green tea " * 10)  # 250 characters
    await memory.insights.add("short")
    counts = await reembed(db, Refusing(8), batch_size=10)
    assert counts["insights"] == 2
