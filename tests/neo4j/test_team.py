"""A team on one Neo4j: two real HTTP server processes share runs and what is learned from them.

Both servers serve the bundled library with ``--store neo4j`` against the server ``.ci/test``
starts; each has its own index folder and outbox, so nothing passes between them but Neo4j. The
database is emptied first (as the store tests do), then both servers index it at once as they
start.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from skillgrove.graph.model import EdgeKind, NodeKind
from skillgrove.graph.neo4j_store import Neo4jConfig, Neo4jStore
from tests.conftest import NEO4J_URI
from tests.neo4j import support
from tests.test_engine import TRANSLATE_TWICE
from tests.test_http_server import LIBRARY, REPORT, REPORT_RUN, Server, start_server, stop_server

pytestmark = pytest.mark.neo4j


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    support.clear_database()
    started: list[Server] = []
    try:
        for name in ("first", "second"):
            started.append(start_server(tmp_path_factory.mktemp(name), "--store", "neo4j"))
        yield started[0], started[1]
    finally:
        for server in started:
            stop_server(server)


@pytest.fixture(scope="module")
def store() -> Iterator[Neo4jStore]:
    opened = Neo4jStore.from_config(Neo4jConfig(uri=NEO4J_URI))
    yield opened
    opened.close()


def co_used(store: Neo4jStore) -> dict[tuple[str, str], float]:
    return {(e.src, e.dst): e.weight for e in store.edges(EdgeKind.CO_USED)}


def test_a_run_started_on_one_server_is_listed_resumed_and_injected_from_the_other(
        servers: tuple[Server, Server]) -> None:
    first, second = servers
    with httpx.Client(base_url=first.url, timeout=120) as one, \
            httpx.Client(base_url=second.url, timeout=120) as two:
        missing = str(Path(REPORT).with_name("no-such-report.pdf"))
        failed = one.post("/v1/groups/report-analysis/runs",
                          json={**REPORT_RUN, "inputs": {"pdf_path": missing}})
        assert failed.status_code == 201, failed.text
        run = failed.json()
        assert run["status"] == "failure"
        assert run["steps"][0]["id"] == "extract_text" and run["steps"][0]["status"] == "failure"

        listed = two.get("/v1/runs", params={"limit": 50}).json()["runs"]
        assert run["id"] in [r["id"] for r in listed]
        assert two.get(f"/v1/runs/{run['id']}").json() == run

        resumed = two.post("/v1/groups/report-analysis/runs",
                           json={"resume": run["id"], "inputs": {"pdf_path": REPORT},
                                 "confirm": True})
        assert resumed.status_code == 201, resumed.text
        again = resumed.json()
        assert again["resumed_from"] == run["id"] and again["status"] == "success"
        assert again["context"] == run["context"]  # the stored context, read from Neo4j
        assert [p for p in second.outbox.glob("*.eml") if "Q3 2024" in p.read_text()]
        assert one.get(f"/v1/runs/{again['id']}").json() == again  # and back on the first

        injected = two.post("/v1/inject", json={"run_id": again["id"]})
        assert injected.status_code == 200, injected.text
        block = injected.json()
        assert again["id"] in str(block)
        assert "Report analysis" in str(block) or "report-analysis" in str(block)


def test_co_use_is_learned_from_the_runs_of_both_servers(
        servers: tuple[Server, Server], store: Neo4jStore, tmp_path: Path) -> None:
    """Each server runs the report group once; a re-index by a third process counts both runs
    in the CO_USED weight of each pair the group's steps used together, and in the group's
    quality statistics."""
    from skillgrove import Skillgrove

    def succeeded() -> int:
        group = store.node("group:report-analysis")
        assert group is not None
        return int(group.data.get("stats", {}).get("succeeded", 0))

    ids = {n.name: n.id for n in store.nodes(NodeKind.SKILL)}
    pair = tuple(sorted((ids["pdf-to-text"], ids["extract-metrics"])))
    with Skillgrove([LIBRARY], store="neo4j", index=tmp_path / "third") as third:
        third.index()  # learns from the runs so far (the other test's, when it ran first)
        before, succeeded_before = co_used(store).get(pair, 0.0), succeeded()  # type: ignore[call-overload]
        for server in servers:
            response = httpx.post(server.url + "/v1/groups/report-analysis/runs",
                                  json=REPORT_RUN, timeout=120)
            assert response.status_code == 201 and response.json()["status"] == "success"
        third.index()
    assert co_used(store)[pair] == before + 2.0  # type: ignore[index]
    assert succeeded() == succeeded_before + 2


# -- one library state per team ---------------------------------------------------------------

TWICE_REQUEST = "translate this to german and back again"


def test_replicas_serve_one_library_state_whichever_re_indexed(tmp_path: Path) -> None:
    """Two engines on one library folder and one Neo4j, each with its own index folder: after
    the first re-indexes a change, the second serves the new group without indexing it itself
    (its watcher's refresh follows the store); a group whose file broke keeps its last good
    version on both, and on a replica started after it broke, which never saw it valid."""
    from skillgrove import Skillgrove
    from tests.helpers import copy_fixture_library, write_group

    support.clear_database()
    library = copy_fixture_library(tmp_path / "lib")
    messages: list[str] = []
    first = Skillgrove([library], store="neo4j", index=tmp_path / "a", auto_refresh=False)
    second = Skillgrove([library], store="neo4j", index=tmp_path / "b", auto_refresh=False,
                        log=messages.append)
    late: Skillgrove | None = None
    try:
        first.index()
        assert second.search(TWICE_REQUEST).group != "group:translate-twice"
        path = write_group(library, "translate-twice.yaml", TRANSLATE_TWICE)
        first.index()
        assert second.refresh() is None  # nothing to index: the first did
        assert "translate-twice" in {g["id"] for g in second.groups()}
        chosen = [engine.search(TWICE_REQUEST).group for engine in (first, second)]
        assert [g.id if g else None for g in chosen] == ["group:translate-twice"] * 2
        assert second.store.get_meta("library_fingerprint") == second._library_fingerprint

        path.write_text(path.read_text().replace("skill: translate-text\n    needs",
                                                 "skill: translate-txt\n    needs"))
        first.index()
        second.refresh()
        late = Skillgrove([library], store="neo4j", index=tmp_path / "c", auto_refresh=False)
        for engine in (first, second, late):
            listed = {g["id"]: g for g in engine.groups()}
            assert listed["translate-twice"]["status"] == "last-good"
            assert "unknown skill 'translate-txt'" in listed["translate-twice"]["errors"][0]
            assert engine.health().broken_groups.keys() == {"translate-twice"}
            assert engine.plan("translate-twice", {"text": "hi"}).levels == (("there",),
                                                                                ("back",))
        path.unlink()
        late.index()
        for engine in (first, second):
            engine.refresh()
            assert "translate-twice" not in {g["id"] for g in engine.groups()}
        assert not any("re-index" in m for m in messages)
    finally:
        for engine in (first, second, late):
            if engine is not None:
                engine.close()


def test_replicas_answer_with_the_settings_the_store_holds(tmp_path: Path) -> None:
    """Retrieval settings fitted on the history (``index --history``) are stored with the
    graph: a replica that did not index takes them up with the new generation, and the
    defaults again when a later index holds none."""
    from skillgrove import Skillgrove
    from skillgrove.graph.indexer import index_library
    from skillgrove.graph.stages import DEFAULT_SETTINGS
    from tests.helpers import copy_fixture_library

    support.clear_database()
    library = copy_fixture_library(tmp_path / "lib")
    first = Skillgrove([library], store="neo4j", index=tmp_path / "a", auto_refresh=False)
    second = Skillgrove([library], store="neo4j", index=tmp_path / "b", auto_refresh=False)
    try:
        first.index()
        second.search(TWICE_REQUEST)
        assert second.retriever.settings == DEFAULT_SETTINGS
        fitted = DEFAULT_SETTINGS.but(skills={"minimum": 0.1}, groups={"threshold": 0.2})
        # What ``index --history`` writes after fitting (the fit itself is
        # tests/test_bench_product_path.py's), with the first replica's library state.
        state = {key: first.store.get_meta(key) or "" for key in
                 ("library_fingerprint", "library_paths", "library_last_good")}
        index_library(first.library, first.store, first.encoder, meta=state,
                      fitted=fitted.to_json())
        second.search(TWICE_REQUEST)
        assert second.retriever.settings == fitted
        first.index()  # no history: nothing fitted
        second.search(TWICE_REQUEST)
        assert second.retriever.settings == DEFAULT_SETTINGS
    finally:
        first.close()
        second.close()
