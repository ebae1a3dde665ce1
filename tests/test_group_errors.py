"""One fixture per group error kind: the exact message, line and column a user sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillgrove.groups import load_library
from tests.helpers import copy_fixture_library, write_group, write_skill

HEAD = "id: g\ndescription: d\nexamples: [e]\n"
# Each case: (name, group YAML, rule, line, column, exact message, hint or None)
CASES = [
    ("unknown skill",
     HEAD + "steps:\n  - id: a\n    skill: summarise-text\n    with: {text: t}\n",
     "unknown-skill", 6, 12, "steps[0].skill: unknown skill 'summarise-text'",
     "did you mean 'summarize-text'?"),
    ("unknown sub-group",
     HEAD + "steps:\n  - id: a\n    group: escalate\n",
     "unknown-group", 6, 12, "steps[0].group: unknown group 'escalate'", None),
    ("unknown needs",
     HEAD + "steps:\n  - id: summarize\n    skill: summarize-text\n    with: {text: t}\n"
     "  - id: b\n    skill: summarize-text\n    needs: [summarise]\n    with: {text: t}\n",
     "unknown-step", 10, 13, "steps[1].needs[0]: unknown step 'summarise'",
     "did you mean 'summarize'?"),
    ("cycle",
     HEAD + "steps:\n  - id: a\n    skill: summarize-text\n    needs: [c]\n    with: {text: t}\n"
     "  - id: b\n    skill: summarize-text\n    needs: [a]\n    with: {text: t}\n"
     "  - id: c\n    skill: summarize-text\n    needs: [b]\n    with: {text: t}\n",
     "cycle", 7, 12, "steps[0].needs: steps form a cycle: a -> b -> c -> a",
     "remove one of these 'needs' so the steps can run in order"),
    ("reference to a step that is not upstream",
     HEAD + "steps:\n  - id: a\n    skill: summarize-text\n    with: {text: t}\n"
     "  - id: b\n    skill: summarize-text\n    with:\n"
     "      text: ${{ steps.a.outputs.summary }}\n",
     "not-upstream", 11, 17, "steps[1].with.text: step 'b' uses steps.a but does not run after it",
     "add 'a' to the 'needs' of step 'b'"),
    ("output the skill does not declare",
     HEAD + "steps:\n  - id: a\n    skill: summarize-text\n    with: {text: t}\n"
     "  - id: b\n    skill: summarize-text\n    needs: [a]\n    with:\n"
     "      text: ${{ steps.a.outputs.sumary }}\n",
     "unknown-output", 12, 17,
     "steps[1].with.text: skill 'summarize-text' of step 'a' has no output 'sumary'",
     "did you mean 'summary'?"),
    ("type mismatch between declared schemas",
     HEAD + "steps:\n  - id: pdf\n    skill: pdf-to-text\n    with: {path: a.pdf}\n"
     "  - id: s\n    skill: summarize-text\n    needs: [pdf]\n    with:\n"
     "      text: ${{ steps.pdf.outputs.text }}\n"
     "      max_sentences: ${{ steps.pdf.outputs.text }}\n",
     "type-mismatch", 13, 22,
     "steps[1].with.max_sentences: 'max_sentences' expects integer but "
     "'steps.pdf.outputs.text' is string", None),
    ("literal of the wrong type",
     HEAD + "steps:\n  - id: s\n    skill: summarize-text\n    with:\n      text: t\n"
     "      max_sentences: three\n",
     "type-mismatch", 9, 22,
     "steps[0].with.max_sentences: 'max_sentences' does not fit the input schema: "
     "'three' is not of type 'integer'", None),
    ("default that does not match its type",
     HEAD + "inputs:\n  limit:\n    type: integer\n    default: five\n"
     "steps:\n  - id: s\n    skill: summarize-text\n    with: {text: t}\n",
     "default-type", 7, 14, "inputs.limit.default: default 'five' is not of type integer",
     "give an integer default or change the type"),
    ("unknown field",
     HEAD + "steps:\n  - id: s\n    skill: summarize-text\n    depends_on: [x]\n"
     "    with: {text: t}\n",
     "unknown-field", 7, 5, "steps[0].depends_on: unknown field 'depends_on'",
     "did you mean 'needs'?"),
    ("unknown top-level field",
     HEAD + "stepz: []\nsteps:\n  - id: s\n    skill: summarize-text\n    with: {text: t}\n",
     "unknown-field", 4, 1, "stepz: unknown field 'stepz'", "did you mean 'steps'?"),
    ("unknown input",
     HEAD + "steps:\n  - id: s\n    skill: summarize-text\n    with:\n"
     "      text: ${{ inputs.body }}\n",
     "unknown-input", 8, 17, "steps[0].with.text: input 'body' is not declared",
     "declare it under 'inputs:' (inputs: body: ...)"),
    ("unknown root name",
     HEAD + "steps:\n  - id: s\n    skill: summarize-text\n    with:\n"
     "      text: \"${{ contxt.note }}\"\n",
     "unknown-reference", 8, 18, "steps[0].with.text: unknown name 'contxt'",
     "did you mean 'context'?"),
    ("expression syntax",
     HEAD + "steps:\n  - id: s\n    skill: summarize-text\n    with:\n"
     "      text: ${{ 'a' + }}\n",
     "expression-syntax", 8, 23,
     "steps[0].with.text: invalid expression: unexpected end of expression", None),
    ("unknown function",
     HEAD + "steps:\n  - id: s\n    skill: summarize-text\n    if: ${{ startswith(context.x, 'a') }}\n"
     "    with: {text: t}\n",
     "unknown-function", 7, 13, "steps[0].if: unknown function 'startswith'",
     "did you mean 'startsWith'?"),
    ("duplicate step id",
     HEAD + "steps:\n  - id: s\n    skill: summarize-text\n    with: {text: t}\n"
     "  - id: s\n    skill: summarize-text\n    with: {text: t}\n",
     "duplicate-step", 8, 9, "steps[1].id: step id 's' is already used by steps[0]", None),
    ("missing parameter",
     HEAD + "steps:\n  - id: mail\n    skill: send-email\n    with: {to: a@b.c}\n",
     "missing-parameter", 7, 11, "steps[0].with: skill 'send-email' needs input 'subject', 'body'",
     "pass it under 'with:'"),
    ("unknown parameter",
     HEAD + "steps:\n  - id: s\n    skill: summarize-text\n    with:\n      text: t\n"
     "      lenght: 3\n",
     "unknown-parameter", 9, 7, "steps[0].with.lenght: skill 'summarize-text' has no input 'lenght'",
     "its inputs: text, metrics, max_sentences"),
    ("step with no skill",
     HEAD + "steps:\n  - id: s\n    with: {text: t}\n",
     "step-target", 5, 5, "steps[0]: a step needs exactly one of 'skill' or 'group'", None),
    ("bad timeout",
     HEAD + "steps:\n  - id: s\n    skill: summarize-text\n    timeout: soon\n    with: {text: t}\n",
     "wrong-type", 7, 14, "steps[0].timeout: timeout 'soon' is not a positive duration",
     "write seconds (30) or a duration ('30s', '500ms', '2m', '1h')"),
    ("yaml syntax",
     HEAD + "steps:\n  - id: s\n    skill: summarize-text\n    with:\n"
     "      text: Summary: ${{ inputs.x }}\n",
     "yaml-syntax", 8, 20, "not valid YAML: mapping values are not allowed in this context",
     "quote the whole value: an unquoted ': ' starts a new mapping"),
    ("missing description",
     "id: g\nexamples: [e]\nsteps:\n  - id: s\n    skill: summarize-text\n    with: {text: t}\n",
     "missing-field", 1, 1, "'description' is required", None),
    ("status function outside if",
     HEAD + "steps:\n  - id: s\n    skill: summarize-text\n    with:\n"
     "      text: ${{ always() }}\n",
     "unknown-function", 8, 17, "steps[0].with.text: always() can only be used in a step's 'if'",
     None),
]


@pytest.mark.parametrize(("case", "text", "rule", "line", "column", "message", "hint"), CASES,
                         ids=[c[0] for c in CASES])
def test_group_error(tmp_path: Path, case: str, text: str, rule: str, line: int, column: int,
                     message: str, hint: str | None) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    path = write_group(root, "g.yaml", text)
    library = load_library([root])
    errors = [d for d in library.errors if d.path == path]
    assert [(e.rule, e.line, e.column, e.message) for e in errors] == [
        (rule, line, column, message)], case
    assert errors[0].hint == hint
    assert "g" not in library.groups


def test_sub_group_cycle(tmp_path: Path) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    write_group(root, "a.yaml", "id: a\ndescription: d\nexamples: [e]\nsteps:\n"
                "  - id: call_b\n    group: b\n")
    write_group(root, "b.yaml", "id: b\ndescription: d\nexamples: [e]\nsteps:\n"
                "  - id: call_a\n    group: a\n")
    library = load_library([root])
    messages = sorted(d.message for d in library.errors)
    assert messages == ["sub-groups call each other in a loop: a -> b -> a",
                        "sub-groups call each other in a loop: b -> a -> b"]


def test_all_errors_are_reported_at_once(tmp_path: Path) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    write_group(root, "g.yaml", HEAD + "steps:\n  - id: a\n    skill: nope\n  - id: b\n"
                "    skill: summarize-text\n    needs: [zz]\n    bogus: 1\n    with: {text: t}\n")
    rules = sorted(d.rule for d in load_library([root]).errors)
    assert rules == ["unknown-field", "unknown-skill", "unknown-step"]


def test_sub_group_parameters_are_checked(tmp_path: Path) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    write_group(root, "caller.yaml", HEAD.replace("id: g", "id: caller") + "steps:\n"
                "  - id: report\n    group: report-analysis\n    with:\n      pdf: x.pdf\n")
    errors = [d for d in load_library([root]).errors]
    assert [(d.rule, d.message) for d in errors] == [
        ("missing-parameter", "steps[0].with: group 'report-analysis' needs input 'pdf_path'"),
        ("unknown-parameter", "steps[0].with.pdf: group 'report-analysis' has no input 'pdf'"),
    ]


def test_the_design_notes_example_loads_and_validates(fixture_library: Path) -> None:
    library = load_library([fixture_library])
    assert library.diagnostics == ()
    group = library.groups["report-analysis"]
    assert [s.id for s in group.steps] == ["extract_text", "metrics", "summarize", "notify"]
    assert group.edges() == (("extract_text", "metrics"), ("extract_text", "summarize"),
                             ("metrics", "summarize"), ("summarize", "notify"))
    notify = group.step("notify")
    assert notify.with_["subject"] == "${{ 'Report summary: ' + context.report_name }}"
    assert notify.if_ == "${{ context.team_email != null }}"
    assert notify.retry is not None and notify.retry.max_attempts == 3
    assert notify.retry.initial_interval == 1.0
    assert notify.timeout == 30.0
    spec = group.input("pdf_path")
    assert spec is not None and spec.required


def test_sub_group_enum_is_checked(tmp_path: Path) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    write_group(root, "level.yaml", "id: level\ndescription: d\nexamples: [e]\ninputs:\n"
                "  level: {type: string, enum: [low, high], default: low}\nsteps:\n"
                "  - id: s\n    skill: summarize-text\n    with: {text: t}\n")
    write_group(root, "caller.yaml", "id: caller\ndescription: d\nexamples: [e]\nsteps:\n"
                "  - id: call\n    group: level\n    with: {level: zzz}\n")
    errors = load_library([root]).errors
    assert [(d.rule, d.line) for d in errors] == [("type-mismatch", 7)]
    assert "'zzz' is not one of ['low', 'high']" in errors[0].message


# -- comparisons the declared types already decide (warnings: the group stays valid) ----------

CHECK_SKILL = """
    ---
    name: check-text
    description: Check a text and say whether it is valid.
    inputs:
      properties:
        text: {type: string}
      required: [text]
    outputs:
      properties:
        valid: {type: boolean}
        count: {type: integer}
        label: {type: string}
        tags: {type: array}
    ---
    Checks a text.
    """
GUARDED = (HEAD + "inputs:\n  dry: {type: boolean, default: false}\nsteps:\n"
           "  - id: check\n    skill: check-text\n    with: {text: t}\n"
           "  - id: s\n    skill: summarize-text\n    needs: [check]\n")
# Each case: (name, the rest of step 's', rule, line, column, exact message, hint)
WARNING_CASES = [
    ("boolean output compared with 'true'",
     "    if: ${{ steps.check.outputs.valid == 'true' }}\n    with: {text: t}\n",
     "never-equal", 13, 13,
     "steps[1].if: steps.check.outputs.valid == 'true' is never true: "
     "steps.check.outputs.valid is a boolean and 'true' is a string",
     "compare with true, not 'true'"),
    ("the same without ${{ }}, and != is always true",
     "    if: \"steps.check.outputs.valid != 'false'\"\n    with: {text: t}\n",
     "never-equal", 13, 10,
     "steps[1].if: steps.check.outputs.valid != 'false' is always true: "
     "steps.check.outputs.valid is a boolean and 'false' is a string",
     "compare with false, not 'false'"),
    ("a comparison inside a larger condition",
     "    if: ${{ success() && (steps.check.outputs.count == '3') }}\n    with: {text: t}\n",
     "never-equal", 13, 27,
     "steps[1].if: steps.check.outputs.count == '3' is never true: "
     "steps.check.outputs.count is a number and '3' is a string",
     "compare with 3, not '3'"),
    ("number compared with a word",
     "    with:\n      text: \"many: ${{ steps.check.outputs.count == 'many' }}\"\n",
     "never-equal", 14, 24,
     "steps[1].with.text: steps.check.outputs.count == 'many' is never true: "
     "steps.check.outputs.count is a number and 'many' is a string",
     "compare values of the same type, or convert one with string() or number()"),
    ("number ordered against a word",
     "    if: ${{ steps.check.outputs.count > 'many' }}\n    with: {text: t}\n",
     "cannot-order", 13, 13,
     "steps[1].if: steps.check.outputs.count > 'many' fails when it runs: "
     "steps.check.outputs.count is a number and 'many' is a string, which '>' cannot order",
     "compare values of the same type, or convert one with string() or number()"),
    ("boolean group input compared with 'yes'",
     "    if: ${{ inputs.dry == 'yes' }}\n    with: {text: t}\n",
     "never-equal", 13, 13,
     "steps[1].if: inputs.dry == 'yes' is never true: inputs.dry is a boolean and 'yes' is "
     "a string", "compare values of the same type, or convert one with string() or number()"),
    ("string output compared with true",
     "    if: ${{ steps.check.outputs.label == true }}\n    with: {text: t}\n",
     "never-equal", 13, 13,
     "steps[1].if: steps.check.outputs.label == true is never true: "
     "steps.check.outputs.label is a string and true is a boolean",
     "compare with 'true', not true"),
    ("list compared with one of its items",
     "    if: ${{ steps.check.outputs.tags == 'urgent' }}\n    with: {text: t}\n",
     "never-equal", 13, 13,
     "steps[1].if: steps.check.outputs.tags == 'urgent' is never true: "
     "steps.check.outputs.tags is an array and 'urgent' is a string",
     "to ask whether a list holds a value, use contains(list, value)"),
]


@pytest.mark.parametrize(("case", "step", "rule", "line", "column", "message", "hint"),
                         WARNING_CASES, ids=[c[0] for c in WARNING_CASES])
def test_comparison_warning(tmp_path: Path, case: str, step: str, rule: str, line: int,
                            column: int, message: str, hint: str) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    write_skill(root / "skills", "check-text", CHECK_SKILL)
    path = write_group(root, "g.yaml", GUARDED + step)
    library = load_library([root])
    found = [d for d in library.diagnostics if d.path == path]
    assert [(d.severity.value, d.rule, d.line, d.column, d.message, d.hint) for d in found] == [
        ("warning", rule, line, column, message, hint)], case
    assert "g" in library.groups  # a warning does not make the group invalid


@pytest.mark.parametrize("condition", [
    "steps.check.outputs.valid == true",
    "steps.check.outputs.valid != false",
    "string(steps.check.outputs.valid) == 'true'",
    "steps.check.outputs.count >= 2",
    "steps.check.outputs.count == 2.5",
    "steps.check.outputs.label == 'ok'",
    "steps.check.outputs.label < 'm'",
    "steps.check.outputs.valid == null",
    "steps.check.status == 'success'",
    "context.approved == 'true'",
    "contains(steps.check.outputs.tags, 'urgent')",
    "inputs.dry == false",
])
def test_comparisons_the_types_allow_are_not_flagged(tmp_path: Path, condition: str) -> None:
    root = copy_fixture_library(tmp_path / "lib")
    write_skill(root / "skills", "check-text", CHECK_SKILL)
    path = write_group(root, "g.yaml", GUARDED + f"    if: ${{{{ {condition} }}}}\n"
                       "    with: {text: t}\n")
    library = load_library([root])
    assert [d.format() for d in library.diagnostics if d.path == path] == []
    assert "g" in library.groups
