"""The dashboard's GraphQL documents (static/dashboard/operations.js) and its trusted-documents
manifest. ``python -m tests.browser.documents`` rewrites the manifest from operations.js."""

from __future__ import annotations

import json
import re

from gql_memory.api.persisted import sha256_hex
from gql_memory.server.ui import DASHBOARD_DIR, DASHBOARD_MANIFEST

# operations.js holds each document as `export const NAME = `<text>`;` (no ${} in them)
DOCUMENT = re.compile(r"^export const (\w+) = `((?:[^`$]|\$(?!\{))*)`;", re.M)


def page_documents() -> dict[str, str]:
    """The documents operations.js exports, by constant name."""
    source = (DASHBOARD_DIR / "operations.js").read_text(encoding="utf-8")
    return dict(DOCUMENT.findall(source))


def manifest_for(documents: dict[str, str]) -> dict[str, str]:
    return {sha256_hex(text): text for text in documents.values()}


def main() -> None:
    manifest = manifest_for(page_documents())
    DASHBOARD_MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(f"{DASHBOARD_MANIFEST}: {len(manifest)} documents")


if __name__ == "__main__":
    main()
