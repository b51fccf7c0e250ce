"""Every ```python example of README.md and docs/ runs as a reader pastes it.

Each example runs as a script of its own, in a fresh data dir (``GQL_MEMORY_DATA_DIR``) with
the suite's network-free embedder (``GQL_MEMORY_EMBEDDING_PROVIDER=hash``): nothing else a
reader could not see. One ``gql-memory serve`` holds that data dir's embedded PostgreSQL for
the whole module, so the examples attach to a running server instead of each starting one,
and the examples that talk to a server over HTTP talk to it.

The marker convention: an example that needs something the reader must bring says so in its
first line, ``# needs: <what>``. The test provides one need itself, a running server
(``NEEDS_A_SERVER``, reached at the example's ``http://127.0.0.1:8000`` on the test's port);
an example that needs anything else (a model, an API key) is not run, and its marker is what
the test checks. An example that is neither marked nor runnable fails. Examples that open a
store name a namespace of their own, so that they never read each other's memories.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import ROOT, private_temp_dir
from tests.processes import ServeProcess
from tests.test_readme import code_blocks

NEEDS = "# needs: "
NEEDS_A_SERVER = "a running server (gql-memory serve)"
EXAMPLE_SERVER = "http://127.0.0.1:8000"  # where the examples reach a server
EXTRA = re.compile(r"gql-memory\[([\w,-]+)\]")
NAMESPACE = re.compile(r"""namespace=(["'])(.+?)\1""")
# What some pages' examples print, to show they did what they say (not only exited 0).
PRINTS = {
    "docs/library.md": ["Importance must be <= 1.0", "your LLM's answer"],
    "docs/extraction.md": ["True grep-error"],
    "docs/api.md": ["your LLM's answer"],
    "docs/integrations/langgraph.md": ["Allergic to peanuts"],
    "docs/integrations/llama-index.md": ["My cat is called Miso"],
}


@dataclass(frozen=True)
class Example:
    """One ```python block of a page."""

    page: str  # relative to the repository, e.g. docs/library.md
    line: int
    code: str

    @property
    def needs(self) -> str | None:
        """What its ``# needs:`` first line says it needs, or None."""
        first = self.code.lstrip("\n").split("\n", 1)[0]
        return first.removeprefix(NEEDS).strip() if first.startswith(NEEDS) else None

    @property
    def runnable(self) -> bool:
        return self.needs in (None, NEEDS_A_SERVER)

    def __str__(self) -> str:
        return f"{self.page} line {self.line}"


def pages() -> list[Path]:
    """README.md and every page under docs/, new ones included."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def examples_of(page: Path) -> list[Example]:
    name = page.relative_to(ROOT).as_posix()
    return [Example(name, line, code) for line, code in code_blocks(page.read_text(), "python")]


EXAMPLES = [example for page in pages() for example in examples_of(page)]
PAGES_WITH_EXAMPLES = sorted({example.page for example in EXAMPLES})


@pytest.fixture(scope="module")
def server() -> Iterator[ServeProcess]:
    """`gql-memory serve` on a fresh data dir; it keeps the embedded PostgreSQL running."""
    root = private_temp_dir()
    process = ServeProcess(data_dir=root / "data", env={"PYTHONPATH": str(ROOT)})
    try:
        yield process.start()
    finally:
        process.stop()
        shutil.rmtree(root, ignore_errors=True)


def reader_environment(data_dir: Path) -> dict[str, str]:
    """A reader's environment: no settings of ours, no keys, the fresh data dir and the
    network-free embedder."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("GQL_MEMORY_", "OPENAI_")) and name != "DATABASE_URL"
    }
    env["GQL_MEMORY_DATA_DIR"] = str(data_dir)
    env["GQL_MEMORY_EMBEDDING_PROVIDER"] = "hash"
    env["PYTHONPATH"] = str(ROOT)  # this checkout's gql_memory, not an installed one
    return env


def run(example: Example, server: ServeProcess) -> str:
    """Run ``example`` as a script; its output, or a failure saying what went wrong."""
    code = example.code
    if example.needs == NEEDS_A_SERVER:
        assert EXAMPLE_SERVER in code, (
            f"{example}: needs a server but never reaches {EXAMPLE_SERVER}"
        )
        code = code.replace(EXAMPLE_SERVER, server.base_url)
    # a name no import can mean (a script called langgraph.py would shadow the package)
    script = server.data_dir.parent / f"example-{Path(example.page).stem}-{example.line}.py"
    script.write_text(code)
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=script.parent,
        env=reader_environment(server.data_dir),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (
        f"{example} fails as pasted; fix it, or mark what it needs in its first line "
        f"({NEEDS}<what>):\n{result.stderr[-3000:]}"
    )
    return result.stdout


@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES)
def test_every_example_runs_as_pasted_or_says_what_it_needs(
    page: str, server: ServeProcess
) -> None:
    printed = "".join(
        run(example, server) for example in EXAMPLES if example.page == page and example.runnable
    )
    missing = [text for text in PRINTS.get(page, []) if text not in printed]
    assert not missing, f"{page}: its examples did not print {missing}:\n{printed[-3000:]}"


def test_the_examples_that_are_not_run_only_need_what_a_reader_brings() -> None:
    """A model or a key; anything the test could provide, it runs."""
    marked = {str(example): example.needs or "" for example in EXAMPLES if not example.runnable}
    assert all("model" in needs or "key" in needs for needs in marked.values()), marked


@pytest.mark.parametrize("example", EXAMPLES, ids=str)
def test_every_example_compiles_and_names_nothing_undefined(example: Example) -> None:
    """Also the examples not run: a name the reader never defined (``model``) fails here."""
    compile(example.code, str(example), "exec")  # top-level await, syntax
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run(
        [str(ruff), "check", "--select", "F821,F822,F823", "--stdin-filename", "example.py", "-"],
        input=example.code,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"{example}:\n{result.stdout}"


def test_every_example_that_opens_a_store_has_a_namespace_of_its_own() -> None:
    """So that no example reads another's memories in a shared data dir."""
    owners: dict[str, str] = {}
    for example in EXAMPLES:
        if "MemoryStore(" not in example.code:
            continue
        names = {match.group(2) for match in NAMESPACE.finditer(example.code)}
        assert names, f"{example} opens a store without naming its namespace"
        for name in names:
            assert name not in owners, f"{example} and {owners[name]} share namespace {name!r}"
            owners[name] = str(example)


@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES)
def test_the_extras_a_page_names_are_installed(page: str) -> None:
    """The examples run with what the page tells the reader to install."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    named = {
        extra for group in EXTRA.findall((ROOT / page).read_text()) for extra in group.split(",")
    }
    for extra in sorted(named):
        assert extra in extras, f"{page} names the extra {extra!r}; pyproject.toml has not"
        for requirement in map(Requirement, extras[extra]):
            try:
                installed = version(requirement.name)
            except PackageNotFoundError:
                pytest.fail(f"{page}: {requirement.name} (extra {extra!r}) is not installed")
            assert requirement.specifier.contains(installed, prereleases=True), (
                f"{page}: {requirement.name} {installed} does not satisfy {requirement}"
            )
