"""Each adapter's page in docs/integrations/ shows an example; it runs here as written, with
the store pointed at this module's database (in a namespace of the test's own) instead of
a fresh embedded PostgreSQL, and, for the OpenAI Agents SDK, the page's `model` a scripted
one (no network)."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from agents import set_tracing_disabled

from gql_memory.config import Settings
from tests.conftest import ROOT
from tests.integrations.agents_model import ScriptedModel
from tests.test_readme import code_blocks

PAGES = ROOT / "docs" / "integrations"
EXPECTED = {
    "openai-agents": ("AsyncMemoryStore()", "I was sent 3 items; you said: What is my cat"),
    "langgraph": ("MemoryStore()", "Allergic to peanuts"),
    "llama-index": ("MemoryStore()", "My cat is called Miso"),
}


def example(page: str) -> str:
    return code_blocks((PAGES / f"{page}.md").read_text(), "python")[0][1]


@pytest.mark.parametrize("page", sorted(EXPECTED))
def test_the_example_of_each_page_runs(page: str, store_settings: Settings, namespace: str) -> None:
    constructor, printed = EXPECTED[page]
    code = example(page)
    assert constructor in code
    assert len(code.splitlines()) <= 25, "the page's example is meant to be short"
    # the settings object carries the module database's URL and the test's pool size
    code = code.replace(
        constructor,
        f"{constructor[:-1]}settings=settings, namespace={namespace!r}, migrate=False)",
        1,
    )
    set_tracing_disabled(True)
    scope: dict[str, Any] = {"__name__": "__example__", "settings": store_settings}
    scope["model"] = ScriptedModel()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"docs/integrations/{page}.md", "exec"), scope)
    assert printed in out.getvalue()


def test_every_adapter_has_its_page() -> None:
    assert {p.stem for p in PAGES.glob("*.md")} == set(EXPECTED)
