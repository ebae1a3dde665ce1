"""``skillgrove bench`` and the product answer alike: a library written by the harness, indexed
by the engine with the history as its run log (``index --history``) and searched through the
engine, gives the toolboxes the harness scores, on 20 queries of each dev set.

Each dev set is cut to the skills its first 20 queries and 60 history rows use plus 80 others
(the claim is about the code path, not the figures, and a full set takes minutes to embed)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.learning import HistoryRow
from skillgrove.graph.retrieval import Retriever, Toolbox
from skillgrove.graph.stages import DEFAULT_SETTINGS, Settings
from skillgrove.runtime import bench
from skillgrove.runtime.engine import Skillgrove
from skillgrove.runtime.errors import InvalidRequestError

BENCHMARKS = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
SETS = ["toollens", "sealtools-in", "toollinkos"]


def cut(dataset: bench.Dataset) -> bench.Dataset:
    queries = dataset.queries[:20]
    history = dataset.history[:60]
    wanted = {s for q in queries for s in q.gold} | {s for r in history for s in r.skills}
    others = [s for s in dataset.skills if str(s["id"]) not in wanted]
    random.Random(3).shuffle(others)
    keep = wanted | {str(s["id"]) for s in others[:80]}
    skills = tuple(s for s in dataset.skills if str(s["id"]) in keep)
    return replace(dataset, skills=skills, history=history, queries=queries)


def answer(toolbox: Toolbox) -> tuple[object, ...]:
    return (toolbox.group.id if toolbox.group else None, toolbox.selected, toolbox.edges,
            tuple(s.id for s in toolbox.skills), toolbox.fallback_reason)


@pytest.mark.slow
@pytest.mark.parametrize("name", SETS)
def test_bench_and_index_history_give_the_same_toolboxes(name: str, tmp_path: Path,
                                                         encoder: object) -> None:
    folder = BENCHMARKS / name
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing")
    dataset = cut(bench.read_dataset(folder))
    config = Settings()
    # The harness: its own library folder, learned groups, co-use and transitions.
    store, _, _ = bench._build(dataset, tmp_path / "bench", "groups", None,
                                     encoder, lambda f: EmbeddedStore(f / "index.sqlite"))
    harness = Retriever(store, encoder, config)  # type: ignore[arg-type]
    # The product: the same folder, indexed by the engine with the history as its run log.
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps({"id": r.id, "request": r.request,
                                           "skills": list(r.skills), "edges": list(r.edges)})
                               + "\n" for r in dataset.history), encoding="utf-8")
    engine = Skillgrove([tmp_path / "bench" / "library"], index=tmp_path / "index",
                        encoder=encoder, retrieval=config, auto_refresh=False)  # type: ignore[arg-type]
    try:
        engine.index(history=history)
        assert (tmp_path / "index" / "history.jsonl").exists()
        for query in dataset.queries:
            assert answer(engine.search(query.request)) == answer(
                harness.search(query.request)), query.request
    finally:
        engine.close()
        store.close()


def test_a_malformed_history_names_its_line(tmp_path: Path, encoder: object) -> None:
    bad = tmp_path / "history.jsonl"
    bad.write_text('{"id": "1", "request": "x", "skills": ["a"]}\n{"id": 2\n', encoding="utf-8")
    engine = Skillgrove([Path(__file__).resolve().parents[1] / "library"],
                        index=tmp_path / "index", encoder=encoder)  # type: ignore[arg-type]
    try:
        with pytest.raises(InvalidRequestError) as caught:
            engine.index(history=bad)
        assert "history.jsonl:2" in str(caught.value)
        assert not (tmp_path / "index" / "history.jsonl").exists()
    finally:
        engine.close()


def history_file(rows: Sequence[HistoryRow], path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": r.id, "request": r.request,
                                        "skills": list(r.skills), "edges": list(r.edges)})
                            + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.slow
def test_index_history_fits_the_settings_bench_fits(tmp_path: Path, encoder: object) -> None:
    """What ``skillgrove index --history`` learns is what ``skillgrove bench`` scores: the
    same settings, fitted by the same code on the same held-out rows, and the same toolboxes.
    320 history rows of ToolLinkOS: 32 held out, above the minimum sample of 30."""
    folder = BENCHMARKS / "toollinkos"
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing")
    full = bench.read_dataset(folder)
    queries, history = full.queries[:20], full.history[:320]
    wanted = {s for q in queries for s in q.gold} | {s for r in history for s in r.skills}
    others = [s for s in full.skills if str(s["id"]) not in wanted][:40]
    keep = wanted | {str(s["id"]) for s in others}
    dataset = replace(full, skills=tuple(s for s in full.skills if str(s["id"]) in keep),
                      history=history, queries=queries)

    def make_store(folder: Path) -> EmbeddedStore:
        return EmbeddedStore(folder / "graph.sqlite")

    fitted, details = bench.fit_on_dataset(dataset, tmp_path / "fit", encoder,  # type: ignore[arg-type]
                                           make_store)
    assert details["sample"] == 32 and "kept" not in details
    assert fitted != DEFAULT_SETTINGS  # something was learned, or the test shows nothing
    store, _, _ = bench._build(dataset, tmp_path / "bench", "groups", None,
                               encoder, make_store)  # type: ignore[arg-type]
    harness = Retriever(store, encoder, fitted)  # type: ignore[arg-type]
    engine = Skillgrove([tmp_path / "bench" / "library"], index=tmp_path / "index",
                        encoder=encoder, auto_refresh=False)  # type: ignore[arg-type]
    try:
        engine.index(history=history_file(history, tmp_path / "history.jsonl"))
        assert engine.retrieval_fit()["sample"] == 32
        for query in dataset.queries:
            assert answer(engine.search(query.request)) == answer(
                harness.search(query.request)), query.request
        assert engine.retriever.settings == fitted
        # Indexed again with the same history, nothing is fitted again; the settings stay.
        engine.index()
        engine.search(queries[0].request)
        assert engine.retriever.settings == fitted
    finally:
        engine.close()
        store.close()


@pytest.mark.parametrize("count", [20, 40])
def test_a_short_history_fits_the_selection_floor_at_most(tmp_path: Path, encoder: object,
                                                          count: int) -> None:
    """Under 300 rows nothing is held out for the groups; from 30 rows the selection floor
    (which judges the skill ranking alone, learned from no row) is fitted on all of them."""
    library = Path(__file__).resolve().parents[1] / "library"
    rows = [HistoryRow(str(i), "summarize this PDF", ("pdf-to-text", "summarize-text"), ())
            for i in range(count)]
    engine = Skillgrove([library], index=tmp_path / "index", encoder=encoder)  # type: ignore[arg-type]
    try:
        engine.index(history=history_file(rows, tmp_path / "history.jsonl"))
        fit = engine.retrieval_fit()
        assert fit["history_rows"] == count and "fewer than 30" in fit["kept"]
        engine.search("summarize this PDF")
        if count < 30:
            assert "skill_sample" not in fit
            assert engine.retriever.settings == DEFAULT_SETTINGS
        else:
            assert fit["skill_sample"] == count
            assert engine.retriever.settings == DEFAULT_SETTINGS.but(
                skills={"minimum": fit["select_min"]})
    finally:
        engine.close()


def test_index_says_when_the_router_was_turned_off() -> None:
    from skillgrove.runtime.commands import fit_summary

    line = fit_summary({"sample": 30, "history_rows": 250, "threshold": 0.0,
                        "skill_vector_weight": 0.5, "select_ratio": 0.85, "select_min": 0.2,
                        "router": False, "group_vector_weight": 0.25})
    assert "groups chosen by their words (the router off, group vector weight 0.25)" in line
    assert "router" not in fit_summary({"sample": 30, "history_rows": 250, "router": True})


def test_index_says_when_tasks_are_joined_only_by_reference() -> None:
    from skillgrove.runtime.commands import fit_summary

    said = "a task joins the one before it only where it refers back to its result"
    assert said in fit_summary({"sample": 70, "history_rows": 700, "referenced": True})
    assert said not in fit_summary({"sample": 70, "history_rows": 700, "referenced": False})


@pytest.mark.parametrize(("fit", "line"), [
    ({"sample": 3, "history_rows": 40, "kept": "defaults: 3 held-out rows, fewer than 30"},
     "retrieval settings: the defaults, from a history of 40 rows (defaults: 3 held-out rows, "
     "fewer than 30)"),
    ({"sample": 4, "history_rows": 40, "kept": "defaults beyond the floor: 4 held-out "
      "rows, fewer than 30", "skill_sample": 40, "select_min": 0.1},
     "retrieval settings: the selection floor 0.1 fitted on all 40 rows of the history, the "
     "rest defaults beyond the floor: 4 held-out rows, fewer than 30"),
    ({"sample": 5, "history_rows": 50, "kept": "defaults beyond the floor and the support "
      "rule: 5 held-out rows, fewer than 30", "skill_sample": 50, "select_min": 0.1,
      "support_depth": None, "support_folds": 5},
     "retrieval settings: the selection floor 0.1 fitted on all 50 rows of the history, the "
     "group support rule on 5 folds of them (off), the rest defaults beyond the floor and the "
     "support rule: 5 held-out rows, fewer than 30"),
    ({"sample": 104, "history_rows": 1046, "threshold": 0.0, "skill_vector_weight": 0.5,
      "select_ratio": 0.7, "select_min": 0.25, "seconds": 22.5,
      "fitted_at": "2026-12-05 13:05 UTC"},
     "retrieval settings fitted on 104 held-out rows of a history of 1046 (2026-12-05 13:05 UTC, "
     "22.5 s): group threshold 0.0, skill vector weight 0.5, selection cut 0.7 / 0.25 "
     "(`skillgrove index --json` lists every value)"),
])
def test_index_says_which_settings_answer_and_when_they_were_fitted(
        fit: dict[str, object], line: str) -> None:
    from skillgrove.runtime.commands import fit_summary

    assert fit_summary(fit) == line


def test_index_learns_from_the_library_s_own_runs(tmp_path: Path, encoder: object) -> None:
    """Runs of the library's groups, each with the request that started it, are fit rows as a
    history file's are (40 rows: the selection floor is fitted on them) and teach the order
    their skills ran in (the group's edges between the steps that ran)."""
    from skillgrove.graph.model import EdgeKind, NodeKind
    from skillgrove.graph.runlog import RunRecord, SqliteRunLog, StepRecord

    library = Path(__file__).resolve().parents[1] / "library"
    index = tmp_path / "index"
    engine = Skillgrove([library], index=index, encoder=encoder)  # type: ignore[arg-type]
    try:
        engine.index()
        assert engine.retrieval_fit() == {}
        steps = [("extract_text", "pdf-to-text"), ("metrics", "extract-metrics"),
                 ("summarize", "summarize-text"), ("figures", "markdown-table"),
                 ("notify", "send-email")]
        log = SqliteRunLog(index / "runs.sqlite")
        for number in range(40):
            log.record(RunRecord(
                f"run-{number}", "report-analysis", "success", {}, {}, {},
                tuple(StepRecord(sid, target, "skill", "success", started_at=float(at))
                      for at, (sid, target) in enumerate(steps)),
                started_at=float(number), seconds=1.0,
                request=f"summarize report {number} and mail the key numbers to the team"))
        # Neither one without a request nor a failed run teaches anything.
        log.record(RunRecord("run-bare", "report-analysis", "success", {}, {}, {}, (),
                             started_at=50.0, seconds=1.0))
        log.close()
        engine.index()
        fit = engine.retrieval_fit()
        assert fit["from_run_log"] == 40 and fit["skill_sample"] == 40, fit
        ids = {n.name: n.id for n in engine.store.nodes(NodeKind.SKILL)}
        forward = {}
        for edge in engine.store.edges(EdgeKind.CO_USED):
            for a, b, key in ((edge.src, edge.dst, "forward"), (edge.dst, edge.src, "backward")):
                if edge.props.get(key):
                    forward[(a, b)] = edge.props[key]
        assert forward[(ids["pdf-to-text"], ids["extract-metrics"])] == 40
        assert (ids["extract-metrics"], ids["pdf-to-text"]) not in forward
    finally:
        engine.close()
