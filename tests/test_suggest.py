"""`groups suggest`: drafts from a run log of the bundled groups and from a history file pass
`check`, carry the runs' edges and bindings, never repeat an existing group, and land where
`check` reads them; with nothing to draft, the reason says why."""

from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from skillgrove.graph.learning import rows_from_runs
from skillgrove.graph.runlog import RunRecord, SqliteRunLog, StepRecord
from skillgrove.groups.authoring import member_set
from skillgrove.groups.library import load_library
from skillgrove.runtime.cli import main
from skillgrove.runtime.paths import default_paths

SUMMARY = "Revenue grew 12% to 4.1 million while margins held at 31%."
TEXT = "Quarterly report. Revenue grew 12% to 4.1 million. Margins held at 31%."


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = tmp_path / "library"
    shutil.copytree(default_paths()[0], root, ignore=shutil.ignore_patterns("samples"))
    return root


def _step(sid: str, target: str, at: float, inputs: dict[str, Any], outputs: dict[str, Any],
          kind: str = "skill") -> StepRecord:
    return StepRecord(sid, target, kind, "success", inputs, outputs, None, 1, at, 0.5)


def _run(rid: str, group: str, at: float, inputs: dict[str, Any], outputs: dict[str, Any],
         steps: tuple[StepRecord, ...], request: str | None = None) -> RunRecord:
    return RunRecord(rid, group, "success", inputs, {}, outputs, steps, at, 3.0, request)


def _bundled_run_log(at: float = 1_000_000.0) -> list[RunRecord]:
    """What running the bundled groups records: report-analysis three times, two of them
    followed by `run-skill markdown-to-html` on its summary; a toolbox `ask` composed twice
    (pdf-to-text -> summarize-text -> markdown-to-html); web-page-digest once."""
    runs = []
    for n in range(3):
        t = at + n * 100
        runs.append(_run(f"ra{n}", "report-analysis", t, {"pdf_path": "/in/q.pdf"},
                         {"summary": SUMMARY, "metrics": []},
                         (_step("extract_text", "pdf-to-text", t, {"path": "/in/q.pdf"},
                                {"text": TEXT}),
                          _step("summarize", "summarize-text", t + 1, {"text": TEXT},
                                {"summary": SUMMARY}))))
        if n < 2:
            runs.append(_run(f"md{n}", "skill:markdown-to-html", t + 10, {"markdown": SUMMARY},
                             {"html": "<p>…</p>"},
                             (_step("markdown-to-html", "markdown-to-html", t + 10,
                                    {"markdown": SUMMARY}, {"html": "<p>…</p>"}),)))
    for n in range(2):
        t = at + 1000 + n * 100
        runs.append(_run(f"c{n}", "composed-summarize-text-markdown-to-html", t,
                         {"path": "/in/q.pdf"}, {},
                         (_step("pdf_to_text", "pdf-to-text", t, {"path": "/in/q.pdf"},
                                {"text": TEXT, "pages": 2}),
                          _step("summarize_text", "summarize-text", t + 1, {"text": TEXT},
                                {"summary": SUMMARY}),
                          _step("markdown_to_html", "markdown-to-html", t + 2,
                                {"markdown": SUMMARY}, {"html": "<p>…</p>"})),
                         request=f"summarize the PDF report as a web page ({n})"))
    runs.append(_run("wd", "web-page-digest", at + 5000, {"html_path": "/in/a.html"}, {}, ()))
    return runs


def _record(index: Path, runs: list[RunRecord]) -> None:
    log = SqliteRunLog(index / "runs.sqlite")
    for run in runs:
        log.record(run)
    log.close()


def _suggest(library: Path, index: Path, *extra: str) -> str:
    out = StringIO()
    assert main(["groups", "suggest", "--library", str(library), "--index", str(index),
                 *extra], out) == 0
    return out.getvalue()


def test_rows_from_runs_chain_a_group_run_and_the_run_that_read_its_output() -> None:
    rows = rows_from_runs([r.to_dict() for r in _bundled_run_log()],
                          groups=["report-analysis", "web-page-digest"])
    chained = [r for r in rows if "markdown-to-html" in r.skills and len(r.skills) == 2]
    assert len(chained) == 2
    assert chained[0].skills == ("group:report-analysis", "markdown-to-html")
    assert chained[0].edges == (("group:report-analysis", "markdown-to-html"),)
    composed = [r for r in rows if len(r.skills) == 3]
    assert composed[0].edges == (("pdf-to-text", "summarize-text"),
                                 ("summarize-text", "markdown-to-html"))
    assert {(b.member, b.name, b.source, b.output) for b in composed[0].bindings} >= {
        ("summarize-text", "text", "pdf-to-text", "text"),
        ("markdown-to-html", "markdown", "summarize-text", "summary"),
        ("pdf-to-text", "path", "", "path")}


def test_suggest_on_the_run_log_of_the_bundled_groups(library: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    _record(index, _bundled_run_log())
    said = _suggest(library, index)
    drafts = library / "groups" / "drafts"
    files = sorted(p.name for p in drafts.iterdir())
    assert "report-analysis-markdown-to-html.yaml" in files
    assert "pdf-to-text-summarize-text-markdown-to-html.yaml" in files
    assert "passes check" in said and "remain" not in said
    assert "report-analysis (1)" in said and "web-page-digest (1)" in said

    checked = load_library([library])
    assert not checked.errors, [d.format() for d in checked.errors]
    assert {"report-analysis-markdown-to-html",
            "pdf-to-text-summarize-text-markdown-to-html"} <= set(checked.drafts)
    assert not set(checked.drafts) & set(checked.groups)  # drafts are not loaded as groups
    notes = [d for d in checked.diagnostics if d.rule == "draft-group"]
    assert all("passes check" in d.message for d in notes) and len(notes) == len(files)
    approved = {member_set(g) for g in checked.groups.values()}
    for draft in checked.drafts.values():
        assert member_set(draft) not in approved, draft.id

    composed = checked.drafts["pdf-to-text-summarize-text-markdown-to-html"]
    steps = {s.id: s for s in composed.steps}
    assert steps["summarize_text"].needs == ("pdf_to_text",)
    assert steps["markdown_to_html"].needs == ("summarize_text",)
    assert steps["summarize_text"].with_ == {"text": "${{ steps.pdf_to_text.outputs.text }}"}
    assert steps["markdown_to_html"].with_ == {
        "markdown": "${{ steps.summarize_text.outputs.summary }}"}
    assert steps["pdf_to_text"].with_ == {"path": "${{ inputs.path }}"}
    assert composed.examples == ("summarize the PDF report as a web page (0)",
                                 "summarize the PDF report as a web page (1)")
    assert composed.description.startswith("Extract")
    chained = checked.drafts["report-analysis-markdown-to-html"]
    assert [(s.group, s.skill, s.needs) for s in chained.steps] == [
        ("report-analysis", None, ()), (None, "markdown-to-html", ("report_analysis",))]
    assert chained.steps[1].with_ == {"markdown": "${{ steps.report_analysis.outputs.summary }}"}


def test_suggest_on_a_history_file(library: Path, tmp_path: Path) -> None:
    """Rows in the benchmark format: a set with edges becomes a draft with those edges and
    contract-inferred bindings; rows that did what report-analysis does are not drafted."""
    edges = [["pdf-to-text", "extract-metrics"], ["pdf-to-text", "summarize-text"],
             ["extract-metrics", "summarize-text"], ["summarize-text", "markdown-to-html"]]
    rows = [{"id": str(i), "request": f"turn report {i} into a web page with its figures",
             "skills": ["pdf-to-text", "extract-metrics", "summarize-text", "markdown-to-html"],
             "edges": edges} for i in range(3)]
    bundled = [s.skill for s in load_library([library]).groups["report-analysis"].steps]
    rows += [{"id": f"r{i}", "request": "analyse the report", "skills": bundled, "edges": []}
             for i in range(2)]
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    said = _suggest(library, tmp_path / "index", "--history", str(history))
    assert "report-analysis (2)" in said
    checked = load_library([library])
    assert not checked.errors, [d.format() for d in checked.errors]
    (draft,) = checked.drafts.values()
    by_skill = {s.skill: s for s in draft.steps}
    ids = {s.skill: s.id for s in draft.steps}
    got = {(ids_of, s.skill) for s in draft.steps for ids_of in s.needs}
    assert got == {(ids[a], b) for a, b in edges}
    assert by_skill["extract-metrics"].with_["text"] == "${{ steps.pdf_to_text.outputs.text }}"
    assert by_skill["pdf-to-text"].with_ == {"path": "${{ inputs.path }}"}
    assert draft.examples[0] == "turn report 0 into a web page with its figures"


def test_suggest_says_why_there_is_no_draft(library: Path, tmp_path: Path) -> None:
    for skill in load_library([library]).catalog.skills:  # no co-references left
        if not skill.is_executable:
            shutil.rmtree(skill.folder)
    said = _suggest(library, tmp_path / "empty-index")
    assert said.startswith("no draft groups: no runs recorded")
    index = tmp_path / "index"
    _record(index, [r for r in _bundled_run_log() if r.id.startswith("ra") or r.id == "wd"])
    said = _suggest(library, index)
    assert "4 of 4 runs did exactly what an existing group does: report-analysis (3), " \
           "web-page-digest (1)" in said


def test_instruction_only_library_without_runs(tmp_path: Path) -> None:
    root = tmp_path / "guides"
    for name, body in [("tone-guide", "Plain words."), ("refund-policy", "Refunds in 14 days.")]:
        (root / "skills" / name).mkdir(parents=True)
        (root / "skills" / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: The {name}.\n---\n{body}\n", encoding="utf-8")
    said = _suggest(root, tmp_path / "index")
    assert "only instruction-only skills, which run nothing" in said
    # Once one names the other, the pair is a draft (edges: the named one first).
    (root / "skills" / "refund-policy" / "SKILL.md").write_text(
        "---\nname: refund-policy\ndescription: The refund policy.\n---\nWrite as tone-guide "
        "says.\n", encoding="utf-8")
    said = _suggest(root, tmp_path / "index")
    assert "co-references" in said
    checked = load_library([root])
    (draft,) = checked.drafts.values()
    assert [(s.skill, s.needs) for s in draft.steps] == [("tone-guide", ()),
                                                        ("refund-policy", ("tone_guide",))]
