"""``bench/baseline.py``: the plain baseline of issue 25 (BM25 ranking; the best history set by
BM25, BM25's top skill when no history request shares a word)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import REPO


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_baseline", REPO / "bench" / "baseline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


baseline = _load()

SKILLS = [
    {"id": "geo", "name": "geocode-city", "description": "Find the coordinates of a city",
     "body": "", "tags": ["maps"],
     "outputs": {"properties": {"latitude": {"type": "number",
                                             "description": "degrees north"}}}},
    {"id": "fc", "name": "weather-forecast", "description": "Weather forecast for coordinates",
     "body": "Returns the forecast for the next days.", "tags": ["weather"],
     "inputs": {"properties": {"latitude": {"type": "number"}}, "required": ["latitude"]}},
    {"id": "tz", "name": "time-zone", "description": "The time zone of a place", "body": "",
     "tags": []},
    {"id": "mail", "name": "send-email", "description": "Send an email message", "body": "",
     "tags": ["mail"]},
    {"id": "zip", "name": "zip-files", "description": "Compress files into an archive",
     "body": "", "tags": []},
]
HISTORY = [
    # Three rows hold the set {geo, fc}: two ordered geo -> fc, one (the best match of the
    # query below) the other way round. The set's most frequent edges win.
    {"id": "h1", "request": "weather in Paris tomorrow", "skills": ["geo", "fc"],
     "edges": [["geo", "fc"]]},
    {"id": "h2", "request": "will it rain in Rome", "skills": ["geo", "fc"],
     "edges": [["geo", "fc"]]},
    {"id": "h3", "request": "forecast for Oslo please, forecast", "skills": ["fc", "geo"],
     "edges": [["fc", "geo"]]},
    {"id": "h4", "request": "email the zipped reports to Bob", "skills": ["zip", "mail"],
     "edges": [["zip", "mail"]]},
    {"id": "h5", "request": "nothing was called", "skills": [], "edges": []},
]
QUERIES = [
    {"id": "q1", "request": "forecast for Oslo", "gold_skills": ["geo", "fc"],
     "gold_edges": [["geo", "fc"]]},
    {"id": "q2", "request": "which time zone has Lima, compress files",
     "gold_skills": ["tz"], "gold_edges": []},
]


def _write(folder: Path, skills: list[dict[str, Any]] = SKILLS,
           history: list[dict[str, Any]] = HISTORY,
           queries: list[dict[str, Any]] = QUERIES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("skills", skills), ("history", history), ("queries", queries)):
        (folder / f"{name}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


@pytest.fixture
def dataset(tmp_path: Path) -> Any:
    return baseline.read_dataset(_write(tmp_path / "tiny"))


def test_tokens_are_lowercase_words_and_single_cjk_characters() -> None:
    assert baseline.tokens("Email the PDF-report_v2 给团队!") == [
        "email", "the", "pdf", "report", "v2", "给", "团", "队"]


def test_bm25_is_lucenes_form() -> None:
    # Two documents; "zip" is in one of them: idf = log(1 + (2 - 1 + 0.5) / (1 + 0.5)).
    index = baseline.Bm25([["zip", "files"], ["send", "mail", "now", "please"]])
    idf = math.log(1 + 1.5 / 1.5)
    norm = 1.2 * (1 - 0.75 + 0.75 * 2 / 3)  # length 2, average length 3
    assert index.scores(["zip"]).tolist() == pytest.approx([idf * 2.2 / (1 + norm), 0.0])
    # A repeated query term counts once.
    assert index.scores(["zip", "zip"]).tolist() == index.scores(["zip"]).tolist()


def test_skill_text_holds_the_declared_contract_names_and_descriptions() -> None:
    text = baseline.skill_text(SKILLS[0])
    assert "geocode-city" in text and "maps" in text
    assert "latitude" in text and "degrees north" in text


def test_the_best_history_row_gives_the_set_and_its_set_gives_the_most_frequent_edges(
        dataset: Any) -> None:
    rule = baseline.Baseline(dataset.skills, dataset.history)
    answer = rule.answer("forecast for Oslo")
    assert answer.from_history and answer.history_row == "h3"
    assert answer.selected == ("fc", "geo")  # the row's call order
    assert answer.edges == (("geo", "fc"),)  # two rows of the set against one


def test_a_set_seen_once_keeps_its_rows_edges(dataset: Any) -> None:
    answer = baseline.Baseline(dataset.skills, dataset.history).answer("zipped reports for Bob")
    assert answer.selected == ("zip", "mail") and answer.edges == (("zip", "mail"),)


def test_equal_edge_counts_keep_the_top_rows_own_edges(tmp_path: Path) -> None:
    history = [{"id": "a", "request": "alpha", "skills": ["geo", "fc"], "edges": [["geo", "fc"]]},
               {"id": "b", "request": "beta", "skills": ["geo", "fc"], "edges": [["fc", "geo"]]}]
    data = baseline.read_dataset(_write(tmp_path / "tie", history=history))
    rule = baseline.Baseline(data.skills, data.history)
    assert rule.answer("beta").edges == (("fc", "geo"),)
    assert rule.answer("alpha").edges == (("geo", "fc"),)


def test_no_history_word_falls_back_to_the_top_bm25_skill(dataset: Any) -> None:
    rule = baseline.Baseline(dataset.skills, dataset.history)
    answer = rule.answer("which time zone has Lima")
    assert not answer.from_history
    assert answer.selected == ("tz",) and answer.edges == ()
    assert answer.ranking[0][0] == "tz"
    wider = rule.answer("which time zone has Lima, compress files", fallback_size=3)
    assert set(wider.selected) == {"tz", "zip"}  # only skills that score above zero
    assert baseline.Baseline(dataset.skills, ()).answer("forecast").selected == ("fc",)


def test_the_ranked_list_is_the_selected_set_then_the_bm25_ranking(dataset: Any) -> None:
    rule = baseline.Baseline(dataset.skills, dataset.history)
    answer = rule.answer("forecast for Oslo")
    names = {s["id"]: s["name"] for s in SKILLS}
    box = baseline.toolbox("forecast for Oslo", answer, names, {})
    assert [s.id for s in box.skills][:2] == ["fc", "geo"]
    assert box.group is None and box.selected == ("fc", "geo")
    assert box.edges == (("geo", "fc"),) and box.shape == "composed"


def test_figures_come_from_the_harness_metrics(dataset: Any) -> None:
    result = baseline.evaluate(dataset)
    metrics = result["metrics"]
    # q1: exact set, its edge right; q2: fell back to time-zone alone, exact too.
    assert metrics["set_f1"] == 100.0 and metrics["exact"] == 100.0
    assert metrics["edge_f1"] == 100.0  # only q1 has gold edges
    assert result["details"]["fallback_rate"] == 50.0
    assert result["details"]["history_rows"] == 4  # the row without skills is no candidate
    # The top-3 fallback adds zip-files to q2's selection: F1 2/3 there.
    assert result["fallback_top3"]["set_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2, abs=0.1)


def test_history_can_be_cut_to_a_seeded_sample(dataset: Any) -> None:
    small = baseline.limit_history(dataset, rows=2, seed=3)
    assert len(small.history) == 2
    assert small.history == baseline.limit_history(dataset, rows=2, seed=3).history
    ids = [row.id for row in dataset.history]
    assert [ids.index(r.id) for r in small.history] == sorted(ids.index(r.id)
                                                              for r in small.history)
    assert len(baseline.limit_history(dataset, fraction=0.6).history) == 3
    assert baseline.limit_history(dataset) is dataset


def test_the_command_prints_one_json_object(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    folder = _write(tmp_path / "tiny")
    assert baseline.main([str(folder), "--json", "--history-rows", "0"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["queries"] == 2 and result["details"]["history_rows"] == 0
    assert result["details"]["fallback_rate"] == 100.0
    assert {"set_f1", "edge_f1", "recall@10", "completeness@10", "exact"} <= set(
        result["metrics"])
    assert baseline.main([str(folder)]) == 0
    assert "set F1" in capsys.readouterr().out
