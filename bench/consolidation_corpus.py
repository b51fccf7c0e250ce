"""A seeded synthetic corpus for the consolidation benchmark (issue 44, bench/consolidation.py).

The generator (this module and its words, bench/consolidation_phrasing.py), its seed (SEED)
and its size were fixed, and committed on their own, before any threshold of the
consolidation was tuned. They must not be changed to fit the thresholds: a
change of the consolidation is measured on this very corpus.

Facts as an agent's memory extractor would store them, all in one namespace; subjects are
NAMES (60 first names), relatives of them, and the user. No (subject, attribute) is used by
two labelled items, so the ground truth is unambiguous; facts of different items are
unrelated (and any action joining two of them is a false one). 340 facts in three sets:

a) duplicates, 140 facts: 60 groups of one fact stated again (40 groups of two statements,
   20 of three), re-stored 1-30 days apart. Each later statement differs from the group's
   first by one variation, in fixed proportions over the 80 later statements: exact repeat 8,
   case or punctuation 12, filler prefix ("User mentioned that ...", "Note: ...") 12, the
   user's perspective ("the user" / "User" / "I") 8, hedge or intensifier ("really",
   "apparently") 12, clause reordering ("In winter Carol goes skiing" / "Carol goes skiing in
   winter") 8, predicate synonym (likes / enjoys / loves, lives in / resides in / is based
   in, works at / is employed at / has a job at, is allergic to / has an allergy to) 20.
b) updates, 120 facts: 60 pairs (older, newer) of the same subject and attribute with a new
   value, the newer 3-180 days later, stated naturally ("Carol lives in Berlin." -> "Carol
   moved to Munich."); 12 attributes, 5 pairs each: residence, employer, favourite colour,
   relationship status, job title, phone number, car, diet, age, dog's name, favourite food,
   field of study. Each pair has a question about the attribute ("Where does Carol live?").
c) similar-but-distinct, 80 facts: 40 pairs that look alike and are both true, 10 of each
   kind: an added qualifier ("likes hiking" / "likes hiking in winter"), another subject with
   the same predicate (5 relatives: "Carol's sister lives in Lisbon" / "Carol's brother ...";
   5 people: "Anna works at Acme" / "Ben works at Acme"), a multi-valued attribute ("speaks
   French" / "speaks German", "has a dog named Rex" / "has a cat named Tom"), another time or
   object ("visited Rome in 2019" / "visited Rome in 2023").

Every instant lies between 2024-01-01 and 2025-08-01 (in the past). ``scaled(n)`` repeats the
generator with other seeds and a family name per copy (no ground truth: for the cost part).
`python -m bench.consolidation_corpus` checks the invariants and prints the composition.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from bench.consolidation_phrasing import (
    BANDS,
    CHANGES,
    FAMILIES,
    FILLERS,
    HABITS,
    HEDGES,
    MARATHONS,
    MULTI,
    NAMES,
    PLACES,
    QUALIFIED,
    RELATIVES,
    SHARED,
    STYLES,
    SURNAMES,
    SYNONYMOUS,
    USER,
    USER_FILLERS,
    USER_FORMS,
    Change,
    Family,
    Statement,
    Subject,
    article,
    fill,
)

SEED = 44
DUPLICATE, UPDATE, DISTINCT = "duplicate", "update", "distinct"
START, LAST = datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 8, 1, tzinfo=UTC)

# --- a) duplicates ------------------------------------------------------------------------------

VARIATIONS = {  # how each later statement of a group differs from the first: count of 80
    "exact": 8,
    "case_punctuation": 12,
    "filler": 12,
    "perspective": 8,
    "hedge": 12,
    "reorder": 8,
    "synonym": 20,
}
GROUP_SIZES = (2,) * 40 + (3,) * 20


PAIRS_PER_CHANGE = 5
SAME_AS = {"dog's name": "pet:dog", "job title": "profession"}


# --- the corpus ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    id: int  # position in ``Corpus.facts``: the facts are in the order they were stored
    content: str
    valid_from: datetime
    set: str  # DUPLICATE, UPDATE or DISTINCT
    subject: str  # "Carol", "Carol's sister", "the user"
    attribute: str  # "residence", "likes:hiking", ...


@dataclass(frozen=True)
class DuplicateGroup:
    ids: tuple[int, ...]  # oldest first
    variations: tuple[str, ...]  # how each later statement differs from the first


@dataclass(frozen=True)
class Update:
    old: int
    new: int
    attribute: str
    query: str  # a question about the attribute: "Where does Carol live?"
    old_value: str
    new_value: str


@dataclass(frozen=True)
class DistinctPair:
    ids: tuple[int, int]
    kind: str  # "qualifier", "other subject", "multi-valued", "other time or object"


@dataclass(frozen=True)
class Corpus:
    seed: int
    facts: tuple[Fact, ...]
    duplicates: tuple[DuplicateGroup, ...]
    updates: tuple[Update, ...]
    distinct: tuple[DistinctPair, ...]

    def composition(self) -> list[str]:
        sets = Counter(f.set for f in self.facts)
        sizes = Counter(len(g.ids) for g in self.duplicates)
        kinds = Counter(v for g in self.duplicates for v in g.variations)
        attributes = Counter(u.attribute for u in self.updates)
        distinct = Counter(p.kind for p in self.distinct)
        return [
            f"seed {self.seed}: {len(self.facts)} facts",
            f"duplicates: {sets[DUPLICATE]} facts in {len(self.duplicates)} groups "
            f"({', '.join(f'{n} of {s}' for s, n in sorted(sizes.items()))}); later statements "
            f"by variation: {', '.join(f'{k} {n}' for k, n in kinds.items())}",
            f"updates: {sets[UPDATE]} facts in {len(self.updates)} pairs; by attribute: "
            f"{', '.join(f'{k} {n}' for k, n in attributes.items())}",
            f"similar-but-distinct: {sets[DISTINCT]} facts in {len(self.distinct)} pairs; "
            f"{', '.join(f'{k} {n}' for k, n in distinct.items())}",
        ]


@dataclass
class Builder:
    """Facts as they are made, keyed so that no (subject, attribute) serves two items."""

    rng: random.Random
    family_name: str | None
    facts: list[Fact] = field(default_factory=list)
    taken: set[tuple[str, str]] = field(default_factory=set)

    def name(self, first: str) -> str:
        return f"{first} {self.family_name}" if self.family_name else first

    def subject(self, user: bool = False) -> Subject:
        if user:
            return Subject(USER, self.rng.choice(USER_FORMS))
        return Subject(self.name(self.rng.choice(NAMES)))

    def free(self, *keys: tuple[Subject, str]) -> bool:
        """Reserve every (subject, attribute), if none of them is taken yet."""
        wanted = {(subject.key, attribute) for subject, attribute in keys}
        if wanted & self.taken or len(wanted) < len(keys):
            return False
        self.taken |= wanted
        return True

    def instant(self, days: int = 400) -> datetime:
        return START + timedelta(days=self.rng.randint(0, days), seconds=self.rng.randint(0, 86399))

    def later(self, when: datetime, low: int, high: int) -> datetime:
        return when + timedelta(
            days=self.rng.randint(low, high), seconds=self.rng.randint(0, 86399)
        )

    def add(self, content: str, when: datetime, set_: str, subject: Subject, attr: str) -> int:
        self.facts.append(Fact(len(self.facts), content, when, set_, subject.key, attr))
        return len(self.facts) - 1


def variation_deck(rng: random.Random) -> list[tuple[str, ...]]:
    """The variations of every group's later statements, in VARIATIONS' proportions; a group
    of three gets two different ones, never a synonym with a reordering (habits have none)."""
    deck = [kind for kind, count in VARIATIONS.items() for _ in range(count)]
    rng.shuffle(deck)
    sizes = list(GROUP_SIZES)
    rng.shuffle(sizes)
    triples: list[tuple[str, ...]] = []
    for _ in range(sizes.count(3)):
        first = deck.pop(0)
        second = next(k for k in deck if k != first and {k, first} != {"synonym", "reorder"})
        deck.remove(second)
        triples.append((first, second))
    pairs = [(k,) for k in deck]
    return [triples.pop() if size == 3 else pairs.pop() for size in sizes]


def varied(base: Statement, kind: str, rng: random.Random, family: Family | None) -> Statement:
    user = base.subject.name == USER
    if kind == "case_punctuation":
        return replace(base, style=rng.choice(STYLES))
    if kind == "filler":
        return replace(base, prefix=rng.choice(USER_FILLERS if user else FILLERS))
    if kind == "perspective":
        form = rng.choice([f for f in USER_FORMS if f != base.subject.form])
        return replace(base, subject=replace(base.subject, form=form))
    if kind == "hedge":
        return replace(base, hedge=rng.choice(HEDGES))
    if kind == "reorder":
        return replace(base, adverbial_first=not base.adverbial_first)
    if kind == "synonym":
        assert family is not None
        return replace(base, verb=rng.choice([v for v in family.verbs if v != base.verb]))
    return base  # exact


def duplicates(b: Builder) -> list[DuplicateGroup]:
    groups = []
    for kinds in variation_deck(b.rng):
        user = "perspective" in kinds
        while True:
            subject = b.subject(user)
            family: Family | None = None
            if "reorder" in kinds or ("synonym" not in kinds and b.rng.random() < 0.2):
                activity, adverbial = b.rng.choice(HABITS)
                attribute = f"habit:{activity}"
                base = Statement(subject, activity, "", adverbial, b.rng.random() < 0.5)
            else:
                family = b.rng.choice(SYNONYMOUS if "synonym" in kinds else FAMILIES)
                obj = b.rng.choice(family.objects)
                attribute = family.name if family.single else f"{family.name}:{obj}"
                base = Statement(subject, b.rng.choice(family.verbs), obj)
            if b.free((subject, attribute)):
                break
        when = b.instant(380)
        ids = [b.add(base.text(), when, DUPLICATE, subject, attribute)]
        for kind in kinds:
            when = b.later(when, 1, 30)
            text = varied(base, kind, b.rng, family).text()
            ids.append(b.add(text, when, DUPLICATE, subject, attribute))
        groups.append(DuplicateGroup(tuple(ids), kinds))
    return groups


def values_of(change: Change, rng: random.Random) -> tuple[str, str]:
    if change.pairs:
        return rng.choice(change.pairs)
    if change.attribute == "phone number":
        old, new = rng.sample(range(100, 200), 2)
        return f"555-0{old}", f"555-0{new}"
    if change.attribute == "age":
        age = rng.randint(19, 70)
        return str(age), str(age + 1)
    old, new = rng.sample(change.values, 2)
    return old, new


def updates(b: Builder) -> list[Update]:
    pairs = []
    deck = [c for c in CHANGES for _ in range(PAIRS_PER_CHANGE)]
    b.rng.shuffle(deck)
    for change in deck:
        # the attribute as other items key it: a dog ("has a dog named Rex"), a profession
        key = SAME_AS.get(change.attribute, change.attribute)
        while True:
            subject = b.subject(user=b.rng.random() < 0.1)
            if b.free((subject, key)):
                break
        old, new = values_of(change, b.rng)
        values = {"old": old, "new": new, "a_old": article(old), "a_new": article(new)}
        older = fill(b.rng.choice(change.old), subject, **values)
        newer = fill(b.rng.choice(change.new), subject, **values)
        when = b.instant(360)
        old_id = b.add(older, when, UPDATE, subject, key)
        new_id = b.add(newer, b.later(when, 3, 180), UPDATE, subject, key)
        query = fill(change.query, Subject(subject.name))
        pairs.append(Update(old_id, new_id, change.attribute, query, old, new))
    return pairs


def distinct(b: Builder) -> list[DistinctPair]:
    makers = [qualified] * 10 + [relatives] * 5 + [people] * 5 + [multi] * 10 + [timed] * 10
    b.rng.shuffle(makers)
    pairs = []
    for make in makers:
        kind, ids = make(b)
        pairs.append(DistinctPair(ids, kind))
    return pairs


def qualified(b: Builder) -> tuple[str, tuple[int, int]]:
    while True:
        subject = b.subject(user=b.rng.random() < 0.1)
        family, verb, obj, qualifier = b.rng.choice(QUALIFIED)
        plain, more = f"{family}:{obj}", f"{family}:{obj} {qualifier}"
        if b.free((subject, plain), (subject, more)):
            break
    again = b.subject(user=True) if subject.name == USER else subject  # the user, as written
    return "qualifier", (
        b.add(Statement(subject, verb, obj).text(), b.instant(), DISTINCT, subject, plain),
        b.add(Statement(again, verb, obj, qualifier).text(), b.instant(), DISTINCT, subject, more),
    )


def relatives(b: Builder) -> tuple[str, tuple[int, int]]:
    attribute, verb, objects = b.rng.choice(SHARED)
    one, other = b.rng.choice(RELATIVES)
    while True:
        owner = b.subject(user=b.rng.random() < 0.1)
        first, second = replace(owner, relative=one), replace(owner, relative=other)
        if b.free((first, attribute), (second, attribute)):
            break
    obj = b.rng.choice(objects)
    return "other subject", (
        b.add(Statement(first, verb, obj).text(), b.instant(), DISTINCT, first, attribute),
        b.add(Statement(second, verb, obj).text(), b.instant(), DISTINCT, second, attribute),
    )


def people(b: Builder) -> tuple[str, tuple[int, int]]:
    attribute, verb, objects = b.rng.choice(SHARED)
    while True:
        first, second = b.subject(), b.subject()
        if b.free((first, attribute), (second, attribute)):
            break
    obj = b.rng.choice(objects)
    return "other subject", (
        b.add(Statement(first, verb, obj).text(), b.instant(), DISTINCT, first, attribute),
        b.add(Statement(second, verb, obj).text(), b.instant(), DISTINCT, second, attribute),
    )


def multi(b: Builder) -> tuple[str, tuple[int, int]]:
    family, verb, values = b.rng.choice(MULTI)
    one, other = b.rng.sample(values, 2)
    if family == "pet":  # one dog and one cat, each of them its own key
        one = b.rng.choice([v for v in values if "dog" in v])
        other = b.rng.choice([v for v in values if "cat" in v])
        keys = ("pet:dog", "pet:cat")
    else:
        keys = (f"{family}:{one}", f"{family}:{other}")
    while True:
        subject = b.subject(user=b.rng.random() < 0.1)
        if b.free((subject, keys[0]), (subject, keys[1])):
            break
    second = b.subject(user=True) if subject.name == USER else subject
    return "multi-valued", (
        b.add(Statement(subject, verb, one).text(), b.instant(), DISTINCT, subject, keys[0]),
        b.add(Statement(second, verb, other).text(), b.instant(), DISTINCT, subject, keys[1]),
    )


def timed(b: Builder) -> tuple[str, tuple[int, int]]:
    what = b.rng.choice(("visited", "marathon", "concert"))
    if what == "marathon":
        year = b.rng.randint(2015, 2023)
        one, other = b.rng.sample(MARATHONS, 2)
        texts = (f"ran the {one} marathon in {year}", f"ran the {other} marathon in {year}")
        keys, generic = (f"marathon:{one}", f"marathon:{other}"), ()
    else:
        thing = b.rng.choice(PLACES if what == "visited" else BANDS)
        early, late = sorted(b.rng.sample(range(2012, 2024), 2))
        verb = f"visited {thing}" if what == "visited" else f"saw {thing} live"
        texts = (f"{verb} in {early}", f"{verb} in {late}")
        keys = (f"{what}:{thing}:{early}", f"{what}:{thing}:{late}")
        generic = (f"{what}:{thing}",)  # no other item about the same visit or band
    while True:
        subject = b.subject(user=b.rng.random() < 0.1)
        if b.free(*((subject, k) for k in (*keys, *generic))):
            break
    first, second = (
        b.add(Statement(subject, text).text(), b.instant(), DISTINCT, subject, key)
        for text, key in zip(texts, keys, strict=True)
    )
    return "other time or object", (first, second)


def generate(seed: int = SEED, family_name: str | None = None) -> Corpus:
    """The corpus of ``seed``; with ``family_name``, every named subject bears it (the
    copies ``scaled`` makes), so that copies share no subject but the user."""
    b = Builder(random.Random(seed), family_name)
    groups, pairs, kept = duplicates(b), updates(b), distinct(b)
    # stored in the order they became true, as an agent would have stored them
    order = sorted(range(len(b.facts)), key=lambda i: (b.facts[i].valid_from, i))
    new_id = {old: new for new, old in enumerate(order)}
    facts = tuple(replace(b.facts[old], id=new) for new, old in enumerate(order))
    return Corpus(
        seed,
        facts,
        tuple(replace(g, ids=tuple(new_id[i] for i in g.ids)) for g in groups),
        tuple(replace(u, old=new_id[u.old], new=new_id[u.new]) for u in pairs),
        tuple(replace(p, ids=(new_id[p.ids[0]], new_id[p.ids[1]])) for p in kept),
    )


def scaled(size: int, seed: int = SEED) -> list[Fact]:
    """``size`` facts for the cost part: copies of the corpus of seeds ``seed``, ``seed`` + 1,
    ..., the k-th copy's names bearing the k-th family name (the first copy is the corpus)."""
    facts: list[Fact] = []
    for copy in range(len(SURNAMES) + 1):
        corpus = generate(seed + copy, SURNAMES[copy - 1] if copy else None)
        facts += corpus.facts
        if len(facts) >= size:
            return facts[:size]
    raise ValueError(f"at most {len(facts)} facts")


def validate(corpus: Corpus, now: datetime | None = None) -> None:
    """Raise AssertionError unless the corpus keeps its promises (the docstring's)."""
    now = now or datetime.now(UTC)
    facts = corpus.facts
    assert len(facts) >= 300, len(facts)
    assert [f.id for f in facts] == list(range(len(facts)))
    assert all(START <= f.valid_from < min(now, LAST) for f in facts)
    assert all(a.valid_from <= b.valid_from for a, b in zip(facts, facts[1:], strict=False))
    labelled = [i for g in corpus.duplicates for i in g.ids]
    labelled += [i for u in corpus.updates for i in (u.old, u.new)]
    labelled += [i for p in corpus.distinct for i in p.ids]
    assert sorted(labelled) == list(range(len(facts))), "every fact in exactly one item"
    keys = Counter((f.subject, f.attribute) for f in facts)
    for group in corpus.duplicates:
        members = [facts[i] for i in group.ids]
        assert 2 <= len(members) <= 3 and len(group.variations) == len(members) - 1
        assert all(m.set == DUPLICATE for m in members)
        assert all(a.valid_from < b.valid_from for a, b in zip(members, members[1:], strict=False))
        assert keys[(members[0].subject, members[0].attribute)] == len(members)
        for kind, member in zip(group.variations, members[1:], strict=True):
            assert (member.content == members[0].content) == (kind == "exact"), member
    for update in corpus.updates:
        old, new = facts[update.old], facts[update.new]
        assert old.set == new.set == UPDATE and old.subject == new.subject
        assert timedelta(days=3) <= new.valid_from - old.valid_from <= timedelta(days=181)
        assert keys[(old.subject, old.attribute)] == 2 and update.old_value != update.new_value
    for pair in corpus.distinct:
        one, other = (facts[i] for i in pair.ids)
        assert one.set == other.set == DISTINCT and one.content != other.content
        assert keys[(one.subject, one.attribute)] == keys[(other.subject, other.attribute)] == 1
    repeated = Counter(f.content for f in facts)
    for text, count in repeated.items():
        if count > 1:  # only the exact repeats of a group
            assert len({(f.subject, f.attribute) for f in facts if f.content == text}) == 1, text
    assert Counter(v for g in corpus.duplicates for v in g.variations) == Counter(VARIATIONS)
    assert Counter(len(g.ids) for g in corpus.duplicates) == Counter(GROUP_SIZES)


def main(argv: list[str]) -> None:
    seed = next((int(a) for a in argv if a.isdigit()), SEED)
    corpus = generate(seed)
    validate(corpus)
    assert generate(seed) == corpus, "not deterministic"
    print("\n".join(corpus.composition()))
    if "--print" in argv:
        for fact in corpus.facts:
            print(f"{fact.id:4} {fact.valid_from:%Y-%m-%d} {fact.set:9} {fact.content}")


if __name__ == "__main__":
    main(sys.argv[1:])
