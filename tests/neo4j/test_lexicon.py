"""Text searches on the Neo4j store are scored here, on term counts read once per sync.

The store reads every node's stored tokens of a kind along with the first search after a sync
(the search statement brings them only when the sync token it reads is not the one they were
read under) and scores BM25 on them in this process. What must hold: the scores and ranking
are those the Lucene path gives (the fulltext index finds candidates, ``cypher.bm25_scores``
scores them), to the bit; a sync by another store is seen by the next search; and a graph
without a sync token, where nothing may be kept, is still searched (through Lucene).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from skillgrove.graph.cypher import Statement
from skillgrove.graph.model import NodeKind, NodeRecord
from skillgrove.graph.neo4j_store import Neo4jConfig, Neo4jStore
from skillgrove.graph.text import query_tokens
from tests.conftest import NEO4J_URI
from tests.neo4j import support

pytestmark = pytest.mark.neo4j

WORDS = ("convert", "document", "report", "email", "chart", "table", "translate", "summary",
         "pdf", "slides", "invoice", "calendar", "image", "resize", "markdown", "周报", "图片")


def library(size: int, seed: int = 3) -> list[NodeRecord]:
    """Skills whose texts repeat words unevenly: many ties and near-ties, short and long texts,
    terms most skills hold (their idf is the floor) and terms few do."""
    rng = np.random.default_rng(seed)
    weights = np.linspace(2, 0.2, len(WORDS))  # the first words common, the last ones rare
    records = []
    for i in range(size):
        words = rng.choice(WORDS, size=int(rng.integers(1, 14)), p=weights / weights.sum())
        text = f"skill {i} " + " ".join(words)
        records.append(NodeRecord(f"sk-{i:04d}", NodeKind.SKILL, f"skill-{i}", text, f"h{i}",
                                  {"description": text}))
    return records


def vectors_for(records: list[NodeRecord]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    raw = rng.standard_normal((len(records), 16)).astype(np.float32)
    raw /= np.linalg.norm(raw, axis=1, keepdims=True)
    return {r.id: raw[i] for i, r in enumerate(records)}


QUERIES = ["convert the pdf report", "email email chart", "translate 周报 into markdown",
           "skill 7", "resize an image for the invoice", "document", "nothing matches zzz"]


def parts_read(store: Neo4jStore, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The ``part`` of each row of each read ``store`` makes from now on (one list a read)."""
    reads: list[list[str]] = []
    read = store._read

    def recorded(statement: Statement) -> list[dict[str, Any]]:
        rows = read(statement)
        reads.append([str(row.get("part")) for row in rows])
        return rows

    monkeypatch.setattr(store, "_read", recorded)
    return reads


@pytest.mark.parametrize("k", [1, 5, 50])
def test_scores_are_the_lucene_paths_to_the_bit(store: Neo4jStore, k: int) -> None:
    records = library(400)
    store.sync(records, vectors_for(records), [])
    for query in QUERIES:
        tokens = list(query_tokens(query))
        through_lucene, _ = store._lucene_searches(tokens, {NodeKind.SKILL: k})
        assert store.text_search(NodeKind.SKILL, query, k) == through_lucene.get(
            NodeKind.SKILL, []), query


def test_the_counts_are_read_once_per_sync_and_a_resync_is_seen(
        store: Neo4jStore, monkeypatch: pytest.MonkeyPatch) -> None:
    records = library(60)
    vectors = vectors_for(records)
    store.sync(records, vectors, [])
    reader = Neo4jStore.from_config(Neo4jConfig(uri=NEO4J_URI))
    try:
        reads = parts_read(reader, monkeypatch)
        first = reader.text_search(NodeKind.SKILL, "convert the pdf report", 5)
        assert first and "postings" in reads[0]
        reads.clear()
        assert reader.text_search(NodeKind.SKILL, "convert the pdf report", 5) == first
        assert len(reads) == 1 and "postings" not in reads[0]  # kept: the same token

        # Another store re-indexes: one skill now holds a word no skill held.
        changed = [replace(r, text=r.text + " zzfresh", content_hash=r.content_hash + "-2")
                   if r.id == "sk-0042" else r for r in records]
        store.sync(changed, vectors, [])
        reads.clear()
        assert [i for i, _ in reader.text_search(NodeKind.SKILL, "zzfresh", 5)] == ["sk-0042"]
        assert len(reads) == 1 and "postings" in reads[0]  # read again, in the same statement
        expected, _ = reader._lucene_searches(["zzfresh"], {NodeKind.SKILL: 5})
        assert reader.text_search(NodeKind.SKILL, "zzfresh", 5) == expected[NodeKind.SKILL]

        store.sync(records, vectors, [])  # and back: the word is gone
        assert reader.text_search(NodeKind.SKILL, "zzfresh", 5) == []
    finally:
        reader.close()


def test_a_graph_without_a_sync_token_is_searched_through_lucene(
        store: Neo4jStore, monkeypatch: pytest.MonkeyPatch) -> None:
    records = library(60)
    store.sync(records, vectors_for(records), [])
    expected = store.text_search(NodeKind.SKILL, "email email chart", 10)
    assert expected
    with support.driver() as drv:  # as a graph synced before sync tokens were written
        drv.execute_query("MATCH (m:SkillgroveMeta {key: 'skillgrove.sync'}) DELETE m")
    reads = parts_read(store, monkeypatch)
    assert store.text_search(NodeKind.SKILL, "email email chart", 10) == expected
    assert "postings" not in reads[0] and "text" in reads[1]  # nothing read to keep
    assert store._cache.token is None
