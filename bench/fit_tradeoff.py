"""The fit rule's two thresholds against what they trade (issue 25): requests given an empty
toolbox with nothing learned (flat mode, the dev sets) against off-topic requests answered
"nothing fits" (the corpus and the bundled library) and people's requests answered as their
writer expects (``bench/people.jsonl``). Prints figures, asserts nothing.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/fit_tradeoff.py [--limit 300] [--corpus-index DIR]

Each pair sets ``skills.minimum`` (the score a skill needs to fit) and ``skills.fit_cosine``
(the embedding it needs; see ``graph/stages/skills.py``, ``fits``). The dev sets are indexed once
in flat mode, as ``skillgrove bench --mode flat`` does, and scored as it scores them; the
corpus and the bundled library are indexed as a new user indexes them. The off-topic requests
are ``bench/cold.py``'s twenty.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cold
import people

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import CachedEncoder, EmbeddingCache, default_encoder
from skillgrove.graph.retrieval import Retriever
from skillgrove.graph.stages import DEFAULT_SETTINGS, Settings
from skillgrove.runtime.bench import _build, aggregate, read_dataset, score_query
from skillgrove.runtime.commands import cache_path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
DEV_SETS = ("toollinkos", "sealtools-in", "toollens")
PAIRS = ((0.25, 0.2), (0.2, 0.18), (0.2, 0.15), (0.15, 0.12), (0.1, 0.1), (0.05, 0.05))
"""(``skills.minimum``, ``skills.fit_cosine``), the shipped defaults first."""


def settings(pair: tuple[float, float]) -> Settings:
    return DEFAULT_SETTINGS.but(skills={"minimum": pair[0], "fit_cosine": pair[1]})


def dev_set(folder: Path, encoder: CachedEncoder, limit: int) -> dict[tuple[float, float], str]:
    dataset = read_dataset(folder)
    out = {}
    with tempfile.TemporaryDirectory(prefix="skillgrove-tradeoff-") as scratch:
        store, library, _ = _build(dataset, Path(scratch) / "flat", "flat", None, encoder,
                                   lambda path: EmbeddedStore(path / "graph.sqlite"))
        ids_by_name = {s.name: s.id for s in library.skills.values()}
        for pair in PAIRS:
            retriever = Retriever(store, encoder, settings(pair))
            rows = [score_query(retriever.search(q.request), q, ids_by_name, False)
                    for q in dataset.queries[:limit]]
            metrics = aggregate(rows, [])
            out[pair] = f"{metrics['set_f1']} / {metrics['shape_none']}%"
        store.close()
    return out


def library(paths: list[Path], index: Path, encoder: CachedEncoder,
            ) -> dict[tuple[float, float], tuple[int, int | None]]:
    """Per pair: off-topic requests given nothing; people's requests answered as expected
    (None unless ``paths`` is the bundled library)."""
    from skillgrove.runtime.engine import Skillgrove
    from skillgrove.runtime.paths import bundled_library

    with Skillgrove(paths, index=index, encoder=encoder) as engine:
        engine.index()
        names = {skill.id: name for name, skill in engine.library.skills.items()}
        cases = [json.loads(line) for line in people.REQUESTS.read_text().splitlines()
                 if line.strip()] if paths == [bundled_library()] else None
        out: dict[tuple[float, float], tuple[int, int | None]] = {}
        for pair in PAIRS:
            retriever = Retriever(engine.store, encoder, settings(pair))
            empty = 0
            for request in cold.OFF_TOPIC:
                toolbox = retriever.search(request)
                empty += toolbox.group is None and not toolbox.selected
            right = None if cases is None else sum(
                people.accepted(people.answer_of(retriever.search(c["request"]), names),
                                c["accept"]) for c in cases)
            out[pair] = (empty, right)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--corpus", type=Path, default=cold.CORPUS)
    parser.add_argument("--corpus-index", type=Path, help="an index of the corpus (built if "
                        "missing)")
    args = parser.parse_args()
    from skillgrove.runtime.paths import bundled_library

    encoder = CachedEncoder(default_encoder(None, cache_path().parent),
                            EmbeddingCache(cache_path()))
    columns: dict[str, dict[tuple[float, float], Any]] = {}
    for name in DEV_SETS:
        columns[f"{name} flat: set F1 / empty"] = dev_set(SHARED / name, encoder, args.limit)
    corpus_index = args.corpus_index or Path(tempfile.mkdtemp(prefix="skillgrove-tradeoff-"))
    corpus = library([args.corpus], corpus_index, encoder)
    columns["corpus off-topic: nothing fits"] = {p: f"{v[0]} of 20" for p, v in corpus.items()}
    with tempfile.TemporaryDirectory(prefix="skillgrove-tradeoff-") as scratch:
        bundled = library([bundled_library()], Path(scratch), encoder)
    columns["bundled off-topic: nothing fits"] = {p: f"{v[0]} of 20" for p, v in bundled.items()}
    written = sum(1 for line in people.REQUESTS.read_text().splitlines() if line.strip())
    columns["people: as expected"] = {p: f"{v[1]} of {written}" for p, v in bundled.items()}
    print("| minimum, fit_cosine | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for pair in PAIRS:
        label = f"{pair[0]}, {pair[1]}" + (" (defaults)" if pair == PAIRS[0] else "")
        print(f"| {label} | " + " | ".join(str(c[pair]) for c in columns.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
