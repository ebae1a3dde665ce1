"""The harness reads any folder in the benchmark format (``shared/benchmarks/FORMAT.md``), as
other tools write it: ids that are no skill id (``GET /movie/{id}``, ``工具1``), contracts
spelling their types as another tool format does, names that repeat or hold a path, a byte-order
mark. None of these may cost a skill: a skill the library does not hold, or holds under another
id, is a gold label nothing can answer."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

from skillgrove.groups.library import load_library
from skillgrove.runtime import bench
from skillgrove.runtime.cli import main
from skillgrove.skills.loader import LoadOptions, valid_skill_id
from tests.conftest import FIXTURES

BENCH = FIXTURES / "bench"
ODD_IDS = ["GET /report/{id}", "summarize text", "-mail", "工具4", "csv#stats", "x" * 200]


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _write(folder: Path, name: str, rows: list[dict[str, Any]], prefix: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(prefix + "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                for r in rows), encoding="utf-8")


def _renamed(folder: Path) -> Path:
    """The fixture data set with every skill id replaced by one no skill id may be."""
    skills = _rows(BENCH / "skills.jsonl")
    new = {s["id"]: ODD_IDS[i % len(ODD_IDS)] + ("" if i < len(ODD_IDS) else str(i))
           for i, s in enumerate(skills)}
    _write(folder, "skills.jsonl", [{**s, "id": new[s["id"]]} for s in skills])
    _write(folder, "history.jsonl", [
        {**r, "skills": [new[s] for s in r["skills"]],
         "edges": [[new[a], new[b]] for a, b in r.get("edges", [])]}
        for r in _rows(BENCH / "history.jsonl")])
    _write(folder, "queries.jsonl", [
        {**q, "gold_skills": [new[s] for s in q["gold_skills"]],
         "gold_edges": [[new[a], new[b]] for a, b in q.get("gold_edges", [])]}
        for q in _rows(BENCH / "queries.jsonl")])
    return folder


def _scores(folder: Path) -> dict[str, float]:
    out = StringIO()
    assert main(["bench", str(folder), "--json"], out) == 0
    metrics = json.loads(out.getvalue())["metrics"]
    return {k: v for k, v in metrics.items() if "latency" not in k and not k.endswith("_ms_p50")}


def test_ids_no_skill_may_have_score_as_the_plain_ones(tmp_path: Path) -> None:
    odd = _renamed(tmp_path / "odd")
    assert _scores(odd) == _scores(BENCH)


def test_every_id_of_a_data_set_maps_to_one_library_id() -> None:
    ids = [bench.library_id(i) for i in ODD_IDS]
    assert len(set(ids)) == len(ids)
    assert bench.library_id("s1") == "s1"
    assert bench.library_id("GET /report/{id}").startswith("GET-report-id-")
    assert bench.library_id("工具").startswith("id-")
    assert all(valid_skill_id(i) for i in ids)


def _dataset(tmp_path: Path, skills: list[dict[str, Any]], prefix: str = "") -> bench.Dataset:
    folder = tmp_path / "set"
    _write(folder, "skills.jsonl", skills, prefix)
    _write(folder, "history.jsonl", [])
    _write(folder, "queries.jsonl", [{"id": "q", "request": "r", "gold_skills": ["a"]}])
    return bench.read_dataset(folder)


def test_a_contract_in_another_format_s_type_names_loads_retyped(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path, [
        {"id": "a", "name": "search-title", "description": "Find a film by its title",
         "inputs": {"type": "OBJECT", "properties": {"title": {"type": "STRING"},
                                                     "year": {"type": "int"}}}},
        {"id": "b", "name": "film-details", "description": "Details of a film",
         "inputs": {"type": "object", "properties": {"film": {"type": "movie"}}},
         "outputs": ["title", "rating"], "body": "Returns the cast."}])
    root, _, _ = bench.write_library(dataset, tmp_path / "lib", "flat")
    library = load_library([root], LoadOptions())
    assert not library.errors, [e.format() for e in library.errors]
    skills = {s.id: s for s in library.skills.values()}
    assert set(skills) == {"a", "b"}
    assert skills["a"].inputs is not None
    assert skills["a"].inputs["properties"]["year"] == {"type": "integer"}
    # Refused even retyped: left out of the frontmatter, its text kept where retrieval reads.
    assert skills["b"].inputs is None and skills["b"].outputs is None
    body = skills["b"].body()
    assert '"movie"' in body and '"rating"' in body and "Returns the cast." in body
    assert bench.usable_contracts(dataset)[1] == {"retyped": 1, "left out": 2}


def test_a_contract_the_loader_accepts_is_written_as_declared(tmp_path: Path) -> None:
    # The order of the properties is the order of the inputs (a draft binds, and retrieval
    # reads, in that order): sorting them cost ToolLinkOS with hidden sets 4 points.
    dataset = _dataset(tmp_path, [
        {"id": "a", "name": "book-table", "description": "Book a table",
         "inputs": {"type": "object", "properties": {"time": {"type": "string"},
                                                     "party": {"type": "integer"},
                                                     "date": {"type": "string"}},
                    "required": ["time", "date"]}}])
    root, _, _ = bench.write_library(dataset, tmp_path / "lib", "flat")
    skill = next(iter(load_library([root], LoadOptions()).skills.values()))
    assert skill.inputs is not None
    assert list(skill.inputs["properties"]) == ["time", "party", "date"]
    assert skill.inputs["required"] == ["time", "date"]


def test_names_that_repeat_or_hold_a_path_and_null_fields_cost_no_skill(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path, [
        {"id": "a", "name": "lookup", "description": "Look up a word"},
        {"id": "b", "name": "lookup", "description": "Look up a place"},
        {"id": "c", "name": "../../outside", "description": "Escape the library"},
        {"id": "d", "name": "", "description": "No name at all"},
        {"id": "e", "name": "nulls", "description": None, "tags": "one tag", "body": None}],
        prefix="\ufeff")
    root, _, _ = bench.write_library(dataset, tmp_path / "lib", "flat")
    written = sorted(p.parent.name for p in (root / "skills").glob("*/SKILL.md"))
    assert written == ["d", "lookup", "lookup-2", "nulls", "outside"]
    library = load_library([root], LoadOptions())
    assert not library.errors, [e.format() for e in library.errors]
    # Every skill answers under its id: the second "lookup" is another skill, not a copy of
    # the first that it would shadow.
    assert {s.id for s in library.skills.values()} == {"a", "b", "c", "d", "e"}
    assert {s.name for s in library.skills.values()} >= {"lookup", "lookup-2"}
    assert [s.tags for s in library.skills.values() if s.name == "nulls"] == [("one tag",)]
    assert not (tmp_path / "outside").exists()
    ids = {p.parent.name: (p.parent / ".skill_id").read_text().strip()
           for p in (root / "skills").glob("*/SKILL.md")}
    assert ids == {"lookup": "a", "lookup-2": "b", "outside": "c", "d": "d", "nulls": "e"}


def test_bench_reports_the_contracts_it_retyped_or_left_out(
        tmp_path: Path, capsys: Any) -> None:
    folder = tmp_path / "set"
    _write(folder, "skills.jsonl", [
        {"id": "a", "name": "search-title", "description": "Find a film by its title",
         "inputs": {"type": "object", "properties": {"title": {"type": "STRING"}}}},
        {"id": "b", "name": "film-details", "description": "Details of a film",
         "inputs": {"type": "object", "properties": {"film": {"type": "movie"}}}}])
    _write(folder, "history.jsonl", [])
    _write(folder, "queries.jsonl", [{"id": "q", "request": "details of Alien",
                                      "gold_skills": ["b"]}])
    out = StringIO()
    assert main(["bench", str(folder), "--json"], out) == 0
    result = json.loads(out.getvalue())
    assert result["details"]["contracts"] == {"retyped": 1, "left_out": 1}
    assert result["details"]["skills"] == 2
    capsys.readouterr()
    assert main(["bench", str(folder)], StringIO()) == 0
    said = capsys.readouterr().err
    assert "declared contracts: 1 retyped to JSON Schema's type names; 1 that the loader " \
        "refuses left out" in said
