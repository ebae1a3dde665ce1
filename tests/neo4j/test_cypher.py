"""The Cypher builders, without a database: values only ever travel as parameters."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from skillgrove.graph import cypher
from skillgrove.graph.bm25 import BM25
from skillgrove.graph.model import EdgeKind, NodeKind
from skillgrove.graph.text import tokenize

HOSTILE = "x'}) DETACH DELETE n // `$p` \"q\" \n {a: 1}"

BUILDERS: list[Callable[[], cypher.Statement]] = [
    lambda: cypher.upsert_nodes(NodeKind.SKILL, [{"id": HOSTILE, "properties": {"name": HOSTILE}}]),
    lambda: cypher.relabel_nodes(NodeKind.SKILL, NodeKind.GROUP, [HOSTILE]),
    lambda: cypher.delete_nodes(NodeKind.GROUP, [HOSTILE]),
    lambda: cypher.delete_edges(EdgeKind.FLOWS_TO, NodeKind.SKILL, NodeKind.SKILL,
                                [{"src": HOSTILE, "dst": HOSTILE, "group": HOSTILE}]),
    lambda: cypher.merge_edges(EdgeKind.CONTAINS, NodeKind.GROUP, NodeKind.SKILL,
                               [{"src": HOSTILE, "dst": HOSTILE, "group": "", "weight": 1.0,
                                 "props": HOSTILE}]),
    lambda: cypher.node_by_id(HOSTILE),
    lambda: cypher.node_vector(HOSTILE),
    lambda: cypher.neighbors(HOSTILE, [EdgeKind.CO_USED]),
    lambda: cypher.fulltext_statistics(NodeKind.SKILL, [HOSTILE]),
    lambda: cypher.fulltext_search(NodeKind.SKILL, HOSTILE, 5),
    lambda: cypher.get_meta(HOSTILE),
    lambda: cypher.set_meta(HOSTILE, HOSTILE),
    lambda: cypher.show_indexes([HOSTILE]),
    lambda: cypher.drop_index(HOSTILE),
    lambda: cypher.get_meta_and_token(HOSTILE),
    lambda: cypher.nodes_with_vectors([HOSTILE]),
    lambda: cypher.candidate_reads([HOSTILE], [HOSTILE]),
    lambda: cypher.hybrid_searches([(NodeKind.SKILL, 200), (NodeKind.GROUP, 200)],
                                   {NodeKind.SKILL: 5}, [HOSTILE, "pdf"], [0.5, 0.5]),
    lambda: cypher.hybrid_searches([], {NodeKind.SKILL: 5}, [HOSTILE, "pdf"], [0.5, 0.5],
                                   {NodeKind.SKILL: HOSTILE, NodeKind.GROUP: None}),
    lambda: cypher.lock_sync(HOSTILE),
    lambda: cypher.write_run({"id": HOSTILE, "group": HOSTILE, "inputs": HOSTILE},
                             [{"id": HOSTILE, "order": 0, "error": HOSTILE}]),
    lambda: cypher.read_run(HOSTILE),
]


@pytest.mark.parametrize("build", BUILDERS)
def test_values_never_enter_the_query_text(build: Callable[[], cypher.Statement]) -> None:
    query, params = build()
    assert HOSTILE not in query and "DETACH DELETE n //" not in query
    assert HOSTILE in repr(params) or repr(HOSTILE)[1:-1] in repr(params)


def test_labels_and_types_come_only_from_our_enums() -> None:
    assert [cypher.label(k) for k in (NodeKind.SKILL, NodeKind.GROUP)] == ["Skill", "Group"]
    assert cypher.rel_type(EdgeKind.FLOWS_TO) == "FLOWS_TO"
    wrong: list[Any] = ["Skill", "Skill) DETACH DELETE (n", 1]
    for value in wrong:
        with pytest.raises(TypeError, match="not a NodeKind"):
            cypher.label(value)
        with pytest.raises(TypeError, match="not an EdgeKind"):
            cypher.rel_type(value)
    assert cypher.kind_of_labels(["Group"]) is NodeKind.GROUP
    assert cypher.kind_of_labels(["SmokeDoc"]) is None


def test_schema_statements() -> None:
    query, params = cypher.create_id_constraint(NodeKind.SKILL)
    assert query == ("CREATE CONSTRAINT $name IF NOT EXISTS FOR (n:Skill) "
                     "REQUIRE n.id IS UNIQUE")
    assert params == {"name": "skillgrove_skill_id"}
    query, params = cypher.create_fulltext_index(NodeKind.GROUP)
    assert "FOR (n:Group) ON EACH [n.tokens]" in query
    assert params == {"name": "skillgrove_group_tokens", "analyzer": "whitespace"}
    query, params = cypher.create_vector_index(NodeKind.SKILL, 384, (5, 26, 30))
    assert "FOR (n:Skill) ON n.embedding" in query and "$config" in query
    assert params["config"] == {"vector.dimensions": 384, "vector.similarity_function": "cosine",
                                "vector.quantization.enabled": False}
    _, params = cypher.create_vector_index(NodeKind.SKILL, 768, (5, 13, 0))
    assert "vector.quantization.enabled" not in params["config"]  # 5.13 has no such setting
    with pytest.raises(ValueError, match="dimensions must be positive"):
        cypher.create_vector_index(NodeKind.SKILL, 0)


@pytest.mark.parametrize(("existing", "matches"), [
    ({"vector.dimensions": 384, "vector.similarity_function": "COSINE",
      "vector.quantization.enabled": False, "vector.hnsw.m": 16}, True),
    ({"vector.dimensions": 384, "vector.similarity_function": "COSINE",
      "vector.quantization.enabled": True}, False),
    ({"vector.dimensions": 768, "vector.similarity_function": "COSINE",
      "vector.quantization.enabled": False}, False),
    ({"vector.dimensions": 384, "vector.similarity_function": "EUCLIDEAN",
      "vector.quantization.enabled": False}, False),
])
def test_an_existing_vector_index_is_kept_only_when_it_is_ours(existing: dict[str, Any],
                                                               matches: bool) -> None:
    assert cypher.vector_index_matches(existing, 384, (5, 26)) is matches


@pytest.mark.parametrize(("version", "parsed", "supported"), [
    ("5.26.30", (5, 26, 30), True), ("5.13.0", (5, 13, 0), True),
    ("5.12.0", (5, 12, 0), False), ("4.4.41", (4, 4, 41), False),
    ("2025.01.0", (2025, 1, 0), True), ("5.20.0-aura", (5, 20, 0), True),
    ("dev", (), False),
])
def test_versions(version: str, parsed: tuple[int, ...], supported: bool) -> None:
    assert cypher.parse_version(version) == parsed
    assert cypher.version_supported(version) is supported


def test_batches() -> None:
    assert list(cypher.batches([1, 2, 3, 4, 5], 2)) == [[1, 2], [3, 4], [5]]
    assert list(cypher.batches([], 2)) == []
    with pytest.raises(ValueError):
        list(cypher.batches([1], 0))


@pytest.mark.parametrize(("term", "escaped"), [
    ("report", "report"), ("a+b", r"a\+b"), ("c++", r"c\+\+"), ('say "hi"', r'say \"hi\"'),
    ("x:y", r"x\:y"), ("a/b", r"a\/b"), ("(x)", r"\(x\)"), ("a&&b||c", r"a\&\&b\|\|c"),
    ("AND", '"AND"'), ("and", "and"), ("周报", "周报"), ("back\\slash", r"back\\slash"),
])
def test_lucene_escape(term: str, escaped: str) -> None:
    assert cypher.lucene_escape(term) == escaped


def test_cosine_from_neo4j_score() -> None:
    assert cypher.cosine_from_score(1.0) == 1.0
    assert cypher.cosine_from_score(0.5) == 0.0
    assert cypher.cosine_from_score(0.0) == -1.0


CORPUS = [
    "extract the text of a PDF document page by page",
    "send an email with the report to the team",
    "draw a bar chart of the numbers in a CSV file",
    "summary statistics of a CSV export",
    "生成周报并发送给团队",
    "translate a document between languages",
    "",
]
QUERIES = ["email the PDF report to the team", "CSV chart chart", "发送周报",
           "document document document", "the a of", "chart of a document",
           "zebra quasar report", "pdf"]


def test_the_constants_are_the_embedded_stores() -> None:
    bm25 = BM25([["x"]])
    ours = (cypher.BM25_K1, cypher.BM25_B, cypher.BM25_EPSILON)
    assert ours == (bm25.k1, bm25.b, bm25.epsilon)


def _statistics(query: str) -> tuple[list[list[str]], BM25, list[str], dict[str, float],
                                     dict[str, float]]:
    """The corpus tokens, the embedded BM25, the query tokens, and the Cypher side's
    statistics and idfs for them."""
    documents = [tokenize(text) for text in CORPUS]
    tokens = tokenize(query)
    dfs = {t: sum(1 for d in documents if t in d) for t in set(tokens)}
    stats = cypher.vocabulary_statistics(documents)
    idfs = cypher.term_idfs(tokens, len(documents), dfs, stats["mean_idf"])
    return documents, BM25(documents), tokens, stats, idfs


@pytest.mark.parametrize("query", QUERIES)
def test_idfs_and_bound_are_the_embedded_bm25s(query: str) -> None:
    _, bm25, tokens, stats, idfs = _statistics(query)
    assert idfs == pytest.approx({t: bm25.idf[t] for t in dict.fromkeys(tokens) if t in bm25.idf})
    assert cypher.bm25_bound(tokens, idfs, stats["mean_idf"]) == pytest.approx(
        bm25.max_score(tokens))
    assert stats["average_length"] == pytest.approx(bm25.avgdl)


@pytest.mark.parametrize("query", QUERIES)
def test_rescoring_gives_the_embedded_stores_scores(query: str) -> None:
    documents, bm25, tokens, stats, idfs = _statistics(query)
    candidates = {f"d{i}": " ".join(d) for i, d in enumerate(documents)}
    mine = cypher.bm25_scores(candidates, tokens, idfs, stats, 10)
    best = bm25.max_score(tokens)
    expected = [(f"d{i}", score / best) for i, score in bm25.top(tokens, 10)] if best > 0 else []
    assert [i for i, _ in mine] == [i for i, _ in expected]
    assert [s for _, s in mine] == pytest.approx([s for _, s in expected], abs=1e-9)


def test_rescoring_counts_a_term_repeated_in_a_row() -> None:
    """Stored tokens where a query term occurs in runs of one to five (" pdf pdf " shares a
    space between its two matches) score as the embedded BM25 scores them."""
    documents = [["pdf"] * run + ["report"] + ["pdf"] * (5 - run) + ["x"] * run
                 for run in range(1, 6)]
    documents += [["report", "report", "pdf", "report"], ["pdfs", "pdf", "apdf"],
                  ["x", "pdf", "pdf", "y"], ["x", "y"]]
    tokens = ["pdf", "report", "pdf"]
    dfs = {t: sum(1 for d in documents if t in d) for t in set(tokens)}
    stats = cypher.vocabulary_statistics(documents)
    idfs = cypher.term_idfs(tokens, len(documents), dfs, stats["mean_idf"])
    candidates = {f"d{i}": " ".join(d) for i, d in enumerate(documents)}
    mine = cypher.bm25_scores(candidates, tokens, idfs, stats, 10)
    bm25 = BM25(documents)
    best = bm25.max_score(tokens)
    expected = [(f"d{i}", score / best) for i, score in bm25.top(tokens, 10)]
    assert len(mine) == len(documents) - 1
    assert [i for i, _ in mine] == [i for i, _ in expected]
    assert [s for _, s in mine] == pytest.approx([s for _, s in expected], abs=1e-9)


def test_the_boosts_make_lucene_weigh_terms_by_our_idf() -> None:
    idfs = {"pdf": 2.0, "周报": 0.5, "c++": 1.0, "common": -0.1}
    dfs = {"pdf": 3, "周报": 1, "c++": 2, "common": 40}
    query = cypher.lucene_query(["pdf", "pdf", "周报", "c++", "common"], idfs, 50, dfs)
    parts = dict(part.rsplit("^", 1) for part in query.split(" "))
    assert set(parts) == {"pdf", "周报", r"c\+\+"}  # a negative idf cannot raise a score
    lucene_idf = math.log(1 + (50 - 3 + 0.5) / (3 + 0.5))
    assert float(parts["pdf"]) * lucene_idf == pytest.approx(2 * 2.0, abs=1e-5)
    assert cypher.lucene_query([], {}, 50, {}) == ""
    assert cypher.fulltext_candidates(100) == 400 and cypher.fulltext_candidates(5) == 200


def test_a_query_longer_than_lucene_allows_keeps_its_first_terms() -> None:
    tokens = [f"t{i}" for i in range(cypher.LUCENE_MAX_CLAUSES + 10)]
    assert cypher.query_terms(tokens) == tokens[: cypher.LUCENE_MAX_CLAUSES]
    _, params = cypher.fulltext_statistics(NodeKind.SKILL, tokens)
    assert len(params["terms"]) == cypher.LUCENE_MAX_CLAUSES


def test_vector_search_asks_the_index_for_enough_candidates() -> None:
    query, params = cypher.vector_search(NodeKind.SKILL, [0.5, 0.5], 50)
    assert "db.index.vector.queryNodes($index, candidates, $vector)" in query
    assert params["candidates"] == cypher.VECTOR_CANDIDATES and params["k"] == 50
    assert params["exhaustive_up_to"] == cypher.EXHAUSTIVE_VECTOR_SEARCH_UP_TO
    _, params = cypher.vector_search(NodeKind.SKILL, [0.5, 0.5], 5000)
    assert params["candidates"] == 5000


def test_the_run_log_statements() -> None:
    query, params = cypher.read_runs(5)
    assert "ORDER BY r.started_at DESC, r.id DESC LIMIT $limit" in query
    assert params == {"limit": 5}
    with pytest.raises(ValueError, match="must not be negative"):
        cypher.read_runs(-1)
    assert cypher.create_run_constraint()[1] == {"name": "skillgrove_run_id"}
    # Runs are not the graph's: clearing the graph and a sync's reads leave them alone.
    for statement in (cypher.delete_all(), cypher.existing_nodes()):
        assert cypher.RUN_LABEL not in statement[0] and cypher.STEP_LABEL not in statement[0]
