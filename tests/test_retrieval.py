"""The embedded graph and two-tier retrieval on a small fixture library, with the real model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from skillgrove.graph import (
    EdgeKind,
    EmbeddedStore,
    NodeKind,
    RequestContext,
    Retriever,
    index_library,
)
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.graph.toolbox import GroupExplanation, RunnerUp, SkillExplanation
from skillgrove.groups import load_library
from skillgrove.skills import LoadOptions
from tests.helpers import copy_fixture_library

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def indexed(tmp_path: Path, encoder: CachedEncoder) -> tuple[Path, EmbeddedStore]:
    root = copy_fixture_library(tmp_path / "lib")
    library = load_library([root], LoadOptions(write_ids=True))
    store = EmbeddedStore(tmp_path / "index" / "graph.sqlite")
    index_library(library, store, encoder)
    return root, store


def test_graph_has_all_edge_kinds(indexed: tuple[Path, EmbeddedStore]) -> None:
    _, store = indexed
    assert len(store.nodes(NodeKind.SKILL)) == 7
    assert len(store.nodes(NodeKind.GROUP)) == 2
    contains = store.edges(EdgeKind.CONTAINS)
    assert {(e.src, e.props["step"]) for e in contains} >= {("group:report-analysis", "notify")}
    flows = {(store.node(e.src).name, store.node(e.dst).name)  # type: ignore[union-attr]
             for e in store.edges(EdgeKind.FLOWS_TO)}
    assert ("pdf-to-text", "extract-metrics") in flows and ("csv-stats", "make-chart") in flows
    co_used = {frozenset((store.node(e.src).name, store.node(e.dst).name)): e.weight  # type: ignore[union-attr]
               for e in store.edges(EdgeKind.CO_USED)}
    assert co_used[frozenset(("pdf-to-text", "send-email"))] == 1.0
    assert store.edges(EdgeKind.SIMILAR_TO), "similar skills are linked"


@pytest.mark.parametrize(("request_text", "group"), [
    ("summarize the quarterly report PDF and email the key numbers to my team",
     "group:report-analysis"),
    ("turn this CSV export into the weekly KPI report with a chart", "group:kpi-report"),
])
def test_a_request_a_group_serves_returns_that_group(indexed: tuple[Path, EmbeddedStore],
                                                     encoder: CachedEncoder, request_text: str,
                                                     group: str) -> None:
    _, store = indexed
    toolbox = Retriever(store, encoder).search(request_text)
    assert toolbox.group is not None and toolbox.group.id == group
    assert toolbox.selected == toolbox.group.members
    assert (toolbox.group.explanation.vector or 0) > 0


def test_missing_required_input_is_named(indexed: tuple[Path, EmbeddedStore],
                                         encoder: CachedEncoder) -> None:
    _, store = indexed
    request = "summarize the quarterly report PDF and email the key numbers to my team"
    bare = Retriever(store, encoder).search(request)
    assert bare.group is not None and not bare.group.ready
    assert bare.group.missing_inputs == ("pdf_path",)
    given = Retriever(store, encoder).search(
        request, RequestContext(values={"pdf_path": "/tmp/q3.pdf"}))
    assert given.group is not None and given.group.ready and given.group.missing_inputs == ()


def test_unrelated_request_falls_back_with_co_use_suggestions(
        indexed: tuple[Path, EmbeddedStore], encoder: CachedEncoder) -> None:
    _, store = indexed
    toolbox = Retriever(store, encoder).search("translate this paragraph into German")
    assert toolbox.group is None
    assert toolbox.fallback_reason and "below the threshold" in toolbox.fallback_reason
    assert toolbox.skills[0].name == "translate-text"
    assert toolbox.selected[0] == toolbox.skills[0].id


def test_fallback_suggests_what_is_usually_used_with_the_skill(
        indexed: tuple[Path, EmbeddedStore], encoder: CachedEncoder) -> None:
    _, store = indexed
    toolbox = Retriever(store, encoder).search("plot the values 3, 5 and 8 as a PNG bar chart")
    assert toolbox.group is None
    assert toolbox.skills[0].name == "make-chart"
    names = [s.name for s in toolbox.suggestions]
    assert "csv-stats" in names[:2]
    reason = next(s.reason for s in toolbox.suggestions if s.name == "csv-stats")
    assert "make-chart" in reason


def test_unavailable_member_makes_retrieval_fall_back(tmp_path: Path,
                                                      encoder: CachedEncoder) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    skill_md = root / "skills" / "send-email" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace(
        "name: send-email\n", "name: send-email\nrequires:\n  env: [SG_NO_SUCH_SMTP]\n"))
    library = load_library([root], LoadOptions(environ={}))
    store = EmbeddedStore(None)
    index_library(library, store, encoder)
    toolbox = Retriever(store, encoder).search(
        "summarize the quarterly report PDF and email the key numbers to my team")
    assert toolbox.group is None
    assert toolbox.fallback_reason is not None
    assert "send-email (environment variable not set: SG_NO_SUCH_SMTP)" in toolbox.fallback_reason


def test_recent_skills_in_context_lift_the_ranking(indexed: tuple[Path, EmbeddedStore],
                                                   encoder: CachedEncoder) -> None:
    _, store = indexed
    request = "process the document"
    plain = Retriever(store, encoder).search(request)
    lifted = Retriever(store, encoder).search(
        request, RequestContext(recent_skills=("translate-text",)))
    rank = lambda tb: [s.name for s in tb.skills].index("translate-text")  # noqa: E731
    assert rank(lifted) <= rank(plain)
    assert next(s for s in lifted.skills if s.name == "translate-text").explanation \
        .recently_used is True


def test_quality_filter_demotes_failing_skills(tmp_path: Path, encoder: CachedEncoder) -> None:
    from dataclasses import replace

    from skillgrove.graph.indexer import build_graph

    library = load_library([copy_fixture_library(tmp_path / "lib")])
    nodes, vectors, edges = build_graph(library, encoder)
    request = "plot the values 3, 5 and 8 as a PNG bar chart"
    healthy = EmbeddedStore(None)
    healthy.sync(nodes, vectors, edges)
    undemoted = next(s for s in Retriever(healthy, encoder).search(request).skills
                     if s.name == "make-chart").score
    nodes = [replace(n, data={**n.data, "stats": {"selected": 3, "succeeded": 0}},
                     content_hash=n.content_hash + "x") if n.name == "make-chart" else n
             for n in nodes]
    store = EmbeddedStore(None)
    store.sync(nodes, vectors, edges)
    toolbox = Retriever(store, encoder).search(request)
    chart = next(s for s in toolbox.skills if s.name == "make-chart")
    assert chart.explanation.demoted == "selected 3 times, never succeeded"
    assert chart.score == pytest.approx(undemoted / 2, abs=1e-3)


def test_reindexing_an_unchanged_library_embeds_nothing(tmp_path: Path,
                                                        encoder: CachedEncoder) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    index_library(load_library([root]), store, encoder)
    again = index_library(load_library([root]), store, encoder)
    assert again.embedded == 0
    assert not again.report.changed
    assert again.report.unchanged == 7 + 2 + 4  # skills, groups, their example requests
    summary = root / "skills" / "summarize-text" / "SKILL.md"
    summary.write_text(summary.read_text() + f"\nKeep the tone neutral ({uuid.uuid4().hex}).\n")
    changed = index_library(load_library([root]), store, encoder)
    assert changed.embedded >= 1
    updated = {store.node(i).name for i in changed.report.updated}  # type: ignore[union-attr]
    assert "summarize-text" in updated


def test_deleted_skill_and_group_leave_the_graph(tmp_path: Path, encoder: CachedEncoder) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    index_library(load_library([root]), store, encoder)
    (root / "groups" / "kpi-report.yaml").unlink()
    import shutil

    shutil.rmtree(root / "skills" / "translate-text")
    result = index_library(load_library([root]), store, encoder)
    removed = sorted(result.report.removed)
    assert len(removed) == 4  # the skill, the group and the group's two example requests
    assert "group:kpi-report" in removed
    assert sum(1 for r in removed if r.startswith("example:kpi-report:")) == 2
    assert store.node("group:kpi-report") is None
    assert not [e for e in store.edges() if e.src == "group:kpi-report"]


def test_a_second_process_searches_without_rebuilding(tmp_path: Path,
                                                      encoder: CachedEncoder) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    index_dir = tmp_path / "index"
    store = EmbeddedStore(index_dir / "graph.sqlite")
    index_library(load_library([root], LoadOptions(write_ids=True)), store, encoder)
    store.close()
    before = (index_dir / "graph.sqlite").stat().st_mtime_ns
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SKILLGROVE_CACHE": str(tmp_path / "c2")}
    result = subprocess.run(
        [sys.executable, "-m", "skillgrove.runtime.cli", "search", "--index", str(index_dir), "--json",
         "--detail", "full", "make the weekly KPI report from this CSV and mail it to the team"],
        capture_output=True, text=True, cwd=REPO, env=env, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    toolbox = json.loads(result.stdout)
    assert toolbox["shape"] == "group" and toolbox["group"]["id"] == "kpi-report"
    # Every selected skill is described, with what an agent needs to use it.
    described = {s["name"]: s for s in toolbox["skills"]}
    assert toolbox["selected"] and set(toolbox["selected"]) <= set(described)
    for name in toolbox["selected"]:
        skill = described[name]
        assert skill["location"].endswith(f"{name}/SKILL.md")
        assert skill["input_schema"]["type"] == "object"
        assert {"runnable", "available", "unavailable_reasons"} <= set(skill)
    assert toolbox["group"]["input_schema"]["type"] == "object"
    assert (index_dir / "graph.sqlite").stat().st_mtime_ns == before


def test_search_without_an_index_indexes_first_and_says_so(tmp_path: Path) -> None:
    from io import StringIO

    from skillgrove.runtime.cli import main

    library = copy_fixture_library(tmp_path / "lib")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SKILLGROVE_PATH": str(library)}
    err = subprocess.run([sys.executable, "-m", "skillgrove.runtime.cli", "search",
                          "chart the weekly KPIs", "--index", str(tmp_path / "none")],
                         capture_output=True, text=True, cwd=REPO, env=env, check=False)
    assert err.returncode == 0, err.stderr
    assert f"no index yet: indexing {library}" in err.stderr
    assert "make-chart" in err.stdout
    assert "Traceback" not in err.stderr
    assert main(["check", str(REPO / "tests" / "fixtures" / "library")], StringIO()) == 0


def test_graph_cli_neighbors_and_export(tmp_path: Path) -> None:
    from io import StringIO

    from skillgrove.runtime.cli import main

    root = copy_fixture_library(tmp_path / "lib")
    index = tmp_path / "index"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = StringIO()
    assert main(["index", str(root), "--index", str(index), "-q"], out) == 0
    assert "indexed 7 skills and 2 groups" in out.getvalue()
    out = StringIO()
    assert main(["graph", "neighbors", "make-chart", "--index", str(index)], out) == 0
    text = out.getvalue()
    assert "<- CONTAINS" in text and "kpi-report" in text.lower() and "FLOWS_TO" in text
    out = StringIO()
    assert main(["graph", "export", "report-analysis", "--index", str(index)], out) == 0
    assert out.getvalue().splitlines()[0] == "flowchart TD"
    assert "    extract_text --> metrics" in out.getvalue()
    out = StringIO()
    assert main(["graph", "export", "kpi-report", "--format", "dot", "--index", str(index)],
                out) == 0
    assert '"stats" -> "chart";' in out.getvalue()


def test_close_runner_up_groups_lead_the_single_skill_ranking(encoder: CachedEncoder) -> None:
    import numpy as np

    from skillgrove.graph.model import NodeRecord
    from skillgrove.graph.retrieval import GroupChoice, ScoredSkill

    def skill(sid: str) -> NodeRecord:
        return NodeRecord(sid, NodeKind.SKILL, sid, sid, sid, {"description": sid})

    def grp(gid: str, members: list[str]) -> NodeRecord:
        return NodeRecord(gid, NodeKind.GROUP, gid, gid, gid, {"members": members})

    nodes = [skill(s) for s in ("a", "b", "c", "d", "e")] + [
        grp("group:abc", ["a", "b", "c"]), grp("group:abd", ["a", "b", "d"]),
        grp("group:ae", ["a", "e"])]
    vectors = {n.id: np.ones(384, dtype=np.float32) / np.sqrt(384) for n in nodes}
    store = EmbeddedStore(None)
    store.sync(nodes, vectors, [])
    retriever = Retriever(store, encoder)
    chosen = GroupChoice("group:abc", "abc", 0.60, ("a", "b", "c"), ("a", "b", "c"), (), (),
                         True, GroupExplanation(router=0.6))
    ranked = [ScoredSkill("e", "e", 0.5, "", True, SkillExplanation()),
              ScoredSkill("c", "c", 0.4, "", True, SkillExplanation())]
    out = retriever._close_runner_ups_first(
        chosen, [("group:abc", 0.60), ("group:abd", 0.58), ("group:ae", 0.30)], ranked, 10)
    assert [s.id for s in out] == ["d", "e", "c"]  # abd is close (0.58 >= 0.54); ae is not
    assert out[0].explanation.runner_up_group == RunnerUp("group:abd", 0.58)


def test_index_learns_quality_and_co_use_from_the_run_log(tmp_path: Path) -> None:
    """Runs recorded in the index folder feed the quality filter and CO_USED at the next
    `skillgrove index`, and the toolbox says what was demoted."""
    from io import StringIO

    from skillgrove.graph.runlog import RunRecord, SqliteRunLog, StepRecord
    from skillgrove.runtime.cli import main

    root = copy_fixture_library(tmp_path / "lib")
    index = tmp_path / "index"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    assert main(["index", str(root), "--index", str(index), "-q"], StringIO()) == 0
    store = EmbeddedStore(index / "graph.sqlite")
    ids = {n.name: n.id for n in store.nodes(NodeKind.SKILL)}
    before = {(e.src, e.dst): e.weight for e in store.edges(EdgeKind.CO_USED)}
    store.close()

    log = SqliteRunLog(index / "runs.sqlite")
    for number in range(3):  # kpi-report failed three times, at the chart step
        log.record(RunRecord(
            f"run-{number}", "kpi-report", "failure", {}, {}, {},
            (StepRecord("stats", "csv-stats", "skill", "success", started_at=1.0),
             StepRecord("chart", "make-chart", "skill", "failure", started_at=2.0),
             StepRecord("mail", "send-email", "skill", "skipped")),
            started_at=float(number), seconds=1.0, request="weekly KPI mail"))
    log.record(RunRecord("run-ok", "report-analysis", "success", {}, {}, {},
                         (StepRecord("t", "translate-text", "skill", "success", started_at=1.0),
                          StepRecord("s", "summarize-text", "skill", "success",
                                     started_at=2.0)),
                         started_at=5.0, seconds=1.0))
    log.close()
    assert main(["index", str(root), "--index", str(index), "-q"], StringIO()) == 0

    store = EmbeddedStore(index / "graph.sqlite")
    group = store.node("group:kpi-report")
    assert group is not None and group.data["stats"] == {
        "selected": 3, "succeeded": 0, "failed": 3, "fallbacks": 0}
    chart = next(n for n in store.nodes(NodeKind.SKILL) if n.name == "make-chart")
    assert chart.data["stats"]["failed"] == 3
    after = {(e.src, e.dst): e.weight for e in store.edges(EdgeKind.CO_USED)}
    pair = tuple(sorted((ids["translate-text"], ids["summarize-text"])))
    assert after[pair] == before.get(pair, 0.0) + 1.0  # ran together once
    store.close()

    out = StringIO()
    assert main(["search", "compute KPI statistics from the weekly CSV, chart them and mail "
                 "the team", "--index", str(index)], out) == 0
    assert "demoted" in out.getvalue()
    assert "selected 3 times, never succeeded" in out.getvalue()


def test_suggestions_are_companions_never_substitutes_or_repeats(
        indexed: tuple[Path, EmbeddedStore], encoder: CachedEncoder) -> None:
    """"Usually used with" follows co-use, FLOWS_TO and shared groups; a SIMILAR_TO neighbour
    is an alternative to the skill, and a skill the answer already ranks well is not news."""
    from skillgrove.graph.model import EdgeKind

    _, store = indexed
    for request in ("plot the values 3, 5 and 8 as a PNG bar chart",
                    "translate this paragraph into German", "summarize this text"):
        toolbox = Retriever(store, encoder).search(request)
        best = toolbox.skills[0].score
        offered = {s.id for s in toolbox.skills if s.score >= 0.5 * best} | set(toolbox.selected)
        for suggestion in toolbox.suggestions:
            assert suggestion.id not in offered, (request, suggestion)
            assert "similar to" not in suggestion.reason
            kinds = {edge.kind for anchor in toolbox.selected
                     for edge, other in store.neighbors(anchor) if other.id == suggestion.id}
            assert kinds - {EdgeKind.SIMILAR_TO} or not kinds, (request, suggestion)


def test_a_skill_score_is_read_from_its_explanation(indexed: tuple[Path, EmbeddedStore],
                                                    encoder: CachedEncoder) -> None:
    from skillgrove.graph.stages import DEFAULT_SETTINGS

    _, store = indexed
    balanced = DEFAULT_SETTINGS.but(skills={"vector_weight": None})
    toolbox = Retriever(store, encoder, balanced).search(
        "turn this markdown file into an html page")
    shares = {s.explanation.vector_share for s in toolbox.skills}
    assert len(shares) == 1  # one share for the request, balanced over its candidates
    for skill in toolbox.skills:
        notes = skill.explanation
        assert notes.vector is not None and notes.lexical is not None
        assert notes.vector_share is not None and 0.0 <= notes.vector_share <= 0.5
        assert skill.score == pytest.approx(notes.vector_share * notes.vector
                                            + (1 - notes.vector_share) * notes.lexical,
                                            abs=1e-3)
