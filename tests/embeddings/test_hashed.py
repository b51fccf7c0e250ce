"""The hash embedder (tests, CI): deterministic, normalised, lexically meaningful."""

from __future__ import annotations

import math
import subprocess
import sys

from gql_memory.embeddings.hashed import HashEmbedder


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_are_unit_length_with_the_configured_dimension() -> None:
    for dim in (16, 384, 1536):
        vector = HashEmbedder(dim).embed_one("The quick brown fox")
        assert len(vector) == dim
        assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, rel_tol=1e-9)


def test_text_without_words_still_gets_a_unit_vector() -> None:
    vector = HashEmbedder(64).embed_one("?!  ...")
    assert math.isclose(sum(v * v for v in vector), 1.0)


def test_deterministic_across_processes() -> None:
    code = (
        "from gql_memory.embeddings.hashed import HashEmbedder;"
        "print(HashEmbedder(32).embed_one('deterministic text'))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1
    assert str(HashEmbedder(32).embed_one("deterministic text")) + "\n" in outputs


def test_similar_texts_are_closer_than_unrelated_ones() -> None:
    embed = HashEmbedder(384).embed_one
    query = embed("How do I reset my password?")
    similar = embed("Resetting a forgotten password step by step")
    unrelated = embed("The weather in Lisbon is sunny in July")
    assert cosine(query, similar) > cosine(query, unrelated) + 0.1


def test_word_pieces_match_inflections() -> None:
    embed = HashEmbedder(384).embed_one
    assert cosine(embed("deploying"), embed("deployment")) > cosine(
        embed("deploying"), embed("banana")
    )
