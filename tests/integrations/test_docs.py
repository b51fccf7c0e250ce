"""Each adapter has its page in docs/integrations/. Their examples run as pasted in
tests/test_docs_examples.py, except the OpenAI Agents SDK's, which needs OpenAI's model (its
``# needs:`` line): it runs here with the page's model a scripted one (no network), and
the store pointed at this module's database, in a namespace of the test's own."""

from __future__ import annotations

import contextlib
import io
from typing import Any

from agents import set_tracing_disabled

from gql_memory.config import Settings
from tests.conftest import ROOT
from tests.integrations.agents_model import ScriptedModel
from tests.test_readme import code_blocks

PAGES = ROOT / "docs" / "integrations"
ADAPTERS = {"openai-agents", "langgraph", "llama-index"}


def example(page: str) -> str:
    return code_blocks((PAGES / f"{page}.md").read_text(), "python")[0][1]


def test_the_openai_agents_example_runs_with_a_scripted_model(
    store_settings: Settings, namespace: str
) -> None:
    code = example("openai-agents")
    assert code.startswith("# needs: an OpenAI API key")
    assert len(code.splitlines()) <= 25, "the page's example is meant to be short"
    constructor, model = 'AsyncMemoryStore(namespace="agents-demo")', 'model="gpt-5-mini"'
    assert constructor in code and model in code
    # the settings object carries the module database's URL and the test's pool size
    code = code.replace(
        constructor,
        f"AsyncMemoryStore(settings=settings, namespace={namespace!r}, migrate=False)",
        1,
    ).replace(model, "model=model", 1)
    set_tracing_disabled(True)
    scope: dict[str, Any] = {"__name__": "__example__", "settings": store_settings}
    scope["model"] = ScriptedModel()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/integrations/openai-agents.md", "exec"), scope)
    assert "I was sent 3 items; you said: What is my cat" in out.getvalue()


def test_every_adapter_has_its_page() -> None:
    assert {p.stem for p in PAGES.glob("*.md")} == ADAPTERS
