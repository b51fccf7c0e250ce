"""The README and its reference pages in docs/ stay true: every setting and every operation
is documented with an example, every GraphQL example is valid against the schema, and every
link resolves.

The README's tour is run against a live server by tests/test_readme_tour.py, every Python
example of the docs by tests/test_docs_examples.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLError,
    GraphQLSchema,
    OperationDefinitionNode,
    parse,
    validate,
)

from gql_memory.api.schema import build_schema
from gql_memory.config import Settings
from tests.conftest import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
# The pages of the README's "Documentation" table that hold the reference moved out of it.
REFERENCE = ["api", "library", "mcp", "extraction", "embeddings", "configuration"]
REFERENCE += ["operations", "security"]
PAGES = [README, *(DOCS / f"{name}.md" for name in REFERENCE)]
# Link targets that other work is still producing; once one exists, remove it here
# (the link check then holds it to the same rule as every other link).
PENDING: set[str] = set()
LONG_PAGE_LINES = 150


def code_blocks(text: str, language: str) -> list[tuple[int, str]]:
    """(line number, body) of every fenced block of ``language``, indented ones included."""
    blocks = []
    fence = re.compile(rf"^( *)```{language}\n(.*?)^\1```", re.S | re.M)
    for match in fence.finditer(text):
        indent = len(match.group(1))
        body = "\n".join(line[indent:] for line in match.group(2).splitlines())
        blocks.append((text.count("\n", 0, match.start()) + 1, body))
    return blocks


def headings(text: str, level: int) -> list[str]:
    """The headings of ``level`` outside code blocks."""
    outside = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.findall(rf"^{'#' * level} (.+)$", outside, re.M)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    return {anchor(h) for level in range(1, 5) for h in headings(text, level)}


# --- settings ------------------------------------------------------------------------------


def environment_name(name: str, field: Any) -> str:
    """The variable a setting is read from: its alias if it has one, else GQL_MEMORY_<NAME>."""
    alias = field.validation_alias
    if alias is not None:
        return str(alias.choices[0])
    return f"GQL_MEMORY_{name.upper()}"


def test_every_setting_is_documented() -> None:
    reference = (DOCS / "configuration.md").read_text()
    tables = "\n".join(line for line in reference.splitlines() if line.startswith("| `"))
    missing = [
        environment_name(name, field)
        for name, field in Settings.model_fields.items()
        if f"`{environment_name(name, field)}`" not in tables
    ]
    assert not missing, f"settings docs/configuration.md does not document: {missing}"


# --- GraphQL examples ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def schema() -> GraphQLSchema:
    return build_schema()._schema  # type: ignore[no-any-return]


def operations(document: DocumentNode) -> list[DocumentNode]:
    """Each operation of a document on its own (a block may show several)."""
    return [
        DocumentNode(definitions=(definition,))
        for definition in document.definitions
        if isinstance(definition, OperationDefinitionNode)
    ]


def graphql_examples(page: Path) -> list[tuple[str, DocumentNode]]:
    """(where, operation) for every operation of every ```graphql block of ``page``."""
    found = []
    for line, body in code_blocks(page.read_text(), "graphql"):
        where = f"{page.relative_to(ROOT)} line {line}"
        try:
            document = parse(body)
        except GraphQLError as exc:
            pytest.fail(f"{where}: {exc.message}")
        found += [(where, operation) for operation in operations(document)]
    return found


def test_every_graphql_example_is_valid_against_the_schema(schema: GraphQLSchema) -> None:
    invalid = [
        f"{where}: {error.message}"
        for page in PAGES
        for where, operation in graphql_examples(page)
        for error in validate(schema, operation)
    ]
    assert not invalid, "\n".join(invalid)


def test_every_operation_has_an_example_in_the_api_reference(schema: GraphQLSchema) -> None:
    shown: dict[str, set[str]] = {"query": set(), "mutation": set(), "subscription": set()}
    for _, document in graphql_examples(DOCS / "api.md"):
        (operation,) = document.definitions
        assert isinstance(operation, OperationDefinitionNode)
        for selection in operation.selection_set.selections:
            if isinstance(selection, FieldNode):
                shown[operation.operation.value].add(selection.name.value)
    missing = [
        f"{kind} {name}"
        for kind, root in [
            ("query", schema.query_type),
            ("mutation", schema.mutation_type),
            ("subscription", schema.subscription_type),
        ]
        if root is not None
        for name in root.fields
        if name not in shown[kind]
    ]
    assert not missing, f"operations without an example in docs/api.md: {missing}"


# --- navigation ----------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_long_pages_have_a_table_of_contents(page: Path) -> None:
    text = page.read_text()
    if text.count("\n") < LONG_PAGE_LINES:
        return
    assert "## Contents" in text, f"{page.name} is long and has no ## Contents"
    contents = text[text.index("## Contents") :].split("\n## ", 1)[0]
    listed = set(re.findall(r"\]\(#([^)]+)\)", contents))
    unlisted = [h for h in headings(text, 2) if h != "Contents" and anchor(h) not in listed]
    assert not unlisted, f"{page.name}: sections missing from its contents: {unlisted}"


def links(page: Path) -> list[str]:
    outside_code = re.sub(r"^ *```.*?^ *```", "", page.read_text(), flags=re.S | re.M)
    return re.findall(r"\]\(([^)\s]+)\)", outside_code)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z]+:", target):
            continue  # https:, mailto:
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        relative = resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else ""
        if relative in PENDING:
            assert not resolved.exists(), f"{relative} exists now: remove it from PENDING"
            continue
        if not resolved.exists() or (
            fragment and resolved.suffix == ".md" and fragment not in anchors(resolved.read_text())
        ):
            broken.append(target)
    assert not broken, f"{page.name}: broken links {broken}"
