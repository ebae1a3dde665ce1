"""``skillgrove bench`` and the product answer alike: a library written by the harness, indexed
by the engine with the history as its run log (``index --history``) and searched through the
engine, gives the toolboxes the harness scores, on 20 queries of each dev set.

Each dev set is cut to the skills its first 20 queries and 60 history rows use plus 80 others
(the claim is about the code path, not the figures, and a full set takes minutes to embed)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.retrieval import RetrievalConfig, Retriever, Toolbox
from skillgrove.runtime import bench
from skillgrove.runtime.engine import Skillgrove
from skillgrove.runtime.errors import InvalidRequestError

BENCHMARKS = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
SETS = ["toollens", "sealtools-in", "toollinkos"]


def cut(dataset: bench.Dataset) -> bench.Dataset:
    queries = dataset.queries[:20]
    history = dataset.history[:60]
    wanted = {s for q in queries for s in q.gold} | {s for r in history for s in r.skills}
    others = [s for s in dataset.skills if str(s["id"]) not in wanted]
    random.Random(3).shuffle(others)
    keep = wanted | {str(s["id"]) for s in others[:80]}
    skills = tuple(s for s in dataset.skills if str(s["id"]) in keep)
    return replace(dataset, skills=skills, history=history, queries=queries)


def answer(toolbox: Toolbox) -> tuple[object, ...]:
    return (toolbox.group.id if toolbox.group else None, toolbox.selected, toolbox.edges,
            tuple(s.id for s in toolbox.skills), toolbox.fallback_reason)


@pytest.mark.slow
@pytest.mark.parametrize("name", SETS)
def test_bench_and_index_history_give_the_same_toolboxes(name: str, tmp_path: Path,
                                                         encoder: object) -> None:
    folder = BENCHMARKS / name
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing")
    dataset = cut(bench.read_dataset(folder))
    config = RetrievalConfig()
    # The harness: its own library folder, learned groups, co-use and transitions.
    store, _, _ = bench._build(dataset, tmp_path / "bench", "groups", None,
                                     encoder, lambda f: EmbeddedStore(f / "index.sqlite"))
    harness = Retriever(store, encoder, config)  # type: ignore[arg-type]
    # The product: the same folder, indexed by the engine with the history as its run log.
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps({"id": r.id, "request": r.request,
                                           "skills": list(r.skills), "edges": list(r.edges)})
                               + "\n" for r in dataset.history), encoding="utf-8")
    engine = Skillgrove([tmp_path / "bench" / "library"], index=tmp_path / "index",
                        encoder=encoder, retrieval=config, auto_refresh=False)  # type: ignore[arg-type]
    try:
        engine.index(history=history)
        assert (tmp_path / "index" / "history.jsonl").exists()
        for query in dataset.queries:
            assert answer(engine.search(query.request)) == answer(
                harness.search(query.request)), query.request
    finally:
        engine.close()
        store.close()


def test_a_malformed_history_names_its_line(tmp_path: Path, encoder: object) -> None:
    bad = tmp_path / "history.jsonl"
    bad.write_text('{"id": "1", "request": "x", "skills": ["a"]}\n{"id": 2\n', encoding="utf-8")
    engine = Skillgrove([Path(__file__).resolve().parents[1] / "library"],
                        index=tmp_path / "index", encoder=encoder)  # type: ignore[arg-type]
    try:
        with pytest.raises(InvalidRequestError) as caught:
            engine.index(history=bad)
        assert "history.jsonl:2" in str(caught.value)
        assert not (tmp_path / "index" / "history.jsonl").exists()
    finally:
        engine.close()
