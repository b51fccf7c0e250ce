"""The `context` query over HTTP: sections with reasons and costs, the budget, and its errors."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from tests.conftest import ROOT, LiveServer
from tests.test_readme import code_blocks

CONTEXT = """
query($q: String!, $s: String!, $m: Int!, $i: [ContextSectionKind!]!) {
  context(query: $q, sessionId: $s, maxTokens: $m, include: $i) {
    query sessionId text totalTokens maxTokens tokenizer
    sections { kind header reason tokens items { kind id content tokens reason truncated } }
  }
}
"""


async def seed(api: LiveServer) -> None:
    await api.data(
        'mutation { addWorkingMemory(input: {content: "Deadline is Friday", importance: 0.9, '
        'sessionId: "agent"}) { addedId } }'
    )
    insight = await api.data(
        'mutation { addInsight(input: {content: "The user is planning a trip to Berlin"}) { id } }'
    )
    await api.data(
        'mutation { storeEpisode(input: {query: "book a trip to Berlin", reward: -0.5, '
        'reflection: "Confirm the budget first"}) { id } }'
    )
    await api.data(
        'mutation($i: ID) { addNode(input: {label: "City", name: "Berlin", insightId: $i}) '
        "{ id } }",
        {"i": insight["addInsight"]["id"]},
    )
    await api.data(
        'mutation { addEdge(input: {source: {label: "City", name: "Berlin"}, target: '
        '{label: "Country", name: "Germany"}, relation: "located_in", createMissing: true}) '
        "{ id } }"
    )


async def test_context_packs_every_section_with_reasons(api: LiveServer) -> None:
    await seed(api)
    data = await api.data(
        CONTEXT,
        {
            "q": "book a trip to Berlin",
            "s": "agent",
            "m": 2000,
            "i": ["WORKING", "SEARCH", "EPISODES", "GRAPH"],
        },
    )
    context = data["context"]
    assert [s["kind"] for s in context["sections"]] == ["WORKING", "SEARCH", "EPISODES", "GRAPH"]
    assert context["totalTokens"] <= context["maxTokens"] == 2000
    assert context["tokenizer"] == "estimate" and context["sessionId"] == "agent"
    working, search, episodes, graph = context["sections"]
    assert working["items"][0]["content"] == "- Deadline is Friday"
    assert search["items"][0]["kind"] == "INSIGHT"
    assert "vector rank 1" in search["items"][0]["reason"]
    assert "Confirm the budget first" in episodes["items"][0]["content"]
    assert "failed" in episodes["items"][0]["reason"]
    assert graph["items"][0]["content"] == "- Berlin (City) —located_in→ Germany (Country)"
    for section in context["sections"]:
        assert section["header"] in context["text"]
        for item in section["items"]:
            assert item["content"] in context["text"] and item["tokens"] > 0


async def test_defaults_are_all_sections_and_2000_tokens(api: LiveServer) -> None:
    await seed(api)
    data = await api.data('{ context(query: "trip to Berlin") { maxTokens sections { kind } } }')
    assert data["context"]["maxTokens"] == 2000
    # session "default" has no working memory; the other sections are all there
    assert [s["kind"] for s in data["context"]["sections"]] == ["SEARCH", "EPISODES", "GRAPH"]


async def test_a_small_budget_is_respected(api: LiveServer) -> None:
    await seed(api)
    data = await api.data(
        CONTEXT, {"q": "Berlin", "s": "agent", "m": 40, "i": ["WORKING", "SEARCH", "GRAPH"]}
    )
    assert 0 < data["context"]["totalTokens"] <= 40


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ('{ context(query: "") { text } }', "query must not be empty"),
        ('{ context(query: "q", maxTokens: 5) { text } }', "maxTokens must be between 32"),
        ('{ context(query: "q", maxTokens: 100001) { text } }', "maxTokens must be between"),
        # far out of range: the field's own error, not the query cost's
        ('{ context(query: "q", maxTokens: 10000000) { text } }', "maxTokens must be between"),
        ('{ context(query: "q", include: []) { text } }', "include must name at least one"),
        ('{ context(query: "q", sessionId: "") { text } }', "sessionId must not be empty"),
    ],
)
async def test_invalid_arguments_are_bad_user_input(
    api: LiveServer, query: str, message: str
) -> None:
    error = await api.error(query)
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert message in error["message"]


async def test_the_agent_loop_of_the_api_reference_runs_as_written(api: LiveServer) -> None:
    """docs/api.md's agent loop, with nothing but the standard library, against a server: the
    context it reads, the turns it stores."""
    page = (ROOT / "docs/api.md").read_text()
    [loop] = [body for _, body in code_blocks(page, "python") if "def agent_turn" in body]
    assert 'SERVER = "http://127.0.0.1:8000/graphql"' in loop
    code = loop.replace("http://127.0.0.1:8000", api.base_url.rstrip("/"), 1)
    # the page's stand-in for the reader's model, answering what the test can find again
    stand_in = "(your LLM's answer to"
    assert stand_in in code
    code = code.replace(stand_in, "Which dates? (", 1)
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("Which dates? ")
    stored = await api.data('{ search(query: "Which dates", layers: [RAW], topK: 5) { content } }')
    contents = {hit["content"] for hit in stored["search"]}
    assert any(c.startswith("assistant: Which dates?") for c in contents), contents
