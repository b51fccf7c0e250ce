"""Export and import of a namespace on the cluster (gql_memory.memory.interchange): the
import's id map lives in temporary tables of the coordinator, joined to distributed tables."""

from __future__ import annotations

from pathlib import Path

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings.hashed import HashEmbedder
from gql_memory.memory import Memory
from gql_memory.memory.interchange.load import Mode, load_export
from tests.memory.test_interchange import export_text, fill_every_layer, without_ids


async def test_a_namespace_moves_through_an_export_on_the_cluster(
    owner: Database, tmp_path: Path
) -> None:
    settings = Settings()
    embedder = HashEmbedder(settings.hash_embedding_dim)
    await fill_every_layer(Memory(owner, settings, "interchange-src", embedder))
    first = await export_text(owner, "interchange-src")
    path = tmp_path / "src.jsonl"
    path.write_text(first)

    await load_export(owner, settings, "interchange-copy", path)
    again = await load_export(owner, settings, "interchange-copy", path, Mode.MERGE)
    replaced = await load_export(owner, settings, "interchange-copy", path, Mode.REPLACE)

    assert sum(again.added.values()) == 0 and replaced.replaced
    assert without_ids(await export_text(owner, "interchange-copy")) == without_ids(first)
