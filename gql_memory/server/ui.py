"""The browser UIs: GraphiQL (its page and vendored bundles, static/graphiql/) and the memory
dashboard (static/dashboard/). Everything they load comes from this server, so they work
offline, and their Content-Security-Policy lets them load nothing from anywhere else."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import re
from pathlib import Path

from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import PathLike, StaticFiles
from starlette.types import Scope

from gql_memory.config import Settings

STATIC_DIR = Path(__file__).parent / "static"
GRAPHIQL_DIR = STATIC_DIR / "graphiql"
DASHBOARD_DIR = STATIC_DIR / "dashboard"
# The dashboard's operations as a trusted-documents manifest (GQL_MEMORY_TRUSTED_DOCUMENTS).
DASHBOARD_MANIFEST = DASHBOARD_DIR / "persisted-documents.json"

# What the static mounts serve; the HTML pages come from their routes, the rest
# (licences, notes, vendor.sh) stays in the package.
ASSET_SUFFIXES = frozenset({".js", ".css", ".svg", ".json"})
# vendor/ paths name the package version, so a file there never changes.
IMMUTABLE = "public, max-age=31536000, immutable"
# Our own files may change with an upgrade: the browser revalidates them (ETag) on each load.
REVALIDATE = "no-cache"
GZIP_MIN_BYTES = 1024
# Settings the dashboard shows, put into its page (index.html names them {{like_this}}).
DASHBOARD_SETTINGS = ("working_memory_capacity", "critical_importance", "attention_floor")

_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)
# GraphiQL's components set inline styles and add <style> elements at run time.
GRAPHIQL_CSP = (
    "default-src 'self'; script-src 'self' {inline_scripts}; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
DASHBOARD_CSP = (
    "default-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'; object-src 'none'"
)


class AssetFiles(StaticFiles):
    """Static files with an asset suffix only (ASSET_SUFFIXES), each with a Cache-Control
    header."""

    def __init__(self, directory: Path, cache_control: str) -> None:
        super().__init__(directory=directory)
        self.cache_control = cache_control

    def lookup_path(self, path: str) -> tuple[str, os.stat_result | None]:
        if Path(path).suffix not in ASSET_SUFFIXES:
            return "", None
        return super().lookup_path(path)

    def file_response(
        self,
        full_path: PathLike,
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = self.cache_control
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response


def routes(settings: Settings) -> list[BaseRoute]:
    """The mounts of the UIs the settings switch on (GraphiQL's page is the GraphQL view's)."""
    mounted: list[BaseRoute] = []
    if settings.graphiql:
        vendor = AssetFiles(GRAPHIQL_DIR / "vendor", IMMUTABLE)
        mounted += [
            Mount("/graphiql/vendor", GZipMiddleware(vendor, GZIP_MIN_BYTES, compresslevel=6)),
            Mount("/graphiql", AssetFiles(GRAPHIQL_DIR, REVALIDATE)),
        ]
    if settings.dashboard:
        html = dashboard_html(settings)
        pages = {
            needed: html.replace("{{key_needed}}", str(needed).lower()) for needed in (True, False)
        }

        async def dashboard(request: Request) -> Response:
            return _page(pages[await key_needed(request)], DASHBOARD_CSP)

        # /dashboard redirects here (the router's redirect_slashes), so that the page's
        # relative URLs work under any path prefix.
        mounted.append(
            Mount(
                "/dashboard",
                routes=[
                    Route("/", dashboard),
                    Mount("/", AssetFiles(DASHBOARD_DIR, REVALIDATE)),
                ],
            )
        )
    return mounted


async def key_needed(request: Request) -> bool:
    """Whether this caller's requests need an API key: what one of them without a key would
    meet (the loopback rule, GQL_MEMORY_AUTH). The UIs' pages say so, and the dashboard
    connects by itself where none is needed."""
    without_key = {k: v for k, v in request.headers.items() if k != "authorization"}
    anonymous = await request.app.state.authenticator.from_headers(without_key)
    return anonymous.principal is None


def builtin_documents(settings: Settings) -> dict[str, str]:
    """The dashboard's documents, trusted while it is served (api/persisted.py): its page
    sends them by id whether or not GQL_MEMORY_TRUSTED_DOCUMENTS is set."""
    if not settings.dashboard:
        return {}
    from gql_memory.api.persisted import load_manifest

    return load_manifest(DASHBOARD_MANIFEST)


def graphiql_page(default_headers: dict[str, str], key_needed: bool = True) -> HTMLResponse:
    """GraphiQL's page, sending ``default_headers`` with every HTTP request; its welcome text
    asks for an API key if ``key_needed`` (page.js)."""
    html, policy = _graphiql_html(tuple(default_headers.items()), key_needed)
    return _page(html, policy)


@functools.cache
def _graphiql_html(
    default_headers: tuple[tuple[str, str], ...], key_needed: bool
) -> tuple[str, str]:
    """The page and its Content-Security-Policy, which allows its one inline script by hash."""
    template = (GRAPHIQL_DIR / "index.html").read_text(encoding="utf-8")
    fields = ", ".join(f"{_js_key(name)}: {_js_string(value)}" for name, value in default_headers)
    html = template.replace(
        "const defaultHeaders = {}; const keyNeeded = true;",
        f"const defaultHeaders = {{ {fields} }}; const keyNeeded = {str(key_needed).lower()};",
    )
    hashes = " ".join(f"'sha256-{_digest(script)}'" for script in _INLINE_SCRIPT.findall(html))
    return html, GRAPHIQL_CSP.format(inline_scripts=hashes)


def dashboard_html(settings: Settings) -> str:
    """The dashboard's page, with the settings it shows (capacity, thresholds) in meta tags."""
    html = (DASHBOARD_DIR / "index.html").read_text(encoding="utf-8")
    for name in DASHBOARD_SETTINGS:
        html = html.replace(f"{{{{{name}}}}}", str(getattr(settings, name)), 1)
    return html


def _page(html: str, policy: str) -> HTMLResponse:
    return HTMLResponse(
        html,
        headers={
            "Content-Security-Policy": policy,
            "Cache-Control": REVALIDATE,
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
        },
    )


def _js_key(name: str) -> str:
    """A header name as an object key: bare when it is an identifier (Accept: "...")."""
    return name if name.isidentifier() else _js_string(name)


def _js_string(value: str) -> str:
    """A JavaScript string literal that cannot end the <script> element it is in."""
    return json.dumps(value).replace("<", "\\u003c")


def _digest(script: str) -> str:
    return base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
