"""The browser UIs over real HTTP: GraphiQL's page and its vendored bundles, the dashboard's
page and modules; their content types and cache headers, that they load nothing from
anywhere else, the settings that switch them off, and the dashboard's trusted documents."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urljoin

import pytest
import pytest_asyncio
from graphql import parse, validate

from gql_memory.api.schema import build_schema
from gql_memory.config import Settings
from gql_memory.server.ui import DASHBOARD_DIR, DASHBOARD_MANIFEST, GRAPHIQL_DIR
from tests.browser.documents import DOCUMENT, manifest_for, page_documents
from tests.conftest import ROOT, LiveServer, serving

HTML = {"Accept": "text/html"}
# An XML namespace name: never fetched, and the only URL our own files may hold.
SVG_NAMESPACE = "http://www.w3.org/2000/svg"
URL = re.compile(r"(?:https?|wss?)://[^\s\"'`)<>]*")
CONTENT_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
# Where a URL in a bundle would make the browser fetch it (anchors' hrefs are links a person
# may follow, not loads).
LOADING = re.compile(
    r"""(?:\bsrc\s*[=:]|url\(|@import|\bimport\s*\(|\bfetch\s*\(|new\s+(?:WebSocket|Worker|"""
    r"""EventSource)\s*\(|importScripts\s*\(|sendBeacon\s*\()\s*["'`]?\s*(?:https?:)?//""",
    re.I,
)
LICENCE_COMMENT = re.compile(r"/\*[!*].*?\*/", re.S)
ASSET_REFERENCE = re.compile(r"""(?:src|href)="([^"]+)\"""")
MODULE_IMPORT = re.compile(r"""^import .* from "(\./[\w-]+\.js)";$""", re.M)


@pytest_asyncio.fixture(scope="module")
async def switched_off(settings: Settings) -> AsyncIterator[LiveServer]:
    async with serving(settings.with_overrides(graphiql=False, dashboard=False)) as server:
        yield server


def own_files(directory: Path) -> list[Path]:
    """The UI's own files (not the vendored bundles)."""
    return [
        path
        for path in directory.rglob("*")
        if path.suffix in {".html", ".js", ".css", ".svg", ".json"} and "vendor" not in path.parts
    ]


def imported_modules(entry: str) -> set[str]:
    """The dashboard's module ``entry`` and every module it imports, directly or not."""
    found, pending = set(), [entry]
    while pending:
        module = pending.pop()
        if module not in found:
            found.add(module)
            source = (DASHBOARD_DIR / module).read_text(encoding="utf-8")
            pending += [name.removeprefix("./") for name in MODULE_IMPORT.findall(source)]
    return found


def vendored_files() -> list[Path]:
    return [p for p in (GRAPHIQL_DIR / "vendor").rglob("*") if p.suffix in {".js", ".css"}]


async def test_graphiql_page_loads_its_assets_from_this_server(live: LiveServer) -> None:
    page = await live.client.get("/graphql", headers=HTML)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "connect-src 'self'" in policy
    assets = ASSET_REFERENCE.findall(page.text)
    assert len(assets) == 9  # the icon, 3 stylesheets, 5 scripts
    for asset in assets:
        assert not re.match(r"^(?:[a-z]+:)?//", asset), asset  # relative: this server's
        response = await live.client.get(urljoin(f"{live.base_url}/graphql", asset))
        assert response.status_code == 200, asset
        expected = CONTENT_TYPES[Path(asset).suffix]
        assert response.headers["content-type"].startswith(expected), asset
        assert response.headers["x-content-type-options"] == "nosniff"


async def test_vendored_bundles_are_cached_for_good_and_compressed(live: LiveServer) -> None:
    bundle = "/graphiql/vendor/graphiql-3.8.3/graphiql.min.js"
    response = await live.client.get(bundle, headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert response.headers["content-encoding"] == "gzip"
    assert response.content == (GRAPHIQL_DIR / "vendor/graphiql-3.8.3/graphiql.min.js").read_bytes()
    own = await live.client.get("/graphiql/page.js")
    assert own.headers["cache-control"] == "no-cache" and own.headers["etag"]
    revalidated = await live.client.get(
        "/graphiql/page.js", headers={"If-None-Match": own.headers["etag"]}
    )
    assert revalidated.status_code == 304


async def test_only_assets_are_served_from_the_ui_folders(live: LiveServer) -> None:
    for path in (
        "/graphiql/vendor.sh",
        "/graphiql/index.html",
        "/graphiql/VERSIONS.md",
        "/graphiql/vendor/react-18.2.0/LICENSE",
        "/dashboard/index.html",
    ):
        assert (await live.client.get(path)).status_code == 404, path


def test_no_url_in_the_pages_and_scripts_of_our_own() -> None:
    for path in own_files(GRAPHIQL_DIR) + own_files(DASHBOARD_DIR):
        text = path.read_text(encoding="utf-8")
        urls = [url for url in URL.findall(text) if url != SVG_NAMESPACE]
        assert not urls, f"{path.name}: {urls}"


def test_vendored_bundles_load_nothing_from_elsewhere() -> None:
    """The bundles keep the URLs of their licences, docs links and error messages, but none
    where a browser would fetch it; and no source map comment."""
    for path in vendored_files():
        code = LICENCE_COMMENT.sub("", path.read_text(encoding="utf-8"))
        assert not LOADING.findall(code), path
        assert "sourceMappingURL" not in code, path


async def test_dashboard_page_and_its_modules(live: LiveServer) -> None:
    redirect = await live.client.get("/dashboard")
    assert redirect.status_code in (307, 308)
    assert redirect.headers["location"].endswith("/dashboard/")
    page = await live.client.get("/dashboard/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assert '<meta name="working-memory-capacity" content="10" />' in page.text
    assert "{{" not in page.text
    modules = imported_modules("app.js")
    assert modules == {path.name for path in DASHBOARD_DIR.glob("*.js")}  # no dead file
    for asset in [*ASSET_REFERENCE.findall(page.text), *sorted(modules)]:
        response = await live.client.get(urljoin(f"{live.base_url}/dashboard/", asset))
        assert response.status_code == 200, asset
        assert response.headers["content-type"].startswith(CONTENT_TYPES[Path(asset).suffix])
    manifest = await live.client.get("/dashboard/persisted-documents.json")
    assert manifest.headers["content-type"].startswith("application/json")


async def test_graphiql_and_dashboard_can_be_switched_off(switched_off: LiveServer) -> None:
    assert (await switched_off.client.get("/graphql", headers=HTML)).status_code == 404
    for path in (
        "/graphiql/page.js",
        "/graphiql/vendor/graphiql-3.8.3/graphiql.min.js",
        "/dashboard",
        "/dashboard/",
        "/dashboard/app.js",
        "/dashboard/persisted-documents.json",
    ):
        assert (await switched_off.client.get(path)).status_code == 404, path


def test_the_dashboard_manifest_holds_exactly_the_documents_of_the_page() -> None:
    documents = page_documents()
    source = (DASHBOARD_DIR / "operations.js").read_text(encoding="utf-8")
    assert len(documents) == source.count("export const ") == len(DOCUMENT.findall(source))
    manifest = json.loads(DASHBOARD_MANIFEST.read_text(encoding="utf-8"))
    assert manifest == manifest_for(documents), (
        "persisted-documents.json is out of date: run python -m tests.browser.documents"
    )


def test_the_dashboard_documents_are_valid_against_the_schema() -> None:
    schema = build_schema(Settings())._schema
    for name, text in page_documents().items():
        assert not validate(schema, parse(text)), name


async def test_graphiql_keeps_its_headers_in_the_tab_only(live: LiveServer) -> None:
    """The served page hands GraphiQL a storage on sessionStorage, so the Authorization key
    (in the headers, the tabs and the history, which records each query's headers) is gone
    with the tab instead of lying in localStorage (tests/node/graphiql_storage.cjs runs the
    page against stand-ins for the browser)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found on PATH: this test runs GraphiQL's page script in it")
    page_js = (await live.client.get("/graphiql/page.js")).content
    headers = json.dumps({"Authorization": "Bearer gqlm_ThisKeyMustNotOutliveTheTab"})
    ran = subprocess.run(
        [node, str(ROOT / "tests/node/graphiql_storage.cjs"), headers],
        input=page_js,
        capture_output=True,
        check=True,
    )
    seen = json.loads(ran.stdout)
    assert seen["hasStorage"] and seen["shouldPersistHeaders"]
    written = seen["written"]
    assert written["local"] == {}
    assert written["session"]["graphiql:headers"] == headers
    assert "gqlm_ThisKeyMustNotOutliveTheTab" in written["session"]["graphiql:queries"]
    assert written["length"] == 2
    assert seen["afterClear"] == {"dashboard-key": "kept"}  # clearing GraphiQL's items only
