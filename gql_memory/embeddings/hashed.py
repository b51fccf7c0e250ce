"""A dependency-free lexical embedder for tests and CI: hashed words, stems, word bigrams
and character trigrams.

It is lexical, not semantic: texts that share words, stems and word pieces end up close;
paraphrases with other words do not. Deterministic across processes (crc32, not Python's
salted hash), L2-normalised, a few thousand short texts per second in pure Python.
"""

from __future__ import annotations

import functools
import math
import re
import zlib

from gql_memory.embeddings.provider import SYMMETRIC, TextRole, Vector

WORD = re.compile(r"\w+", re.UNICODE)
WORD_WEIGHT = 1.0
STEM_WEIGHT = 0.8
BIGRAM_WEIGHT = 0.5
# All character trigrams of one word share this weight, so long words do not dominate.
TRIGRAMS_PER_WORD_WEIGHT = 0.6
MAX_CHARS = 20_000
STOP_WORDS = frozenset(
    """
    a an and are as at be been but by can could did do does for from had has have he her him
    his how i if in into is it its me my no not of on or our she so than that the their them
    then there these they this to us was we were what when where which who why will with
    would you your
    """.split()
)
SUFFIXES = (
    "ational",
    "ization",
    "ations",
    "ation",
    "ments",
    "ment",
    "ness",
    "ings",
    "ing",
    "ies",
    "ied",
    "ers",
    "est",
    "ed",
    "es",
    "er",
    "ly",
    "s",
)


@functools.lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """A crude suffix stripper: 'resetting' -> 'reset', 'deployment' -> 'deploy'."""
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
                word = word[:-1]
            return word
    return word


@functools.lru_cache(maxsize=65_536)
def word_features(word: str) -> tuple[tuple[str, float], ...]:
    """A word's own features: itself, its stem and its stem's character trigrams (the same
    for every text, so computed once per word: a long text costs a lookup per word)."""
    root = stem(word)
    padded = f"<{root}>"
    trigrams = [padded[i : i + 3] for i in range(len(padded) - 2)]
    share = TRIGRAMS_PER_WORD_WEIGHT / len(trigrams)
    return (
        ("w:" + word, WORD_WEIGHT),
        ("s:" + root, STEM_WEIGHT),
        *(("c:" + trigram, share) for trigram in trigrams),
    )


@functools.lru_cache(maxsize=262_144)
def crc32(feature: str) -> int:
    return zlib.crc32(feature.encode())


class HashEmbedder:
    """Feature hashing into ``dim`` buckets with a sign bit and sublinear term weights.

    Symmetric: a query and a document are embedded alike (``role`` is ignored)."""

    name = "hash"
    model = "hashed-ngrams-v2"
    asymmetry = SYMMETRIC

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim

    async def embed(self, texts: list[str], *, role: TextRole = TextRole.DOCUMENT) -> list[Vector]:
        return [self.embed_one(text) for text in texts]

    async def aclose(self) -> None:
        return None

    def features(self, text: str) -> dict[str, float]:
        counts: dict[str, float] = {}

        def add(key: str, weight: float) -> None:
            counts[key] = counts.get(key, 0.0) + weight

        words = [w for w in WORD.findall(text[:MAX_CHARS].lower()) if w not in STOP_WORDS]
        for word in words:
            for key, weight in word_features(word):
                add(key, weight)
        for first, second in zip(words, words[1:], strict=False):
            add(f"b:{stem(first)} {stem(second)}", BIGRAM_WEIGHT)
        return counts

    def embed_one(self, text: str) -> Vector:
        vector = [0.0] * self.dim
        for feature, weight in self.features(text).items():
            digest = crc32(feature)
            sign = 1.0 if digest & 0x80000000 else -1.0
            # sublinear: repeated terms count, but less than linearly
            vector[digest % self.dim] += sign * math.sqrt(weight)
        norm = math.sqrt(sum(v * v for v in vector))
        if norm == 0.0:
            # A text without (non-stop) words still needs a valid, non-zero unit vector.
            vector[zlib.crc32(text.encode()) % self.dim] = 1.0
            return vector
        return [v / norm for v in vector]
