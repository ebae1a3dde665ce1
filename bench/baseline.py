"""The plain baseline of issue 25: BM25 for the ranking, the best history set by BM25 for the
selection. Prints figures, asserts nothing; reads any folder in the format of
``shared/benchmarks/FORMAT.md``.

    .venv/bin/python bench/baseline.py DIR [--hide-sets 0.2] [--history-rows N |
        --history-fraction F] [--seed 0] [--json]

The rule, per query:

- **Ranking**: BM25 in Lucene's form (k1 1.2, b 0.75, ``idf = log(1 + (N - n + 0.5) / (n +
  0.5))``) over each skill's name, description, tags, body and the names and descriptions of its
  declared inputs and outputs; only skills with a positive score are ranked.
- **Selection**: the same BM25 over the requests of the history rows. The top-scoring row (the
  first in file order on a tie) gives the selected set: its skills, in its call order. The
  selected edges are that row's edges; where several rows hold the same skill set, the edge set
  most of them carry (a tie goes to the top row's own edges, then to the first seen).
- **Fallback**: when no history row scores above zero, the top BM25 skill alone is selected, with
  no edges (``fallback_top3`` in ``--json`` selects the top three instead).
- **Ranked list**: the selected set first, then the BM25 ranking without repeats.

The metrics are those of ``runtime/bench.py`` (``score_query``, ``aggregate``): each answer is
made into a :class:`Toolbox` with no group, the selected edges in ``Toolbox.edges``. ``flat``
in ``--json`` is BM25 alone (no history; the top skill selected), to compare with FORMAT.md's
reference figures.

Tokens: lower-cased runs of ``[a-z0-9]`` and each CJK character on its own. A query term counts
once however often it occurs in the query (a query as a set of term clauses): with this, BM25
alone comes within 0.4 points of FORMAT.md's reference figures on sealtools-in (R@5 88.7 against
89.1, C@10 85.1 against 85.3) and within 1.5 on the others; counting repeats loses 2-10 points of
C@10.

``--hide-sets S`` removes that share of the recurring skill sets from history and scores only the
queries that need one (``runtime/bench.py``'s ``hide_skill_sets``, seed 0). ``--history-rows N``
(or ``--history-fraction F``) then keeps the first N history rows of a seeded shuffle (``--seed``),
to mimic a small run log.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skillgrove.graph.learning import HistoryRow
from skillgrove.graph.retrieval import ScoredSkill, Toolbox
from skillgrove.graph.toolbox import SkillExplanation
from skillgrove.runtime.bench import (
    Dataset,
    Query,
    aggregate,
    hide_skill_sets,
    read_dataset,
    score_query,
)

K1 = 1.2
B = 0.75
RANKED = 20
"""How many BM25-ranked skills follow the selected set in the ranked list (metrics read 10)."""

_TOKEN = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")


def tokens(text: str) -> list[str]:
    """>>> tokens("Email the PDF-report 给团队")
    ['email', 'the', 'pdf', 'report', '给', '团', '队']"""
    return _TOKEN.findall(text.lower())


class Bm25:
    """Lucene's BM25 over a fixed corpus. A term's weight in a document does not depend on the
    query, so it is computed once per (term, document); a query adds up its terms' columns."""

    def __init__(self, corpus: Iterable[Sequence[str]], k1: float = K1, b: float = B) -> None:
        counts = [Counter(doc) for doc in corpus]
        self.size = len(counts)
        lengths = np.array([sum(c.values()) for c in counts], dtype=np.float64)
        average = float(lengths.mean()) if self.size and lengths.sum() else 1.0
        norm = k1 * (1 - b + b * lengths / average)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for index, doc in enumerate(counts):
            for term, tf in doc.items():
                docs, tfs = postings.setdefault(term, ([], []))
                docs.append(index)
                tfs.append(tf)
        self.postings: dict[str, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = {}
        for term, (docs, tfs) in postings.items():
            at, tf = np.array(docs, dtype=np.int64), np.array(tfs, dtype=np.float64)
            idf = math.log(1 + (self.size - len(docs) + 0.5) / (len(docs) + 0.5))
            self.postings[term] = (at, idf * tf * (k1 + 1) / (tf + norm[at]))

    def scores(self, query: Sequence[str]) -> np.ndarray[Any, Any]:
        out = np.zeros(self.size, dtype=np.float64)
        for term in dict.fromkeys(query):
            found = self.postings.get(term)
            if found is not None:
                out[found[0]] += found[1]
        return out


def skill_text(skill: Mapping[str, Any]) -> str:
    """Name, description, tags, body, and the declared inputs' and outputs' names and
    descriptions."""
    parts = [str(skill.get("name") or ""), str(skill.get("description") or ""),
             " ".join(str(t) for t in skill.get("tags") or []), str(skill.get("body") or "")]
    for key in ("inputs", "outputs"):
        schema = skill.get(key)
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if isinstance(properties, dict):
            for name, spec in properties.items():
                parts.append(str(name))
                if isinstance(spec, dict) and spec.get("description"):
                    parts.append(str(spec["description"]))
    return "\n".join(parts)


@dataclass(frozen=True)
class Answer:
    selected: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    ranking: tuple[tuple[str, float], ...]
    """BM25-ranked skill ids with their scores, best first (positive scores only)."""
    from_history: bool
    history_row: str | None = None


class Baseline:
    """The rule of the module docstring over one library and one history."""

    def __init__(self, skills: Sequence[Mapping[str, Any]], history: Sequence[HistoryRow],
                 fallback_size: int = 1) -> None:
        self.ids = [str(s["id"]) for s in skills]
        self.skill_index = Bm25(tokens(skill_text(s)) for s in skills)
        self.rows = [r for r in history if r.skills]
        self.history_index = Bm25(tokens(r.request) for r in self.rows)
        self.fallback_size = fallback_size
        # Per skill set, how often each edge set occurs among its rows.
        self.edge_sets: dict[frozenset[str], Counter[frozenset[tuple[str, str]]]] = {}
        for row in self.rows:
            self.edge_sets.setdefault(frozenset(row.skills), Counter())[
                frozenset(row.edges)] += 1

    def rank(self, request: str) -> tuple[tuple[str, float], ...]:
        scores = self.skill_index.scores(tokens(request))
        positive = np.nonzero(scores > 0)[0]
        order = positive[np.lexsort((positive, -scores[positive]))]
        return tuple((self.ids[i], float(scores[i])) for i in order)

    def answer(self, request: str, fallback_size: int | None = None) -> Answer:
        ranking = self.rank(request)
        scores = self.history_index.scores(tokens(request))
        if self.rows and scores.max() > 0:
            row = self.rows[int(np.argmax(scores))]  # argmax: the first of equal scores
            return Answer(tuple(dict.fromkeys(row.skills)), self._edges(row), ranking, True,
                          row.id)
        size = self.fallback_size if fallback_size is None else fallback_size
        return Answer(tuple(s for s, _ in ranking[:size]), (), ranking, False)

    def _edges(self, row: HistoryRow) -> tuple[tuple[str, str], ...]:
        counts = self.edge_sets[frozenset(row.skills)]
        own = frozenset(row.edges)
        best = max(counts.values())
        # max() keeps the first of equal keys: the row's own edges first, then first seen.
        chosen = max([own, *counts], key=lambda edges: counts[edges] == best)
        ordered = [e for e in row.edges if e in chosen] + sorted(chosen - own)
        return tuple(dict.fromkeys(ordered))


def toolbox(request: str, answer: Answer, names: Mapping[str, str],
            descriptions: Mapping[str, str], latency_ms: float = 0.0) -> Toolbox:
    """The answer as the product's value, so ``score_query`` reads it as it reads a search."""
    scores = dict(answer.ranking)
    listed = list(dict.fromkeys([*answer.selected,
                                 *(s for s, _ in answer.ranking[:RANKED])]))
    skills = tuple(ScoredSkill(s, names.get(s, s), scores.get(s, 0.0), descriptions.get(s, ""),
                               True, SkillExplanation()) for s in listed)
    reason = None if answer.from_history else "no history request shares a word"
    return Toolbox(request, None, reason, skills, answer.selected, (), (), latency_ms,
                   answer.edges)


def limit_history(dataset: Dataset, rows: int | None = None, fraction: float | None = None,
                  seed: int = 0) -> Dataset:
    """The dataset with the first ``rows`` (or ``fraction`` of the) history rows of a seeded
    shuffle, in their file order."""
    if rows is None and fraction is None:
        return dataset
    count = rows if rows is not None else round(len(dataset.history) * (fraction or 0.0))
    order = list(range(len(dataset.history)))
    random.Random(seed).shuffle(order)
    kept = sorted(order[:max(0, count)])
    return replace(dataset, history=tuple(dataset.history[i] for i in kept))


def evaluate(dataset: Dataset) -> dict[str, Any]:
    """Every query answered and scored three ways: the baseline, with a top-3 fallback, and
    BM25 alone (``flat``)."""
    names = {str(s["id"]): str(s["name"]) for s in dataset.skills}
    descriptions = {str(s["id"]): str(s.get("description") or "") for s in dataset.skills}
    ids_by_name = {n: i for i, n in names.items()}
    started = time.perf_counter()
    baseline = Baseline(dataset.skills, dataset.history)
    build_s = time.perf_counter() - started
    runs: dict[str, list[dict[str, float | None]]] = {"baseline": [], "fallback_top3": [],
                                                        "flat": []}
    latencies: list[float] = []
    fallbacks = 0
    for query in dataset.queries:
        began = time.perf_counter()
        answer = baseline.answer(query.request)
        latency = (time.perf_counter() - began) * 1000
        latencies.append(latency)
        fallbacks += not answer.from_history
        runs["baseline"].append(_score(query, toolbox(query.request, answer, names,
                                                      descriptions, latency), ids_by_name))
        top3 = answer if answer.from_history else baseline.answer(query.request, 3)
        runs["fallback_top3"].append(_score(query, toolbox(query.request, top3, names,
                                                           descriptions), ids_by_name))
        flat = Answer(tuple(s for s, _ in answer.ranking[:1]), (), answer.ranking, False)
        runs["flat"].append(_score(query, toolbox(query.request, flat, names, descriptions),
                                   ids_by_name))
    count = len(dataset.queries)
    return {
        "dataset": dataset.name, "mode": "baseline", "queries": count,
        "metrics": _figures(runs["baseline"], latencies),
        "fallback_top3": _figures(runs["fallback_top3"], []),
        "flat": _figures(runs["flat"], []),
        "details": {"skills": len(dataset.skills), "history_rows": len(baseline.rows),
                    "fallback_rate": round(100 * fallbacks / count, 1) if count else 0.0,
                    "build_s": round(build_s, 2)},
    }


_REPORTED = ("recall@3", "recall@5", "recall@10", "completeness@3", "completeness@5",
             "completeness@10", "ndcg@5", "set_f1", "edge_f1", "exact", "latency_ms_p50",
             "latency_ms_p95")


def _score(query: Query, box: Toolbox, ids_by_name: Mapping[str, str]
           ) -> dict[str, float | None]:
    return score_query(box, query, ids_by_name, composite=False)


def _figures(rows: Sequence[Mapping[str, float | None]], latencies: Sequence[float]
             ) -> dict[str, float]:
    metrics = aggregate(rows, latencies)
    return {k: metrics[k] for k in _REPORTED if k in metrics}


def format_table(result: Mapping[str, Any]) -> str:
    keys = ("set_f1", "edge_f1", "recall@5", "recall@10", "completeness@10", "exact")
    heads = ("set F1", "edge F1", "R@5", "R@10", "C@10", "exact")
    lines = [f"{result['dataset']}: {result['queries']} queries, "
             f"{result['details']['history_rows']} history rows, "
             f"{result['details']['fallback_rate']}% fell back to BM25",
             f"{'':16}" + "".join(f"{h:>9}" for h in heads)]
    for label in ("baseline", "fallback_top3", "flat"):
        figures = result["metrics"] if label == "baseline" else result[label]
        cells = "".join(f"{figures[k]:>9.1f}" if k in figures else f"{'-':>9}" for k in keys)
        lines.append(f"{label:16}{cells}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--hide-sets", type=float, default=0.0)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--history-rows", type=int)
    size.add_argument("--history-fraction", type=float)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    dataset = read_dataset(args.folder)
    hidden = 0
    if args.hide_sets > 0:
        dataset, sets = hide_skill_sets(dataset, args.hide_sets)
        hidden = len(sets)
    dataset = limit_history(dataset, args.history_rows, args.history_fraction, args.seed)
    result = evaluate(dataset)
    result["details"].update(hide_sets=args.hide_sets, hidden_sets=hidden)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
