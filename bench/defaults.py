"""Leave-one-data-set-out for the defaults a new library gets (issue 25): the selection settings
of flat retrieval (nothing learned, no groups), fitted on two dev sets and measured on the third.
Prints figures, asserts nothing.

    .venv/bin/python bench/defaults.py [DIR ...] [--limit 300] [--max-empty 5] [--json]

Each data set (default: the three of ``../shared/benchmarks``) is indexed once in flat mode,
exactly as ``skillgrove bench --mode flat`` does; then every setting of :data:`GRID` answers the
first ``--limit`` queries of each, scored as the bench scores them (set F1, edge F1 and the share
of requests given an empty toolbox). For each held-out set, the setting chosen is the one with
the best mean set F1 on the other two among those that leave at most ``--max-empty`` percent of
requests empty on both; its figures on the held-out set are printed beside the shipped defaults'
and the plain baseline's (``bench/baseline.py``, run on the same queries).

Query vectors come from the embedding cache after the first setting, which changes no score.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baseline import evaluate as baseline_evaluate

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import CachedEncoder, EmbeddingCache, default_encoder
from skillgrove.graph.retrieval import Retriever
from skillgrove.graph.stages import DEFAULT_SETTINGS
from skillgrove.runtime.bench import _build, aggregate, read_dataset, score_query
from skillgrove.runtime.commands import cache_path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
DEFAULT_SETS = ("toollinkos", "sealtools-in", "toollens")

GRID: dict[str, dict[str, Any]] = {
    "defaults": {},
    "minimum 0.15": {"minimum": 0.15},
    "ratio 0.7": {"ratio": 0.7},
    "ratio 0.7, minimum 0.15": {"ratio": 0.7, "minimum": 0.15},
    "fit_cosine 0.25": {"fit_cosine": 0.25},
    "fit_cosine off": {"fit_cosine": None},
    "vector_weight 0.25": {"vector_weight": 0.25},
    "vector_weight balanced": {"vector_weight": None},
    "vector_weight 0.75": {"vector_weight": 0.75},
}
"""The settings tried: each changes the shipped defaults of the candidate-skill stage
(``graph/stages/skills.py``, ``SkillSettings``) in one place or two. Flat retrieval fits nothing, so these are exactly what a new library answers with."""


def measure(folder: Path, encoder: CachedEncoder, limit: int) -> dict[str, dict[str, Any]]:
    """Every setting of :data:`GRID` on the first ``limit`` queries of the data set."""
    dataset = read_dataset(folder)
    queries = dataset.queries[:limit]
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="skillgrove-defaults-") as scratch:
        store, library, _ = _build(dataset, Path(scratch) / "flat", "flat", None, encoder,
                                   lambda path: EmbeddedStore(path / "graph.sqlite"))
        ids_by_name = {s.name: s.id for s in library.skills.values()}
        for name, changes in GRID.items():
            retriever = Retriever(store, encoder, DEFAULT_SETTINGS.but(skills=changes))
            rows = [score_query(retriever.search(query.request), query, ids_by_name, False)
                    for query in queries]
            metrics = aggregate(rows, [])
            # Flat mode has no groups: a toolbox of shape "none" is an empty one.
            out[name] = {"set_f1": metrics["set_f1"], "edge_f1": metrics.get("edge_f1", "-"),
                         "empty": metrics["shape_none"]}
            print(f"  {dataset.name}: {name}: {out[name]}", file=sys.stderr)
        store.close()
    return out


def baseline(folder: Path, limit: int) -> dict[str, Any]:
    """``bench/baseline.py``'s figures on the same first ``limit`` queries."""
    dataset = read_dataset(folder)
    dataset = replace(dataset, queries=dataset.queries[:limit])
    metrics = baseline_evaluate(dataset)["metrics"]
    return {"set_f1": metrics["set_f1"], "edge_f1": metrics.get("edge_f1", "-")}


def leave_one_out(figures: Mapping[str, Mapping[str, Mapping[str, Any]]],
                  max_empty: float) -> dict[str, str]:
    """For each held-out set, the setting with the best mean set F1 on the others, among those
    leaving at most ``max_empty`` percent empty on each of them (the defaults if none does)."""
    chosen = {}
    for held in figures:
        others = [name for name in figures if name != held]

        def fitted(setting: str, others: Sequence[str] = others) -> tuple[bool, float]:
            allowed = all(figures[o][setting]["empty"] <= max_empty for o in others)
            return allowed, sum(figures[o][setting]["set_f1"] for o in others) / len(others)

        chosen[held] = max(GRID, key=fitted)
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="*", type=Path,
                        default=[SHARED / name for name in DEFAULT_SETS])
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--max-empty", type=float, default=5.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if len(args.dirs) < 2:
        parser.error("leaving one data set out needs two data sets or more")
    cache = EmbeddingCache(cache_path())
    encoder = CachedEncoder(default_encoder(None, cache_path().parent), cache)
    figures = {folder.name: measure(folder, encoder, args.limit) for folder in args.dirs}
    plain = {folder.name: baseline(folder, args.limit) for folder in args.dirs}
    chosen = leave_one_out(figures, args.max_empty)
    if args.json:
        print(json.dumps({"figures": figures, "baseline": plain, "chosen": chosen}))
        return 0
    names = list(figures)
    print("set F1 / edge F1 / % empty, first", args.limit, "queries, flat mode")
    print("| setting | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for setting in GRID:
        cells = [f"{figures[n][setting]['set_f1']} / {figures[n][setting]['edge_f1']} / "
                 f"{figures[n][setting]['empty']}%" for n in names]
        print(f"| {setting} | " + " | ".join(cells) + " |")
    print()
    print("| held out | chosen on the other two | held-out set F1 / edge F1 / % empty "
          "| the defaults | plain baseline |")
    print("|---|---|---|---|---|")
    for held in names:
        got, ship = figures[held][chosen[held]], figures[held]["defaults"]
        print(f"| {held} | {chosen[held]} | {got['set_f1']} / {got['edge_f1']} / "
              f"{got['empty']}% | {ship['set_f1']} / {ship['edge_f1']} / {ship['empty']}% | "
              f"{plain[held]['set_f1']} / {plain[held]['edge_f1']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
