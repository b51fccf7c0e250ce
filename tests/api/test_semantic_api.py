"""Insights and episodes over HTTP; embeddings are read only when selected, in one batch."""

from __future__ import annotations

import pytest

from gql_memory.config import Settings
from gql_memory.db import Database
from tests.conftest import LiveServer, serving, truncate_all


async def add_insight(api: LiveServer, content: str, source_ids: list[str] | None = None) -> dict:
    data = await api.data(
        "mutation($i: InsightInput!) { addInsight(input: $i) { id content sourceIds metadata "
        "createdAt } }",
        {"i": {"content": content, "sourceIds": source_ids or [], "metadata": {"k": 1}}},
    )
    return data["addInsight"]


async def test_insight_lifecycle(api: LiveServer) -> None:
    turn = await api.data(
        'mutation { storeRawDialogue(input: {sessionId: "s", speaker: "user", '
        'content: "I adore green tea"}) { id } }'
    )
    turn_id = turn["storeRawDialogue"]["id"]
    added = await add_insight(api, "The user likes green tea", [turn_id])
    assert added["sourceIds"] == [turn_id] and added["metadata"] == {"k": 1}
    await add_insight(api, "The user works as a nurse")
    found = await api.data(
        '{ insightSearch(query: "green tea", topK: 1) { score insight { id content '
        "sources { id content } } } }"
    )
    [hit] = found["insightSearch"]
    assert hit["insight"]["content"] == "The user likes green tea"
    assert hit["insight"]["sources"] == [{"id": turn_id, "content": "I adore green tea"}]
    assert 0 < hit["score"] <= 1
    page = await api.data(
        "{ insights(first: 1) { edges { node { content } } pageInfo { hasNextPage } } }"
    )
    assert page["insights"]["edges"][0]["node"]["content"] == "The user works as a nurse"
    assert page["insights"]["pageInfo"]["hasNextPage"]
    deleted = await api.data(f'mutation {{ deleteInsight(id: "{added["id"]}") }}')
    assert deleted == {"deleteInsight": True}
    assert (await api.data(f'{{ insight(id: "{added["id"]}") {{ id }} }}')) == {"insight": None}


async def test_unknown_source_id_is_bad_user_input(api: LiveServer) -> None:
    error = await api.error(
        'mutation { addInsight(input: {content: "x", sourceIds: ["99999"]}) { id } }'
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "99999" in error["message"]


async def test_search_errors_and_empty_results(api: LiveServer) -> None:
    assert (await api.data('{ insightSearch(query: "anything") { score } }')) == {
        "insightSearch": []
    }
    error = await api.error('{ insightSearch(query: "") { score } }')
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    error = await api.error('{ insightSearch(query: "x", topK: 500) { score } }')
    assert error["message"] == "topK must be between 1 and 100"


async def test_embedding_is_read_only_when_selected_and_in_one_batch(
    api: LiveServer, statements: list[str]
) -> None:
    for i in range(5):
        await add_insight(api, f"insight number {i}")
    statements.clear()
    await api.data("{ insights { edges { node { id content } } } }")
    assert not any("embedding" in s for s in statements), statements
    statements.clear()
    data = await api.data("{ insights { edges { node { id embedding } } } }")
    assert all(len(e["node"]["embedding"]) == 384 for e in data["insights"]["edges"])
    assert sum("embedding" in s for s in statements) == 1  # one batch for every insight


async def test_episode_lifecycle(api: LiveServer) -> None:
    stored = await api.data(
        'mutation { storeEpisode(input: {query: "book a restaurant for friday", reward: 0.9, '
        'reflection: "call ahead, online booking fails"}) '
        "{ id query reward reflection createdAt } }"
    )
    episode = stored["storeEpisode"]
    similar = await api.data(
        '{ similarEpisodes(query: "book a restaurant for friday") '
        "{ similarity episode { id reflection } } }"
    )
    [hit] = similar["similarEpisodes"]
    assert hit["episode"]["id"] == episode["id"] and hit["similarity"] == pytest.approx(1.0)
    none = await api.data(
        '{ similarEpisodes(query: "quantum chromodynamics lecture") { similarity } }'
    )
    assert none == {"similarEpisodes": []}
    error = await api.error(
        'mutation { storeEpisode(input: {query: "q", reward: 2, reflection: "r"}) { id } }'
    )
    assert error["message"] == "reward must be between -1.0 and 1.0"
    assert (await api.data(f'mutation {{ deleteEpisode(id: "{episode["id"]}") }}')) == {
        "deleteEpisode": True
    }
    assert (await api.data(f'{{ episode(id: "{episode["id"]}") {{ id }} }}')) == {"episode": None}


async def test_search_weights_a_client_leaves_out_are_the_operators(
    settings: Settings, db: Database
) -> None:
    """A leg left out of ``weights`` (or sent as null) gets the weight the operator
    configured (here 0: the vector leg is off); an explicit 0.5 is kept."""
    await truncate_all(db)
    async with serving(settings.with_overrides(search_vector_weight=0.0)) as api:
        await add_insight(api, "The user likes green tea")
        search = (
            'query($w: SearchWeights) { search(query: "green tea", weights: $w) '
            "{ vectorRank textRank } }"
        )
        text_only = await api.data(search, {"w": {"text": 0.5}})
        assert text_only == {"search": [{"vectorRank": None, "textRank": 1}]}
        both = await api.data(search, {"w": {"vector": 0.5, "text": 0.5}})
        assert both == {"search": [{"vectorRank": 1, "textRank": 1}]}
        literal = await api.data(
            '{ search(query: "green tea", weights: {text: 0.5}) { vectorRank } }'
        )
        assert literal == {"search": [{"vectorRank": None}]}
        null = await api.data(search, {"w": {"vector": None, "text": 0.5}})
        assert null == text_only
