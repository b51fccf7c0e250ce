"""A quiet session's digest: its most central sentences, within a token budget, no model.

Each sentence of the session's turns is weighed by how much it shares with the others (the
sum of its TF-IDF cosines with the session's other sentences: what the session keeps talking
about), the best are taken until the budget is spent, and they are told in their order, each with
its speaker. When a chat model is configured, it may write the digest instead (llm.py).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
WORD = re.compile(r"[^\W_]+", re.UNICODE)
MIN_SENTENCE_WORDS = 4


@dataclass(frozen=True)
class Turn:
    id: int
    speaker: str
    content: str
    timestamp: datetime


@dataclass(frozen=True)
class _Sentence:
    position: int
    speaker: str
    text: str
    words: Counter[str]


def sentences(turns: Sequence[Turn]) -> list[_Sentence]:
    found: list[_Sentence] = []
    for turn in turns:
        for match in SENTENCE.finditer(turn.content):
            text = " ".join(match.group(0).split())
            words = Counter(w.casefold() for w in WORD.findall(text))
            if sum(words.values()) >= MIN_SENTENCE_WORDS:
                found.append(_Sentence(len(found), turn.speaker, text, words))
    return found


def central_sentences(
    turns: Sequence[Turn], budget: int, count_tokens: Callable[[str], int]
) -> list[tuple[str, str]]:
    """(speaker, sentence) of the most central sentences within ``budget`` tokens, in the
    order they were said."""
    found = sentences(turns)
    if not found:
        return []
    documents = Counter(word for s in found for word in s.words)
    total = len(found)
    vectors = []
    for s in found:
        weights = {w: n * math.log((1 + total) / (1 + documents[w])) for w, n in s.words.items()}
        norm = math.sqrt(sum(v * v for v in weights.values())) or 1.0
        vectors.append({w: v / norm for w, v in weights.items()})
    # the sum of a sentence's cosines with all others is its dot product with the sum of
    # all (unit) vectors, less its own: linear in the session's length
    summed: Counter[str] = Counter()
    for vector in vectors:
        summed.update(vector)
    centrality = [sum(v * summed[w] for w, v in vector.items()) - 1.0 for vector in vectors]
    chosen: list[_Sentence] = []
    used = 0
    for index in sorted(range(total), key=lambda k: (-centrality[k], k)):
        s = found[index]
        cost = count_tokens(f"{s.speaker}: {s.text}")
        if used + cost > budget:
            continue
        chosen.append(s)
        used += cost
    return [(s.speaker, s.text) for s in sorted(chosen, key=lambda s: s.position)]


def digest_text(session_id: str, turns: Sequence[Turn], lines: Sequence[tuple[str, str]]) -> str:
    """The digest as stored: the session, when it was held, then its sentences."""
    first, last = turns[0].timestamp, turns[-1].timestamp
    when = first.date().isoformat()
    if last.date() != first.date():
        when += f" to {last.date().isoformat()}"
    body = " ".join(f"{speaker}: {text}" for speaker, text in lines)
    return f"Session {session_id} ({when}): {body}"
