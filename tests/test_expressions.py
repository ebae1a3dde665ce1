"""The ``${{ }}`` language: values, operators, functions, errors, references."""

from __future__ import annotations

from typing import Any

import pytest

from skillgrove.groups.expressions import (
    StepStatuses,
    evaluate,
    parse_expression,
    parse_template,
    references,
    render,
    render_value,
)
from skillgrove.skills.errors import ExpressionEvalError, ExpressionSyntaxError

SCOPE: dict[str, Any] = {
    "inputs": {"n": 2, "name": "Q3", "tags": ["urgent", "billing"], "empty": ""},
    "context": {"team_email": "team@example.com", "report-name": "Q3 report", "user": None},
    "steps": {"extract": {"outputs": {"text": "Revenue grew 12%", "pages": 3},
                          "status": "success"}},
}

VALUES = [
    ("'it''s'", "it's"),
    ('"tab\\t"', "tab\t"),
    ("42", 42),
    ("2.5", 2.5),
    ("-3", -3),
    ("true && false", False),
    ("null", None),
    ("inputs.n + 1", 3),
    ("'Report summary: ' + inputs.name", "Report summary: Q3"),
    ("'pages: ' + steps.extract.outputs.pages", "pages: 3"),
    ("steps.extract.output.text", "Revenue grew 12%"),
    ("steps.extract.status == 'success'", True),
    ("context['report-name']", "Q3 report"),
    ("context.report-name", "Q3 report"),
    ("context.missing.deeper", None),
    ("inputs.tags[0]", "urgent"),
    ("inputs.tags[9]", None),
    ("inputs.n >= 2 and not (inputs.n > 5)", True),
    ("inputs.n == 2.0", True),
    ("'2' == 2", False),
    ("contains(inputs.tags, 'urgent')", True),
    ("contains('Hello World', 'world')", True),
    ("startsWith(context.team_email, 'TEAM')", True),
    ("endsWith(context.team_email, '.org')", False),
    ("lower('AbC') + upper('d')", "abcD"),
    ("length(inputs.tags) + length('abc')", 5),
    ("join(inputs.tags, ' | ')", "urgent | billing"),
    ("format('{0} of {1} ({{x}})', 1, 2)", "1 of 2 ({x})"),
    ("toJSON(inputs.tags)", '["urgent", "billing"]'),
    ("fromJSON('{\"a\": [1]}').a[0]", 1),
    ("default(inputs.empty, 'fallback')", "fallback"),
    ("default(context.user, 'anon')", "anon"),
    ("context.user || 'anon'", "anon"),
    ("number('12') + 1", 13),
    ("string(true)", "true"),
    ("trim('  x ')", "x"),
    ("[1, 'a']", [1, "a"]),
]


@pytest.mark.parametrize(("text", "expected"), VALUES, ids=[v[0] for v in VALUES])
def test_values(text: str, expected: Any) -> None:
    assert evaluate(parse_expression(text), SCOPE) == expected


SYNTAX_ERRORS = [
    ("", "empty expression", 0),
    ("inputs.", "expected a property name after '.' but found end of expression", 7),
    ("1 +", "unexpected end of expression", 3),
    ("(1", "expected ')' but found end of expression", 2),
    ("a b", "unexpected 'b'", 2),
    ("$x", "unexpected character '$'", 0),
    ("f(1,", "unexpected end of expression", 4),
]


@pytest.mark.parametrize(("text", "message", "offset"), SYNTAX_ERRORS,
                         ids=[s[0] or "empty" for s in SYNTAX_ERRORS])
def test_syntax_errors_carry_offsets(text: str, message: str, offset: int) -> None:
    with pytest.raises(ExpressionSyntaxError) as info:
        parse_expression(text)
    assert (str(info.value), info.value.offset) == (message, offset)


def test_template_offsets_point_into_the_string() -> None:
    with pytest.raises(ExpressionSyntaxError) as info:
        parse_template("Hi ${{ inputs. }}")
    assert info.value.offset == 15
    with pytest.raises(ExpressionSyntaxError, match="never closed"):
        parse_template("Hi ${{ inputs.x")


def test_eval_errors() -> None:
    with pytest.raises(ExpressionEvalError, match="unknown name 'input'"):
        evaluate(parse_expression("input.x"), SCOPE)
    with pytest.raises(ExpressionEvalError, match="cannot compare string with integer"):
        evaluate(parse_expression("'a' < 1"), SCOPE)
    with pytest.raises(ExpressionEvalError, match="cannot turn 'x' into a number"):
        evaluate(parse_expression("number('x')"), SCOPE)


def test_templates_keep_types_or_make_strings() -> None:
    assert render(parse_template("${{ inputs.n }}"), SCOPE) == 2
    assert render(parse_template("  ${{ inputs.tags }} "), SCOPE) == ["urgent", "billing"]
    assert render(parse_template("n=${{ inputs.n }}, ok=${{ true }}"), SCOPE) == "n=2, ok=true"
    assert render(parse_template("a }} b ${{ '}}' }}"), SCOPE) == "a }} b }}"
    assert render_value({"a": ["${{ inputs.n }}", "x"], "b": 1}, SCOPE) == {"a": [2, "x"], "b": 1}


def test_status_functions() -> None:
    node_ok = parse_expression("success()")
    node_fail = parse_expression("failure()")
    statuses = StepStatuses({"a": "success", "b": "failure"})
    assert evaluate(node_ok, SCOPE, statuses) is False
    assert evaluate(node_fail, SCOPE, statuses) is True
    assert evaluate(parse_expression("always()"), SCOPE, statuses) is True


def test_no_python_eval_escape() -> None:
    for hostile in ["__import__('os')", "inputs.__class__", "().__class__"]:
        try:
            value = evaluate(parse_expression(hostile), SCOPE)
        except (ExpressionSyntaxError, ExpressionEvalError):
            continue
        assert value is None, hostile


def test_references() -> None:
    node = parse_expression("steps.a.outputs.x == 'y' && contains(inputs['tags'], context.k)")
    assert [r.dotted for r in references(node)] == ["steps.a.outputs.x", "inputs.tags",
                                                    "context.k"]
