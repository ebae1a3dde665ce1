"""The validator's cases from issue 16: one fixture group per mistake, the exact diagnostic an
author sees (rule, line, column, message, hint), and the errors one fix clears folded under it.

Each fixture in ``fixtures/validator/cases`` is put into a copy of the fixture library (its own
groups removed, the instruction-only skill of ``fixtures/validator/skills`` added); the library
is then checked from its root, or from its ``groups`` folder alone for ``groups-folder-only``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from skillgrove.groups import load_library
from skillgrove.runtime.runner import resolve_inputs
from skillgrove.skills.errors import SkillgroveError
from tests.helpers import copy_fixture_library

CASES_DIR = Path(__file__).resolve().parent / "fixtures" / "validator"


class Case(NamedTuple):
    fixture: str
    rule: str
    line: int | None
    column: int | None
    message: str
    hint: str | None
    follow_ons: tuple[tuple[str, int, int], ...] = ()
    """(rule, line, column) of each error folded under the diagnostic, in order."""
    folder: str = "groups"
    """Where the fixture goes in the library."""


QUOTE = "quote the whole value: an unquoted ': ' starts a new mapping"
CASES = [
    Case("cycle-already-needed", "cycle", 7, 12,
         "steps[0].needs: steps form a cycle: text -> summary -> text",
         "remove one of these 'needs' so the steps can run in order"),
    Case("needs-typo", "unknown-step", 10, 13, "steps[1].needs[0]: unknown step 'txet'",
         "did you mean 'text'?",
         (("not-upstream", 12, 17), ("not-upstream", 17, 17), ("not-upstream", 24, 39))),
    Case("missing-needs", "not-upstream", 11, 17,
         "steps[1].with.text: step 'metrics' uses steps.text but does not run after it",
         "add 'text' to the 'needs' of step 'metrics'",
         (("not-upstream", 16, 17), ("not-upstream", 23, 30))),
    Case("key-out-of-line", "yaml-syntax", 9, 6,
         "not valid YAML: 'password:' in column 6 is not in line with the keys above it",
         "keys of one mapping start in the same column: move it to column 7, under 'path:' "
         "on line 8"),
    Case("colon-in-value", "yaml-syntax", 8, 20,
         "not valid YAML: mapping values are not allowed in this context", QUOTE),
    Case("dash-out-of-line", "yaml-syntax", 8, 4,
         "not valid YAML: this list item ('-' in column 4) is not in line with the items "
         "above it", "put its '-' in column 3, under the '-' of line 5"),
    Case("flow-mapping-expression", "yaml-syntax", 9, 19,
         "not valid YAML: did not find expected ',' or '}'",
         "an unquoted '${{' inside '{ }' or '[ ]' starts a nested mapping: quote the expression "
         "('${{ inputs.pdf_path }}') or write one key per line"),
    Case("tab-indent", "yaml-syntax", 6, 1, "not valid YAML: a tab in the indentation",
         "replace the tab with spaces: YAML indents with spaces only"),
    Case("with-not-indented", "misplaced-input", 12, 5,
         "steps[1].text: 'text' is an input of skill 'extract-metrics', not a field of the step",
         "indent it and 'limit' under 'with:'",
         (("misplaced-input", 13, 5), ("missing-parameter", 8, 5))),
    Case("with-to-instruction-only", "with-ignored", 7, 5,
         "steps[0].with: skill 'style-guide' is instruction-only: nothing runs, so 'with:' is "
         "not used", "remove 'with:'; the agent is given the skill's instructions instead"),
    Case("output-of-instruction-only", "unknown-output", 11, 17,
         "steps[1].with.text: skill 'style-guide' of step 'guide' is instruction-only and has "
         "no outputs: 'text' is never set",
         "an instruction-only skill runs nothing; its instructions go to the agent, so read "
         "results from a skill that runs"),
    Case("required-input-unused", "unused-input", 6, 3,
         "inputs.language: required input 'language' is not used by any step or output",
         "pass it to a step as '${{ inputs.language }}', or remove it: every caller has to "
         "give it"),
    Case("outside-groups", "group-file-not-read", 4, 1,
         "this file holds 'steps:' but is not read as a group: groups are read from a "
         "'groups' folder or from files named *.group.yaml",
         "move it into {root}/groups or rename it to outside-groups.group.yaml",
         folder="drafts"),
    Case("groups-folder-only", "no-skills", None, None,
         "no skills were loaded from {root}/groups, so the skills of 2 steps are unknown",
         "check the library root, the folder that holds skills/ and groups/: "
         "skillgrove check {root}",
         (("unknown-skill", 6, 12), ("unknown-skill", 9, 12))),
]


@pytest.mark.parametrize("case", CASES, ids=[c.fixture for c in CASES])
def test_validator_case(tmp_path: Path, case: Case) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    shutil.rmtree(root / "groups")
    (root / "groups").mkdir()
    shutil.copytree(CASES_DIR / "skills", root / "skills", dirs_exist_ok=True)
    path = root / case.folder / f"{case.fixture}.yaml"
    path.parent.mkdir(exist_ok=True)
    shutil.copyfile(CASES_DIR / "cases" / path.name, path)
    checked = root / "groups" if case.fixture == "groups-folder-only" else root

    library = load_library([checked])

    found = [d for d in library.diagnostics if d.path in (path, root / "groups")]
    assert [(d.rule, d.line, d.column, d.message) for d in found] == [
        (case.rule, case.line, case.column, case.message.replace("{root}", str(root)))]
    assert found[0].hint == (case.hint.replace("{root}", str(root)) if case.hint else None)
    assert [(f.rule, f.line, f.column) for f in found[0].follow_ons] == list(case.follow_ons)
    assert all(f.path == path for f in found[0].follow_ons)
    assert case.fixture not in library.groups or not found[0].is_error


def test_the_follow_ons_are_printed_under_their_cause(tmp_path: Path) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    path = root / "groups" / "needs-typo.yaml"
    shutil.copyfile(CASES_DIR / "cases" / "needs-typo.yaml", path)
    [error] = [d for d in load_library([root]).errors if d.path == path]
    assert error.format().splitlines() == [
        f"{path}:10:13: error: steps[1].needs[0]: unknown step 'txet' (did you mean 'text'?; "
        "fixing it also clears the 3 errors below) [unknown-step]",
        f"    {path}:12:17: steps[1].with.text: step 'metrics' uses steps.text but does not run "
        "after it [not-upstream]",
        f"    {path}:17:17: steps[2].with.text: step 'summary' uses steps.text but does not run "
        "after it [not-upstream]",
        f"    {path}:24:39: steps[3].with.language: step 'translated' uses steps.text but does "
        "not run after it [not-upstream]",
    ]
    assert [f["rule"] for f in error.to_dict()["follow_ons"]] == ["not-upstream"] * 3


def test_a_cycle_does_not_hide_a_real_missing_need(tmp_path: Path) -> None:
    """Only the cycle is folded away: a step outside it that reads a step it does not run
    after is still reported."""
    root = copy_fixture_library(tmp_path / "lib")
    path = root / "groups" / "g.yaml"
    path.write_text((CASES_DIR / "cases" / "cycle-already-needed.yaml").read_text()
                    + "  - id: late\n    skill: summarize-text\n    with:\n"
                    "      text: ${{ steps.summary.outputs.summary }}\n")
    rules = [d.rule for d in load_library([root]).errors if d.path == path]
    assert rules == ["cycle", "not-upstream"]


@pytest.mark.parametrize(("given", "expected"), [
    ({"pdf": "a.pdf"}, "unknown input 'pdf' (did you mean 'pdf_path'?)"),
    ({"pdf_path": "a.pdf", "zzz": 1}, "unknown input 'zzz' (inputs: max_metrics, pdf_path)"),
])
def test_run_time_input_errors_say_what_was_meant(fixture_library: Path, given: dict[str, str],
                                                  expected: str) -> None:
    group = load_library([fixture_library]).groups["report-analysis"]
    assert {spec.name for spec in group.inputs} == {"pdf_path", "max_metrics"}
    with pytest.raises(SkillgroveError, match=re.escape(expected)):
        resolve_inputs(group, given)
