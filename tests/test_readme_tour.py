"""The README's ten-minute tour, run as written: every GraphQL example, in order, against one
fresh server (real HTTP, the embedded PostgreSQL, and the in-process e5 embedder a newcomer
gets with no settings), so the docs cannot rot.

Conventions of the tour, which this test relies on: each ```graphql block is one operation; a
```json block right after it is its variables, where a string ``"<name.path>"`` stands for a
value of an earlier result (``<hotel.addedId>``: the ``addedId`` under the result key
``hotel``; ``<turns.0.id>``: the first turn's ``id``). A subscription stays open while the
next example runs, and must have seen that example's changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import pytest_asyncio
from graphql import FieldNode, OperationDefinitionNode, parse

from gql_memory.config import Settings
from tests.conftest import ROOT, LiveServer, serving
from tests.live import GraphQLWS, wait_for_subscriptions

TOUR = "## Ten-minute tour"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.S | re.M)
PLACEHOLDER = re.compile(r"^<([A-Za-z_]\w*(?:\.\w+)+)>$")


@dataclass
class Example:
    """One GraphQL block of the tour and the variables block under it."""

    line: int
    document: str
    variables: dict[str, Any] = field(default_factory=dict)

    @property
    def is_subscription(self) -> bool:
        return self.document.lstrip().startswith("subscription")

    def __str__(self) -> str:
        return f"the tour example at README.md line {self.line}"


def tour_examples() -> list[Example]:
    readme = (ROOT / "README.md").read_text()
    start = readme.index(TOUR)
    end = readme.find("\n## ", start + len(TOUR))
    section = readme[start : end if end != -1 else len(readme)]
    first_line = readme.count("\n", 0, start) + 1
    examples: list[Example] = []
    graphql_end = None  # where the last graphql block ended
    for block in BLOCK.finditer(section):
        language, text = block.group(1), block.group(2)
        line = first_line + section.count("\n", 0, block.start())
        if language == "graphql":
            examples.append(Example(line, text))
            graphql_end = block.end()
        elif language == "json":
            assert graphql_end is not None and not section[graphql_end : block.start()].strip(), (
                f"README.md line {line}: a json block must follow a graphql block directly "
                "(it is that operation's variables)"
            )
            examples[-1].variables = json.loads(text)
            graphql_end = None
    return examples


def result_keys(document: str) -> list[str]:
    """The keys of an operation's result: its root fields' aliases, or their names."""
    (operation,) = parse(document).definitions
    assert isinstance(operation, OperationDefinitionNode)
    return [
        (selection.alias or selection.name).value
        for selection in operation.selection_set.selections
        if isinstance(selection, FieldNode)
    ]


def placeholders(value: Any) -> list[str]:
    if isinstance(value, str):
        match = PLACEHOLDER.match(value)
        return [match.group(1)] if match else []
    if isinstance(value, list):
        return [p for item in value for p in placeholders(item)]
    if isinstance(value, dict):
        return [p for item in value.values() for p in placeholders(item)]
    return []


def resolve(value: Any, results: dict[str, Any], example: Example) -> Any:
    """``value`` with every ``"<name.path>"`` replaced by that value of an earlier result."""
    if isinstance(value, list):
        return [resolve(item, results, example) for item in value]
    if isinstance(value, dict):
        return {key: resolve(item, results, example) for key, item in value.items()}
    if not (isinstance(value, str) and PLACEHOLDER.match(value)):
        return value
    name, *path = value[1:-1].split(".")
    assert name in results, f"{example}: {value} names no earlier result"
    found = results[name]
    for step in path:
        found = found[int(step)] if isinstance(found, list) else found[step]
    return found


# --- what some steps must show besides "no errors", by result key --------------------------


def budget_attention_decayed(items: list[dict[str, Any]]) -> bool:
    budget = next(i for i in items if i["content"].startswith("Budget"))
    return bool(budget["attention"] < budget["importance"])


def insight_boosted_by_the_session(hits: list[dict[str, Any]]) -> bool:
    insight = next(h for h in hits if h["layer"] == "INSIGHT")
    return insight["sessionBoost"] > 0 and {h["layer"] for h in hits} == {
        "INSIGHT",
        "EPISODE",
        "RAW",
    }


def one_closed_one_valid(connection: dict[str, Any]) -> bool:
    valid_to = [edge["node"]["validTo"] for edge in connection["edges"]]
    return len(valid_to) == 2 and valid_to.count(None) == 1


CHECKS: dict[str, Callable[[Any], bool]] = {
    "turns": lambda turns: len(turns) == 3,
    "rawDialogue": lambda page: len(page["edges"]) == 2,
    "hotel": lambda added: added["currentCount"] == 2,
    "workingMemory": budget_attention_decayed,
    # step 3's text: its importance again (0.5) plus one mention's 0.05
    "accessWorkingMemory": lambda item: (
        item["mentionCount"] == 1 and abs(item["attention"] - 0.55) < 1e-9
    ),
    "archived": lambda item: item["reason"] == "MANUAL_ARCHIVE",
    "restoreStaleMemory": lambda added: added["addedId"] is not None,
    "ingestToolOutput": lambda result: result["stored"] and result["ruleId"] == "bash-git-commit",
    "insight": lambda insight: len(insight["sources"]) == 2,
    "insightSearch": lambda hits: "vegetarian" in hits[0]["insight"]["content"],
    "similarEpisodes": lambda hits: len(hits) == 1 and hits[0]["similarity"] > 0.8,
    "caroline": lambda node: len(node["edges"]) >= 3,
    "neighbors": lambda found: (
        {("Diet", "vegetarian"), ("Entity", "Berlin")}
        <= {(n["node"]["label"], n["node"]["name"]) for n in found}
    ),
    "path": lambda path: path["nodes"][-1]["name"] == "Museum Island",
    "search": insight_boosted_by_the_session,
    "today": lambda hits: (
        hits[0]["periodRank"] == 1
        and {h["interpretedPeriod"]["expression"] for h in hits} == {"today"}
    ),
    "context": lambda context: context["totalTokens"] <= 400 and "Budget" in context["text"],
    "insights": one_closed_one_valid,
    "n11": lambda added: added["evictedId"] is not None and added["currentCount"] == 10,
    "staleMemory": lambda page: len(page["edges"]) >= 1,
    "forgotten": lambda deleted: deleted > 0,
}

# The tour's subscription watches the session that the example after it fills past capacity.
SUBSCRIPTION_SEES = ["ADDED"] * 11 + ["EVICTED"]


@pytest_asyncio.fixture(scope="module")
async def newcomer_server(settings: Settings) -> AsyncIterator[LiveServer]:
    """The real app on a fresh database, with the default (in-process e5) embedder."""
    default = Settings.model_validate({**settings.model_dump(), "embedding_provider": None})
    async with serving(default) as server:
        yield server


def test_the_tour_is_written_in_the_conventions_this_test_runs() -> None:
    examples = tour_examples()
    assert len(examples) >= 20, [e.line for e in examples]
    assert any(e.is_subscription for e in examples)
    seen: list[str] = []
    for example in examples:
        for placeholder in placeholders(example.variables):
            name = placeholder.split(".")[0]
            assert name in seen, f"{example}: <{placeholder}> names no earlier result"
            assert seen.count(name) == 1, f"{example}: <{placeholder}> is ambiguous"
        seen += result_keys(example.document)


async def test_every_tour_example_runs_in_order_on_a_fresh_database(
    newcomer_server: LiveServer,
) -> None:
    server = newcomer_server
    results: dict[str, Any] = {}
    checked: set[str] = set()
    async with AsyncExitStack() as stack:
        open_subscription: tuple[GraphQLWS, Example] | None = None
        for example in tour_examples():
            if example.is_subscription:
                ws = await stack.enter_async_context(
                    GraphQLWS.connect(server.client, server.base_url)
                )
                await ws.subscribe(example.document, resolve(example.variables, results, example))
                await wait_for_subscriptions(server.client, server.base_url, "workingMemoryChanged")
                open_subscription = (ws, example)
                continue
            variables = resolve(example.variables, results, example)
            body = await server.graphql(example.document, variables)
            assert "errors" not in body, f"{example} failed: {body['errors']}"
            assert body["data"], f"{example} returned no data: {body}"
            for key, value in body["data"].items():
                results[key] = value
                if key in CHECKS:
                    assert CHECKS[key](value), f"{example}: unexpected {key}: {value}"
                    checked.add(key)
            if open_subscription is not None:
                ws, subscribed = open_subscription
                kinds = await event_kinds_until(ws, SUBSCRIPTION_SEES[-1])
                assert kinds == SUBSCRIPTION_SEES, f"{subscribed} saw {kinds}"
                open_subscription = None
    assert checked == set(CHECKS), f"checks that no tour result reached: {set(CHECKS) - checked}"
    metrics = (await server.client.get("/metrics")).text
    assert 'provider="local"' in metrics, "the tour ran without the default embedder"


async def event_kinds_until(ws: GraphQLWS, last: str) -> list[str]:
    """The kinds of the subscription's events, up to the first of kind ``last``."""
    kinds: list[str] = []
    while not kinds or kinds[-1] != last:
        data = await ws.next_data(timeout=10)
        kinds.append(data["workingMemoryChanged"]["event"]["kind"])
    return kinds
