"""A search on the Neo4j store takes a handful of round trips (issue #15), not one per record.

Every read the Neo4j store makes goes through ``Neo4jStore._read``: one query, one round trip to
the server. The test wraps it (the real server answers; nothing is mocked) and counts the reads
of each ``Retriever.search`` on the fixture library, indexed with its group router: with the
store's read cache emptied first (what a search of records never read before costs), and
again for the same request (what is kept is not read twice; the index generation and the
searches themselves always are).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skillgrove.graph import Retriever, index_library
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.graph.planner import request_parts
from skillgrove.graph.text import cjk_share
from skillgrove.groups import load_library
from tests.helpers import copy_fixture_library
from tests.neo4j.support import counted_reads, fresh_store

pytestmark = pytest.mark.neo4j

MAX_ROUND_TRIPS = 7
"""Measured: 5 or 6 per search on these requests with nothing kept (before batching: 40 to
140; batched, before the combined searches and the read cache: 5 to 9)."""
GLOSSED_GROUPS = 4
MAX_REPEATED_ROUND_TRIPS = 3
"""The same request again: the index generation (with the sync token) and the searches, which
are never kept: one statement, two for the request in Chinese (searched again by its English
gloss)."""

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
        reads = counted_reads(store, monkeypatch)
        counts: dict[str, int] = {}
        repeated: dict[str, int] = {}
        for request in REQUESTS:
            store.clear_read_cache()
            reads.clear()
            toolbox = retriever.search(request, k=5)
            assert toolbox.skills, request
            counts[request] = len(reads)
            reads.clear()
            assert retriever.search(request, k=5).skills == toolbox.skills
            repeated[request] = len(reads)
        assert min(counts.values()) >= 2  # the wrapper does see the reads
        # Each part of a request beyond the first is searched on its own (graph/planner.py):
        # one more statement each.
        # A request in Chinese that no group fits as written looks for a group again by its
        # English gloss: four more.
        extra = {r: len(request_parts(r)) - 1 + (GLOSSED_GROUPS if cjk_share(r) > 0.3 else 0)
                 for r in REQUESTS}
        over = {r: (n, extra[r]) for r, n in counts.items() if n > MAX_ROUND_TRIPS + extra[r]}
        assert not over, over
        assert all(n <= MAX_REPEATED_ROUND_TRIPS + extra[r] for r, n in repeated.items()), \
            repeated
    finally:
        store.close()
