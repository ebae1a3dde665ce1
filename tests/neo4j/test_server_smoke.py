"""Smoke test against the real Neo4j Community server started by .ci/neo4j/server.sh.

Proves that the features skillgrove relies on exist on Community Edition: a VECTOR index
(384-dim, cosine) that can be queried for nearest neighbours, and a FULLTEXT index.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator

import pytest
from neo4j import Driver, GraphDatabase

pytestmark = pytest.mark.neo4j

URI = os.environ.get("SKILLGROVE_NEO4J_URI", "bolt://127.0.0.1:7687")
DATABASE = "neo4j"
DIMENSIONS = 384
VECTOR_INDEX = "skillgrove_smoke_doc_embedding"
FULLTEXT_INDEX = "skillgrove_smoke_doc_text"

DOCS = [
    ("alpha", "graph databases store nodes and relationships"),
    ("beta", "vector search finds the nearest embedding"),
    ("gamma", "fulltext search uses lucene analyzers"),
    ("delta", "skills grow in a grove of small trees"),
    ("epsilon", "cosine similarity compares directions"),
]


def embedding(seed: int) -> list[float]:
    """Deterministic unit vector; different seeds point in clearly different directions."""
    raw = [
        math.sin((seed + 1) * 0.7 * (i + 1)) + math.cos((seed + 3) * 0.3 * i)
        for i in range(DIMENSIONS)
    ]
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


def cleanup(driver: Driver) -> None:
    # DETACH DELETE in one go is fine: the smoke data is a handful of nodes.
    driver.execute_query("MATCH (n:SmokeDoc) DETACH DELETE n", database_=DATABASE)
    for name in (VECTOR_INDEX, FULLTEXT_INDEX):
        # Index names are identifiers, which Cypher only accepts as parameters in DDL.
        driver.execute_query("DROP INDEX $name IF EXISTS", name=name, database_=DATABASE)


@pytest.fixture
def driver() -> Iterator[Driver]:
    with GraphDatabase.driver(URI, auth=None) as drv:
        drv.verify_connectivity()
        cleanup(drv)
        try:
            yield drv
        finally:
            cleanup(drv)


def test_vector_and_fulltext_indexes_on_community(driver: Driver) -> None:
    docs = [
        {"name": name, "text": text, "embedding": embedding(i)}
        for i, (name, text) in enumerate(DOCS)
    ]
    driver.execute_query(
        "UNWIND $docs AS doc CREATE (n:SmokeDoc) SET n = doc",
        docs=docs,
        database_=DATABASE,
    )

    driver.execute_query(
        "CREATE VECTOR INDEX $name IF NOT EXISTS FOR (n:SmokeDoc) ON n.embedding "
        "OPTIONS {indexConfig: {`vector.dimensions`: $dimensions, `vector.similarity_function`: $similarity}}",
        name=VECTOR_INDEX,
        dimensions=DIMENSIONS,
        similarity="cosine",
        database_=DATABASE,
    )
    driver.execute_query(
        "CREATE FULLTEXT INDEX $name IF NOT EXISTS FOR (n:SmokeDoc) ON EACH [n.text]",
        name=FULLTEXT_INDEX,
        database_=DATABASE,
    )
    driver.execute_query("CALL db.awaitIndexes($seconds)", seconds=120, database_=DATABASE)

    records, _, _ = driver.execute_query(
        "SHOW INDEXES YIELD name, type, state WHERE name IN $names RETURN name, type, state",
        names=[VECTOR_INDEX, FULLTEXT_INDEX],
        database_=DATABASE,
    )
    assert {r["name"]: (r["type"], r["state"]) for r in records} == {
        VECTOR_INDEX: ("VECTOR", "ONLINE"),
        FULLTEXT_INDEX: ("FULLTEXT", "ONLINE"),
    }

    # Query with a slightly perturbed copy of "delta" so the match is near, not identical.
    target = 3
    query = [x + 0.01 * math.cos(i) for i, x in enumerate(embedding(target))]
    records, _, _ = driver.execute_query(
        "CALL db.index.vector.queryNodes($index, $k, $query) YIELD node, score "
        "RETURN node.name AS name, score ORDER BY score DESC",
        index=VECTOR_INDEX,
        k=3,
        query=query,
        database_=DATABASE,
    )
    assert len(records) == 3
    assert records[0]["name"] == DOCS[target][0]
    assert records[0]["score"] > 0.95  # Neo4j reports cosine as (1 + cos) / 2
    assert records[0]["score"] > records[1]["score"]

    records, _, _ = driver.execute_query(
        "CALL db.index.fulltext.queryNodes($index, $search) YIELD node, score "
        "RETURN node.name AS name, score ORDER BY score DESC",
        index=FULLTEXT_INDEX,
        search="lucene",
        database_=DATABASE,
    )
    assert [r["name"] for r in records] == ["gamma"]
