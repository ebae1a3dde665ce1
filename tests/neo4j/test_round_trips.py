"""A search on the Neo4j store takes a handful of round trips (issue #15), not one per record.

Every read the Neo4j store makes goes through ``Neo4jStore._read``: one query, one round trip to
the server. The test wraps it (the real server answers; nothing is mocked) and counts the reads
of each ``Retriever.search`` on the fixture library, indexed with its group router.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skillgrove.graph import Retriever, index_library
from skillgrove.graph.cypher import Statement
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.groups import load_library
from tests.helpers import copy_fixture_library
from tests.neo4j.support import fresh_store

pytestmark = pytest.mark.neo4j

MAX_ROUND_TRIPS = 10
"""Measured: 5 to 9 per search on these requests (before batching: 40 to 140)."""

REQUESTS = [
    "summarize the quarterly report PDF and email the key numbers to my team",  # a group
    "turn this CSV export into the weekly KPI report with a chart",
    "translate this paragraph into German",  # one skill
    "plot the values 3, 5 and 8 as a PNG bar chart",
    "extract the key figures from this text",
    "把这份报告翻译成德语",
    "process the document",
]


def test_a_search_takes_a_handful_of_round_trips(tmp_path: Path, encoder: CachedEncoder,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store = fresh_store()
    try:
        index_library(load_library([copy_fixture_library(tmp_path / "lib")]), store, encoder)
        retriever = Retriever(store, encoder)
        assert retriever.router() is not None  # the routed path, as a real library has
        reads: list[str] = []
        read = store._read

        def counted(statement: Statement) -> list[dict[str, Any]]:
            reads.append(statement[0])
            return read(statement)

        monkeypatch.setattr(store, "_read", counted)
        counts: dict[str, int] = {}
        for request in REQUESTS:
            reads.clear()
            toolbox = retriever.search(request, k=5)
            assert toolbox.skills, request
            counts[request] = len(reads)
        assert min(counts.values()) >= 1  # the wrapper does see the reads
        assert max(counts.values()) <= MAX_ROUND_TRIPS, counts
    finally:
        store.close()
