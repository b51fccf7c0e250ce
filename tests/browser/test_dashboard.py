"""The memory dashboard in a real browser that can reach 127.0.0.1 only, against a server
that requires API keys and runs only trusted documents (the dashboard's manifest, merged with
this module's own documents as an operator would merge their app's)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select
from selenium.webdriver.support.wait import WebDriverWait

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.keys import ApiKeyStore
from gql_memory.server.ui import DASHBOARD_MANIFEST
from tests.browser.conftest import console_errors, not_local, requests_sent, save_screenshot
from tests.browser.documents import manifest_for
from tests.conftest import LiveServer, private_temp_dir, serving, truncate_all

# The documents this module writes with (the dashboard only reads).
ADD = """mutation Add($s: String!, $c: String!, $i: Float!, $k: RefKind, $r: ID) {
  addWorkingMemory(input: {sessionId: $s, content: $c, importance: $i, refKind: $k, refId: $r}) {
    addedId
  }
}"""
TURN = """mutation Turn($s: String!, $c: String!) {
  storeRawDialogue(input: {sessionId: $s, speaker: "user", content: $c}) { id }
}"""
ACCESS = "mutation Access($id: ID!) { accessWorkingMemory(id: $id) { id } }"
ARCHIVE = "mutation Archive($id: ID!) { archiveWorkingMemory(id: $id) { id } }"
INSIGHT = "mutation Insight($c: String!) { addInsight(input: {content: $c}) { id } }"
CONSOLIDATE = "mutation Tidy { consolidate { actions { id } } }"
EDGE = """mutation Edge($r: String!, $sl: String!, $sn: String!, $tl: String!, $tn: String!) {
  addEdge(input: {relation: $r, source: {label: $sl, name: $sn},
                  target: {label: $tl, name: $tn}, createMissing: true}) { sourceId targetId }
}"""
CAPACITY = 6
CONNECT_S = 60  # a hang guard: the first load of the page and its streams, on a busy machine
# A live update reaches the page over its open stream (the page never polls): the wait is a
# hang guard, not a latency bound. How fast events arrive is measured by bench/fanout.py.
LIVE_S = 60


@pytest.fixture(scope="module")
def trusted_manifest() -> Iterator[Path]:
    """The dashboard's manifest merged with this module's documents."""
    root = private_temp_dir()
    documents = json.loads(DASHBOARD_MANIFEST.read_text(encoding="utf-8"))
    documents |= manifest_for(
        {
            "ADD": ADD,
            "TURN": TURN,
            "ACCESS": ACCESS,
            "ARCHIVE": ARCHIVE,
            "INSIGHT": INSIGHT,
            "CONSOLIDATE": CONSOLIDATE,
            "EDGE": EDGE,
        }
    )
    path = root / "trusted-documents.json"
    path.write_text(json.dumps(documents), encoding="utf-8")
    yield path
    shutil.rmtree(root, ignore_errors=True)


@pytest_asyncio.fixture(scope="module")
async def trusted_live(settings: Settings, trusted_manifest: Path) -> AsyncIterator[LiveServer]:
    trusted = settings.with_overrides(
        auth="required",
        trusted_documents=trusted_manifest,
        trusted_documents_only=True,
        working_memory_capacity=CAPACITY,
    )
    async with serving(trusted) as server:
        yield server


@pytest_asyncio.fixture
async def operator(
    trusted_live: LiveServer, db: Database, key_store: ApiKeyStore
) -> tuple[LiveServer, str]:
    """The server on an emptied database with a writer's key attached, and the read-only key
    of the same namespace that the dashboard is given (it only reads)."""
    await truncate_all(db)
    writer = (await key_store.create("demo", "read,write")).secret
    reader = (await key_store.create("demo", "read")).secret
    return trusted_live.with_key(writer), reader


def connect(driver: WebDriver, base_url: str, key: str) -> None:
    """The dashboard open, the key entered, both its subscriptions live."""
    driver.get(f"{base_url}/dashboard")
    field = WebDriverWait(driver, CONNECT_S).until(lambda d: d.find_element(By.ID, "api-key"))
    field.clear()
    field.send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "#key-form button[type=submit]").click()
    WebDriverWait(driver, CONNECT_S, poll_frequency=0.05).until(
        lambda d: d.find_element(By.ID, "live-status").get_attribute("data-state") == "live"
    )


def texts(driver: WebDriver, selector: str, attribute: str = "textContent") -> list[str]:
    """An attribute of every element ``selector`` matches, read at once (the views re-render
    as events arrive, so elements found one call earlier may be gone)."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((e) => e[arguments[1]] ??"
        " e.getAttribute(arguments[1]));",
        selector,
        attribute,
    )


def shown_items(driver: WebDriver) -> list[str]:
    """Ids of the working-memory rows of the focused session."""
    return texts(driver, "#working-items tr.item", "data-id")


async def test_an_item_added_through_the_api_appears_live(
    browser: WebDriver, operator: tuple[LiveServer, str]
) -> None:
    api, key = operator
    await asyncio.to_thread(connect, browser, api.base_url, key)

    added = await api.data(ADD, {"s": "default", "c": "Ship the dashboard", "i": 0.9})
    item_id = added["addWorkingMemory"]["addedId"]

    await asyncio.to_thread(
        WebDriverWait(browser, LIVE_S, poll_frequency=0.02).until,
        lambda d: item_id in shown_items(d),
    )
    assert key not in browser.current_url
    assert browser.execute_script("return sessionStorage.getItem('gql-memory.apiKey')") == key
    sent = requests_sent(browser)
    assert not not_local(sent)
    operations = [json.loads(r["body"]) for r in sent if r["url"].endswith("/graphql")]
    assert operations and all(
        set(operation) == {"documentId", "variables"} for operation in operations
    )
    assert all(r["url"].find(key) < 0 for r in sent)
    assert not console_errors(browser)


async def seed(api: LiveServer) -> dict[str, Any]:
    """A namespace worth looking at: three sessions (one over capacity), archived items,
    insights, a small graph, and working-memory items that boost search hits."""

    async def add(session: str, content: str, importance: float, **ref: Any) -> str:
        variables = {"s": session, "c": content, "i": importance, **ref}
        return (await api.data(ADD, variables))["addWorkingMemory"]["addedId"]

    insights = []
    for content in (
        "Ada deploys gql-memory to eu-west-1 every Friday",
        "The eu-west-1 deploy needs the pgvector extension enabled",
        "Deploys are rolled back when the health check fails twice",
        "Ada prefers concise answers with the code first",
    ):
        insights.append((await api.data(INSIGHT, {"c": content}))["addInsight"]["id"])
    # stored twice: consolidation merges the second into the first
    await api.data(INSIGHT, {"c": "Ada prefers concise answers with the code first"})
    await api.data(CONSOLIDATE)
    edges = [
        ("works_on", "Person", "Ada", "Project", "gql-memory"),
        ("runs_on", "Project", "gql-memory", "Database", "PostgreSQL"),
        ("extended_by", "Database", "PostgreSQL", "Extension", "pgvector"),
        ("deployed_to", "Project", "gql-memory", "Region", "eu-west-1"),
        ("reviews", "Person", "Grace", "Project", "gql-memory"),
    ]
    node_ids = {}
    for relation, source_label, source, target_label, target in edges:
        variables = {"r": relation, "sl": source_label, "sn": source, "tl": target_label}
        edge = (await api.data(EDGE, {**variables, "tn": target}))["addEdge"]
        node_ids[source], node_ids[target] = edge["sourceId"], edge["targetId"]

    await add("default", "Check the health check thresholds", 0.3)
    await add("default", "User prefers concise answers", 0.5)
    await add("default", "Ada is reviewing the deploy", 0.6, k="NODE", r=node_ids["Ada"])
    deploy = await add("default", "Deploy to eu-west-1 on Friday", 0.7, k="INSIGHT", r=insights[0])
    await add("default", "Ship the dashboard for issue 15", 0.9)
    for turn in ("When is the next deploy?", "Friday, to eu-west-1."):
        await api.data(TURN, {"s": "default", "c": turn})
    await api.data(ACCESS, {"id": deploy})

    research = [
        await add("research", f"Paper {n}: {topic}", 0.4 + n / 20)
        for n, topic in enumerate(
            [
                "RRF versus DBSF fusion",
                "event-based decay",
                "graph propagation",
                "HNSW recall at 100k",
                "text search under RLS",
                "episodic memory",
                "working-memory capacity",
                "causal boosts",
            ]
        )
    ]
    await api.data(ARCHIVE, {"id": research[-1]})
    await add("support", "Customer asks for an export", 0.5)
    await add("support", "Export runs nightly", 0.4)
    await api.data(TURN, {"s": "support", "c": "Can I export my memories?"})
    return {"centre": node_ids["gql-memory"]}


async def test_the_dashboard_shows_sessions_stale_memory_search_and_the_graph(
    browser: WebDriver, operator: tuple[LiveServer, str]
) -> None:
    api, key = operator
    seeded = await seed(api)

    def scenario() -> dict[str, Any]:
        connect(browser, api.base_url, key)
        wait = WebDriverWait(browser, CONNECT_S, poll_frequency=0.05)
        sessions = wait.until(lambda d: session_fills(d) if len(session_fills(d)) == 3 else None)
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#stale-items tr[data-id]")))
        reasons = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#stale-items .reason")]
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#consolidation-actions tr[data-id]"))
        consolidated = texts(browser, "#consolidation-actions tr[data-id] td")
        Select(browser.find_element(By.ID, "graph-node")).select_by_value(seeded["centre"])
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#graph-canvas .node")) >= 5)
        graph = texts(browser, "#graph-canvas .node .label")
        query = browser.find_element(By.CSS_SELECTOR, "#search-form input[name=query]")
        query.send_keys("deploy eu-west-1")
        browser.find_element(By.CSS_SELECTOR, "#search-form button[type=submit]").click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#search-results .hit")) >= 2)
        explanation = texts(browser, "#search-results .hit:first-child dt")
        save_screenshot(browser, "dashboard", full_page=True)
        return {
            "sessions": sessions,
            "reasons": reasons,
            "consolidated": consolidated,
            "graph": graph,
            "explanation": explanation,
        }

    shown = await asyncio.to_thread(scenario)
    assert shown["sessions"] == {
        "default": f"5/{CAPACITY}",
        "research": f"{CAPACITY - 1}/{CAPACITY}",
        "support": f"2/{CAPACITY}",
    }
    assert sorted(shown["reasons"]) == ["archived", "evicted (capacity)", "evicted (capacity)"]
    assert shown["consolidated"][0] == "merged"
    assert "merged into insight" in shown["consolidated"][1]
    assert {"gql-memory", "Ada", "PostgreSQL", "pgvector", "eu-west-1"} <= set(shown["graph"])
    assert shown["explanation"] == [
        "vector rank",
        "text rank",
        "RRF",
        "fused",
        "graph boost",
        "session boost",
        "causal boost",
        "final",
    ]
    # another session changes: memoryEvents tells the page, which refetches that session
    await api.data(ADD, {"s": "support", "c": "Export sent", "i": 0.5})
    await asyncio.to_thread(
        WebDriverWait(browser, LIVE_S, poll_frequency=0.02).until,
        lambda d: session_fills(d).get("support") == f"3/{CAPACITY}",
    )
    assert not not_local(requests_sent(browser))
    assert not console_errors(browser)


def session_fills(driver: WebDriver) -> dict[str, str]:
    """Session -> "n/capacity" as the session list shows it (read at once)."""
    return driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#session-list .session')]"
        ".map((s) => [s.querySelector('button').textContent,"
        " s.querySelector('.count').textContent]));"
    )


# --- where no key is needed: a loopback server with API keys optional (the default) --------

TRIP = """mutation Trip($s: String!, $a: String!, $b: String!, $c: String!) {
  storeRawDialogueBatch(input: [
    {sessionId: $s, speaker: "user", content: $a},
    {sessionId: $s, speaker: "assistant", content: $b},
    {sessionId: $s, speaker: "user", content: $c}
  ]) { id }
}"""
TRIP_TURNS = {
    "a": "I am planning a trip to Berlin in May with Caroline.",
    "b": "Great! Should I look for a hotel near Museum Island?",
    "c": "Yes please. Caroline is vegetarian, so we need a restaurant.",
}
NOTE = """mutation Note($s: String!, $c: String!) {
  addWorkingMemory(input: {sessionId: $s, content: $c}) { addedId }
}"""
CAPTION = "user: I am planning a trip…"


@pytest_asyncio.fixture(scope="module")
async def local_live(settings: Settings) -> AsyncIterator[LiveServer]:
    """The server as `make serve` runs it for this machine: API keys optional on 127.0.0.1."""
    async with serving(settings.with_overrides(working_memory_capacity=CAPACITY)) as server:
        yield server


def open_dashboard(driver: WebDriver, base_url: str) -> None:
    """The dashboard opened, nothing typed: it connects by itself, both streams live."""
    driver.get(f"{base_url}/dashboard")
    WebDriverWait(driver, CONNECT_S, poll_frequency=0.05).until(
        lambda d: d.find_element(By.ID, "live-status").get_attribute("data-state") == "live"
    )


# Relation labels that cover a node's circle (client rectangles, 1 px of tolerance).
COVERED = """
const inner = (e) => { const r = e.getBoundingClientRect();
  return {l: r.left + 1, r: r.right - 1, t: r.top + 1, b: r.bottom - 1}; };
const circles = [...document.querySelectorAll('#graph-canvas .node circle')].map(inner);
return [...document.querySelectorAll('#graph-canvas .relation')].filter((label) => {
  const a = inner(label);
  return circles.some((c) => a.l < c.r && c.l < a.r && a.t < c.b && c.t < a.b);
}).map((label) => label.textContent);
"""


async def test_the_dashboard_connects_by_itself_where_no_key_is_needed(
    browser: WebDriver, local_live: LiveServer, db: Database
) -> None:
    await truncate_all(db)
    await local_live.data(NOTE, {"s": "default", "c": "An older note"})
    await local_live.data(TRIP, {"s": "trip", **TRIP_TURNS})
    await local_live.data(NOTE, {"s": "trip", "c": "Book a vegetarian restaurant"})
    await local_live.data(INSIGHT, {"c": "Caroline is vegetarian and travels to Berlin in May"})
    caroline = await local_live.data('{ nodeByName(label: "Entity", name: "Caroline") { id } }')

    def scenario() -> dict[str, Any]:
        open_dashboard(browser, local_live.base_url)
        wait = WebDriverWait(browser, CONNECT_S, poll_frequency=0.05)
        # the most recently active session, not the empty default
        wait.until(lambda d: d.find_element(By.ID, "focused-session").text == "trip")
        wait.until(lambda d: len(shown_items(d)) == 1)
        centre = caroline["nodeByName"]["id"]
        wait.until(lambda d: centre in texts(d, "#graph-node option", "value"))
        Select(browser.find_element(By.ID, "graph-node")).select_by_value(centre)
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#graph-canvas .node")) >= 6)
        save_screenshot(browser, "dashboard-local", full_page=True)
        return {
            "message": browser.find_element(By.ID, "message").is_displayed(),
            "key": browser.execute_script("return sessionStorage.getItem('gql-memory.apiKey')"),
            "captions": texts(browser, "#graph-canvas .node .label"),
            "legend": texts(browser, "#graph-legend li"),
            "covered": browser.execute_script(COVERED),
            "options": texts(browser, "#graph-node option"),
        }

    shown = await asyncio.to_thread(scenario)
    assert not shown["message"]
    assert shown["key"] is None  # nothing was typed or kept
    assert CAPTION in shown["captions"], shown["captions"]
    assert "Caroline" in shown["captions"]
    assert not [c for c in shown["captions"] if c.isdigit()], shown["captions"]  # no bare ids
    assert any(item.startswith("Entity (") for item in shown["legend"]), shown["legend"]
    assert any(item.startswith("Turn (") for item in shown["legend"]), shown["legend"]
    assert shown["covered"] == [], shown["covered"]
    assert f"Turn: {CAPTION}" in shown["options"]

    # a stored turn graphs itself (a Turn node, automatically): the node list follows
    await local_live.data(TURN, {"s": "trip", "c": "Dinner with Bob at Tegel on Friday"})
    await asyncio.to_thread(
        WebDriverWait(browser, LIVE_S, poll_frequency=0.05).until,
        lambda d: "Turn: user: Dinner with Bob at Tegel…" in texts(d, "#graph-node option"),
    )
    sent = requests_sent(browser)
    assert not not_local(sent)
    # the dashboard's documents are known without GQL_MEMORY_TRUSTED_DOCUMENTS: ids only
    operations = [json.loads(r["body"]) for r in sent if r["url"].endswith("/graphql")]
    assert operations and all("documentId" in operation for operation in operations)
    assert not console_errors(browser)


def header_count(driver: WebDriver, name: str) -> str | None:
    """A count of the header (``sessions``, ``insights`` ...) as the page shows it (read at
    once: the header re-renders as events arrive)."""
    counts = driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#stats div')].map((d) =>"
        " [d.querySelector('dt').textContent, d.querySelector('dd').textContent]));"
    )
    return counts.get(name)


async def test_the_session_list_and_the_header_count_the_same_sessions(
    browser: WebDriver, local_live: LiveServer, db: Database
) -> None:
    """A new namespace lists no session (not an empty "default"), nor one watched while it is
    empty; once sessions hold something, the list shows them and the header counts them."""
    await truncate_all(db)

    def fresh() -> dict[str, Any]:
        open_dashboard(browser, local_live.base_url)
        wait = WebDriverWait(browser, CONNECT_S, poll_frequency=0.05)
        wait.until(lambda d: header_count(d, "sessions") is not None)
        field = browser.find_element(By.ID, "watch-session")
        field.send_keys("chat-42")
        browser.find_element(By.CSS_SELECTOR, "#watch-form button[type=submit]").click()
        wait.until(lambda d: d.find_element(By.ID, "focused-session").text == "chat-42")
        save_screenshot(browser, "dashboard-empty")
        return {
            "sessions": session_fills(browser),
            "list": texts(browser, "#session-list li"),
            "count": header_count(browser, "sessions"),
        }

    shown = await asyncio.to_thread(fresh)
    assert shown == {"sessions": {}, "list": ["No sessions yet"], "count": "0"}

    # dialogue in two sessions, an item archived from a third: three sessions hold something
    await local_live.data(TURN, {"s": "chat-42", "c": "My cat is called Miso"})
    await local_live.data(TURN, {"s": "agent-7", "c": "Book a trip to Berlin"})
    item = await local_live.data(NOTE, {"s": "notes", "c": "Passport expires in June"})
    await local_live.data(ARCHIVE, {"id": item["addWorkingMemory"]["addedId"]})

    listed = {session: f"0/{CAPACITY}" for session in ("agent-7", "chat-42", "notes")}

    def filled() -> dict[str, Any]:
        wait = WebDriverWait(browser, LIVE_S, poll_frequency=0.05)
        wait.until(lambda d: header_count(d, "stale") == "1" and session_fills(d) == listed)
        save_screenshot(browser, "dashboard-sessions")
        return {"sessions": session_fills(browser), "count": header_count(browser, "sessions")}

    assert await asyncio.to_thread(filled) == {"sessions": listed, "count": "3"}
    assert not console_errors(browser)


async def test_where_a_key_is_needed_the_page_says_so(
    browser: WebDriver, operator: tuple[LiveServer, str]
) -> None:
    api, _ = operator

    def scenario() -> dict[str, Any]:
        browser.get(f"{api.base_url}/dashboard")  # a key kept by an earlier test: forgotten
        browser.execute_script("sessionStorage.clear();")
        browser.get(f"{api.base_url}/dashboard")
        requests_sent(browser)
        browser.get_log("browser")
        message = WebDriverWait(browser, CONNECT_S, poll_frequency=0.05).until(
            lambda d: (
                d.find_element(By.ID, "message")
                if d.find_element(By.ID, "message").is_displayed()
                else None
            )
        )
        return {
            "message": message.text,
            "state": browser.find_element(By.ID, "live-status").get_attribute("data-state"),
        }

    shown = await asyncio.to_thread(scenario)
    assert shown["message"].startswith("This server needs an API key from this browser.")
    assert shown["state"] == "off"
    # nothing was sent without a key that could be refused (a 401 is a console error)
    assert not [r for r in requests_sent(browser) if r["url"].endswith("/graphql")]
    assert not console_errors(browser)
