"""Fit and check the relevance model on the hits the recall benchmarks dump (bench.hit_dump).

    python -m bench.relevance_fit LOCOMO.jsonl LONGMEMEVAL.jsonl [--folds 5]

Relevance must tell the evidence from the other memories of the same namespace, not only one
namespace from another (issue 42). Each hit is described by numbers of its own and of its place
in its ranking (memory/search/relevance.py, ``features``). The model's ``hit`` part is fitted
on both benchmarks together, on the hits of each question asked of its own memory (evidence
against the other hits), cross-validated by group (a LoCoMo conversation, a LongMemEval
question): the model that rates a group's hits never saw that group. Its ``query`` part, which
tells a memory holding the answer from one that does not (negatives: the hits of each question
asked of another memory), is the shipped one.

Reported per benchmark, for the relevance as dumped (the code that ran the benchmark) and the
one fitted:
- within-namespace AUC: the share of (evidence, other hit of the same question) pairs that the
  relevance orders right;
- context precision and evidence recall at 500 and 2,000 tokens: the question's best
  CONTEXT_SEARCH_TOP_K hits at or above the floor, packed in rank order into the budget.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gql_memory.config import CONTEXT_SEARCH_TOP_K
from gql_memory.memory.search.relevance import (
    CALIBRATIONS,
    HIT_FEATURES,
    Calibration,
    Logistic,
    Rated,
    features,
    relevances,
)

MODEL = "multilingual-e5-small"

BUDGETS = (500, 2000)
FLOORS = (0.0, 0.002, 0.003, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)


@dataclass
class Question:
    benchmark: str
    question: str
    group: str
    own: bool  # asked of its own memory (else: of another one, every hit a negative)
    evidence: int
    hits: list[dict[str, float]]


def load(path: Path, benchmark: str) -> list[Question]:
    questions = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        questions.append(
            Question(
                benchmark,
                record["question"],
                record["group"],
                record["asked_of"] == record["group"],
                record["evidence"],
                record["hits"],
            )
        )
    return questions


def features_of(q: Question) -> list[dict[str, float]]:
    """Each hit's features; the query's bests as the search recorded them, else (a dump from
    before they were) the best among the dumped hits."""
    cosines = [h["cosine"] for h in q.hits if h["cosine"] is not None]
    texts = [h["text_score"] for h in q.hits if h["text_score"] is not None]
    rows = []
    for h in q.hits:
        best_cosine = h.get("best_cosine") or max(cosines, default=0.0)
        best_text = h.get("best_text_score") or max(texts, default=None)
        cosine = h["cosine"] if h["cosine"] is not None else 0.0
        rows.append(features(cosine, h["text_score"], best_cosine, best_text, h["rank"]))
    return rows


def matrix(rows: Sequence[dict[str, float]], names: Sequence[str]) -> np.ndarray:
    return np.asarray([[row[n] for n in names] for row in rows], dtype=float).reshape(
        len(rows), len(names)
    )


def fit(questions: Sequence[Question], l2: float) -> Calibration:
    """The model's ``hit`` part, fitted on the hits of the questions asked of their own memory
    (evidence against the other hits); its ``query`` part is the shipped one (fitted with
    the questions asked of another memory, bench.relevance_floor)."""
    shipped = CALIBRATIONS[MODEL]
    hits = [row for q in questions if q.own for row in features_of(q)]
    evidence = [float(h["evidence"]) for q in questions if q.own for h in q.hits]
    return Calibration(
        query=shipped.query,
        hit=logistic(matrix(hits, HIT_FEATURES), np.asarray(evidence), HIT_FEATURES, l2),
        floor=shipped.floor,
    )


def logistic(x: np.ndarray, y: np.ndarray, names: Sequence[str], l2: float) -> Logistic:
    w = fit_logistic(x, y, l2)
    return Logistic(float(w[-1]), {n: float(v) for n, v in zip(names, w[:-1], strict=True)})


def rated(calibration: Calibration, q: Question) -> list[float]:
    """Each hit's relevance as the search computes it (memory/search/relevance.py)."""
    values = features_of(q)
    return relevances(
        [Rated(calibration.query.probability(v), calibration.hit.probability(v)) for v in values],
        [0.0] * len(values),
    )


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 50) -> np.ndarray:
    """Weights (bias last) by Newton's method with an L2 penalty (not on the bias) on the
    standardized features, returned on the features' own scale."""
    mean, spread = x.mean(axis=0), x.std(axis=0)
    spread[spread == 0] = 1.0
    design = np.hstack([(x - mean) / spread, np.ones((len(x), 1))])
    w = np.zeros(design.shape[1])
    penalty = np.eye(design.shape[1]) * l2
    penalty[-1, -1] = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(design @ w, -60, 60)))
        gradient = design.T @ (p - y) + penalty @ w
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    scaled = w[:-1] / spread
    return np.append(scaled, w[-1] - float(scaled @ mean))


def within_auc(questions: Iterable[Question], scores: dict[int, list[float]]) -> float:
    right = pairs = 0.0
    for index, q in enumerate(questions):
        if not q.own:
            continue
        positive = [s for s, h in zip(scores[index], q.hits, strict=True) if h["evidence"]]
        negative = [s for s, h in zip(scores[index], q.hits, strict=True) if not h["evidence"]]
        for p in positive:
            for n in negative:
                pairs += 1
                right += 1.0 if p > n else 0.5 if p == n else 0.0
    return right / pairs if pairs else math.nan


def context(
    questions: Sequence[Question],
    scores: dict[int, list[float]],
    floor: float,
    budget: int,
    ratio: float = 0.0,
) -> tuple[float, float, float]:
    """Precision (share of kept hits that are evidence, over the questions' contexts), evidence
    recall (per question, averaged), and the share of foreign contexts left empty. A hit is
    kept at or above ``floor`` and ``ratio`` times the best rated of the question's top."""
    kept = evidence_kept = 0
    recalls: list[float] = []
    empty: list[bool] = []
    for index, q in enumerate(questions):
        top = list(zip(q.hits, scores[index], strict=True))[:CONTEXT_SEARCH_TOP_K]
        bar = max(floor, ratio * max((score for _, score in top), default=0.0))
        spent, items, found = 0, 0, 0
        for hit, score in top:
            if score < bar or spent + hit["tokens"] > budget:
                continue
            spent += hit["tokens"]
            items += 1
            found += bool(hit["evidence"])
        if q.own:
            kept += items
            evidence_kept += found
            recalls.append(found / q.evidence if q.evidence else 0.0)
        else:
            empty.append(items == 0)
    precision = evidence_kept / kept if kept else math.nan
    share_empty = sum(empty) / len(empty) if empty else math.nan
    return precision, sum(recalls) / len(recalls), share_empty


def cross_validated(
    questions: list[Question], folds: int, l2: float, by_question: bool = False
) -> dict[int, list[float]]:
    """Each question's hits scored by a model fitted without its group (or, ``by_question``,
    without the question: for a dump of one group)."""

    def unit(q: Question) -> tuple[str, str]:
        return (q.benchmark, q.question if by_question else q.group)

    units = sorted({unit(q) for q in questions})
    fold_of = {u: i % folds for i, u in enumerate(units)}
    scores: dict[int, list[float]] = {}
    for fold in range(folds):
        model = fit([q for q in questions if fold_of[unit(q)] != fold], l2)
        for index, q in enumerate(questions):
            if fold_of[unit(q)] == fold:
                scores[index] = rated(model, q)
    return scores


RATIOS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.relevance_fit", description=__doc__)
    p.add_argument("locomo", type=Path)
    p.add_argument("longmemeval", type=Path, nargs="?")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--l2", type=float, default=1.0)
    p.add_argument("--by-question", action="store_true", help="folds of questions, not groups")
    args = p.parse_args(argv)
    questions = load(args.locomo, "LoCoMo")
    if args.longmemeval:
        questions += load(args.longmemeval, "LongMemEval")
    today = {i: [h["relevance"] for h in q.hits] for i, q in enumerate(questions)}
    fitted = cross_validated(questions, args.folds, args.l2, args.by_question)
    model = fit(questions, args.l2)
    print("fitted on all:", model)
    for benchmark in sorted({q.benchmark for q in questions}):
        chosen = [i for i, q in enumerate(questions) if q.benchmark == benchmark]
        subset = [questions[i] for i in chosen]
        print(f"\n## {benchmark}: {sum(q.own for q in subset)} questions")
        for name, scores in (("as dumped", today), ("fitted (cross-validated)", fitted)):
            local = {j: scores[i] for j, i in enumerate(chosen)}
            print(f"{name}: within-namespace AUC {within_auc(subset, local):.3f}")
            print("| floor | ratio | budget | precision | recall | foreign empty |")
            for floor in FLOORS:
                for ratio in RATIOS:
                    for budget in BUDGETS:
                        pr, rc, em = context(subset, local, floor, budget, ratio)
                        print(
                            f"| {floor} | {ratio} | {budget} | {100 * pr:.1f} | {100 * rc:.1f} "
                            f"| {100 * em:.1f} |"
                        )


if __name__ == "__main__":
    main()
