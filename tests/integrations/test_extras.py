"""One extra per framework adapter; the base install and import pull in none of them."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import requires

from packaging.requirements import Requirement

from tests.conftest import ROOT

FRAMEWORKS = {"openai-agents", "langgraph", "llama-index-core"}
EXTRAS = {
    "openai-agents": "openai-agents",
    "langgraph": "langgraph",
    "llama-index": "llama-index-core",
}


def requirements() -> list[Requirement]:
    return [Requirement(line) for line in requires("gql-memory") or []]


def test_the_base_install_requires_no_framework() -> None:
    base = {r.name for r in requirements() if r.marker is None}
    assert base, "the package metadata lists no base requirements"
    assert not base & FRAMEWORKS
    assert not any(name.startswith(("llama-index", "langchain", "langgraph")) for name in base)


def test_each_extra_installs_its_framework_with_a_lower_bound() -> None:
    for extra, package in EXTRAS.items():
        wanted = [r for r in requirements() if r.marker and r.marker.evaluate({"extra": extra})]
        assert [r.name for r in wanted] == [package], extra
        assert any(s.operator == ">=" for s in wanted[0].specifier), wanted[0]


def test_importing_the_package_imports_no_framework() -> None:
    code = (
        "import sys, gql_memory, gql_memory.cli, gql_memory.server.app, gql_memory.mcp_server; "
        "print(sorted({m.split('.')[0] for m in sys.modules} "
        "& {'agents', 'langgraph', 'langchain_core', 'llama_index'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
