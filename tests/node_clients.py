"""Reference GraphQL clients in Node (graphql-http's audit, graphql-sse), installed on demand.

The packages are pinned by tests/node/package-lock.json and installed with ``npm ci`` into a
cache directory named after the lockfile's digest (``GQL_MEMORY_NODE_CACHE``, default
``~/.cache/gql-memory-tests``), once per machine: CI reaches only the package registries.
The scripts in tests/node/ load the packages from there (``GQLM_NODE_MODULES``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

NODE_DIR = Path(__file__).resolve().parent / "node"
MANIFESTS = ("package.json", "package-lock.json")


def missing_tools() -> list[str]:
    return [tool for tool in ("node", "npm") if shutil.which(tool) is None]


def cache_root() -> Path:
    configured = os.environ.get("GQL_MEMORY_NODE_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gql-memory-tests"


def install() -> Path:
    """The installed packages' directory (``npm ci`` into the cache on first use)."""
    digest = hashlib.sha256((NODE_DIR / "package-lock.json").read_bytes()).hexdigest()[:16]
    target = cache_root() / f"node-{digest}"
    if (target / "node_modules").is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # installed beside the target, then renamed: concurrent test runs never see half of it
    staging = Path(tempfile.mkdtemp(prefix="installing-", dir=target.parent))
    for name in MANIFESTS:
        shutil.copy(NODE_DIR / name, staging / name)
    result = subprocess.run(
        ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
        cwd=staging,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"npm ci failed in {staging}:\n{result.stdout}\n{result.stderr}")
    try:
        staging.rename(target)
    except OSError:  # another run finished first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def node_env(modules: Path) -> dict[str, str]:
    return {**os.environ, "GQLM_NODE_MODULES": str(modules / "node_modules")}


async def start_script(modules: Path, script: str, *args: str) -> asyncio.subprocess.Process:
    """tests/node/<script> running beside the test's event loop (which serves the app),
    its stdin, stdout and stderr piped."""
    return await asyncio.create_subprocess_exec(
        "node",
        str(NODE_DIR / script),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=node_env(modules),
    )


async def run_script(modules: Path, script: str, *args: str, timeout: float = 120) -> Any:
    """Runs tests/node/<script> to its end and returns the JSON it prints last."""
    process = await start_script(modules, script, *args)
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, f"{script} failed:\n{out.decode()}\n{err.decode()}"
    return json.loads(out.decode().strip().splitlines()[-1])
