"""A retriever on a second Neo4j store serves the graph of the latest sync.

The Neo4j store keeps the records, vectors and neighbour lists it read while the server's sync
token (rewritten by every sync, in its transaction) is unchanged; the retriever reads a meta
entry before each search, which reads the token too. Here one store indexes the fixture
library, a second serves searches, and the first re-syncs the graph with one record changed
and the same index generation: the second's next search must show the changed record, and
searching again without a sync must read less than the first search did.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from skillgrove.graph import Retriever, index_library
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.graph.indexer import GENERATION_KEY
from skillgrove.graph.model import EdgeKind, NodeKind
from skillgrove.graph.neo4j_store import Neo4jConfig, Neo4jStore
from skillgrove.groups import load_library
from tests.conftest import NEO4J_URI
from tests.helpers import copy_fixture_library
from tests.neo4j.support import counted_reads, fresh_store

pytestmark = pytest.mark.neo4j

REQUEST = "translate this paragraph into German"


def test_a_second_store_serves_a_resync(tmp_path: Path, encoder: CachedEncoder,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    writer = fresh_store()
    reader = Neo4jStore.from_config(Neo4jConfig(uri=NEO4J_URI))
    try:
        index_library(load_library([copy_fixture_library(tmp_path / "lib")]), writer, encoder)
        reads = counted_reads(reader, monkeypatch)
        retriever = Retriever(reader, encoder)
        first = retriever.search(REQUEST, k=5)
        top = first.skills[0]
        assert top.description != "rewritten"
        cold = len(reads)
        reads.clear()
        again = retriever.search(REQUEST, k=5)
        assert again.skills[0].description == top.description
        assert len(reads) < cold  # the records, vectors and neighbours read before are kept

        nodes = writer.nodes()
        vectors = writer.vectors(n.id for n in nodes)
        changed = [replace(n, data={**n.data, "description": "rewritten"},
                           content_hash=n.content_hash + "-rewritten")
                   if n.id == top.id else n for n in nodes]
        generation = writer.get_meta(GENERATION_KEY)
        assert generation
        report = writer.sync(changed, vectors, writer.edges(), meta={GENERATION_KEY: generation})
        assert report.updated == (top.id,)
        after = retriever.search(REQUEST, k=5)
        assert after.skills[0].id == top.id
        assert after.skills[0].description == "rewritten"
    finally:
        reader.close()
        writer.close()


def test_what_a_search_reads_ahead_is_what_the_reads_return(tmp_path: Path,
                                                           encoder: CachedEncoder) -> None:
    """``hybrid_searches`` reads candidates' records, vectors and neighbour lists ahead into
    the cache; served from there they equal what a store without a cache reads from the
    server, neighbours in the same order."""
    writer = fresh_store()
    fresh = Neo4jStore.from_config(Neo4jConfig(uri=NEO4J_URI))  # has read no token: no cache
    try:
        index_library(load_library([copy_fixture_library(tmp_path / "lib")]), writer, encoder)
        vector = encoder.encode([REQUEST])[0]
        limits = dict.fromkeys(NodeKind, 50)
        lexical, dense = writer.hybrid_searches(REQUEST, vector, limits, limits)
        assert (lexical, dense) == (fresh.text_searches(REQUEST, limits),
                                    fresh.vector_searches(vector, limits))
        ids = list(dict.fromkeys(nid for hits in (*lexical.values(), *dense.values())
                                 for nid, _ in hits))
        assert ids and writer._cache.neighbors  # read ahead
        assert writer.nodes_by_id(ids) == fresh.nodes_by_id(ids)
        kept, read = writer.vectors(ids), fresh.vectors(ids)
        assert kept.keys() == read.keys()
        assert all((kept[i] == read[i]).all() for i in kept)
        for kinds in (None, [EdgeKind.SIMILAR_TO], [EdgeKind.FLOWS_TO, EdgeKind.CONTAINS]):
            assert writer.neighbors_of(ids, kinds) == fresh.neighbors_of(ids, kinds)
    finally:
        fresh.close()
        writer.close()
