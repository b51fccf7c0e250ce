"""The enums of working-memory items, registered with strawberry once: RefKind (the kind of
memory an item refers to) and ArchiveReason (why an item left working memory). Working
memory (api/working.py) and its archive (api/stale.py) both show them, so they live here,
below both."""

from __future__ import annotations

import strawberry

from gql_memory.memory.working import archive, working_memory

RefKind = working_memory.RefKind  # registered with strawberry below
strawberry.enum(
    working_memory.RefKind,
    name="RefKind",
    description="The kind of memory a working-memory item refers to.",
)
ArchiveReason = archive.ArchiveReason  # registered with strawberry below
strawberry.enum(
    archive.ArchiveReason, name="ArchiveReason", description="Why an item left working memory."
)
