"""An embedder that fails or hangs never costs a write its row (issue 43, items 3-4).

The real `openai` client against the local fake server: a server that accepts requests and
never answers (``FakeOpenAI.hang``), and one that answers 503. Rows are stored waiting for
their vectors, search answers from its text leg and says so, /readyz and the metrics report
the embedder's state, and the waiting rows get their vectors once the embedder is back (the
background worker, `gql-memory reembed --missing`), exactly the vectors they would have had.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings.hashed import HashEmbedder
from gql_memory.memory import Memory
from gql_memory.memory.search.relevance import text_signal
from gql_memory.memory.search.types import MemoryLayer
from gql_memory.memory.turn_embedding import TurnRecipe
from gql_memory.memory.vectors import parse_vector
from gql_memory.memory.waiting import (
    ADVISORY_LOCK_KEY,
    BackfillWorker,
    embed_waiting,
    waiting_counts,
)
from gql_memory.server.app import create_app
from tests.conftest import (
    HANG_GUARD_S,
    LiveServer,
    openai_settings,
    start_live_server,
    truncate_all,
)
from tests.fake_openai import FakeOpenAI

SECRET = "sk-never-shown"
TURNS = [
    ("user", "My sister Ana moved to Lisbon last spring."),
    ("assistant", "That sounds exciting! Does she like the city?"),
]


@pytest.fixture
def fake(fake_openai: FakeOpenAI) -> FakeOpenAI:
    fake_openai.reset()
    yield fake_openai
    fake_openai.reset()


def hanging_settings(settings: Settings, fake: FakeOpenAI, **changes: Any) -> Settings:
    """The openai provider with a small budget: a hanging request costs 0.5 s, not 10."""
    values = {
        "openai_api_key": SECRET,
        "embedding_timeout_s": 0.2,
        "embedding_budget_s": 0.5,
        "embedding_max_retries": 5,
        "embedding_backfill_interval_s": 0,
    }
    return openai_settings(settings, fake, **{**values, **changes})


async def vectors(db: Database, table: str) -> dict[int, list[float] | None]:
    async with db.read() as conn:
        rows = await conn.execute(text(f"SELECT id, CAST(embedding AS text) FROM {table}"))
        return {r[0]: None if r[1] is None else parse_vector(r[1]) for r in rows}


async def fresh(db: Database) -> None:
    """An empty database whose vectors' provider is not recorded yet: the next server or
    command to start records its own (this module's tests use two providers)."""
    await truncate_all(db)
    async with db.write() as conn:
        await conn.execute(text("UPDATE embedding_config SET provider = 'unset'"))


def close(a: list[float] | None, b: list[float]) -> bool:
    return a is not None and max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-6


async def test_a_hanging_embedder_loses_no_row_and_search_answers_from_its_text_leg(
    db: Database, settings: Settings, fake: FakeOpenAI
) -> None:
    await truncate_all(db)
    config = hanging_settings(settings, fake)
    memory = Memory(db, config)
    fake.hang()
    stored = [await memory.raw.store("trip", speaker, content) for speaker, content in TURNS]
    insight = await memory.insights.add("Ana lives in Lisbon.")
    episode = await memory.episodes.store("where does Ana live", 0.8, "Ask about Lisbon.")
    assert (await memory.stats()).embeddings_waiting == 4
    assert await waiting_counts(db, "default") == {
        "raw_dialogue": 2,
        "insights": 1,
        "episodes": 1,
    }

    hits = await memory.search(
        "Where does Ana live, Lisbon?", 5, layers=[MemoryLayer.RAW, MemoryLayer.INSIGHT]
    )
    assert {(h.layer, h.id) for h in hits} >= {
        (MemoryLayer.RAW, stored[0].id),
        (MemoryLayer.INSIGHT, insight.id),
    }
    host = fake.base_url.removeprefix("http://").removesuffix("/v1")
    reason = (
        f"vector leg skipped: The embedding provider openai at http://{host}/v1 "
        "(model text-embedding-3-small) did not answer within 0.5 s "
        "(GQL_MEMORY_EMBEDDING_BUDGET_S)."
    )
    for hit in hits:
        assert hit.vector_leg_skipped == reason and SECRET not in reason
        assert hit.cosine is None and hit.vector_rank is None
        assert hit.relevance == pytest.approx(text_signal(hit.text_score))
    # the vector leg alone cannot answer without the embedder: a clear error, not []
    with pytest.raises(Exception, match="did not answer within 0.5 s"):
        await memory.search("Lisbon", 5, layers=[MemoryLayer.RAW], weights=vector_only())

    fake.release()
    done = await embed_waiting(db, memory.embedder, TurnRecipe.from_settings(config))
    assert done == {"raw_dialogue": 2, "insights": 1, "episodes": 1}
    assert await waiting_counts(db) == {"raw_dialogue": 0, "insights": 0, "episodes": 0}
    # each row got the vector it would have had: the insight its content, the episode its
    # query, a turn after the end of the turn before it (memory/turn_embedding.py)
    assert close((await vectors(db, "insights"))[insight.id], fake.vector_for(insight.content))
    assert close((await vectors(db, "episodes"))[episode.id], fake.vector_for(episode.query))
    raw = await vectors(db, "raw_dialogue")
    first, second = (f"{speaker}: {content}" for speaker, content in TURNS)
    assert close(raw[stored[0].id], fake.vector_for(first))
    assert close(raw[stored[1].id], fake.vector_for(f"{first}\n{second}"))
    hits = await memory.search("Lisbon", 5, layers=[MemoryLayer.INSIGHT], weights=vector_only())
    assert [h.id for h in hits] == [insight.id] and hits[0].vector_leg_skipped is None


def vector_only() -> Any:
    from gql_memory.memory.search.types import SearchWeights

    return SearchWeights(vector=1.0, text=0.0)


async def test_a_waiting_turn_gets_exactly_the_vector_of_a_turn_stored_with_the_embedder_up(
    db: Database, settings: Settings, fake: FakeOpenAI
) -> None:
    """Its context (the turn before it) is read when it is embedded, as when it is stored."""
    await truncate_all(db)
    config = hanging_settings(settings, fake)
    up = Memory(db, config, "up")
    down = Memory(db, config, "down")
    for speaker, content in TURNS:
        await up.raw.store("s", speaker, content)
    await down.raw.store("s", *TURNS[0])
    fake.always_fail = 503
    await down.raw.store("s", *TURNS[1])
    fake.always_fail = None
    await embed_waiting(db, down.embedder, TurnRecipe.from_settings(config))
    async with db.read() as conn:
        rows = await conn.execute(
            text(
                "SELECT namespace, CAST(embedding AS text) FROM raw_dialogue ORDER BY namespace, id"
            )
        )
        found: dict[str, list[str]] = {}
        for namespace, vector in rows:
            found.setdefault(namespace, []).append(vector)
    assert found["down"] == found["up"] and None not in found["down"]


async def test_one_worker_per_database_embeds_and_rows_embedded_meanwhile_are_left_alone(
    db: Database, settings: Settings
) -> None:
    await truncate_all(db)
    memory = Memory(db, settings)  # the hash embedder of the test database
    turn = await memory.raw.store("s", "user", "the backup runs at night")
    async with db.write() as conn:
        await conn.execute(
            text("UPDATE raw_dialogue SET embedding = NULL, embedding_waiting = true")
        )
    worker = BackfillWorker(db, memory.embedder, settings)
    seen: list[tuple[dict[str, int], dict[str, int]]] = []
    worker.observer = lambda done, waiting: seen.append((done, waiting))
    async with db.engine.connect() as other:  # another process holds the database's lock
        assert await other.scalar(text(f"SELECT pg_try_advisory_lock({ADVISORY_LOCK_KEY})"))
        assert await worker.run_once() is None
        assert seen[-1] == ({}, {"raw_dialogue": 1, "insights": 0, "episodes": 0})
        await other.execute(text(f"SELECT pg_advisory_unlock({ADVISORY_LOCK_KEY})"))
        await other.commit()
    assert await worker.run_once() == {"raw_dialogue": 1, "insights": 0, "episodes": 0}
    assert seen[-1][1] == {"raw_dialogue": 0, "insights": 0, "episodes": 0}
    expected = HashEmbedder(memory.embedder.dim).embed_one("user: the backup runs at night")
    assert close((await vectors(db, "raw_dialogue"))[turn.id], expected)


async def test_the_server_stays_up_and_ready_and_embeds_what_waited_once_the_embedder_is_back(
    db: Database, settings: Settings, fake: FakeOpenAI
) -> None:
    await fresh(db)
    config = hanging_settings(
        settings,
        fake,
        embedding_breaker_failures=2,
        embedding_breaker_cooldown_s=1,
        embedding_backfill_interval_s=0.05,
    )
    server, task, base_url = await start_live_server(create_app(config))
    try:
        async with httpx.AsyncClient(base_url=base_url, timeout=HANG_GUARD_S) as client:
            api = LiveServer(base_url, client)
            fake.hang()
            stored = await api.data(
                'mutation { storeRawDialogue(input: {sessionId: "s", speaker: "user", '
                'content: "The invoice number is INV-7731."}) { id } }'
            )
            assert stored["storeRawDialogue"]["id"]
            added = await api.data(
                'mutation { addInsight(input: {content: "Invoice INV-7731 is paid."}) '
                "{ id embedding } }"
            )
            assert added["addInsight"]["embedding"] is None
            # two failed calls: the breaker is open, calls fail at once, the server is ready
            ready = (await client.get("/readyz")).json()
            assert ready["status"] == "degraded" and ready["embedder"]["state"] == "down"
            assert "did not answer within 0.5 s" in ready["embedder"]["reason"]
            assert SECRET not in str(ready)
            metrics = (await client.get("/metrics")).text
            assert 'gql_memory_embedder_state{state="down"} 1.0' in metrics
            found = await api.data(
                '{ search(query: "INV-7731", layers: [RAW, INSIGHT]) '
                "{ id layer vectorLegSkipped } }"
            )
            assert len(found["search"]) == 2
            host = fake.base_url.removeprefix("http://").removesuffix("/v1")
            skipped = f"vector leg skipped: The embedding provider openai at http://{host}/v1 "
            # failing at once (the breaker), or the probe after the cool-down, hanging
            assert all(h["vectorLegSkipped"].startswith(skipped) for h in found["search"])
            stats = await api.data("{ stats { embeddingsWaiting } }")
            assert stats["stats"]["embeddingsWaiting"] == 2

            fake.release()  # back: after the cool-down the worker's call is the probe
            for _ in range(int(HANG_GUARD_S / 0.05)):
                stats = await api.data("{ stats { embeddingsWaiting } }")
                if stats["stats"]["embeddingsWaiting"] == 0:
                    break
                await asyncio.sleep(0.05)
            assert stats["stats"]["embeddingsWaiting"] == 0
            ready = (await client.get("/readyz")).json()
            assert ready["status"] == "ok" and ready["embedder"] == {"state": "ok"}
            # the worker reports its pass once it has counted what is left (after its commit)
            backfilled = 'gql_memory_embeddings_backfilled_total{table="insights"} 1.0'
            for _ in range(int(HANG_GUARD_S / 0.05)):
                metrics = (await client.get("/metrics")).text
                if backfilled in metrics:
                    break
                await asyncio.sleep(0.05)
            assert backfilled in metrics
            assert 'gql_memory_embeddings_waiting{table="raw_dialogue"} 0.0' in metrics
            found = await api.data(
                '{ search(query: "INV-7731", layers: [RAW, INSIGHT]) '
                "{ id vectorLegSkipped cosine } }"
            )
            assert all(
                h["vectorLegSkipped"] is None and h["cosine"] is not None for h in found["search"]
            )
    finally:
        fake.release()
        server.should_exit = True
        await task


async def test_reembed_missing_embeds_the_waiting_rows_while_a_server_is_up(
    db: Database, settings: Settings, database_url: str
) -> None:
    await fresh(db)
    memory = Memory(db, settings)
    insight = await memory.insights.add("the deploy key rotates monthly")
    async with db.write() as conn:
        await conn.execute(text("UPDATE insights SET embedding = NULL, embedding_waiting = true"))
    server, task, _ = await start_live_server(
        create_app(settings.with_overrides(embedding_backfill_interval_s=0))
    )
    try:
        env = {**os.environ, "DATABASE_URL": database_url, "GQL_MEMORY_EMBEDDING_PROVIDER": "hash"}

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "gql_memory", "reembed", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )

        status = await asyncio.to_thread(cli, "--status")
        assert status.returncode == 0, status.stderr
        assert "1 row waiting for their vectors (`gql-memory reembed --missing` embeds them)" in (
            status.stdout
        )
        done = await asyncio.to_thread(cli, "--missing")
        assert done.returncode == 0, done.stderr
        assert (
            "embedded the rows that waited for their vectors: "
            "insights: 1, episodes: 0, raw_dialogue: 0" in done.stdout
        )
    finally:
        server.should_exit = True
        await task
    expected = HashEmbedder(memory.embedder.dim).embed_one(insight.content)
    assert close((await vectors(db, "insights"))[insight.id], expected)
    assert await waiting_counts(db) == {"raw_dialogue": 0, "insights": 0, "episodes": 0}


async def test_the_worker_looks_only_when_rows_were_stored_waiting_or_seldom(
    db: Database, settings: Settings, fake: FakeOpenAI
) -> None:
    """Its look reads every namespace (every shard of a distributed database): a process
    that stored nothing waiting looks once, then every FULL_LOOK_EVERY_S."""
    from gql_memory.memory import waiting

    await truncate_all(db)
    now = [1000.0]
    memory = Memory(db, settings)
    worker = BackfillWorker(db, memory.embedder, settings, clock=lambda: now[0])
    assert worker.due()  # never looked
    await worker.run_once()
    assert not worker.due()
    now[0] += waiting.FULL_LOOK_EVERY_S
    assert worker.due()
    await worker.run_once()
    failing = Memory(db, hanging_settings(settings, fake))
    fake.always_fail = 503
    await failing.insights.add("stored while the embedder answers 503")
    assert worker.due()  # this process stored a row waiting
    await worker.run_once()
    assert not worker.due()


async def test_a_request_waiting_for_the_embedder_gives_its_admission_slot_to_others(
    db: Database, settings: Settings, fake: FakeOpenAI
) -> None:
    """One slot per namespace while two are active (GQL_MEMORY_ADMISSION_SLOTS=1), held by
    an addInsight whose embedder hangs: the same namespace's next request, which embeds
    nothing, is answered meanwhile, and the insight is stored after."""
    from gql_memory.keys import ApiKeyStore

    await fresh(db)
    store = ApiKeyStore(db)
    mine = (await store.create("default", "read,write")).secret
    theirs = (await store.create("other", "read,write")).secret
    config = hanging_settings(
        settings,
        fake,
        auth="required",
        embedding_budget_s=HANG_GUARD_S,
        admission_slots=1,
        admission_idle_s=3600,  # "other" stays active: default's requests share one slot
    )
    server, task, base_url = await start_live_server(create_app(config))
    try:
        async with httpx.AsyncClient(base_url=base_url, timeout=HANG_GUARD_S) as client:
            api = LiveServer(base_url, client).with_key(mine)
            await LiveServer(base_url, client).with_key(theirs).data("{ stats { insights } }")
            fake.hang()
            adding = asyncio.create_task(
                api.data('mutation { addInsight(input: {content: "kept"}) { id embedding } }')
            )
            while not fake.requests:  # the insight's request reached the embedder
                await asyncio.sleep(0.01)
            stats = await api.data("{ stats { insights } }")
            assert stats["stats"]["insights"] == 0 and not adding.done()
            fake.release()
            added = await adding
            assert close(added["addInsight"]["embedding"], fake.vector_for("kept"))  # late
    finally:
        fake.release()
        server.should_exit = True
        await task


async def test_a_row_the_provider_refuses_stops_waiting_and_the_others_get_their_vectors(
    db: Database, settings: Settings, fake: FakeOpenAI
) -> None:
    """A provider that is up and answers 400 for one text: the breaker does not count it as
    a failure, the other rows of the batch get their vectors, and the refused row stops
    waiting (it keeps no vector, as a text too long to embed) instead of blocking the rest."""
    from gql_memory.embeddings.breaker import CircuitBreakerEmbedder

    await truncate_all(db)
    config = hanging_settings(settings, fake)
    memory = Memory(db, config)
    fake.always_fail = 503
    texts = ("the alpha fact", "the refused fact", "the gamma fact")
    ids = [(await memory.insights.add(content)).id for content in texts]
    fake.always_fail = None
    fake.refuse = {"the refused fact"}
    guarded = CircuitBreakerEmbedder(memory.embedder, failures=1, cooldown_s=3600)
    done = await embed_waiting(db, guarded, TurnRecipe.from_settings(config))
    assert done == {"insights": 3, "episodes": 0, "raw_dialogue": 0}
    found = await vectors(db, "insights")
    assert found[ids[1]] is None
    assert close(found[ids[0]], fake.vector_for(texts[0]))
    assert close(found[ids[2]], fake.vector_for(texts[2]))
    assert await waiting_counts(db) == {"raw_dialogue": 0, "insights": 0, "episodes": 0}
    assert guarded.health().state == "ok"  # one failure would have opened it
