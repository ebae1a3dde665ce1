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
    (:Group {id, name, text, tokens, content_hash, data, embedding})   one label per NodeKind
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

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from skillgrove.graph.model import EdgeKind, NodeKind

Statement = tuple[str, dict[str, Any]]

MIN_SERVER_VERSION = (5, 13)
"""Vector indexes (``CREATE VECTOR INDEX``, ``db.index.vector.queryNodes``) are GA from 5.13."""

META_LABEL = "SkillgroveMeta"
_IDENTIFIER = re.compile(r"^[A-Z][A-Za-z_]*$")
_KIND_VALUE = re.compile(r"^[a-z][a-z_]*$")


def _kind_value(kind: NodeKind) -> str:
    if not isinstance(kind, NodeKind):
        raise TypeError(f"not a NodeKind: {kind!r}")
    if not _KIND_VALUE.match(kind.value):
        raise ValueError(f"refusing to put {kind.value!r} into Cypher: not a plain identifier")
    return kind.value


def constraint_name(kind: NodeKind) -> str:
    """``skillgrove_skill_id``: the uniqueness constraint on the kind's ``id``."""
    return f"skillgrove_{_kind_value(kind)}_id"


def vector_index_name(kind: NodeKind) -> str:
    return f"skillgrove_{_kind_value(kind)}_embedding"


def fulltext_index_name(kind: NodeKind) -> str:
    """One fulltext index per kind, so Lucene's term statistics (idf, average length) are per
    kind, as the embedded store keeps one BM25 per kind."""
    return f"skillgrove_{_kind_value(kind)}_tokens"


META_CONSTRAINT_NAME = "skillgrove_meta_key"
FULLTEXT_ANALYZER = "whitespace"
VECTOR_SIMILARITY = "cosine"

LUCENE_MAX_CLAUSES = 1024
"""Lucene's default limit of clauses in one query; longer queries keep their first terms."""


def _node_columns(var: str) -> str:
    return (f"{var}.id AS id, labels({var}) AS labels, {var}.name AS name, {var}.text AS text, "
            f"{var}.content_hash AS content_hash, {var}.data AS data")

_EDGE_COLUMNS = ("type(r) AS kind, startNode(r).id AS src, endNode(r).id AS dst, "
                 "r.group AS group, r.weight AS weight, r.props AS props")


# -- names from our enums ---------------------------------------------------------------------

def label(kind: NodeKind) -> str:
    """The node label of ``kind`` (``skill`` -> ``Skill``); anything but a :class:`NodeKind`
    is refused."""
    return _checked_identifier("".join(p.capitalize() for p in _kind_value(kind).split("_")))


def kind_of_labels(labels: Iterable[str]) -> NodeKind | None:
    """The kind of a node from its labels (``None`` for a node that is not ours)."""
    for name in labels:
        kind = _KIND_OF_LABEL.get(name)
        if kind is not None:
            return kind
    return None


_KIND_OF_LABEL: dict[str, NodeKind] = {}


def rel_type(kind: EdgeKind) -> str:
    """The relationship type of ``kind``; anything but an :class:`EdgeKind` is refused."""
    if not isinstance(kind, EdgeKind):
        raise TypeError(f"not an EdgeKind: {kind!r}")
    return _checked_identifier(kind.value)


def _checked_identifier(name: str) -> str:
    if not _IDENTIFIER.match(name):
        raise ValueError(f"refusing to put {name!r} into Cypher: not a plain identifier")
    return name


_KIND_OF_LABEL.update({label(kind): kind for kind in NodeKind})


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
            {"name": constraint_name(kind)})


def create_meta_constraint() -> Statement:
    return (f"CREATE CONSTRAINT $name IF NOT EXISTS FOR (m:{META_LABEL}) REQUIRE m.key IS UNIQUE",
            {"name": META_CONSTRAINT_NAME})


def create_fulltext_index(kind: NodeKind) -> Statement:
    return (f"CREATE FULLTEXT INDEX $name IF NOT EXISTS FOR (n:{label(kind)}) ON EACH [n.tokens] "
            "OPTIONS {indexConfig: {`fulltext.analyzer`: $analyzer}}",
            {"name": fulltext_index_name(kind), "analyzer": FULLTEXT_ANALYZER})


def vector_quantization_configurable(server_version: Sequence[int]) -> bool:
    """From 5.23 a vector index quantizes its vectors unless told not to (scores then drift by
    about 0.005); older servers neither quantize nor accept the setting."""
    return tuple(server_version[:2]) >= (5, 23)


def vector_index_config(dimensions: int, server_version: Sequence[int]) -> dict[str, Any]:
    """The ``indexConfig`` we want: cosine, the vectors' dimension, exact (unquantized) vectors."""
    if dimensions <= 0:
        raise ValueError(f"vector dimensions must be positive, not {dimensions}")
    config: dict[str, Any] = {"vector.dimensions": dimensions,
                              "vector.similarity_function": VECTOR_SIMILARITY}
    if vector_quantization_configurable(server_version):
        config["vector.quantization.enabled"] = False
    return config


def create_vector_index(kind: NodeKind, dimensions: int,
                        server_version: Sequence[int] = (5, 13)) -> Statement:
    """A cosine VECTOR index on ``embedding``; ``dimensions`` comes from the vectors synced,
    ``server_version`` (:func:`parse_version`) decides which settings the server accepts."""
    return (f"CREATE VECTOR INDEX $name IF NOT EXISTS FOR (n:{label(kind)}) ON n.embedding "
            "OPTIONS {indexConfig: $config}",
            {"name": vector_index_name(kind),
             "config": vector_index_config(dimensions, server_version)})


def vector_index_matches(existing_config: Mapping[str, Any], dimensions: int,
                         server_version: Sequence[int]) -> bool:
    """Whether an existing index's ``indexConfig`` is the one we want (else it is recreated)."""
    for key, value in vector_index_config(dimensions, server_version).items():
        found = existing_config.get(key)
        if isinstance(value, str) and isinstance(found, str):
            if found.lower() != value.lower():
                return False
        elif found != value:
            return False
    return True


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


def set_tokens(kind: NodeKind, rows: Sequence[Mapping[str, Any]]) -> Statement:
    """Rows: ``{"id", "tokens"}``; rewrites the stored tokens (after a tokenizer change)."""
    return (f"UNWIND $rows AS row MATCH (n:{label(kind)} {{id: row.id}}) "
            "SET n.tokens = row.tokens", {"rows": [dict(r) for r in rows]})


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


def nodes_by_id(ids: Sequence[str]) -> Statement:
    """The nodes among ``ids`` (one index seek per label)."""
    parts = [f"MATCH (n:{name}) WHERE n.id IN $ids RETURN {_node_columns('n')}"
             for name in _node_labels(None)]
    return " UNION ALL ".join(parts), {"ids": list(ids)}


def node_vectors(ids: Sequence[str]) -> Statement:
    """The embeddings of the nodes among ``ids`` that have one."""
    parts = [f"MATCH (n:{name}) WHERE n.id IN $ids AND n.embedding IS NOT NULL "
             "RETURN n.id AS id, n.embedding AS embedding" for name in _node_labels(None)]
    return " UNION ALL ".join(parts), {"ids": list(ids)}


def neighbors_of(ids: Sequence[str], kinds: Sequence[EdgeKind] | None = None) -> Statement:
    """:func:`neighbors` of several nodes at once; ``of`` names the node each row is about,
    and each node's rows come in :func:`neighbors`' order."""
    find = " UNION ALL ".join(f"MATCH (n:{name}) WHERE n.id IN $ids RETURN n"
                              for name in _node_labels(None))
    return (f"CALL {{ {find} }} MATCH (n)-[r:{_rel_types(kinds)}]-(m) WHERE {_any_label('m')} "
            f"RETURN n.id AS of, startNode(r) = n AS outgoing, {_EDGE_COLUMNS}, "
            f"{_node_columns('m')} ORDER BY of, outgoing DESC, kind, src, dst, group",
            {"ids": list(ids)})


EXHAUSTIVE_VECTOR_SEARCH_UP_TO = 2000
"""Up to this many nodes of a kind, a vector search asks the index for all of them."""
VECTOR_CANDIDATES = 500
"""Beyond that, how many candidates the index explores (at least ``k``). On the 10,000-skill
set of ``bench/neo4j_store.py``: recall@50 0.993 with 500 (0.997 with 1,000, 0.989 with 200),
the same top-5 skills as the exact embedded store for 30 of 30 requests, and the index query
about 5 ms of server time against 7.5 ms with 1,000 (measured on a loaded 2-core machine)."""


def vector_search(kind: NodeKind, vector: Sequence[float], k: int) -> Statement:
    """The ``k`` nearest nodes by the cosine VECTOR index, best first.

    Neo4j's HNSW search explores only as many candidates as it is asked for. On MiniLM vectors,
    whose cosines crowd into a narrow band, asking for 50 misses about one in ten of the true
    top 50 (on the 1,299-skill corpus: recall 0.91; the node itself is missed for one query in
    five at k = 5). So the index is asked for every node of the kind when there are at most
    :data:`EXHAUSTIVE_VECTOR_SEARCH_UP_TO` (exact, and at that size no slower), else for
    ``max(k, VECTOR_CANDIDATES)`` (recall 0.993 at 10,000 skills), and the best ``k`` are kept.
    Neo4j scores cosine as ``(1 + cos) / 2``; :func:`cosine_from_score` turns it back."""
    return (f"MATCH (n:{label(kind)}) WITH count(n) AS total "
            "WITH CASE WHEN total <= $exhaustive_up_to THEN total "
            "ELSE $candidates END AS candidates WHERE candidates > 0 "
            "CALL db.index.vector.queryNodes($index, candidates, $vector) YIELD node, score "
            "RETURN node.id AS id, score ORDER BY score DESC, id LIMIT $k",
            {"index": vector_index_name(kind), "k": k, "vector": [float(x) for x in vector],
             "exhaustive_up_to": EXHAUSTIVE_VECTOR_SEARCH_UP_TO,
             "candidates": max(k, VECTOR_CANDIDATES)})


def vector_searches(limits: Mapping[NodeKind, int], vector: Sequence[float]) -> Statement:
    """:func:`vector_search` over several kinds in one statement; ``kind`` names each row's
    kind (its :class:`NodeKind` value), each kind's rows best first."""
    parts: list[str] = []
    params: dict[str, Any] = {"vector": [float(x) for x in vector],
                              "exhaustive_up_to": EXHAUSTIVE_VECTOR_SEARCH_UP_TO}
    for i, (kind, k) in enumerate(limits.items()):
        parts.append(
            f"CALL {{ MATCH (n:{label(kind)}) WITH count(n) AS total "
            f"WITH CASE WHEN total <= $exhaustive_up_to THEN total "
            f"ELSE $candidates_{i} END AS candidates WHERE candidates > 0 "
            f"CALL db.index.vector.queryNodes($index_{i}, candidates, $vector) "
            f"YIELD node, score RETURN node.id AS id, score ORDER BY score DESC, id "
            f"LIMIT $k_{i} }} RETURN $kind_{i} AS kind, id, score")
        params.update({f"index_{i}": vector_index_name(kind), f"k_{i}": k,
                       f"candidates_{i}": max(k, VECTOR_CANDIDATES),
                       f"kind_{i}": _kind_value(kind)})
    return " UNION ALL ".join(parts), params


def nodes_with_vectors(ids: Sequence[str]) -> Statement:
    """:func:`nodes_by_id` with each node's ``embedding`` (null when it has none): what a
    hybrid score needs of a candidate, in one read."""
    parts = [f"MATCH (n:{name}) WHERE n.id IN $ids RETURN {_node_columns('n')}, "
             "n.embedding AS embedding" for name in _node_labels(None)]
    return " UNION ALL ".join(parts), {"ids": list(ids)}


def _node_map(var: str, *extra: tuple[str, str]) -> str:
    entries = [("id", f"{var}.id"), ("labels", f"labels({var})"), ("name", f"{var}.name"),
               ("text", f"{var}.text"), ("content_hash", f"{var}.content_hash"),
               ("data", f"{var}.data"), *extra]
    return "{" + ", ".join(f"{key}: {value}" for key, value in entries) + "}"


def candidate_reads(ids: Sequence[str], neighbor_ids: Sequence[str]) -> Statement:
    """:func:`nodes_with_vectors` of ``ids`` and :func:`neighbors_of` ``neighbor_ids`` in one
    statement: rows of ``part`` ``"node"`` (``row`` a record with its ``embedding``) and
    ``"neighbor"`` (``of`` the node asked about, ``row`` the edge and the other node, in no
    particular order)."""
    parts = [f"MATCH (n:{name}) WHERE n.id IN $ids RETURN 'node' AS part, n.id AS of, "
             f"{_node_map('n', ('embedding', 'n.embedding'))} AS row"
             for name in _node_labels(None)] if ids else []
    if neighbor_ids:
        find = " UNION ALL ".join(f"MATCH (n:{name}) WHERE n.id IN $neighbor_ids RETURN n"
                                  for name in _node_labels(None))
        edge = (("outgoing", "startNode(r) = n"), ("kind", "type(r)"),
                ("src", "startNode(r).id"), ("dst", "endNode(r).id"), ("group", "r.group"),
                ("weight", "r.weight"), ("props", "r.props"))
        parts.append(f"CALL {{ {find} }} MATCH (n)-[r:{_rel_types(None)}]-(m) "
                     f"WHERE {_any_label('m')} RETURN 'neighbor' AS part, n.id AS of, "
                     f"{_node_map('m', *edge)} AS row")
    return " UNION ALL ".join(parts), {"ids": list(ids), "neighbor_ids": list(neighbor_ids)}


SYNC_TOKEN_KEY = "skillgrove.sync"
"""The meta entry every sync rewrites (a fresh random value) in its transaction: while it is
unchanged, nothing a sync writes has changed, so a reader may keep what it read."""


def lock_sync(token: str) -> Statement:
    """A sync's first statement: writes its token to the :data:`SYNC_TOKEN_KEY` node, whose
    write lock the transaction then holds to its end (two syncs at once run one after the
    other)."""
    return (f"MERGE (m:{META_LABEL} {{key: $key}}) SET m.value = $token RETURN m.value AS value",
            {"key": SYNC_TOKEN_KEY, "token": token})


def get_meta_and_token(key: str) -> Statement:
    """A meta entry and the :data:`SYNC_TOKEN_KEY` in one read (one row, nulls when absent)."""
    return (f"OPTIONAL MATCH (m:{META_LABEL} {{key: $key}}) "
            f"OPTIONAL MATCH (t:{META_LABEL} {{key: $token_key}}) "
            "RETURN m.value AS value, t.value AS token",
            {"key": key, "token_key": SYNC_TOKEN_KEY})


_SEARCH_COLUMNS = ("part", "kind", "total", "statistics", "mean_idf", "terms", "lucene", "hits",
                   "token", "ids", "documents")


def _search_row(part: str, kind: str, total: str = "null", statistics: str = "null",
                mean_idf: str = "null", terms: str = "[]", lucene: str = "null",
                hits: str = "[]", token: str = "null", ids: str = "[]",
                documents: str = "[]") -> str:
    values = (f"'{part}'", kind, total, statistics, mean_idf, terms, lucene, hits, token, ids,
              documents)
    return "RETURN " + ", ".join(f"{v} AS {c}" for v, c in zip(values, _SEARCH_COLUMNS,
                                                                  strict=True))


def hybrid_searches(text: Sequence[tuple[NodeKind, int]], dense: Mapping[NodeKind, int],
                    tokens: Sequence[str], vector: Sequence[float] | None,
                    postings: Mapping[NodeKind, str | None] | None = None) -> Statement:
    """Every lexical and vector search of one request in one statement: one row per search
    (``part`` ``"text"`` or ``"vector"``, ``kind`` its :class:`NodeKind` value), a row with
    the :data:`SYNC_TOKEN_KEY` before them all (``part`` ``"token"``) and one after them all
    (``part`` ``"token_after"``): when the two differ, a sync committed while the statement
    ran, and its rows may mix two graphs.

    ``postings`` holds kind -> the sync token under which the caller holds that kind's term
    counts (None: not held). Its row (``part`` ``"postings"``) comes only when the graph has
    a token and it is not the one given: ``ids`` and ``documents`` are every node of the kind
    and its stored tokens (``""`` for none), in the same order, ``total`` their number,
    ``statistics`` and ``mean_idf`` as for ``text``, and ``token`` the token it was read
    under. So a caller that scores BM25 itself reads the counts once per sync, and on every
    other search the row costs one look at the token.

    ``text`` holds ``(kind, limit)``: each is :func:`fulltext_statistics` and
    :func:`fulltext_search` at once, the Lucene query of :func:`lucene_query` built in Cypher
    from the document frequencies it has just counted (each boost written with six decimals,
    as ``lucene_query`` does: Lucene's syntax has no exponents). Its row carries ``total``, the stored ``statistics`` (JSON),
    ``mean_idf`` (null for a graph synced before it was stored: then the query is not
    built), ``terms`` (``{term, df}`` of each held term), ``lucene`` (the query it built)
    and ``hits`` (``{id, tokens}``);
    no row when no node holds any term. ``dense`` holds kind -> ``k``: a
    :func:`vector_search` whose ``hits`` also carry each node's record columns, best first
    (ties by id), so the caller reads nothing more about them."""
    counts = Counter(tokens)
    params: dict[str, Any] = {
        "terms": [{"term": t, "query": lucene_escape(t), "count": counts[t]}
                  for t in query_terms(tokens)],
        "epsilon": BM25_EPSILON, "token_key": SYNC_TOKEN_KEY,
        "exhaustive_up_to": EXHAUSTIVE_VECTOR_SEARCH_UP_TO}
    parts = [f"OPTIONAL MATCH (t:{META_LABEL} {{key: $token_key}}) "
             + _search_row("token", "null", token="t.value")]
    for i, (kind, known) in enumerate((postings or {}).items()):
        params.update({f"p_known_{i}": known, f"p_stats_{i}": statistics_key(kind),
                       f"p_kind_{i}": _kind_value(kind)})
        parts.append(
            f"OPTIONAL MATCH (t:{META_LABEL} {{key: $token_key}}) WITH t "
            f"WHERE t.value IS NOT NULL AND ($p_known_{i} IS NULL OR t.value <> $p_known_{i}) "
            f"CALL {{ MATCH (n:{label(kind)}) "
            "RETURN collect(n.id) AS ids, collect(coalesce(n.tokens, '')) AS documents } "
            f"OPTIONAL MATCH (m:{META_LABEL} {{key: $p_stats_{i}}}) "
            + _search_row("postings", f"$p_kind_{i}", "size(ids)", "m.value", "m.mean_idf",
                          token="t.value", ids="ids", documents="documents"))
    for i, (kind, limit) in enumerate(text):
        params.update({f"t_index_{i}": fulltext_index_name(kind), f"t_limit_{i}": limit,
                       f"t_stats_{i}": statistics_key(kind), f"t_kind_{i}": _kind_value(kind)})
        parts.append(
            f"MATCH (n:{label(kind)}) WITH count(n) AS total "
            f"OPTIONAL MATCH (m:{META_LABEL} {{key: $t_stats_{i}}}) "
            "WITH total, m UNWIND $terms AS term "
            f"CALL db.index.fulltext.queryNodes($t_index_{i}, term.query) YIELD node "
            "WITH total, m, term, count(node) AS df "
            "WITH total, m, term, df, log(total - df + 0.5) - log(df + 0.5) AS okapi "
            "WITH total, m, term, df, CASE WHEN okapi < 0 THEN $epsilon * m.mean_idf "
            "ELSE okapi END AS idf "
            "WITH total, m, term, df, "
            "idf * term.count / log(1.0 + (total - df + 0.5) / (df + 0.5)) AS boost "
            "WITH total, m, term, df, boost, toInteger(round(boost * 1000000)) AS micros "
            "WITH total, m, collect({term: term.term, df: df}) AS terms, "
            "collect(CASE WHEN boost >= 1e-6 THEN term.query + '^' + toString(micros / 1000000) "
            "+ '.' + right('00000' + toString(micros % 1000000), 6) END) AS clauses "
            "WITH total, m, terms, reduce(q = '', c IN clauses | "
            "CASE q WHEN '' THEN c ELSE q + ' ' + c END) AS lucene "
            "CALL { WITH lucene WITH lucene WHERE lucene <> '' "
            f"CALL db.index.fulltext.queryNodes($t_index_{i}, lucene, {{limit: $t_limit_{i}}}) "
            "YIELD node RETURN collect({id: node.id, tokens: node.tokens}) AS hits } "
            + _search_row("text", f"$t_kind_{i}", "total", "m.value", "m.mean_idf", "terms",
                          "lucene", "hits"))
    if dense:
        params["vector"] = [float(x) for x in vector or ()]
    for i, (kind, k) in enumerate(dense.items()):
        params.update({f"v_index_{i}": vector_index_name(kind), f"v_k_{i}": k,
                       f"v_candidates_{i}": max(k, VECTOR_CANDIDATES),
                       f"v_kind_{i}": _kind_value(kind)})
        columns = ", ".join(f"{column}: {value}" for column, value in (
            ("id", "node.id"), ("score", "score"), ("labels", "labels(node)"),
            ("name", "node.name"), ("text", "node.text"),
            ("content_hash", "node.content_hash"), ("data", "node.data")))
        parts.append(
            f"CALL {{ MATCH (n:{label(kind)}) WITH count(n) AS total "
            "WITH CASE WHEN total <= $exhaustive_up_to THEN total "
            f"ELSE $v_candidates_{i} END AS candidates WHERE candidates > 0 "
            f"CALL db.index.vector.queryNodes($v_index_{i}, candidates, $vector) "
            "YIELD node, score WITH node, score ORDER BY score DESC, node.id "
            f"LIMIT $v_k_{i} RETURN collect({{{columns}}}) AS hits }} "
            + _search_row("vector", f"$v_kind_{i}", hits="hits"))
    parts.append(f"OPTIONAL MATCH (t:{META_LABEL} {{key: $token_key}}) "
                 + _search_row("token_after", "null", token="t.value"))
    return " UNION ALL ".join(parts), params


def cosine_from_score(score: float) -> float:
    """Neo4j's cosine score ``(1 + cos) / 2`` back to the cosine."""
    return 2.0 * score - 1.0


# -- fulltext ---------------------------------------------------------------------------------
#
# The embedded store scores text with rank-bm25's Okapi BM25 (k1 = 1.5, b = 0.75, an idf of
# ln((N - n + 0.5) / (n + 0.5)) floored at epsilon x the vocabulary's mean) and divides by the
# most any node could score for the query: sum(max(idf, 0) x (k1 + 1)) over the query's tokens.
# Lucene's BM25 differs (idf ln(1 + ...), k1 = 1.2, no k1 + 1, one-byte length norms), and Neo4j
# does not let a fulltext index change it. So the Neo4j store uses Lucene to *find* candidates
# and computes the embedded store's score for them:
#
# 1. ``fulltext_statistics``: N, the document frequency of each query term (counted through the
#    index) and the mean idf and average length of the kind's vocabulary (written by each sync).
# 2. ``fulltext_search``: a Lucene query of our escaped tokens, each boosted by (our weight) /
#    (Lucene's idf), so Lucene ranks nearly as BM25 does; it returns the best
#    ``fulltext_candidates(k)`` nodes with their stored tokens.
# 3. ``bm25_scores``: the exact BM25 of those candidates, divided by the bound above (where a
#    term no node holds counts with the mean idf): the embedded store's 0..1 lexical score, to
#    float precision.
#
# That is the path of a graph without a sync token. With one, the store reads every node's
# ``tokens`` once per token (the ``postings`` rows of :func:`hybrid_searches`) and does step 3
# itself on every node that holds a query term, with the same arithmetic: the same scores, and
# the exact top ``k`` (``graph.neo4j_store._KindLexicon``).
#
# ``tokens`` are stored, so they must be those of today's tokenizer: a sync that finds a
# different :func:`tokenizer_signature` in meta rewrites them all.

BM25_K1 = 1.5
BM25_B = 0.75
BM25_EPSILON = 0.25
"""The embedded store's BM25 constants (:class:`graph.bm25.BM25`'s defaults)."""

_LUCENE_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')


def lucene_escape(term: str) -> str:
    r"""A term safe in Lucene's query syntax: ``a+b`` -> ``a\+b``; the words AND, OR and NOT
    (operators only in capitals) are quoted."""
    escaped = _LUCENE_SPECIAL.sub(r"\\\1", term)
    if escaped in ("AND", "OR", "NOT"):
        return f'"{escaped}"'
    return escaped


def query_terms(tokens: Sequence[str]) -> list[str]:
    """The distinct terms of a query, in order, at most :data:`LUCENE_MAX_CLAUSES`."""
    return list(Counter(t for t in tokens if t.strip()))[:LUCENE_MAX_CLAUSES]


def okapi_idf(total: int, df: int) -> float:
    """rank-bm25's idf: ``ln((N - n + 0.5) / (n + 0.5))`` (negative for a term in most nodes)."""
    return math.log(total - df + 0.5) - math.log(df + 0.5)


def lucene_idf(total: int, df: int) -> float:
    """Lucene's BM25 idf: ``ln(1 + (N - n + 0.5) / (n + 0.5))``."""
    return math.log(1.0 + (total - df + 0.5) / (df + 0.5))


def vocabulary_statistics(documents: Sequence[Sequence[str]]) -> dict[str, float]:
    """``mean_idf`` (over the vocabulary; rank-bm25 floors negative idfs with it) and
    ``average_length`` of the token lists of one kind: what a sync stores for text search."""
    dfs: Counter[str] = Counter()
    for tokens in documents:
        dfs.update(set(tokens))
    total = len(documents)
    mean = sum(okapi_idf(total, n) for n in dfs.values()) / len(dfs) if dfs else 0.0
    length = sum(len(tokens) for tokens in documents) / total if total else 0.0
    return {"mean_idf": mean, "average_length": length}


def term_idfs(tokens: Sequence[str], total: int, dfs: Mapping[str, int], mean_idf: float,
              epsilon: float = BM25_EPSILON) -> dict[str, float]:
    """The embedded store's idf of each distinct query term some node holds (an idf below zero
    becomes ``epsilon x mean_idf``, as in rank-bm25).

    >>> term_idfs(["pdf", "pdf", "zzz"], 10, {"pdf": 1}, 0.0)
    {'pdf': 1.845...}
    """
    idfs: dict[str, float] = {}
    for term in query_terms(tokens):
        df = dfs.get(term, 0)
        if df > 0:
            idf = okapi_idf(total, df)
            idfs[term] = epsilon * mean_idf if idf < 0 else idf
    return idfs


def bm25_bound(tokens: Sequence[str], idfs: Mapping[str, float], mean_idf: float,
               k1: float = BM25_K1) -> float:
    """What a node holding every query term could score: ``sum(max(idf, 0) x (k1 + 1))`` over
    the query's tokens, repeated ones included, a term no node holds counting with the
    vocabulary's mean idf (the embedded store's :meth:`graph.bm25.BM25.max_score`)."""
    unseen = max(mean_idf, 0.0)
    return sum(max(idfs.get(t, unseen), 0.0) * (k1 + 1) for t in tokens)


def lucene_query(tokens: Sequence[str], idfs: Mapping[str, float], total: int,
                 dfs: Mapping[str, int]) -> str:
    """Our terms as a Lucene query, each boosted so that Lucene weighs it by our idf times its
    occurrences instead of by its own idf; terms that cannot raise a score are left out.

    >>> lucene_query(["report", "report", "周报"], {"report": 1.0, "周报": 0.5}, 10,
    ...              {"report": 1, "周报": 1})
    'report^1.003799 周报^0.250950'
    """
    counts = Counter(tokens)
    parts = []
    for term, idf in idfs.items():
        boost = idf * counts[term] / lucene_idf(total, dfs[term])
        if boost >= 1e-6:
            parts.append(f"{lucene_escape(term)}^{boost:.6f}")
    return " ".join(parts)


def fulltext_candidates(k: int) -> int:
    """How many Lucene hits to rescore for the best ``k``. Lucene ranks nearly as BM25 does
    (k1 and length rounding differ), but not in the tail: rescoring twice as many still missed
    some of the true top 50 for 3 of 30 requests on 1,000 corpus skills; four times as many
    (and at least 200) missed none there nor on 10,000."""
    return max(4 * k, 200)


def fulltext_statistics(kind: NodeKind, tokens: Sequence[str]) -> Statement:
    """Step 1: the number of nodes of ``kind``, the vocabulary statistics the last sync stored
    (JSON, see :func:`vocabulary_statistics`) and, for each distinct query term that some node
    holds, how many nodes hold it (through the fulltext index)."""
    return (f"MATCH (n:{label(kind)}) WITH count(n) AS total "
            f"OPTIONAL MATCH (m:{META_LABEL} {{key: $stats_key}}) "
            "WITH total, m.value AS statistics UNWIND $terms AS term "
            "CALL db.index.fulltext.queryNodes($index, term.query) YIELD node "
            "RETURN total, statistics, term.term AS term, count(node) AS df",
            {"index": fulltext_index_name(kind), "stats_key": statistics_key(kind),
             "terms": [{"term": t, "query": lucene_escape(t)} for t in query_terms(tokens)]})


def fulltext_statistics_of(kinds: Sequence[NodeKind], tokens: Sequence[str]) -> Statement:
    """:func:`fulltext_statistics` of several kinds in one statement; ``kind`` names each
    row's kind."""
    parts: list[str] = []
    params: dict[str, Any] = {
        "terms": [{"term": t, "query": lucene_escape(t)} for t in query_terms(tokens)]}
    for i, kind in enumerate(kinds):
        parts.append(
            f"MATCH (n:{label(kind)}) WITH count(n) AS total "
            f"OPTIONAL MATCH (m:{META_LABEL} {{key: $stats_key_{i}}}) "
            "WITH total, m.value AS statistics UNWIND $terms AS term "
            f"CALL db.index.fulltext.queryNodes($index_{i}, term.query) YIELD node "
            f"RETURN $kind_{i} AS kind, total, statistics, term.term AS term, "
            "count(node) AS df")
        params.update({f"index_{i}": fulltext_index_name(kind),
                       f"stats_key_{i}": statistics_key(kind), f"kind_{i}": _kind_value(kind)})
    return " UNION ALL ".join(parts), params


def fulltext_searches(searches: Sequence[tuple[NodeKind, str, int]]) -> Statement:
    """:func:`fulltext_search` for several ``(kind, lucene query, limit)`` in one statement;
    ``kind`` names each row's kind."""
    parts: list[str] = []
    params: dict[str, Any] = {}
    for i, (kind, query, limit) in enumerate(searches):
        parts.append(f"CALL db.index.fulltext.queryNodes($index_{i}, $query_{i}, "
                     f"{{limit: $limit_{i}}}) YIELD node, score "
                     f"RETURN $kind_{i} AS kind, node.id AS id, node.tokens AS tokens, score")
        params.update({f"index_{i}": fulltext_index_name(kind), f"query_{i}": query,
                       f"limit_{i}": limit, f"kind_{i}": _kind_value(kind)})
    return " UNION ALL ".join(parts), params


def average_length(kind: NodeKind) -> Statement:
    """The average token count of the kind's nodes, for a graph synced before statistics were
    stored."""
    return (f"MATCH (n:{label(kind)}) "
            "RETURN avg(CASE n.tokens WHEN '' THEN 0 ELSE size(split(n.tokens, ' ')) END) "
            "AS average_length", {})


def fulltext_search(kind: NodeKind, query: str, limit: int) -> Statement:
    """Step 2: the best ``limit`` Lucene hits for ``query`` (from :func:`lucene_query`) with
    their tokens."""
    return ("CALL db.index.fulltext.queryNodes($index, $query, {limit: $limit}) "
            "YIELD node, score RETURN node.id AS id, node.tokens AS tokens, score",
            {"index": fulltext_index_name(kind), "query": query, "limit": limit})


def bm25_scores(candidates: Mapping[str, str], tokens: Sequence[str],
                idfs: Mapping[str, float], statistics: Mapping[str, float], k: int,
                k1: float = BM25_K1, b: float = BM25_B) -> list[tuple[str, float]]:
    """Step 3: the embedded store's lexical score of each candidate (id -> its stored tokens),
    best first (ties by id), at most ``k``, only scores above zero. ``statistics`` are the
    kind's :func:`vocabulary_statistics`."""
    bound = bm25_bound(tokens, idfs, statistics["mean_idf"], k1)
    average_length = statistics["average_length"]
    if bound <= 0:
        return []
    scored = []
    held = [(t, f" {t} ", f" {t} {t} ") for t in dict.fromkeys(tokens) if t in idfs]
    for node_id, stored in candidates.items():
        # Only the query's terms are counted, by str.count of " term " in the stored tokens
        # between spaces: no list of 100 strings per candidate, which was most of a search's
        # Python time. Tokens hold no spaces, so a count is exact unless the term occurs
        # twice in a row (two matches would share the space between them); only then is it
        # counted again with every separator doubled.
        length = stored.count(" ") + 1 if stored else 0
        padded = f" {stored} "
        counts: dict[str, int] = {}
        for term, pattern, twice in held:
            found = padded.count(pattern)
            if found and twice in padded:
                found = f" {stored.replace(' ', '  ')} ".count(pattern)
            counts[term] = found
        norm = k1 * (1 - b + b * length / average_length) if average_length else k1
        score = 0.0
        for term in tokens:
            tf = counts.get(term, 0)
            if tf and term in idfs:
                score += idfs[term] * tf * (k1 + 1) / (tf + norm)
        if score > 0:
            scored.append((node_id, score / bound))
    scored.sort(key=lambda hit: (-hit[1], hit[0]))
    return scored[:k]


TOKENIZER_SIGNATURE_KEY = "skillgrove.tokenizer"


def set_statistics(kind: NodeKind, statistics: Mapping[str, float]) -> Statement:
    """Writes a kind's :func:`vocabulary_statistics`: as JSON (the entry's ``value``) and its
    mean idf as a number too (``mean_idf``), which :func:`hybrid_searches` reads in Cypher."""
    return (f"MERGE (m:{META_LABEL} {{key: $key}}) SET m.value = $value, m.mean_idf = $mean_idf",
            {"key": statistics_key(kind), "value": json.dumps(dict(statistics)),
             "mean_idf": float(statistics.get("mean_idf", 0.0))})


def statistics_key(kind: NodeKind) -> str:
    """The meta entry holding a kind's :func:`vocabulary_statistics` (written by sync)."""
    return f"skillgrove.bm25.{_kind_value(kind)}"


# -- meta -------------------------------------------------------------------------------------

def get_meta(key: str) -> Statement:
    return f"MATCH (m:{META_LABEL} {{key: $key}}) RETURN m.value AS value", {"key": key}


def set_meta(key: str, value: str) -> Statement:
    return (f"MERGE (m:{META_LABEL} {{key: $key}}) SET m.value = $value",
            {"key": key, "value": value})


def set_meta_entries(entries: Mapping[str, str]) -> Statement:
    """Several meta entries in one statement (a sync writes the index's metadata with it).

    >>> set_meta_entries({"index_generation": "ab12"})[1]
    {'rows': [{'key': 'index_generation', 'value': 'ab12'}]}
    """
    return (f"UNWIND $rows AS row MERGE (m:{META_LABEL} {{key: row.key}}) SET m.value = row.value",
            {"rows": [{"key": str(k), "value": str(v)} for k, v in entries.items()]})


# -- the run log ------------------------------------------------------------------------------
#
#   (:SkillgroveRun {id, group, status, started_at, seconds, request, resumed_from, error,
#                    run_dir, library, sandboxed, inputs, context, outputs})
#   (:SkillgroveRun)-[:HAS_STEP]->(:SkillgroveStep {order, id, target, kind, status, inputs,
#                    outputs, error, attempts, started_at, seconds, continued, definition, note})
#
# ``inputs``, ``context`` and ``outputs`` are JSON strings. Neither label is a NodeKind's, so a
# sync and ``delete_all`` never touch runs: re-indexing or clearing the graph keeps the log.

RUN_LABEL = "SkillgroveRun"
STEP_LABEL = "SkillgroveStep"
RUN_CONSTRAINT_NAME = "skillgrove_run_id"
RUN_STARTED_INDEX_NAME = "skillgrove_run_started_at"


def create_run_constraint() -> Statement:
    return (f"CREATE CONSTRAINT $name IF NOT EXISTS FOR (r:{RUN_LABEL}) REQUIRE r.id IS UNIQUE",
            {"name": RUN_CONSTRAINT_NAME})


def create_run_started_index() -> Statement:
    """Listing runs newest first reads this range index backwards instead of sorting them all."""
    return (f"CREATE RANGE INDEX $name IF NOT EXISTS FOR (r:{RUN_LABEL}) ON (r.started_at)",
            {"name": RUN_STARTED_INDEX_NAME})


def write_run(run: Mapping[str, Any], steps: Sequence[Mapping[str, Any]]) -> Statement:
    """Creates or replaces the run ``run["id"]`` in one statement (one round trip): its
    properties, its old step nodes removed, then a node per step of ``steps``, each with its
    ``order`` in the record.

    ``run`` holds every property of a run, ``None`` for one it has not (no ``steps``), and is
    laid over the node with ``+=``, where a null removes: ``SET r = $run`` removes the keys the
    statement read before it got the node's lock, so of two processes recording one run at once
    the second kept a property only the first wrote (a success with the failure's error)."""
    return (f"MERGE (r:{RUN_LABEL} {{id: $id}}) SET r += $run "
            # ``CALL { WITH r ...}``, not ``CALL (r) {...}``: servers before 5.23 know only it.
            f"WITH r CALL {{ WITH r MATCH (r)-[:HAS_STEP]->(old:{STEP_LABEL}) "
            "DETACH DELETE old } "
            f"CALL {{ WITH r UNWIND $steps AS step CREATE (r)-[:HAS_STEP]->(s:{STEP_LABEL}) "
            "SET s = step } RETURN r.id AS id",
            {"id": run["id"], "run": dict(run), "steps": [dict(s) for s in steps]})


_RUN_COLUMNS = (f"r {{.*}} AS run, [(r)-[:HAS_STEP]->(s:{STEP_LABEL}) | s {{.*}}] AS steps")


def read_run(run_id: str) -> Statement:
    """One run by its exact id, with its steps (unordered: sort them by ``order``)."""
    return f"MATCH (r:{RUN_LABEL} {{id: $id}}) RETURN {_RUN_COLUMNS}", {"id": run_id}


def read_runs(limit: int) -> Statement:
    """The ``limit`` most recent runs (by ``started_at``, then id), newest first."""
    if limit < 0:
        raise ValueError(f"limit must not be negative, not {limit}")
    return (f"MATCH (r:{RUN_LABEL}) WITH r ORDER BY r.started_at DESC, r.id DESC LIMIT $limit "
            f"RETURN {_RUN_COLUMNS}", {"limit": limit})


def delete_runs() -> Statement:
    """Every run and step (the schema stays); for tests and a reset."""
    return f"MATCH (n) WHERE n:{RUN_LABEL} OR n:{STEP_LABEL} DETACH DELETE n", {}
