"""Which insights say the same thing, and which update one another: the plan, pure Python.

Two valid insights are *the same statement* when they state the same fact (facts.py: same
subject, attribute and value) or are worded alike (wording.py: same words and names), and
their embeddings are near-identical (cosine at least the duplicate threshold, a setting
chosen by `python -m bench consolidation`). Each group of the same statement merges into its
earliest member, which keeps the earliest validity.

A functional attribute (facts.py) holds one value at a time: along the timeline of a
subject's attribute (ordered by valid_from), each run of one value is a statement, and the
first fact of the next run *updates* it. So "Berlin, Munich, Berlin again" is two updates,
never a merge of the two Berlins across Munich.

Pairs that an undone action joined are never planned again: an undo is a decision.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gql_memory.memory.consolidation.facts import Fact, read_fact
from gql_memory.memory.consolidation.wording import Wording


@dataclass(frozen=True)
class Candidate:
    """A valid insight consolidation may change."""

    id: int
    content: str
    valid_from: datetime
    wording: Wording
    fact: Fact | None


@dataclass(frozen=True)
class PlannedMerge:
    survivor: Candidate
    members: tuple[Candidate, ...]
    similarities: dict[int, float]
    matched: dict[int, str]  # member id: "fact" or "wording"


@dataclass(frozen=True)
class PlannedUpdate:
    newer: Candidate
    older: tuple[Candidate, ...]  # every fact of the key still open with another value


def candidate(
    row_id: int, content: str, valid_from: datetime, lexemes: Sequence[str], soft: frozenset[str]
) -> Candidate:
    return Candidate(
        row_id, content, valid_from, Wording.of(content, lexemes, soft), read_fact(content)
    )


def statement_groups(candidates: Sequence[Candidate]) -> list[list[Candidate]]:
    """The groups of the same statement (same fact, or same words and names; a functional
    fact only within its run of one value), each ordered earliest first."""
    ordered = sorted(candidates, key=lambda c: (c.valid_from, c.id))
    run_of = _runs(ordered)
    position = {c.id: i for i, c in enumerate(ordered)}
    parent = {c.id: c.id for c in ordered}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(a: Candidate, b: Candidate) -> None:
        first, second = sorted((root(a.id), root(b.id)), key=position.__getitem__)
        if first != second:
            parent[second] = first

    by_fact: dict[Any, list[Candidate]] = defaultdict(list)
    by_words: dict[frozenset[str], list[Candidate]] = defaultdict(list)
    for c in ordered:
        if c.fact is not None and c.fact.whole:
            by_fact[(c.fact, run_of.get(c.id))].append(c)
        if len(c.wording.words) >= 2:
            by_words[c.wording.words].append(c)
    for group in by_fact.values():
        for other in group[1:]:
            join(group[0], other)
    for group in by_words.values():
        runs = _runs_in(group, run_of)
        for i, c in enumerate(group):
            for earlier in group[:i]:
                if (
                    runs[earlier.id] == runs[c.id]
                    and earlier.wording.same_as(c.wording)
                    and not _facts_differ(earlier, c)
                ):
                    join(earlier, c)
                    break
    members: dict[int, list[Candidate]] = defaultdict(list)
    for c in ordered:
        members[root(c.id)].append(c)
    return [group for group in members.values() if len(group) > 1]


def plan(
    candidates: Sequence[Candidate],
    groups: Sequence[Sequence[Candidate]],
    similarity: Callable[[int, int], float | None],
    threshold: float,
    undone: set[tuple[int, int]],
) -> tuple[list[PlannedMerge], list[PlannedUpdate]]:
    """Merges (of ``groups``, from statement_groups) and updates among ``candidates``.
    ``similarity(a, b)``: the cosine of two insights' embeddings (None while one waits for
    its vector: no merge yet)."""
    merges: list[PlannedMerge] = []
    merged: set[int] = set()
    for group in groups:
        survivor, rest = group[0], group[1:]
        kept: list[Candidate] = []
        similarities: dict[int, float] = {}
        matched: dict[int, str] = {}
        for member in rest:
            if (survivor.id, member.id) in undone:
                continue
            cosine = similarity(survivor.id, member.id)
            if cosine is None or cosine < threshold:
                continue
            kept.append(member)
            similarities[member.id] = cosine
            same_fact = member.fact is not None and member.fact == survivor.fact
            matched[member.id] = "fact" if same_fact else "wording"
        if kept:
            merges.append(PlannedMerge(survivor, tuple(kept), similarities, matched))
            merged.update(m.id for m in kept)
    ordered = sorted(candidates, key=lambda c: (c.valid_from, c.id))
    return merges, _updates(ordered, merged, undone)


def _facts_differ(a: Candidate, b: Candidate) -> bool:
    """Both read as facts, and not the same one: the same words stand for two statements
    ("User's favourite food is pizza" and "Will says their favourite food is pizza")."""
    return a.fact is not None and b.fact is not None and a.fact != b.fact


def _runs_in(group: Sequence[Candidate], run_of: dict[int, int]) -> dict[int, int | None]:
    """The run of one value each member of a same-words group belongs to: a member that
    states no functional fact takes the run of the one before it (or the first one's)."""
    known = [run_of[c.id] for c in group if c.id in run_of]
    current = known[0] if known else None
    runs: dict[int, int | None] = {}
    for c in group:
        current = run_of.get(c.id, current)
        runs[c.id] = current
    return runs


def _runs(ordered: Sequence[Candidate]) -> dict[int, int]:
    """For each fact of a functional attribute, the index of its run of one value along its
    subject's attribute timeline."""
    run: dict[int, int] = {}
    last: dict[tuple[str, str], tuple[str, int]] = {}
    for c in ordered:
        if c.fact is None or not c.fact.functional:
            continue
        value, index = last.get(c.fact.key, (c.fact.value, 0))
        if value != c.fact.value:
            index += 1
        last[c.fact.key] = (c.fact.value, index)
        run[c.id] = index
    return run


def _updates(
    ordered: Sequence[Candidate], merged: set[int], undone: set[tuple[int, int]]
) -> list[PlannedUpdate]:
    """Each new value of a functional attribute updates every fact of that subject and
    attribute still open with another value (older ones; duplicates merged away)."""
    updates: list[PlannedUpdate] = []
    open_facts: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for c in ordered:
        if c.fact is None or not c.fact.functional or c.id in merged:
            continue
        fact = c.fact
        before = open_facts[fact.key]
        replaced = tuple(
            b
            for b in before
            if b.fact is not None
            and b.fact.value != fact.value
            and b.valid_from < c.valid_from
            and (c.id, b.id) not in undone
        )
        open_facts[fact.key] = [b for b in before if b not in replaced] + [c]
        if replaced:
            updates.append(PlannedUpdate(newer=c, older=replaced))
    return updates
