"""One conformance suite for every GraphStore: the embedded store and the Neo4j store.

Each test runs on both (the ``neo4j`` parameter against the real server ``.ci/test`` starts; the
database is emptied before each test). Expected values are computed independently where they can
be (cosines with numpy, BM25 rankings with :class:`graph.bm25.BM25`), so a test cannot pass
merely because both stores share a mistake. The tests at the end compare the two stores directly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skillgrove.graph import (
    Edge,
    EdgeKind,
    EmbeddedStore,
    GraphStore,
    NodeKind,
    NodeRecord,
    RequestContext,
    Retriever,
    index_library,
)
from skillgrove.graph.bm25 import BM25
from skillgrove.graph.embeddings import CachedEncoder, Vectors
from skillgrove.graph.text import tokenize
from skillgrove.groups import load_library
from tests.helpers import copy_fixture_library

DIMS = 384
STORES = ["embedded", pytest.param("neo4j", marks=pytest.mark.neo4j)]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    opened: GraphStore
    if request.param == "embedded":
        opened = EmbeddedStore(tmp_path / "graph.sqlite")
    else:
        from tests.neo4j.support import fresh_store

        opened = fresh_store()
    try:
        yield opened
    finally:
        opened.close()


# -- a small graph ----------------------------------------------------------------------------

def unit(seed: int) -> Vectors:
    vector = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def node(node_id: str, kind: NodeKind, name: str, text: str, **data: Any) -> NodeRecord:
    payload = {"description": text, **data}
    digest = hashlib.sha256(json.dumps([kind.value, name, text, payload], sort_keys=True,
                                       ensure_ascii=False).encode()).hexdigest()
    return NodeRecord(node_id, kind, name, text, digest, payload)


SKILLS = [
    node("sk-pdf", NodeKind.SKILL, "pdf-to-text",
         "pdf to text: extract the text of a PDF document, page by page", tags=["pdf"]),
    node("sk-email", NodeKind.SKILL, "send-email",
         "send email: send an email message to a list of recipients with a subject",
         available=False, unavailable_reasons=["environment variable not set: SMTP_HOST"]),
    node("sk-chart", NodeKind.SKILL, "make-chart",
         "make chart: draw a bar chart or a line chart as a PNG image from numbers"),
    node("sk-csv", NodeKind.SKILL, "csv-stats",
         "csv stats: summary statistics of the numbers in a CSV spreadsheet export"),
    node("sk-weekly", NodeKind.SKILL, "weekly-report-zh",
         "生成周报：汇总本周的工作进展，整理成周报发送给团队"),
    node("sk-translate", NodeKind.SKILL, "translate-text",
         "translate text: translate a paragraph between languages, English to German"),
]
GROUPS = [
    node("group:report", NodeKind.GROUP, "Report by email",
         "report by email: extract the text of a PDF report and email it to the team",
         members=["sk-pdf", "sk-email"]),
    node("group:kpi", NodeKind.GROUP, "Weekly KPI chart",
         "weekly kpi chart: statistics of a CSV export drawn as a chart",
         members=["sk-csv", "sk-chart"]),
]
NODES = SKILLS + GROUPS
VECTORS: dict[str, Vectors] = {n.id: unit(i) for i, n in enumerate(NODES)}
EDGES = [
    Edge(EdgeKind.CONTAINS, "group:report", "sk-pdf", 1.0, {"step": "extract", "order": 0}),
    Edge(EdgeKind.CONTAINS, "group:report", "sk-email", 1.0, {"step": "mail", "order": 1}),
    Edge(EdgeKind.CONTAINS, "group:kpi", "sk-csv", 1.0, {"step": "stats", "order": 0}),
    Edge(EdgeKind.CONTAINS, "group:kpi", "sk-chart", 1.0, {"step": "chart", "order": 1}),
    Edge(EdgeKind.FLOWS_TO, "sk-pdf", "sk-email", 1.0,
         {"group": "report", "from_step": "extract", "to_step": "mail"}),
    Edge(EdgeKind.FLOWS_TO, "sk-pdf", "sk-email", 1.0,
         {"group": "other", "from_step": "a", "to_step": "b"}),
    Edge(EdgeKind.FLOWS_TO, "sk-csv", "sk-chart", 1.0,
         {"group": "kpi", "from_step": "stats", "to_step": "chart"}),
    Edge(EdgeKind.SIMILAR_TO, "sk-chart", "sk-csv", 0.61),
    Edge(EdgeKind.SIMILAR_TO, "group:kpi", "group:report", 0.57),
    Edge(EdgeKind.CO_USED, "sk-email", "sk-pdf", 2.0),
    Edge(EdgeKind.CO_USED, "sk-chart", "sk-csv", 1.0),
]


def edge_set(edges: Sequence[Edge]) -> set[tuple[Any, ...]]:
    return {(*e.key, e.weight, json.dumps(dict(e.props), sort_keys=True)) for e in edges}


def assert_same_nodes(actual: Sequence[NodeRecord], expected: Sequence[NodeRecord]) -> None:
    def as_tuples(records: Sequence[NodeRecord]) -> list[tuple[Any, ...]]:
        return sorted((r.id, r.kind, r.name, r.text, r.content_hash,
                       json.dumps(dict(r.data), sort_keys=True)) for r in records)

    assert as_tuples(actual) == as_tuples(expected)


def changed(record: NodeRecord, text: str) -> NodeRecord:
    return replace(record, text=text, content_hash=record.content_hash + "-2",
                   data={**record.data, "description": text})


# -- writing ----------------------------------------------------------------------------------

def test_sync_writes_nodes_edges_and_vectors(store: GraphStore) -> None:
    report = store.sync(NODES, VECTORS, EDGES)
    assert report.added == tuple(n.id for n in NODES)
    assert (report.updated, report.removed, report.unchanged) == ((), (), 0)
    assert (report.edges_added, report.edges_removed) == (len(EDGES), 0)
    assert_same_nodes(store.nodes(), NODES)
    assert_same_nodes(store.nodes(NodeKind.SKILL), SKILLS)
    assert_same_nodes(store.nodes(NodeKind.GROUP), GROUPS)
    email = store.node("sk-email")
    assert email is not None and email.kind is NodeKind.SKILL
    assert dict(email.data) == dict(SKILLS[1].data)  # data round-trips, lists and booleans too
    assert store.node("nope") is None
    for node_id, vector in VECTORS.items():
        stored = store.vector(node_id)
        assert stored is not None and stored.dtype == np.float32
        np.testing.assert_allclose(stored, vector, atol=1e-7)
    assert store.vector("nope") is None
    assert edge_set(store.edges()) == edge_set(EDGES)


def test_sync_again_changes_nothing(store: GraphStore) -> None:
    store.sync(NODES, VECTORS, EDGES)
    again = store.sync(NODES, VECTORS, EDGES)
    assert not again.changed
    assert again.unchanged == len(NODES)
    assert (again.added, again.updated, again.removed) == ((), (), ())
    assert edge_set(store.edges()) == edge_set(EDGES)


def test_update_is_decided_by_content_hash(store: GraphStore) -> None:
    store.sync(NODES, VECTORS, EDGES)
    new_pdf = changed(SKILLS[0], "pdf to text: turn scanned PDF pages into plain text with OCR")
    # Same hash, different data: the store must not rewrite it (the hash says nothing changed).
    same_hash = replace(SKILLS[2], data={**SKILLS[2].data, "description": "ignored"})
    nodes = [new_pdf if n.id == "sk-pdf" else same_hash if n.id == "sk-chart" else n
             for n in NODES]
    vectors = {**VECTORS, "sk-pdf": unit(100)}
    report = store.sync(nodes, vectors, EDGES)
    assert report.updated == ("sk-pdf",)
    assert (report.added, report.removed, report.unchanged) == ((), (), len(NODES) - 1)
    assert not report.edges_added and not report.edges_removed
    stored = store.node("sk-pdf")
    assert stored is not None and stored.text == new_pdf.text
    assert stored.content_hash == new_pdf.content_hash
    assert stored.data["description"] == new_pdf.text
    np.testing.assert_allclose(store.vector("sk-pdf"), unit(100), atol=1e-7)  # type: ignore[arg-type]
    chart = store.node("sk-chart")
    assert chart is not None and chart.data["description"] == SKILLS[2].data["description"]
    # An updated node synced without a new vector keeps the one it has.
    newer = changed(new_pdf, "pdf to text: plain text out of any PDF")
    vectors_without = {k: v for k, v in vectors.items() if k != "sk-pdf"}
    store.sync([newer if n.id == "sk-pdf" else n for n in nodes], vectors_without, EDGES)
    np.testing.assert_allclose(store.vector("sk-pdf"), unit(100), atol=1e-7)  # type: ignore[arg-type]


def test_a_new_node_without_a_vector_is_refused_and_nothing_written(store: GraphStore) -> None:
    from skillgrove.graph.errors import StoreError

    store.sync(NODES, VECTORS, EDGES)
    extra = node("sk-new", NodeKind.SKILL, "new-skill", "a new skill")
    with pytest.raises(StoreError, match="no vector for node 'sk-new'"):
        store.sync([*NODES, extra], VECTORS, EDGES)
    assert store.node("sk-new") is None
    assert_same_nodes(store.nodes(), NODES)


def test_deleting_a_node_deletes_its_edges(store: GraphStore) -> None:
    store.sync(NODES, VECTORS, EDGES)
    kept_nodes = [n for n in NODES if n.id != "sk-email"]
    kept_edges = [e for e in EDGES if "sk-email" not in (e.src, e.dst)]
    report = store.sync(kept_nodes, VECTORS, kept_edges)
    assert report.removed == ("sk-email",)
    assert report.edges_removed == len(EDGES) - len(kept_edges) == 4
    assert store.node("sk-email") is None and store.vector("sk-email") is None
    assert edge_set(store.edges()) == edge_set(kept_edges)
    assert all(other.id != "sk-email" for _, other in store.neighbors("sk-pdf"))
    assert store.neighbors("sk-email") == []
    assert "sk-email" not in [i for i, _ in store.vector_search(NodeKind.SKILL,
                                                                 VECTORS["sk-email"], 10)]
    assert "sk-email" not in [i for i, _ in store.text_search(NodeKind.SKILL, "email", 10)]


def test_incremental_sync_reports_exactly_what_changed(store: GraphStore) -> None:
    store.sync(NODES, VECTORS, EDGES)
    added = node("sk-ocr", NodeKind.SKILL, "ocr-image", "ocr image: read the text in a photo")
    updated = changed(SKILLS[3], "csv stats: mean, median and totals of each CSV column")
    nodes = [updated if n.id == "sk-csv" else n for n in NODES if n.id != "sk-translate"]
    nodes.append(added)
    vectors = {**VECTORS, "sk-ocr": unit(200), "sk-csv": unit(201)}
    reweighted = Edge(EdgeKind.SIMILAR_TO, "sk-chart", "sk-csv", 0.75)
    new_edge = Edge(EdgeKind.SIMILAR_TO, "sk-ocr", "sk-pdf", 0.66)
    edges = [reweighted if e.kind is EdgeKind.SIMILAR_TO and e.src == "sk-chart" else e
             for e in EDGES if not (e.kind is EdgeKind.CO_USED and e.src == "sk-chart")]
    edges = [e for e in edges if not (e.kind is EdgeKind.FLOWS_TO and e.props["group"] == "other")]
    edges.append(new_edge)
    report = store.sync(nodes, vectors, edges)
    assert report.added == ("sk-ocr",)
    assert report.updated == ("sk-csv",)
    assert report.removed == ("sk-translate",)
    assert report.unchanged == len(NODES) - 2
    assert report.edges_added == 2  # the reweighted edge and the new one
    assert report.edges_removed == 2  # CO_USED chart-csv and the FLOWS_TO of group "other"
    assert edge_set(store.edges()) == edge_set(edges)
    flows = store.edges(EdgeKind.FLOWS_TO)
    assert {e.props["group"] for e in flows if e.src == "sk-pdf"} == {"report"}


def test_edges_by_kind(store: GraphStore) -> None:
    store.sync(NODES, VECTORS, EDGES)
    for kind in EdgeKind:
        expected = [e for e in EDGES if e.kind is kind]
        assert edge_set(store.edges(kind)) == edge_set(expected), kind
    contains = {e.dst: e.props for e in store.edges(EdgeKind.CONTAINS) if e.src == "group:report"}
    assert contains == {"sk-pdf": {"step": "extract", "order": 0},
                        "sk-email": {"step": "mail", "order": 1}}
    assert {e.weight for e in store.edges(EdgeKind.CO_USED)} == {2.0, 1.0}


def test_neighbors_in_both_directions(store: GraphStore) -> None:
    store.sync(NODES, VECTORS, EDGES)
    seen = {(e.kind, e.src, e.dst, e.key[3], other.id, other.name)
            for e, other in store.neighbors("sk-pdf")}
    assert seen == {
        (EdgeKind.CONTAINS, "group:report", "sk-pdf", "", "group:report", "Report by email"),
        (EdgeKind.FLOWS_TO, "sk-pdf", "sk-email", "report", "sk-email", "send-email"),
        (EdgeKind.FLOWS_TO, "sk-pdf", "sk-email", "other", "sk-email", "send-email"),
        (EdgeKind.CO_USED, "sk-email", "sk-pdf", "", "sk-email", "send-email"),
    }
    group = next(other for e, other in store.neighbors("sk-pdf") if e.kind is EdgeKind.CONTAINS)
    assert group.kind is NodeKind.GROUP and group.data["members"] == ["sk-pdf", "sk-email"]
    only = store.neighbors("sk-pdf", [EdgeKind.CO_USED, EdgeKind.CONTAINS])
    assert sorted(e.kind.value for e, _ in only) == ["CONTAINS", "CO_USED"]
    assert store.neighbors("sk-pdf", [EdgeKind.SIMILAR_TO]) == []
    groups = [(e.kind, other.id) for e, other in store.neighbors("group:kpi",
                                                                 [EdgeKind.SIMILAR_TO])]
    assert groups == [(EdgeKind.SIMILAR_TO, "group:report")]
    assert store.neighbors("nope") == []


# -- batched reads ----------------------------------------------------------------------------

def test_nodes_and_vectors_by_id_read_many_at_once(store: GraphStore) -> None:
    store.sync(NODES, VECTORS, EDGES)
    ids = ["group:kpi", "sk-weekly", "nope", "sk-pdf", "sk-weekly"]
    found = store.nodes_by_id(ids)
    assert list(found) == ["group:kpi", "sk-weekly", "sk-pdf"]  # in order, unknown left out
    assert_same_nodes(list(found.values()),
                      [n for n in NODES if n.id in ("group:kpi", "sk-weekly", "sk-pdf")])
    assert all(found[i] == store.node(i) and found[i].data == store.node(i).data  # type: ignore[union-attr]
               for i in found)
    vectors = store.vectors(ids)
    assert list(vectors) == ["group:kpi", "sk-weekly", "sk-pdf"]
    for node_id, vector in vectors.items():
        assert vector.dtype == np.float32
        assert np.array_equal(vector, VECTORS[node_id])
    assert store.nodes_by_id([]) == {} and store.vectors(["nope"]) == {}


def test_neighbors_of_many_nodes_equal_one_at_a_time(store: GraphStore) -> None:
    store.sync(NODES, VECTORS, EDGES)
    ids = ["sk-pdf", "group:kpi", "sk-translate", "nope", "sk-chart"]

    def as_rows(pairs: Sequence[tuple[Edge, NodeRecord]]) -> list[tuple[Any, ...]]:
        return [(*e.key, e.weight, dict(e.props), other.id, other.name, dict(other.data))
                for e, other in pairs]

    for kinds in (None, [EdgeKind.FLOWS_TO], [EdgeKind.SIMILAR_TO, EdgeKind.CO_USED], []):
        many = store.neighbors_of(ids, kinds)
        assert list(many) == ids, kinds  # every id a key, in order
        for node_id in ids:
            assert as_rows(many[node_id]) == as_rows(store.neighbors(node_id, kinds)), (
                node_id, kinds)
    assert store.neighbors_of(ids)["sk-translate"] == [] == store.neighbors_of(ids)["nope"]
    assert store.neighbors_of([]) == {}


def test_searches_of_several_kinds_equal_one_kind_at_a_time(store: GraphStore) -> None:
    store.sync(NODES, VECTORS, EDGES)
    for query in ("email the report to my team", "周报", "weekly kpi chart", "", "zebra"):
        limits = {NodeKind.SKILL: 3, NodeKind.GROUP: 2, NodeKind.EXAMPLE: 5}
        lexical = store.text_searches(query, limits)
        assert list(lexical) == list(limits)
        for kind, k in limits.items():
            assert lexical[kind] == store.text_search(kind, query, k), (query, kind)
    vector = VECTORS["sk-chart"] * 0.9 + VECTORS["group:kpi"] * 0.1
    limits = {NodeKind.GROUP: 1, NodeKind.SKILL: 4, NodeKind.EXAMPLE: 3}
    dense = store.vector_searches(vector, limits)
    assert list(dense) == list(limits)
    for kind, k in limits.items():
        mine, one = dense[kind], store.vector_search(kind, vector, k)
        assert [i for i, _ in mine] == [i for i, _ in one]
        assert [s for _, s in mine] == pytest.approx([s for _, s in one], abs=1e-6)
    assert dense[NodeKind.SKILL][0][0] == "sk-chart" and dense[NodeKind.EXAMPLE] == []


def test_hybrid_searches_equal_the_text_and_vector_searches(store: GraphStore) -> None:
    store.sync(NODES, VECTORS, EDGES)
    vector = VECTORS["sk-chart"] * 0.9 + VECTORS["group:kpi"] * 0.1
    text_limits = {NodeKind.SKILL: 3, NodeKind.GROUP: 2, NodeKind.EXAMPLE: 5}
    vector_limits = {NodeKind.SKILL: 4, NodeKind.GROUP: 1}
    for query in ("weekly kpi chart", "周报", "", "zebra"):
        lexical, dense = store.hybrid_searches(query, vector, text_limits, vector_limits)
        assert lexical == store.text_searches(query, text_limits), query
        one = store.vector_searches(vector, vector_limits)
        assert list(dense) == list(one)
        for kind in vector_limits:
            assert [i for i, _ in dense[kind]] == [i for i, _ in one[kind]], (query, kind)
            assert [s for _, s in dense[kind]] == pytest.approx([s for _, s in one[kind]],
                                                                abs=1e-6)
    assert store.hybrid_searches("weekly kpi chart", None, text_limits, {})[1] == {}


# -- searching --------------------------------------------------------------------------------

def test_vector_search_returns_cosines_best_first(store: GraphStore) -> None:
    store.sync(NODES, VECTORS, EDGES)
    rng = np.random.default_rng(7)
    for target in ("sk-chart", "sk-weekly", "group:kpi"):
        query = VECTORS[target] + 0.08 * rng.standard_normal(DIMS).astype(np.float32)
        query = (query / np.linalg.norm(query)).astype(np.float32)
        kind = NodeKind.GROUP if target.startswith("group:") else NodeKind.SKILL
        ids = [n.id for n in NODES if n.kind is kind]
        cosines = {i: float(VECTORS[i] @ query) for i in ids}
        expected = sorted(ids, key=lambda i: -cosines[i])[:4]
        hits = store.vector_search(kind, query, 4)
        assert [i for i, _ in hits] == expected[: len(hits)]
        assert len(hits) == min(4, len(ids))
        assert hits[0][0] == target
        for node_id, score in hits:
            assert score == pytest.approx(cosines[node_id], abs=1e-4)
    assert store.vector_search(NodeKind.SKILL, VECTORS["sk-pdf"], 1) == [
        ("sk-pdf", pytest.approx(1.0, abs=1e-4))]


def test_vector_search_on_an_empty_store(store: GraphStore) -> None:
    assert store.vector_search(NodeKind.SKILL, unit(1), 5) == []
    assert store.text_search(NodeKind.SKILL, "anything", 5) == []


def reference_text_ranking(records: Sequence[NodeRecord], query: str) -> list[str]:
    """The embedded store's lexical ranking, recomputed with BM25 directly."""
    bm25 = BM25([tokenize(r.text) for r in records])
    return [records[i].id for i, _ in bm25.top(tokenize(query), len(records))]


def reference_text_scores(records: Sequence[NodeRecord], query: str) -> list[float]:
    """The embedded store's 0..1 lexical scores: BM25 over the best it could reach."""
    bm25 = BM25([tokenize(r.text) for r in records])
    tokens = tokenize(query)
    return [s / bm25.max_score(tokens) for _, s in bm25.top(tokens, len(records))]


@pytest.mark.parametrize(("query", "top"), [
    ("email the report to my team", "sk-email"),
    ("draw a chart of these numbers", "sk-chart"),
    ("statistics of a spreadsheet", "sk-csv"),
    ("帮我生成本周周报", "sk-weekly"),
    ("周报", "sk-weekly"),
])
def test_text_search_ranks_like_bm25_on_our_tokens(store: GraphStore, query: str,
                                                    top: str) -> None:
    store.sync(NODES, VECTORS, EDGES)
    hits = store.text_search(NodeKind.SKILL, query, 10)
    assert hits and hits[0][0] == top
    assert [i for i, _ in hits] == reference_text_ranking(SKILLS, query)
    assert [s for _, s in hits] == pytest.approx(reference_text_scores(SKILLS, query), abs=1e-6)
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(0 < s <= 1 for s in scores)


def test_text_search_edge_cases(store: GraphStore) -> None:
    store.sync(NODES, VECTORS, EDGES)
    assert store.text_search(NodeKind.SKILL, "zebra quasar", 5) == []
    assert store.text_search(NodeKind.SKILL, "the and of to", 5) == []  # stopwords only
    assert store.text_search(NodeKind.SKILL, "", 5) == []
    assert [i for i, _ in store.text_search(NodeKind.SKILL, "PDF", 1)] == ["sk-pdf"]
    assert len(store.text_search(NodeKind.SKILL, "text", 2)) == 2
    # Two groups only: every term is in half of them or more, so rank-bm25's idf is never
    # positive and no group scores — the embedded store's rule, which the Neo4j store keeps.
    assert store.text_search(NodeKind.GROUP, "kpi chart csv export", 5) == []
    assert reference_text_ranking(GROUPS, "kpi chart csv export") == []


def test_meta(store: GraphStore) -> None:
    assert store.get_meta("model") is None
    store.set_meta("model", "all-MiniLM-L6-v2")
    store.set_meta("roots", "/a\n/b 周")
    assert store.get_meta("model") == "all-MiniLM-L6-v2"
    assert store.get_meta("roots") == "/a\n/b 周"
    store.set_meta("model", "other")
    assert store.get_meta("model") == "other"
    store.sync(NODES, VECTORS, EDGES)
    assert store.get_meta("model") == "other"  # a sync leaves meta alone


HOSTILE = [
    "it's \"quoted\"",
    "`backticked` name",
    "{braces: 1}",
    "}) DETACH DELETE n //",
    "'}) MATCH (m) DETACH DELETE m //",
    "$param",
    "line one\nline two\r\n",
    "back\\slash",
    "AND OR NOT",
    "+-&&||!(){}[]^\"~*?:/",
    "名字 ✓ 🌲",
]


def test_hostile_ids_names_and_texts_round_trip(store: GraphStore) -> None:
    skills = [node(f"sk:{value}", NodeKind.SKILL, value, f"{value} hostile skill number {i}",
                   note=value) for i, value in enumerate(HOSTILE)]
    groups = [node(f"group:{value}", NodeKind.GROUP, value, f"{value} hostile group",
                   members=[skills[i].id]) for i, value in enumerate(HOSTILE[:4])]
    nodes = skills + groups
    vectors = {n.id: unit(300 + i) for i, n in enumerate(nodes)}
    edges = [Edge(EdgeKind.CONTAINS, g.id, s.id, 1.0, {"step": HOSTILE[i], "order": i})
             for i, (g, s) in enumerate(zip(groups, skills, strict=False))]
    edges += [Edge(EdgeKind.FLOWS_TO, skills[i].id, skills[i + 1].id, 1.0,
                   {"group": HOSTILE[i], "from_step": HOSTILE[i + 1], "to_step": "x"})
              for i in range(len(skills) - 1)]
    report = store.sync(nodes, vectors, edges)
    assert len(report.added) == len(nodes) and report.edges_added == len(edges)
    assert_same_nodes(store.nodes(), nodes)
    for record in nodes:
        found = store.node(record.id)
        assert found is not None and (found.name, found.text) == (record.name, record.text)
        assert found.data["note" if record.kind is NodeKind.SKILL else "members"] == (
            record.data["note" if record.kind is NodeKind.SKILL else "members"])
        np.testing.assert_allclose(store.vector(record.id), vectors[record.id], atol=1e-7)  # type: ignore[arg-type]
    assert edge_set(store.edges()) == edge_set(edges)
    middle = skills[4]
    assert {other.id for _, other in store.neighbors(middle.id)} == {skills[3].id, skills[5].id}
    for value in HOSTILE:  # hostile queries are only text
        store.text_search(NodeKind.SKILL, value, 5)
        store.text_search(NodeKind.GROUP, value, 5)
    hits = [i for i, _ in store.text_search(NodeKind.SKILL, "名字", 3)]
    assert hits[:1] == [f"sk:{HOSTILE[-1]}"]
    hits = [i for i, _ in store.text_search(NodeKind.GROUP, "braces", 3)]
    assert hits == [f"group:{HOSTILE[2]}"]
    assert store.vector_search(NodeKind.SKILL, vectors[skills[3].id], 1)[0][0] == skills[3].id
    store.set_meta(HOSTILE[3], HOSTILE[5])
    assert store.get_meta(HOSTILE[3]) == HOSTILE[5]
    again = store.sync(nodes, vectors, edges)
    assert not again.changed and again.unchanged == len(nodes)
    gone = store.sync([n for n in nodes if n.id != skills[3].id], vectors,
                      [e for e in edges if skills[3].id not in (e.src, e.dst)])
    assert gone.removed == (skills[3].id,)
    assert len(store.nodes()) == len(nodes) - 1


# -- retrieval on the fixture library ---------------------------------------------------------

REQUESTS: list[tuple[str, str | None, str]] = [
    ("summarize the quarterly report PDF and email the key numbers to my team",
     "group:report-analysis", "pdf-to-text"),
    ("turn this CSV export into the weekly KPI report with a chart", "group:kpi-report",
     "csv-stats"),
    ("translate this paragraph into German", None, "translate-text"),
    ("plot the values 3, 5 and 8 as a PNG bar chart", None, "make-chart"),
]


@pytest.fixture
def indexed_fixture(store: GraphStore, tmp_path: Path, encoder: CachedEncoder) -> GraphStore:
    library = load_library([copy_fixture_library(tmp_path / "lib")])
    result = index_library(library, store, encoder)
    assert (result.skills, result.groups) == (7, 2)
    return store


@pytest.mark.parametrize(("request_text", "group", "skill"), REQUESTS)
def test_retrieval_on_the_fixture_library(indexed_fixture: GraphStore, encoder: CachedEncoder,
                                          request_text: str, group: str | None,
                                          skill: str) -> None:
    toolbox = Retriever(indexed_fixture, encoder).search(request_text, k=5)
    assert (toolbox.group.id if toolbox.group else None) == group
    names = [s.name for s in toolbox.skills]
    if group is None:
        assert names[0] == skill
        assert toolbox.selected[0] == toolbox.skills[0].id
    else:
        assert toolbox.group is not None and skill in toolbox.group.member_names
        assert toolbox.selected == toolbox.group.members


def test_suggestions_follow_the_graph(indexed_fixture: GraphStore,
                                      encoder: CachedEncoder) -> None:
    toolbox = Retriever(indexed_fixture, encoder).search(
        "plot the values 3, 5 and 8 as a PNG bar chart")
    names = [s.name for s in toolbox.suggestions]
    assert "csv-stats" in names[:2]
    csv = next(s for s in toolbox.suggestions if s.name == "csv-stats")
    assert "make-chart" in csv.reason


def test_index_meta_is_kept(indexed_fixture: GraphStore) -> None:
    assert indexed_fixture.get_meta("model") == "all-MiniLM-L6-v2"
    assert indexed_fixture.get_meta("roots")


# -- the two stores side by side --------------------------------------------------------------

def toolbox_summary(store: GraphStore, encoder: CachedEncoder, request: str,
                    context: RequestContext | None = None) -> dict[str, Any]:
    toolbox = Retriever(store, encoder).search(request, context, k=5)
    return {"group": toolbox.group.id if toolbox.group else None,
            "skills": [s.id for s in toolbox.skills], "selected": list(toolbox.selected),
            "suggestions": [s.id for s in toolbox.suggestions],
            "candidates": [g for g, _ in toolbox.group_candidates],
            "scores": [s.score for s in toolbox.skills]}


@pytest.mark.neo4j
def test_neo4j_and_embedded_retrieve_the_same_toolboxes(tmp_path: Path,
                                                       encoder: CachedEncoder) -> None:
    from tests.neo4j.support import fresh_store

    library = load_library([copy_fixture_library(tmp_path / "lib")])
    embedded = EmbeddedStore(None)
    neo4j = fresh_store()
    try:
        index_library(library, embedded, encoder)
        index_library(library, neo4j, encoder)
        requests = [r for r, _, _ in REQUESTS] + [
            "extract the key figures from this text", "process the document",
            "email the chart of the weekly numbers", "把这份报告翻译成德语"]
        for request in requests:
            mine, theirs = (toolbox_summary(s, encoder, request) for s in (neo4j, embedded))
            assert mine["group"] == theirs["group"], request
            assert mine["skills"] == theirs["skills"], request
            assert mine["selected"] == theirs["selected"], request
            assert mine["suggestions"] == theirs["suggestions"], request
            assert mine["scores"] == pytest.approx(theirs["scores"], abs=2e-4), request
        recent = RequestContext(recent_skills=("translate-text",))
        assert (toolbox_summary(neo4j, encoder, "process the document", recent)["skills"]
                == toolbox_summary(embedded, encoder, "process the document", recent)["skills"])
    finally:
        neo4j.close()
        embedded.close()


@pytest.mark.neo4j
def test_neo4j_vector_and_text_scores_match_the_embedded_store(
        tmp_path: Path, encoder: CachedEncoder) -> None:
    from tests.neo4j.support import fresh_store

    embedded = EmbeddedStore(None)
    neo4j = fresh_store()
    try:
        for target in (embedded, neo4j):
            target.sync(NODES, VECTORS, EDGES)
        for request in ("send the report by email", "把周报发给团队", "chart csv numbers"):
            vector = encoder.encode([request])[0]
            for kind in NodeKind:
                mine = neo4j.vector_search(kind, vector, 10)
                theirs = embedded.vector_search(kind, vector, 10)
                assert [i for i, _ in mine] == [i for i, _ in theirs]
                assert [s for _, s in mine] == pytest.approx([s for _, s in theirs], abs=1e-4)
                lexical = neo4j.text_search(kind, request, 10)
                reference = embedded.text_search(kind, request, 10)
                assert [i for i, _ in lexical] == [i for i, _ in reference], (request, kind)
                assert [s for _, s in lexical] == pytest.approx(
                    [s for _, s in reference], abs=1e-6)
    finally:
        neo4j.close()
        embedded.close()



# -- two writers ------------------------------------------------------------------------------

@pytest.fixture(params=STORES)
def two_stores(request: pytest.FixtureRequest,
               tmp_path: Path) -> Iterator[tuple[GraphStore, GraphStore]]:
    """Two stores on one graph, as two processes open it: two connections to the SQLite file,
    two drivers to the Neo4j server (the database emptied first)."""
    opened: list[GraphStore] = []
    try:
        if request.param == "embedded":
            opened += [EmbeddedStore(tmp_path / "graph.sqlite") for _ in range(2)]
        else:
            from skillgrove.graph.neo4j_store import Neo4jConfig, Neo4jStore
            from tests.conftest import NEO4J_URI
            from tests.neo4j.support import fresh_store

            opened.append(fresh_store())
            opened.append(Neo4jStore.from_config(Neo4jConfig(uri=NEO4J_URI)))
        yield opened[0], opened[1]
    finally:
        for each in opened:
            each.close()


def library_graph(name: str, size: int = 40,
                  ) -> tuple[list[NodeRecord], dict[str, Vectors], list[Edge]]:
    """A graph of ``size`` skills whose ids all start with ``name``, chained by FLOWS_TO."""
    nodes = [node(f"{name}-{i:02d}", NodeKind.SKILL, f"{name}-skill-{i}",
                  f"{name} skill {i}: converts format {i} into format {i + 1}")
             for i in range(size)]
    vectors = {n.id: unit(1000 + len(name) * 100 + i) for i, n in enumerate(nodes)}
    edges = [Edge(EdgeKind.FLOWS_TO, a.id, b.id, 1.0, {"group": name})
             for a, b in pairwise(nodes)]
    return nodes, vectors, edges


def test_two_writers_syncing_at_once_leave_one_whole_graph(
        two_stores: tuple[GraphStore, GraphStore]) -> None:
    """Two replicas re-index different libraries at the same moment, five times over: the graph
    that remains is one of the two, whole (its nodes, its edges and the fingerprint its meta
    names), never a mix of both."""
    import threading

    graphs = {name: library_graph(name) for name in ("alpha", "beta")}
    two_stores[0].sync(*library_graph("base"), meta={"library_fingerprint": "base"})
    for _ in range(5):
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def sync(store: GraphStore, name: str, barrier: threading.Barrier = barrier,
                 errors: list[BaseException] = errors) -> None:
            nodes, vectors, edges = graphs[name]
            barrier.wait()
            try:
                store.sync(nodes, vectors, edges, meta={"library_fingerprint": name})
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=sync, args=(store, name))
                   for store, name in zip(two_stores, graphs, strict=True)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        for reader in two_stores:
            winner = reader.get_meta("library_fingerprint")
            assert winner in graphs
            nodes, _, edges = graphs[winner]
            assert sorted(n.id for n in reader.nodes()) == sorted(n.id for n in nodes)
            assert edge_set(reader.edges()) == edge_set(edges)
