"""A dependency-free local embedder: hashed word, word-bigram and character-trigram features.

It is lexical, not semantic: texts that share words and word pieces end up close, paraphrases
with other words do not. It is deterministic across processes (crc32, not Python's hash),
L2-normalised, and fast enough to embed thousands of short texts per second.
"""

from __future__ import annotations

import math
import re
import zlib

from gql_memory.embeddings import Vector

WORD = re.compile(r"\w+", re.UNICODE)
WORD_WEIGHT = 1.0
BIGRAM_WEIGHT = 0.7
TRIGRAM_WEIGHT = 0.35
MAX_CHARS = 20_000


class LocalEmbedder:
    """Feature hashing into ``dim`` buckets with a sign bit, sublinear term weights."""

    name = "local"
    model = "hashed-ngrams-v1"

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim

    async def embed(self, texts: list[str]) -> list[Vector]:
        return [self.embed_one(text) for text in texts]

    async def aclose(self) -> None:
        return None

    def embed_one(self, text: str) -> Vector:
        counts: dict[str, float] = {}
        words = WORD.findall(text[:MAX_CHARS].lower())
        for word in words:
            counts["w:" + word] = counts.get("w:" + word, 0.0) + WORD_WEIGHT
            padded = f"<{word}>"
            for i in range(len(padded) - 2):
                key = "c:" + padded[i : i + 3]
                counts[key] = counts.get(key, 0.0) + TRIGRAM_WEIGHT
        for first, second in zip(words, words[1:], strict=False):
            key = f"b:{first} {second}"
            counts[key] = counts.get(key, 0.0) + BIGRAM_WEIGHT
        vector = [0.0] * self.dim
        for feature, weight in counts.items():
            digest = zlib.crc32(feature.encode())
            sign = 1.0 if digest & 0x80000000 else -1.0
            vector[digest % self.dim] += sign * (1.0 + math.log(weight))
        norm = math.sqrt(sum(v * v for v in vector))
        if norm == 0.0:
            # A text without word characters still needs a valid (non-zero) unit vector.
            vector[zlib.crc32(text.encode()) % self.dim] = 1.0
            return vector
        return [v / norm for v in vector]
