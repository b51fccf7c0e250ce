"""Automatic entities that name one thing: "Caroline", "caroline" and "Caroline S.".

Names are the same when they are equal without case, or when one is the other followed by
initials ("Caroline S.", "Caroline S") and no other initials compete ("Caroline S." and
"Caroline T." beside "Caroline" are two people: none of them is merged). Only automatic
entities (autograph.py) are merged; the entities of the reference MCP tools and of callers
are named by them and left alone. The survivor is the name written with a capital, then the
best linked, then the oldest.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

INITIAL = re.compile(r"^[A-Z]\.?$")


@dataclass(frozen=True)
class EntityNode:
    id: int
    name: str


@dataclass(frozen=True)
class PlannedEntityMerge:
    survivor: EntityNode
    aliases: tuple[EntityNode, ...]


def _base(name: str) -> tuple[str, str | None]:
    """The name without trailing initials (casefolded), and the initials (None: none)."""
    words = name.split()
    initials: list[str] = []
    while len(words) > 1 and INITIAL.match(words[-1]):
        initials.insert(0, words.pop().rstrip("."))
    return " ".join(words).casefold(), ("".join(initials) or None)


def entity_groups(found: Sequence[EntityNode]) -> list[list[EntityNode]]:
    """The groups of automatic entities that name one thing (two or more each)."""
    groups: dict[str, list[EntityNode]] = defaultdict(list)
    initials: dict[str, set[str]] = defaultdict(set)
    plain: set[str] = set()
    for node in found:
        base, letters = _base(node.name)
        if letters is None:
            plain.add(base)
        else:
            initials[base].add(letters)
    for node in found:
        base, letters = _base(node.name)
        if letters is not None and (base not in plain or len(initials[base]) > 1):
            continue  # only one set of initials beside the plain name: the same person
        groups[base].append(node)
    return [group for group in groups.values() if len(group) > 1]


def plan_entities(
    groups: Sequence[Sequence[EntityNode]], degrees: dict[int, int], undone: set[tuple[int, int]]
) -> list[PlannedEntityMerge]:
    """Each group's survivor (``degrees``: valid edges per node) and its aliases."""
    merges = []
    for group in groups:
        ranked = sorted(
            group,
            key=lambda n: (
                _base(n.name)[1] is not None,
                not n.name[:1].isupper(),
                -degrees.get(n.id, 0),
                n.id,
            ),
        )
        survivor = ranked[0]
        aliases = tuple(n for n in ranked[1:] if (survivor.id, n.id) not in undone)
        if aliases:
            merges.append(PlannedEntityMerge(survivor, aliases))
    return merges
