"""GraphiQL in a real browser that can reach 127.0.0.1 only: the page, its bundles and its
requests all come from the server; the key goes in the headers editor, queries run over HTTP
and subscriptions over graphql-transport-ws."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from gql_memory.keys import ApiKeyStore
from tests.browser.conftest import console_errors, not_local, requests_sent, save_screenshot
from tests.conftest import LiveServer

ADD = (
    "mutation Add($c: String!) { addWorkingMemory(input: {content: $c, importance: 0.6}) "
    "{ addedId } }"
)
STATS = "{ stats { workingMemory } }"
WATCH = "subscription { workingMemoryChanged { event { kind } items { content } } }"
# GraphiQL fetches the schema as it loads, before the key is in its headers editor
UNAUTHENTICATED = "the server responded with a status of 401"
LOAD_S = 60  # a hang guard: the first load parses 1.5 MB of GraphiQL on a busy machine
RESULT_S = 30


def editor(driver: WebDriver, selector: str) -> Any:
    """The CodeMirror editor inside the element ``selector``, as a JavaScript handle."""
    return driver.execute_script(
        "return document.querySelector(arguments[0] + ' .CodeMirror');", selector
    )


def set_editor(driver: WebDriver, selector: str, text: str) -> None:
    driver.execute_script(
        "document.querySelector(arguments[0] + ' .CodeMirror').CodeMirror.setValue(arguments[1]);",
        selector,
        text,
    )


def result_text(driver: WebDriver) -> str:
    return driver.execute_script(
        "const e = document.querySelector('.graphiql-response .CodeMirror');"
        "return e ? e.CodeMirror.getValue() : '';"
    )


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def open_graphiql(driver: WebDriver, base_url: str, key: str) -> None:
    """GraphiQL loaded, the key in its headers editor."""
    driver.get(f"{base_url}/graphql")
    wait = WebDriverWait(driver, LOAD_S, poll_frequency=0.05)
    wait.until(lambda d: editor(d, ".graphiql-query-editor"))
    driver.find_element(By.CSS_SELECTOR, ".graphiql-editor-tools button[data-name=headers]").click()
    headers = ".graphiql-editor-tool[aria-label=Headers]"
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, headers))
    # the variables editor stays in the section, hidden
    set_editor(driver, f"{headers} .graphiql-editor:not(.hidden)", json.dumps(bearer(key)))


def run_query(driver: WebDriver, query: str, expect: str) -> str:
    """Runs ``query`` with the play button; the result pane's text once it shows ``expect``."""
    set_editor(driver, ".graphiql-query-editor", query)
    driver.find_element(By.CSS_SELECTOR, ".graphiql-execute-button").click()
    try:
        WebDriverWait(driver, RESULT_S, poll_frequency=0.05).until(
            lambda d: expect in result_text(d)
        )
    except TimeoutException:
        raise AssertionError(f"the result pane shows {result_text(driver)!r}") from None
    return result_text(driver)


async def test_graphiql_runs_a_query_with_the_network_blocked(
    browser: WebDriver, secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    key = (await key_store.create("graphiql", "read,write")).secret
    for content in ("User prefers concise answers", "Deploy target is eu-west-1"):
        await secure_api.with_key(key).data(ADD, {"c": content})

    def scenario() -> str:
        open_graphiql(browser, secure_api.base_url, key)
        shown = run_query(browser, STATS, '"workingMemory"')
        save_screenshot(browser, "graphiql")
        return shown

    shown = await asyncio.to_thread(scenario)
    assert json.loads(shown)["data"] == {"stats": {"workingMemory": 2}}
    sent = requests_sent(browser)
    assert not not_local(sent)
    assert any(r["url"].endswith("/graphiql/vendor/graphiql-3.8.3/graphiql.min.js") for r in sent)
    assert not console_errors(browser, expected=UNAUTHENTICATED)


async def test_graphiql_subscription_runs_over_graphql_transport_ws(
    browser: WebDriver, secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    """The headers editor's key authenticates the WebSocket (its connection_init payload)."""
    key = (await key_store.create("graphiql-ws", "read,write")).secret
    await asyncio.to_thread(open_graphiql, browser, secure_api.base_url, key)

    def start_subscription() -> None:
        set_editor(browser, ".graphiql-query-editor", WATCH)
        # GraphiQL picks the transport from the document it parsed after the edit
        WebDriverWait(browser, RESULT_S, poll_frequency=0.05).until(
            lambda d: (
                d.execute_script(
                    "const cm = document.querySelector('.graphiql-query-editor .CodeMirror');"
                    "return cm.CodeMirror.documentAST?.definitions[0]?.operation;"
                )
                == "subscription"
            )
        )
        browser.find_element(By.CSS_SELECTOR, ".graphiql-execute-button").click()

    await asyncio.to_thread(start_subscription)
    # the socket may still be connecting: add until an event shows (bounded)
    for i in range(50):
        await secure_api.with_key(key).data(ADD, {"c": f"watched {i}"})
        try:
            await asyncio.to_thread(
                WebDriverWait(browser, 0.2, poll_frequency=0.05).until,
                lambda d: '"ADDED"' in result_text(d),
            )
            break
        except TimeoutException:  # not shown yet
            continue
    shown = json.loads(await asyncio.to_thread(result_text, browser))
    assert "data" in shown, shown
    change = shown["data"]["workingMemoryChanged"]
    assert change["event"]["kind"] == "ADDED"
    assert change["items"][0]["content"].startswith("watched")
    sockets = [r["url"] for r in requests_sent(browser) if r["method"] == "WEBSOCKET"]
    assert sockets and all(url.startswith("ws://127.0.0.1:") for url in sockets)
    assert not console_errors(browser, expected=UNAUTHENTICATED)


STORED = "return JSON.stringify(Object.assign({}, window[arguments[0]]));"


async def test_graphiql_keeps_the_key_in_this_tab_only(
    browser: WebDriver, secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    """The headers (with the key) persist in sessionStorage, gone with the tab; localStorage,
    which outlives it, never holds the key (nor does the history GraphiQL keeps there)."""
    key = (await key_store.create("graphiql-tab", "read")).secret

    def scenario() -> str:
        open_graphiql(browser, secure_api.base_url, key)
        run_query(browser, STATS, '"workingMemory"')
        WebDriverWait(browser, RESULT_S, poll_frequency=0.05).until(
            lambda d: key in d.execute_script(STORED, "sessionStorage")
        )
        return browser.execute_script(STORED, "localStorage")

    assert key not in await asyncio.to_thread(scenario)


QUERY_EDITOR = "document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror"


def welcome(driver: WebDriver, base_url: str) -> dict[str, Any]:
    """GraphiQL opened afresh (no query kept from an earlier visit): its editor's first text,
    and whether that text is wider than the editor."""
    driver.get(f"{base_url}/graphql")
    driver.execute_script("sessionStorage.clear(); localStorage.clear();")
    driver.get(f"{base_url}/graphql")
    WebDriverWait(driver, LOAD_S, poll_frequency=0.05).until(
        lambda d: editor(d, ".graphiql-query-editor")
    )
    return driver.execute_script(
        f"const cm = {QUERY_EDITOR};"
        "const scroll = cm.getScrollInfo();"
        "return {text: cm.getValue(), overflows: scroll.width > scroll.clientWidth + 1};"
    )


async def test_graphiql_welcome_says_no_key_is_needed_where_none_is(
    browser: WebDriver, live: LiveServer
) -> None:
    def scenario() -> dict[str, Any]:
        shown = welcome(browser, live.base_url)
        save_screenshot(browser, "graphiql-welcome")
        return shown

    shown = await asyncio.to_thread(scenario)
    assert "No API key is needed from this machine" in shown["text"]
    assert "Headers tab" not in shown["text"]
    assert not shown["overflows"], shown["text"]
    assert not console_errors(browser)


async def test_graphiql_welcome_asks_for_a_key_where_one_is_needed(
    browser: WebDriver, secure_api: LiveServer
) -> None:
    shown = await asyncio.to_thread(welcome, browser, secure_api.base_url)
    assert "This server needs an API key from you" in shown["text"]
    assert '{"Authorization": "Bearer gqlm_..."}' in shown["text"]
    assert not shown["overflows"], shown["text"]
