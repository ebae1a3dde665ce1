"""`graph impact` and the lock file, on a library where a member's output schema changes:
summarize-text's output `summary` becomes `abstract` after the groups were locked."""

from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest

from skillgrove.groups.impact import skill_impact
from skillgrove.groups.library import load_library
from skillgrove.groups.lock import LOCK_FILE, schema_changes
from skillgrove.runtime.cli import main
from skillgrove.runtime.paths import default_paths

OUTER = """\
id: report-then-html
name: Report as a web page
description: Analyse a PDF report, then turn its summary into an HTML page.
examples: [turn the quarterly report into a web page]
inputs:
  pdf_path: {type: string, required: true}
steps:
  - id: analysis
    group: report-analysis
    with:
      pdf_path: ${{ inputs.pdf_path }}
  - id: page
    skill: markdown-to-html
    needs: [analysis]
    with:
      markdown: ${{ steps.analysis.outputs.summary }}
"""


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = tmp_path / "library"
    shutil.copytree(default_paths()[0], root, ignore=shutil.ignore_patterns("samples"))
    (root / "groups" / "report-then-html.yaml").write_text(OUTER, encoding="utf-8")
    return root


def _rename_summary_output(root: Path) -> None:
    skill = root / "skills" / "summarize-text" / "SKILL.md"
    text = skill.read_text(encoding="utf-8")
    head, body = text.split("\noutputs:", 1)
    body = body.replace("    summary:\n", "    abstract:\n", 1).replace(
        "required: [summary,", "required: [abstract,", 1)
    skill.write_text(head + "\noutputs:" + body, encoding="utf-8")


def _cli(*argv: str) -> tuple[int, str]:
    out = StringIO()
    return main(list(argv), out), out.getvalue()


def test_the_lock_pins_members_and_check_reports_what_changed(library: Path) -> None:
    code, said = _cli("groups", "lock", "--library", str(library))
    assert code == 0 and "12 groups pinned" in said
    lock = json.loads((library / "groups" / LOCK_FILE).read_text(encoding="utf-8"))
    pinned = lock["groups"]["report-analysis"]["skills"]["summarize-text"]
    assert pinned["content_hash"] and "summary" in pinned["outputs"]["properties"]
    assert lock["groups"]["report-then-html"]["groups"] == ["report-analysis"]
    assert not [d for d in load_library([library]).diagnostics
                if d.rule.startswith("member-")]  # nothing changed yet

    _rename_summary_output(library)
    checked = load_library([library])
    changed = {d.subject: d for d in checked.diagnostics if d.rule == "member-changed"}
    assert set(changed) == {"report-analysis", "web-page-digest"}
    message = changed["report-analysis"].message
    assert message == ("skill 'summarize-text' changed since group 'report-analysis' was "
                       "locked: output 'summary' removed; output 'abstract' added (string, "
                       "required)")
    assert changed["report-analysis"].path == library / "groups" / "report-analysis.yaml"
    assert "skillgrove graph impact summarize-text" in (changed["report-analysis"].hint or "")

    # Approving the new version: lock again, and the warnings go (the errors stay).
    assert _cli("groups", "lock", "--library", str(library))[0] == 0
    relocked = load_library([library])
    assert not [d for d in relocked.diagnostics if d.rule == "member-changed"]


def test_code_only_change_is_reported_without_a_schema_change(library: Path) -> None:
    assert _cli("groups", "lock", "--library", str(library))[0] == 0
    main_py = library / "skills" / "summarize-text" / "main.py"
    main_py.write_text(main_py.read_text(encoding="utf-8") + "\n# tuned\n", encoding="utf-8")
    changed = [d for d in load_library([library]).diagnostics if d.rule == "member-changed"]
    assert changed and all("inputs and outputs are the same; its instructions or code changed"
                           in d.message for d in changed)


def test_graph_impact_names_the_groups_a_schema_change_breaks(library: Path) -> None:
    assert _cli("groups", "lock", "--library", str(library))[0] == 0
    before = skill_impact(load_library([library]), "summarize-text")
    assert [(u.group, u.via, u.breaks) for u in before.uses] == [
        ("report-analysis", (), False), ("web-page-digest", (), False),
        ("report-then-html", ("report-analysis",), False)]

    _rename_summary_output(library)
    after = skill_impact(load_library([library]), "summarize-text")
    uses = {u.group: u for u in after.uses}
    assert set(uses) == {"report-analysis", "web-page-digest", "report-then-html"}
    assert uses["report-analysis"].steps == ("summarize",)
    assert all(u.breaks for u in uses.values())
    rules = {d.rule for d in uses["report-analysis"].problems}
    assert rules == {"unknown-output"}
    assert any("has no output 'summary'" in d.message for d in uses["report-analysis"].problems)
    assert uses["report-then-html"].via == ("report-analysis",)
    assert uses["report-analysis"].changed_since_lock == (
        "output 'summary' removed", "output 'abstract' added (string, required)")

    code, said = _cli("graph", "impact", "summarize-text", "--library", str(library))
    assert code == 1
    assert "report-analysis: steps summarize: BREAKS" in said
    assert "report-then-html: through report-analysis: BREAKS" in said
    assert "changed since locked: output 'summary' removed; output 'abstract' added (string, " \
        "required)" in said
    assert "3 groups use 'summarize-text'; 3 break under its current schema" in said
    code, said = _cli("graph", "impact", "summarize-text", "--library", str(library), "--json")
    assert json.loads(said)["broken"] == ["report-analysis", "web-page-digest",
                                          "report-then-html"]


def test_impact_of_an_input_type_change_and_an_unused_skill(library: Path) -> None:
    skill = library / "skills" / "summarize-text" / "SKILL.md"
    text = skill.read_text(encoding="utf-8")
    head, rest = text.split("    text:\n      type: string", 1)  # the first: an input
    skill.write_text(head + "    text:\n      type: array" + rest, encoding="utf-8")
    report = skill_impact(load_library([library]), "summarize-text")
    problems = {u.group: {d.rule for d in u.problems} for u in report.uses}
    assert "type-mismatch" in problems["report-analysis"]
    code, said = _cli("graph", "impact", "zip-files", "--library", str(library))
    assert code == 0 and "csv-cleanup: steps bundle: ok" in said
    code, said = _cli("graph", "impact", "no-such-skill", "--library", str(library))
    assert said == "no group uses 'no-such-skill' (and the library has no such skill)\n"


def test_schema_changes_in_words() -> None:
    old = {"properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a"]}
    new = {"properties": {"a": {"type": "string"}, "b": {"type": "string"},
                          "c": {"type": "array"}}, "required": ["a", "b", "c"]}
    assert schema_changes(old, None, new, None) == [
        "input 'c' added (array, required)", "input 'b' type integer -> string",
        "input 'b' now required"]
