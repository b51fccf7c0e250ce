"""The wheel, installed: built from the sources the Dockerfile copies, installed (not editable)
into a fresh virtual environment, it holds every module and asset of the package, answers
`gql-memory --help` and serves a query.

The fresh environment gets no dependencies of its own (nothing is downloaded: the wheel is
built with the suite's setuptools and installed with --no-deps). It sees the suite's through
a ``.pth`` file in its site-packages that names the suite's site-packages: Python appends a
directory named in a ``.pth`` file to sys.path after the site-packages that holds the file,
and reads no ``.pth`` file inside it (only site-packages directories themselves get that). So
the suite's ``__editable__.gql_memory-*.pth``, which installs the finder that maps
``gql_memory`` to this checkout, is never processed, and ``gql_memory`` is found first in the
fresh site-packages: the installed wheel. The ``.pth`` file is written after the install,
so that pip never sees the suite's editable gql-memory as an installation to replace. The
processes run outside the checkout and without PYTHONPATH, so neither the working directory
nor the environment brings the checkout back; a test checks where ``gql_memory`` came from.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import private_temp_dir
from tests.processes import ServeProcess, graphql

REPOSITORY = Path(__file__).resolve().parent.parent
# What the wheel is built from: what the Dockerfile copies before its `pip install .`
SOURCES = ("pyproject.toml", "setup.py", "README.md", "gql_memory", "migrations")
# Not a bound on anything: a hung build or install fails instead of hanging the suite.
HANG_GUARD_S = 300

ADD = "mutation Add($c: String!) { addInsight(input: {content: $c}) { id } }"
SEARCH = "query Find($q: String!) { search(query: $q) { id content } }"


@dataclass
class Installed:
    wheel: Path
    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def gql_memory(self) -> Path:
        return self.venv / "bin" / "gql-memory"


def outside_the_checkout() -> dict[str, str]:
    """The environment of a process of the fresh venv: no PYTHONPATH, nothing of the suite's
    settings."""
    unset = {"PYTHONPATH", "PYTHONHOME", "DATABASE_URL"}
    return {
        k: v for k, v in os.environ.items() if k not in unset and not k.startswith("GQL_MEMORY_")
    }


def run(*command: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=outside_the_checkout(),
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    root = private_temp_dir()
    source = root / "source"  # a copy: pip builds in the tree, leaving build/ and egg-info
    for name in SOURCES:
        path = REPOSITORY / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name)
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet")
    run(
        *pip,
        "wheel",
        "--no-deps",
        "--no-index",
        "--no-build-isolation",
        "-w",
        root,
        source,
        cwd=root,
    )
    [wheel] = root.glob("gql_memory-*.whl")
    venv = root / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=root)
    fresh = Installed(wheel, venv)
    run(*pip, "--python", fresh.python, "install", "--no-deps", "--no-index", wheel, cwd=root)
    site_packages = run(
        fresh.python,
        "-I",
        "-c",
        "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        cwd=root,
    ).stdout.strip()
    suite = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (Path(site_packages) / "suite_dependencies.pth").write_text("\n".join(suite) + "\n")
    yield fresh
    shutil.rmtree(root, ignore_errors=True)


def test_the_dockerfile_installs_from_the_same_sources() -> None:
    dockerfile = (REPOSITORY / "Dockerfile").read_text()
    copied = [line.split()[1:-1] for line in dockerfile.splitlines() if line.startswith("COPY ")]
    assert sorted(name for names in copied for name in names) == sorted(SOURCES)
    assert re.search(r"^RUN pip install --no-cache-dir \. ", dockerfile, re.M)  # not editable


def test_the_wheel_holds_every_module_and_asset_of_the_package(installed: Installed) -> None:
    package = REPOSITORY / "gql_memory"
    migrations = REPOSITORY / "migrations"
    static = package / "server" / "static"
    expected = {
        *(p.relative_to(REPOSITORY).as_posix() for p in package.rglob("*.py")),
        *(
            "gql_memory/migrations/" + p.relative_to(migrations).as_posix()
            for p in migrations.rglob("*.py")
        ),
        "gql_memory/migrations/script.py.mako",
        # the browser UIs' files (vendor.sh, which fetches GraphiQL's bundles, stays behind)
        *(
            p.relative_to(REPOSITORY).as_posix()
            for p in static.rglob("*")
            if p.is_file() and p.suffix != ".sh"
        ),
    }
    with zipfile.ZipFile(installed.wheel) as wheel:
        shipped = {
            name for name in wheel.namelist() if not name.split("/")[0].endswith(".dist-info")
        }
    assert shipped == expected
    assert {"gql_memory/config/settings.py", "gql_memory/memory/graph/__init__.py"} <= shipped


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Installed) -> None:
    probe = (
        "import sys, gql_memory, gql_memory.cli, gql_memory.migrations; "
        "print(gql_memory.__file__); print(gql_memory.migrations.__file__); "
        "print(any('editable' in repr(finder) for finder in sys.meta_path))"
    )
    found = run(installed.python, "-I", "-c", probe, cwd=installed.venv).stdout.split()
    assert Path(found[0]).is_relative_to(installed.venv), found
    assert Path(found[1]).is_relative_to(installed.venv), found
    assert found[2] == "False", "the suite's editable finder was installed"


def test_gql_memory_help_runs_from_the_wheel(installed: Installed) -> None:
    done = run(installed.gql_memory, "--help", cwd=installed.venv)
    assert "Usage: gql-memory" in done.stdout
    assert "serve" in done.stdout and "migrate" in done.stdout


async def test_the_installed_server_answers_queries(
    installed: Installed, database_url: str, scratch_dir: Path
) -> None:
    serve = ServeProcess(
        scratch_dir / "data",
        executable=installed.gql_memory,
        # the module's migrated database (a quick start); serve checks its revision against
        # the migrations the wheel ships
        env={"DATABASE_URL": database_url, "PYTHONPATH": ""},
    ).start()
    try:
        async with httpx.AsyncClient(base_url=serve.base_url, timeout=30) as client:
            added = await graphql(client, ADD, {"c": "The user keeps bees on the roof"})
            found = await graphql(client, SEARCH, {"q": "bees"})
            dashboard = await client.get("/dashboard/")
    finally:
        serve.stop()
    assert "errors" not in added, added
    bees = {"id": added["data"]["addInsight"]["id"], "content": "The user keeps bees on the roof"}
    assert found["data"] == {"search": [bees]}, found
    assert dashboard.status_code == 200 and "<html" in dashboard.text.lower()  # package data
    assert serve.wait() == 0, serve.log()[-3000:]
