"""What only the Neo4j store has: a server to reach, a schema, a connection that can break.

The behaviour both stores share is in ``tests/test_store_conformance.py``. Tests marked ``neo4j``
use the real server; the others check what happens without one (unreachable URI, config files,
old versions) and need no server at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from skillgrove.graph import cypher
from skillgrove.graph.errors import StoreError
from skillgrove.graph.model import Edge, EdgeKind, NodeKind, NodeRecord, SyncReport
from skillgrove.graph.neo4j_store import Neo4jConfig, Neo4jStore, check_server_version
from tests.conftest import NEO4J_URI
from tests.neo4j import support
from tests.neo4j.tcp_proxy import TcpProxy

REPO = Path(__file__).resolve().parents[2]


def skill(i: int, version: str = "") -> NodeRecord:
    text = f"skill number {i} {version} converts document format {i % 17} into format {i % 13}"
    return NodeRecord(f"sk-{i:05d}", NodeKind.SKILL, f"skill-{i}", text, f"h{i}{version}",
                      {"description": text, "n": i})


def vectors_for(records: list[NodeRecord], seed: int, dims: int = 384) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    raw = rng.standard_normal((len(records), dims)).astype(np.float32)
    raw /= np.linalg.norm(raw, axis=1, keepdims=True)
    return {r.id: raw[i] for i, r in enumerate(records)}


def chain(records: list[NodeRecord]) -> list[Edge]:
    return [Edge(EdgeKind.SIMILAR_TO, a.id, b.id, 0.6) for a, b in pairwise(records)]


# -- without a server -------------------------------------------------------------------------

def test_an_unreachable_server_is_one_clear_error() -> None:
    uri = f"bolt://127.0.0.1:{support.free_port()}"
    started = time.perf_counter()
    with pytest.raises(StoreError) as caught:
        Neo4jStore.from_environment({"SKILLGROVE_NEO4J_URI": uri})
    message = str(caught.value)
    assert message.startswith(f"cannot reach Neo4j at {uri} to connect")
    assert "bash .ci/neo4j/server.sh start" in message and "docker compose up -d" in message
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize("command", [["search", "find a pdf skill"], ["index", "-q"]])
def test_the_cli_says_what_to_do_without_a_traceback(tmp_path: Path, command: list[str]) -> None:
    uri = f"bolt://127.0.0.1:{support.free_port()}"
    env = {**os.environ, "SKILLGROVE_NEO4J_URI": uri, "HF_HUB_OFFLINE": "1",
           "SKILLGROVE_CACHE": str(tmp_path / "cache")}
    args = [*command, "--store", "neo4j"]
    if command[0] == "index":
        args.append(str(REPO / "tests" / "fixtures" / "library"))
    result = subprocess.run([sys.executable, "-m", "skillgrove.runtime.cli", *args], capture_output=True,
                            text=True, cwd=REPO, env=env, check=False, timeout=120)
    assert result.returncode == 1
    assert result.stderr.startswith(f"skillgrove: cannot reach Neo4j at {uri}")
    assert "server.sh start" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr  # no driver log noise


def test_a_bad_uri_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="cannot use the Neo4j URI 'htp://x'"):
        Neo4jStore.from_environment({"SKILLGROVE_NEO4J_URI": "htp://x"})


@pytest.mark.parametrize(("version", "supported"), [
    ("5.26.30", True), ("5.13.0", True), ("2025.01.0", True), ("5.12.0", False),
    ("4.4.30", False), ("unknown", False),
])
def test_old_servers_are_refused_with_what_to_do(version: str, supported: bool) -> None:
    if supported:
        check_server_version(version, "bolt://db:7687")
        return
    with pytest.raises(StoreError) as caught:
        check_server_version(version, "bolt://db:7687")
    assert str(caught.value).startswith(
        f"Neo4j at bolt://db:7687 is version {version}; skillgrove needs 5.13 or later")
    assert "docker compose up -d" in str(caught.value)


def test_config_from_environment_and_files(tmp_path: Path) -> None:
    assert Neo4jConfig.from_environment({}) == Neo4jConfig()
    assert Neo4jConfig().uri == "bolt://127.0.0.1:7687" and Neo4jConfig().auth() is None
    toml = tmp_path / "neo4j.toml"
    toml.write_text('[neo4j]\nuri = "bolt://db:7687"\nuser = "reader"\npassword = "s3cret"\n'
                    'database = "skills"\nconnection_timeout = 2\n')
    config = Neo4jConfig.from_environment({"SKILLGROVE_NEO4J_CONFIG": str(toml)})
    assert (config.uri, config.user, config.database) == ("bolt://db:7687", "reader", "skills")
    assert config.auth() == ("reader", "s3cret") and config.connection_timeout == 2
    assert "s3cret" not in repr(config)
    json_file = tmp_path / "neo4j.json"
    json_file.write_text(json.dumps({"uri": "neo4j://cluster:7687", "password": "pw"}))
    config = Neo4jConfig.from_environment({"SKILLGROVE_NEO4J_CONFIG": str(json_file),
                                           "SKILLGROVE_NEO4J_URI": "bolt://override:7687"})
    assert config.uri == "bolt://override:7687"  # the environment wins over the file
    assert config.auth() == ("neo4j", "pw")  # a password alone logs in as neo4j


@pytest.mark.parametrize(("content", "suffix", "message"), [
    ("uri = [", ".toml", "is not valid TOML"),
    ("{", ".json", "is not valid JSON"),
    ('url = "bolt://x"', ".toml", "unknown Neo4j setting 'url'"),
    ("batch_size = 'big'", ".toml", "setting 'batch_size' has the wrong type"),
    ("[1, 2]", ".json", "must hold a table of settings"),
])
def test_config_file_mistakes(tmp_path: Path, content: str, suffix: str, message: str) -> None:
    path = tmp_path / f"neo4j{suffix}"
    path.write_text(content)
    with pytest.raises(StoreError, match=message) as caught:
        Neo4jConfig.from_environment({"SKILLGROVE_NEO4J_CONFIG": str(path)})
    assert str(caught.value).startswith(str(path))


def test_a_missing_config_file() -> None:
    with pytest.raises(StoreError, match=r"cannot read the Neo4j config file /no/such\.toml"):
        Neo4jConfig.from_environment({"SKILLGROVE_NEO4J_CONFIG": "/no/such.toml"})


# -- with the server --------------------------------------------------------------------------

@pytest.mark.neo4j
def test_the_schema_is_set_up_once_and_as_specified(store: Neo4jStore) -> None:
    records = [skill(i) for i in range(3)]
    store.sync(records, vectors_for(records, 1), [])
    again = Neo4jStore.from_config(Neo4jConfig(uri=NEO4J_URI))  # opening again changes nothing
    again.close()
    with support.driver() as drv:
        indexes = {r["name"]: r for r in drv.execute_query(
            "SHOW INDEXES YIELD name, type, state, properties, options "
            "WHERE name STARTS WITH 'skillgrove_' RETURN *").records}
        constraints = {r["name"]: r for r in drv.execute_query(
            "SHOW CONSTRAINTS YIELD name, type, labelsOrTypes, properties "
            "WHERE name STARTS WITH 'skillgrove_' RETURN *").records}
    vector = indexes["skillgrove_skill_embedding"]
    assert (vector["type"], vector["state"]) == ("VECTOR", "ONLINE")
    config = vector["options"]["indexConfig"]
    assert config["vector.dimensions"] == 384
    assert config["vector.similarity_function"].lower() == "cosine"
    assert config.get("vector.quantization.enabled", False) is False  # exact cosines
    fulltext = indexes["skillgrove_skill_tokens"]
    assert fulltext["type"] == "FULLTEXT" and fulltext["properties"] == ["tokens"]
    assert fulltext["options"]["indexConfig"]["fulltext.analyzer"] == "whitespace"
    assert "skillgrove_group_tokens" in indexes
    for kind in (NodeKind.SKILL, NodeKind.GROUP):
        found = constraints[cypher.constraint_name(kind)]
        assert found["type"] == "UNIQUENESS" and found["properties"] == ["id"]
        assert found["labelsOrTypes"] == [cypher.label(kind)]


@pytest.mark.neo4j
def test_another_store_sees_each_sync(store: Neo4jStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second store (as in another process) reads a sync's graph at once through the
    single reads; the batched reads, which keep what they read while the sync token is
    unchanged, once it has read a meta entry, as a retriever does before each search."""
    other = Neo4jStore.from_config(Neo4jConfig(uri=NEO4J_URI))
    reads: list[str] = []
    read = other._read

    def counted(statement: cypher.Statement) -> list[dict[str, object]]:
        reads.append(statement[0])
        return read(statement)

    monkeypatch.setattr(other, "_read", counted)
    try:
        records = [skill(i) for i in range(5)]
        store.sync(records, vectors_for(records, 2), chain(records))
        assert [r.id for r in other.nodes()] == [r.id for r in records]
        assert other.get_meta("k") is None
        ids = ["sk-00000", "sk-00001"]
        first = (other.nodes_by_id(ids), other.vectors(ids), other.neighbors_of(ids))
        reads.clear()
        assert (other.nodes_by_id(ids), other.vectors(ids), other.neighbors_of(ids)) == first
        assert reads == []  # kept: the token did not change

        changed = [skill(0, "v2"), *records[1:]]
        new_vectors = vectors_for(changed, 3)
        store.sync(changed, new_vectors, chain(changed[1:]))
        seen = other.node("sk-00000")
        assert seen is not None and "v2" in seen.text
        assert [i for i, _ in other.text_search(NodeKind.SKILL, "v2", 3)] == ["sk-00000"]
        assert other.get_meta("k") is None  # sees the new token: what it kept is dropped
        assert "v2" in other.nodes_by_id(ids)["sk-00000"].text
        np.testing.assert_allclose(other.vectors(ids)["sk-00000"], new_vectors["sk-00000"],
                                   atol=1e-7)
        assert other.neighbors_of(ids)["sk-00000"] == []
        store.set_meta("k", "v")
        assert other.get_meta("k") == "v"
        store.clear()
        assert other.get_meta("k") is None
        assert other.nodes_by_id(ids) == {}
    finally:
        other.close()


@pytest.mark.neo4j
def test_the_vector_index_follows_the_vectors_dimension(store: Neo4jStore) -> None:
    records = [skill(i) for i in range(4)]
    store.sync(records, vectors_for(records, 4), [])
    small = vectors_for(records, 5, dims=8)
    changed = [skill(i, "small") for i in range(4)]
    store.sync(changed, {c.id: small[r.id] for c, r in zip(changed, records, strict=True)}, [])
    hits = store.vector_search(NodeKind.SKILL, small["sk-00002"], 1)
    assert hits[0][0] == "sk-00002" and hits[0][1] == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(StoreError, match="vectors of skills differ in dimension"):
        store.sync([skill(9), *changed], {**{c.id: small[r.id] for c, r in
                                            zip(changed, records, strict=True)},
                                          "sk-00009": np.ones(384, dtype=np.float32)}, [])


@pytest.mark.neo4j
def test_an_edge_to_a_missing_node_is_refused(store: Neo4jStore) -> None:
    records = [skill(0)]
    with pytest.raises(StoreError, match="names 'sk-99999', which is not among the nodes"):
        store.sync(records, vectors_for(records, 1),
                   [Edge(EdgeKind.CO_USED, "sk-00000", "sk-99999", 1.0)])
    assert store.nodes() == []


@pytest.mark.neo4j
def test_a_missing_database_is_named() -> None:
    with pytest.raises(StoreError, match="has no database 'nope'"):
        Neo4jStore.from_config(Neo4jConfig(uri=NEO4J_URI, database="nope"))


@pytest.mark.neo4j
def test_a_connection_cut_mid_sync_leaves_the_previous_graph(store: Neo4jStore) -> None:
    """A proxy forwards the sync until ~1.5 MB of it reached the server, then holds it: the
    transaction is open, half written. Readers still see the old graph. Then the proxy cuts
    every connection and refuses new ones: the sync fails (after the driver's retries), the old
    graph is intact, and the same sync made directly completes it."""
    old = [skill(i) for i in range(300)]
    old_vectors = vectors_for(old, 10)
    store.sync(old, old_vectors, chain(old))
    before_nodes = [(r.id, r.content_hash) for r in store.nodes()]
    before_edges = sorted(e.key for e in store.edges())

    new = ([skill(i) for i in range(100)] + [skill(i, "v2") for i in range(100, 200)]
           + [skill(i) for i in range(300, 3200)])
    new_vectors = vectors_for(new, 11)
    new_edges = chain(new)

    proxy = TcpProxy(("127.0.0.1", int(NEO4J_URI.rsplit(":", 1)[1]))).start()
    drv = support.driver(proxy.uri, max_transaction_retry_time=1.0, connection_timeout=2.0)
    outcome: dict[str, object] = {}
    try:
        proxied = Neo4jStore(drv, uri=proxy.uri)
        proxy.stall_after = proxy.sent + 1_500_000

        def run_sync() -> None:
            try:
                outcome["report"] = proxied.sync(new, new_vectors, new_edges)
            except StoreError as exc:
                outcome["error"] = exc

        worker = threading.Thread(target=run_sync)
        worker.start()
        assert proxy.stalled.wait(120), "the sync never sent 1.5 MB"
        # Mid-sync: the write transaction is open and the old graph is what everyone reads.
        assert [(r.id, r.content_hash) for r in store.nodes()] == before_nodes
        assert store.vector_search(NodeKind.SKILL, old_vectors["sk-00150"], 1)[0][0] == "sk-00150"
        assert store.text_search(NodeKind.SKILL, "skill number 7", 1)
        proxy.cut()
        worker.join(120)
        assert not worker.is_alive()
    finally:
        proxy.cut()
        drv.close()

    assert "report" not in outcome
    error = str(outcome["error"])
    assert error.startswith(f"cannot reach Neo4j at {proxy.uri} to sync")
    assert "the previous graph is unchanged" in error
    assert [(r.id, r.content_hash) for r in store.nodes()] == before_nodes
    assert sorted(e.key for e in store.edges()) == before_edges
    np.testing.assert_allclose(store.vector("sk-00150"), old_vectors["sk-00150"], atol=1e-7)  # type: ignore[arg-type]

    report = store.sync(new, new_vectors, new_edges)
    assert report == SyncReport(
        added=tuple(f"sk-{i:05d}" for i in range(300, 3200)),
        updated=tuple(f"sk-{i:05d}" for i in range(100, 200)),
        removed=tuple(f"sk-{i:05d}" for i in range(200, 300)),
        unchanged=100, edges_added=report.edges_added, edges_removed=report.edges_removed)
    assert sorted(e.key for e in store.edges()) == sorted(e.key for e in new_edges)
    assert len(store.nodes(NodeKind.SKILL)) == len(new)
    np.testing.assert_allclose(store.vector("sk-03199"), new_vectors["sk-03199"], atol=1e-7)  # type: ignore[arg-type]


@pytest.mark.neo4j
def test_a_new_tokenizer_rewrites_the_stored_tokens(store: Neo4jStore,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import skillgrove.graph.neo4j_store as module
    from skillgrove.graph.text import tokenize

    records = [skill(i) for i in range(5)]
    vectors = vectors_for(records, 6)
    store.sync(records, vectors, [])
    assert store.text_search(NodeKind.SKILL, "zzmarker", 5) == []
    # A tokenizer that differs for texts with a "2" in them, as the signature's probe has.
    monkeypatch.setattr(module, "tokenize", lambda text: [
        *tokenize(text), *(["zzmarker"] if "2" in text else [])])
    report = store.sync(records, vectors, [])
    assert not report.changed  # no node changed, yet the stored tokens did
    assert [i for i, _ in store.text_search(NodeKind.SKILL, "zzmarker", 10)] == ["sk-00002"]


@pytest.mark.neo4j
@pytest.mark.parametrize("query", ["skill number 7 converts format 3", "format 16 document",
                                   "converts converts zzz 周报", "into document skill 12"])
def test_the_lucene_query_built_in_cypher_is_lucene_querys(store: Neo4jStore, query: str,
                                                           ) -> None:
    """The search statement builds its Lucene query on the server from the document
    frequencies it counts; it is the one :func:`cypher.lucene_query` builds from them (terms
    every node holds included: their idf is the floor, epsilon x the mean idf)."""
    from skillgrove.graph.text import query_tokens

    records = [skill(i) for i in range(40)]
    store.sync(records, vectors_for(records, 7), [])
    tokens = list(query_tokens(query))
    rows = store._read(cypher.hybrid_searches([(NodeKind.SKILL, 200)], {}, tokens, None))
    text = [row for row in rows if row["part"] == "text"]
    assert len(text) == 1
    row = text[0]
    dfs = {t["term"]: t["df"] for t in row["terms"]}
    assert dfs and all(df > 0 for df in dfs.values())
    statistics = json.loads(row["statistics"])
    assert row["mean_idf"] == pytest.approx(statistics["mean_idf"])
    idfs = cypher.term_idfs(tokens, row["total"], dfs, statistics["mean_idf"])
    assert row["lucene"] == cypher.lucene_query(tokens, idfs, row["total"], dfs)
    assert [r["token"] for r in rows if r["part"] == "token"] != [None]


@pytest.mark.neo4j
def test_a_graph_synced_before_mean_idf_was_stored_is_searched_in_two_steps(
        store: Neo4jStore) -> None:
    """A graph whose statistics entries lack the numeric ``mean_idf`` (written by an older
    version) cannot have its Lucene query built in Cypher: the store falls back to reading
    the statistics first, with the same hits. The graph is read by a store that has not
    read its term counts yet (``store`` keeps the statistics it read with them until the
    next sync: an older version's graph is what another process finds)."""
    records = [skill(i) for i in range(30)]
    store.sync(records, vectors_for(records, 8), [])
    query = "skill number 7 converts format 3"
    expected = store.text_search(NodeKind.SKILL, query, 10)
    assert expected
    with support.driver() as drv:
        drv.execute_query("MATCH (m:SkillgroveMeta) WHERE m.key STARTS WITH 'skillgrove.bm25.' "
                          "REMOVE m.mean_idf")
    other = Neo4jStore.from_config(Neo4jConfig(uri=NEO4J_URI))
    reads: list[str] = []
    read = other._read

    def counted(statement: cypher.Statement) -> list[dict[str, object]]:
        reads.append(statement[0])
        return read(statement)

    other._read = counted  # type: ignore[method-assign]
    try:
        assert other.text_search(NodeKind.SKILL, query, 10) == expected
        assert len(reads) == 3  # the combined search, then statistics and Lucene on their own
        reads.clear()
        assert other.text_search(NodeKind.SKILL, query, 10) == expected
        assert len(reads) == 3  # the term counts are kept, the two steps are taken again
    finally:
        other.close()
