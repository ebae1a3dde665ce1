"""Cypher for the Neo4j store: pure functions that return ``(query, params)``.

Nothing here talks to a server; facts about the server (vector dimensions, what exists) come in
as plain arguments, so every builder is tested without a database (``tests/neo4j/test_cypher.py``).

Values always travel as parameters. The only things written into query text are labels,
relationship types and property keys, and those come from our own enums
(:class:`~graph.model.NodeKind`, :class:`~graph.model.EdgeKind`) through :func:`label` and
:func:`rel_type`, which reject anything else. Index and constraint names are parameters too
(Neo4j accepts ``CREATE INDEX $name``).

The graph in Neo4j::

    (:Skill {id, name, text, tokens, content_hash, data, embedding})
    (:Group {id, name, text, tokens, content_hash, data, embedding})
    (:Group)-[:CONTAINS {group, weight, props}]->(:Skill)       and FLOWS_TO, SIMILAR_TO, CO_USED
    (:SkillgroveMeta {key, value})

``data`` and ``props`` are JSON strings (Neo4j properties cannot hold maps); ``group`` on a
relationship is the edge's ``props["group"]`` or ``""``, part of its identity (two FLOWS_TO edges
between the same skills differ by their group). ``tokens`` is ``" ".join(tokenize(text))``: our own
CJK-aware tokens, which the FULLTEXT index splits on whitespace only, so Lucene sees exactly the
terms the embedded store's BM25 sees.

>>> query, params = delete_nodes(NodeKind.SKILL, ["a"])
>>> query
'UNWIND $ids AS id MATCH (n:Skill {id: id}) DETACH DELETE n'
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from graph.model import EdgeKind, NodeKind

Statement = tuple[str, dict[str, Any]]

MIN_SERVER_VERSION = (5, 13)
"""Vector indexes (``CREATE VECTOR INDEX``, ``db.index.vector.queryNodes``) are GA from 5.13."""

META_LABEL = "SkillgroveMeta"
_LABELS: Mapping[NodeKind, str] = {NodeKind.SKILL: "Skill", NodeKind.GROUP: "Group"}
_IDENTIFIER = re.compile(r"^[A-Z][A-Za-z_]*$")

CONSTRAINT_NAMES: Mapping[NodeKind, str] = {
    NodeKind.SKILL: "skillgrove_skill_id", NodeKind.GROUP: "skillgrove_group_id"}
META_CONSTRAINT_NAME = "skillgrove_meta_key"
VECTOR_INDEX_NAMES: Mapping[NodeKind, str] = {
    NodeKind.SKILL: "skillgrove_skill_embedding", NodeKind.GROUP: "skillgrove_group_embedding"}
FULLTEXT_INDEX_NAMES: Mapping[NodeKind, str] = {
    NodeKind.SKILL: "skillgrove_skill_tokens", NodeKind.GROUP: "skillgrove_group_tokens"}
"""One fulltext index per kind, so Lucene's term statistics (idf, average length) are per kind,
as the embedded store keeps one BM25 per kind."""
FULLTEXT_ANALYZER = "whitespace"
VECTOR_SIMILARITY = "cosine"

LUCENE_MAX_CLAUSES = 1024
"""Lucene's default limit of clauses in one query; longer queries keep their first terms."""
BM25_K1 = 1.2
"""Lucene's BM25 constants (Neo4j does not let a fulltext index change them)."""
BM25_B = 0.75


def _node_columns(var: str) -> str:
    return (f"{var}.id AS id, labels({var}) AS labels, {var}.name AS name, {var}.text AS text, "
            f"{var}.content_hash AS content_hash, {var}.data AS data")

_EDGE_COLUMNS = ("type(r) AS kind, startNode(r).id AS src, endNode(r).id AS dst, "
                 "r.group AS group, r.weight AS weight, r.props AS props")


# -- names from our enums ---------------------------------------------------------------------

def label(kind: NodeKind) -> str:
    """The node label of ``kind``; anything but a :class:`NodeKind` is refused."""
    if not isinstance(kind, NodeKind):
        raise TypeError(f"not a NodeKind: {kind!r}")
    return _checked_identifier(_LABELS[kind])


def kind_of_labels(labels: Iterable[str]) -> NodeKind | None:
    """The kind of a node from its labels (``None`` for a node that is not ours)."""
    present = set(labels)
    for kind, name in _LABELS.items():
        if name in present:
            return kind
    return None


def rel_type(kind: EdgeKind) -> str:
    """The relationship type of ``kind``; anything but an :class:`EdgeKind` is refused."""
    if not isinstance(kind, EdgeKind):
        raise TypeError(f"not an EdgeKind: {kind!r}")
    return _checked_identifier(kind.value)


def _checked_identifier(name: str) -> str:
    if not _IDENTIFIER.match(name):
        raise ValueError(f"refusing to put {name!r} into Cypher: not a plain identifier")
    return name


def _node_labels(kinds: Sequence[NodeKind] | None) -> list[str]:
    return [label(k) for k in (kinds if kinds is not None else list(NodeKind))]


def _rel_types(kinds: Sequence[EdgeKind] | None) -> str:
    return "|".join(rel_type(k) for k in (kinds if kinds is not None else list(EdgeKind)))


def _any_label(var: str, kinds: Sequence[NodeKind] | None = None) -> str:
    return "(" + " OR ".join(f"{var}:{name}" for name in _node_labels(kinds)) + ")"


# -- server facts -----------------------------------------------------------------------------

def server_components() -> Statement:
    return ("CALL dbms.components() YIELD name, versions, edition "
            "RETURN name, versions, edition", {})


def parse_version(version: str) -> tuple[int, ...]:
    """``"5.26.30"`` -> ``(5, 26, 30)``; ``"2025.01.0"`` -> ``(2025, 1, 0)``; suffixes dropped."""
    numbers: list[int] = []
    for part in version.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
    return tuple(numbers)


def version_supported(version: str) -> bool:
    """True for servers with vector indexes: 5.13 and later (calendar versions 2025.x too)."""
    parsed = parse_version(version)
    return bool(parsed) and parsed[: len(MIN_SERVER_VERSION)] >= MIN_SERVER_VERSION


# -- schema -----------------------------------------------------------------------------------

def create_id_constraint(kind: NodeKind) -> Statement:
    return (f"CREATE CONSTRAINT $name IF NOT EXISTS FOR (n:{label(kind)}) REQUIRE n.id IS UNIQUE",
            {"name": CONSTRAINT_NAMES[kind]})


def create_meta_constraint() -> Statement:
    return (f"CREATE CONSTRAINT $name IF NOT EXISTS FOR (m:{META_LABEL}) REQUIRE m.key IS UNIQUE",
            {"name": META_CONSTRAINT_NAME})


def create_fulltext_index(kind: NodeKind) -> Statement:
    return (f"CREATE FULLTEXT INDEX $name IF NOT EXISTS FOR (n:{label(kind)}) ON EACH [n.tokens] "
            "OPTIONS {indexConfig: {`fulltext.analyzer`: $analyzer}}",
            {"name": FULLTEXT_INDEX_NAMES[kind], "analyzer": FULLTEXT_ANALYZER})


def create_vector_index(kind: NodeKind, dimensions: int) -> Statement:
    """A cosine VECTOR index on ``embedding``; ``dimensions`` comes from the vectors synced."""
    if dimensions <= 0:
        raise ValueError(f"vector dimensions must be positive, not {dimensions}")
    return (f"CREATE VECTOR INDEX $name IF NOT EXISTS FOR (n:{label(kind)}) ON n.embedding "
            "OPTIONS {indexConfig: {`vector.dimensions`: $dimensions, "
            "`vector.similarity_function`: $similarity}}",
            {"name": VECTOR_INDEX_NAMES[kind], "dimensions": dimensions,
             "similarity": VECTOR_SIMILARITY})


def show_indexes(names: Sequence[str]) -> Statement:
    return ("SHOW INDEXES YIELD name, type, state, options WHERE name IN $names "
            "RETURN name, type, state, options", {"names": list(names)})


def drop_index(name: str) -> Statement:
    return "DROP INDEX $name IF EXISTS", {"name": name}


def await_indexes(seconds: int = 300) -> Statement:
    return "CALL db.awaitIndexes($seconds)", {"seconds": seconds}


# -- sync: reading what is there --------------------------------------------------------------

def existing_nodes() -> Statement:
    """Every node of ours with its kind, hash and whether it has an embedding."""
    return (f"MATCH (n) WHERE {_any_label('n')} RETURN n.id AS id, labels(n) AS labels, "
            "n.content_hash AS content_hash, n.embedding IS NOT NULL AS has_vector", {})


def existing_edges() -> Statement:
    return (f"MATCH (a)-[r:{_rel_types(None)}]->(b) WHERE {_any_label('a')} AND {_any_label('b')} "
            f"RETURN {_EDGE_COLUMNS}, labels(a) AS src_labels, labels(b) AS dst_labels", {})


# -- sync: writing ----------------------------------------------------------------------------

T = TypeVar("T")


def batches(rows: Sequence[T], size: int) -> Iterator[list[T]]:
    if size <= 0:
        raise ValueError(f"batch size must be positive, not {size}")
    for start in range(0, len(rows), size):
        yield list(rows[start : start + size])


def upsert_nodes(kind: NodeKind, rows: Sequence[Mapping[str, Any]]) -> Statement:
    """Rows: ``{"id": ..., "properties": {name, text, tokens, content_hash, data[, embedding]}}``.

    An updated node whose row has no ``embedding`` keeps the one it has (``+=`` only sets the
    keys given)."""
    return (f"UNWIND $rows AS row MERGE (n:{label(kind)} {{id: row.id}}) SET n += row.properties",
            {"rows": [dict(r) for r in rows]})


def relabel_nodes(old: NodeKind, new: NodeKind, ids: Sequence[str]) -> Statement:
    """A node whose kind changed keeps its id and edges and swaps its label."""
    return (f"UNWIND $ids AS id MATCH (n:{label(old)} {{id: id}}) "
            f"REMOVE n:{label(old)} SET n:{label(new)}", {"ids": list(ids)})


def delete_nodes(kind: NodeKind, ids: Sequence[str]) -> Statement:
    """Deletes nodes with every relationship they have."""
    return (f"UNWIND $ids AS id MATCH (n:{label(kind)} {{id: id}}) DETACH DELETE n",
            {"ids": list(ids)})


def delete_edges(kind: EdgeKind, src: NodeKind, dst: NodeKind,
                 rows: Sequence[Mapping[str, Any]]) -> Statement:
    """Rows: ``{"src", "dst", "group"}``, the identity of each edge to remove."""
    return (f"UNWIND $rows AS row MATCH (a:{label(src)} {{id: row.src}})"
            f"-[r:{rel_type(kind)} {{group: row.group}}]->(b:{label(dst)} {{id: row.dst}}) "
            "DELETE r", {"rows": [dict(r) for r in rows]})


def merge_edges(kind: EdgeKind, src: NodeKind, dst: NodeKind,
                rows: Sequence[Mapping[str, Any]]) -> Statement:
    """Rows: ``{"src", "dst", "group", "weight", "props"}``; creates or rewrites each edge."""
    return (f"UNWIND $rows AS row MATCH (a:{label(src)} {{id: row.src}}) "
            f"MATCH (b:{label(dst)} {{id: row.dst}}) "
            f"MERGE (a)-[r:{rel_type(kind)} {{group: row.group}}]->(b) "
            "SET r.weight = row.weight, r.props = row.props RETURN count(r) AS written",
            {"rows": [dict(r) for r in rows]})


def delete_all() -> Statement:
    """Every node of ours and the meta entries (the schema stays)."""
    return (f"MATCH (n) WHERE {_any_label('n')} OR n:{META_LABEL} DETACH DELETE n", {})


# -- reading ----------------------------------------------------------------------------------

def node_by_id(node_id: str) -> Statement:
    parts = [f"MATCH (n:{name} {{id: $id}}) RETURN {_node_columns('n')}" for name in _node_labels(None)]
    return " UNION ALL ".join(parts), {"id": node_id}


def nodes(kind: NodeKind | None = None) -> Statement:
    kinds = None if kind is None else [kind]
    return (f"MATCH (n) WHERE {_any_label('n', kinds)} RETURN {_node_columns('n')} ORDER BY id", {})


def edges(kind: EdgeKind | None = None) -> Statement:
    kinds = None if kind is None else [kind]
    return (f"MATCH (a)-[r:{_rel_types(kinds)}]->(b) WHERE {_any_label('a')} AND {_any_label('b')} "
            f"RETURN {_EDGE_COLUMNS} ORDER BY kind, src, dst, group", {})


def neighbors(node_id: str, kinds: Sequence[EdgeKind] | None = None) -> Statement:
    """Edges touching the node in either direction, outgoing first, with the other node."""
    find = " UNION ".join(f"MATCH (n:{name} {{id: $id}}) RETURN n"
                          for name in _node_labels(None))
    return (f"CALL {{ {find} }} MATCH (n)-[r:{_rel_types(kinds)}]-(m) WHERE {_any_label('m')} "
            f"RETURN startNode(r) = n AS outgoing, {_EDGE_COLUMNS}, {_node_columns('m')} "
            "ORDER BY outgoing DESC, kind, src, dst, group", {"id": node_id})


def node_vector(node_id: str) -> Statement:
    parts = [f"MATCH (n:{name} {{id: $id}}) RETURN n.embedding AS embedding"
             for name in _node_labels(None)]
    return " UNION ALL ".join(parts), {"id": node_id}


def vector_search(kind: NodeKind, vector: Sequence[float], k: int) -> Statement:
    """Nearest nodes by the cosine VECTOR index. Neo4j scores cosine as ``(1 + cos) / 2``;
    :func:`cosine_from_score` turns it back."""
    return ("CALL db.index.vector.queryNodes($index, $k, $vector) YIELD node, score "
            "RETURN node.id AS id, score ORDER BY score DESC, id",
            {"index": VECTOR_INDEX_NAMES[kind], "k": k, "vector": [float(x) for x in vector]})


def cosine_from_score(score: float) -> float:
    """Neo4j's cosine score ``(1 + cos) / 2`` back to the cosine."""
    return 2.0 * score - 1.0


_LUCENE_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')


def lucene_escape(term: str) -> str:
    r"""A term safe in Lucene's query syntax: ``a+b`` -> ``a\+b``; the words AND, OR and NOT
    (operators only in capitals) are quoted."""
    escaped = _LUCENE_SPECIAL.sub(r"\\\1", term)
    if escaped in ("AND", "OR", "NOT"):
        return f'"{escaped}"'
    return escaped


def lucene_query(tokens: Sequence[str]) -> str:
    """Our tokens as one Lucene query: each distinct term once, boosted by how often it occurs
    (Lucene would merge repeated clauses the same way), at most :data:`LUCENE_MAX_CLAUSES`.

    >>> lucene_query(["report", "周报", "report"])
    'report^2 周报'
    """
    counts = Counter(t for t in tokens if t.strip())
    parts = []
    for term, count in list(counts.items())[:LUCENE_MAX_CLAUSES]:
        parts.append(lucene_escape(term) + (f"^{count}" if count > 1 else ""))
    return " ".join(parts)


def fulltext_search(kind: NodeKind, tokens: Sequence[str], k: int) -> Statement:
    return ("CALL db.index.fulltext.queryNodes($index, $query, {limit: $k}) YIELD node, score "
            "RETURN node.id AS id, score ORDER BY score DESC, id",
            {"index": FULLTEXT_INDEX_NAMES[kind], "query": lucene_query(tokens), "k": k})


def fulltext_statistics(kind: NodeKind, tokens: Sequence[str]) -> Statement:
    """How many nodes of ``kind`` there are and, for each distinct query term, how many hold it
    (terms no node holds are left out): what Lucene's idf is made of."""
    terms = list(Counter(t for t in tokens if t.strip()))[:LUCENE_MAX_CLAUSES]
    return (f"MATCH (n:{label(kind)}) WITH count(n) AS total "
            "UNWIND $terms AS term "
            "CALL db.index.fulltext.queryNodes($index, term.query) YIELD node "
            "RETURN total, term.term AS term, count(node) AS df",
            {"index": FULLTEXT_INDEX_NAMES[kind],
             "terms": [{"term": t, "query": lucene_escape(t)} for t in terms]})


def lucene_idf(total: int, df: int) -> float:
    """Lucene's BM25 idf: ``ln(1 + (N - n + 0.5) / (n + 0.5))``."""
    return math.log(1.0 + (total - df + 0.5) / (df + 0.5))


def lucene_max_score(tokens: Sequence[str], total: int, dfs: Mapping[str, int]) -> float:
    """The most any node could score for ``tokens`` under Lucene's BM25.

    Lucene scores a term ``idf * tf / (tf + k1 * (1 - b + b * len / avglen))``, which tends to
    ``idf`` as the term fills a short document, so the bound is the sum of the query terms' idf,
    each counted as often as it occurs — the same bound the embedded store divides its BM25 by
    (there with rank-bm25's idf and the ``k1 + 1`` factor Lucene drops)."""
    return sum(lucene_idf(total, dfs[t]) for t in tokens if dfs.get(t, 0) > 0)


# -- meta -------------------------------------------------------------------------------------

def get_meta(key: str) -> Statement:
    return f"MATCH (m:{META_LABEL} {{key: $key}}) RETURN m.value AS value", {"key": key}


def set_meta(key: str, value: str) -> Statement:
    return (f"MERGE (m:{META_LABEL} {{key: $key}}) SET m.value = $value",
            {"key": key, "value": value})
