"""Relevance over HTTP (issue 30): every hit's relevance and cosine, minRelevance on search
and context, and what context left out."""

from __future__ import annotations

from tests.conftest import LiveServer

SEARCH = (
    "query($q: String!, $floor: Float) { search(query: $q, minRelevance: $floor) "
    "{ content cosine relevance sessionShare speakerBoost finalScore } }"
)
CONTEXT = (
    'query($q: String!, $floor: Float) { context(query: $q, sessionId: "s", '
    "minRelevance: $floor) { text belowRelevance minRelevance notes } }"
)


async def test_search_and_context_take_min_relevance(api: LiveServer) -> None:
    for content in ("The user prefers green tea", "The deployment runs on Kubernetes"):
        await api.data(
            "mutation($i: InsightInput!) { addInsight(input: $i) { id } }",
            {"i": {"content": content}},
        )
    hits = (await api.data(SEARCH, {"q": "green tea", "floor": None}))["search"]
    assert (
        len(hits) == 2
    )  # search leaves nothing out unless asked (GQL_MEMORY_SEARCH_MIN_RELEVANCE 0)
    assert all(0.0 <= h["relevance"] <= 1.0 and h["cosine"] is not None for h in hits)
    assert all(h["sessionShare"] == 0.0 and h["speakerBoost"] == 0.0 for h in hits)  # insights
    tea = next(h for h in hits if "tea" in h["content"])
    other = next(h for h in hits if "Kubernetes" in h["content"])
    floor = (tea["relevance"] + other["relevance"]) / 2
    kept = (await api.data(SEARCH, {"q": "green tea", "floor": floor}))["search"]
    assert [h["content"] for h in kept] == [tea["content"]]
    context = (await api.data(CONTEXT, {"q": "green tea", "floor": floor}))["context"]
    assert context["belowRelevance"] == 1 and context["minRelevance"] == floor
    assert "Kubernetes" not in context["text"] and "green tea" in context["text"]
    body = await api.graphql(SEARCH, {"q": "green tea", "floor": 2.0})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert "minRelevance" in body["errors"][0]["message"]
