"""Hostile ``${{ }}`` text and values: every failure is an ExpressionError with its position.

The table lists what issue #14 measured (each used to raise JSONDecodeError, ValueError,
RecursionError or TypeError, or to allocate gigabytes) and the error each gives now; the
property at the end feeds the parser and the evaluator generated expressions over values meant
to break them.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillgrove.groups.expressions import evaluate, parse_expression, parse_template, render
from skillgrove.skills.errors import ExpressionError, ExpressionEvalError, ExpressionSyntaxError


def _deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


_LOOP: list[Any] = []
_LOOP.extend([_LOOP] * 1000)

SCOPE: dict[str, Any] = {
    "inputs": {
        "s": "xyz", "n": 3, "f": 2.5, "l": [1, 2], "d": {"a": 1}, "empty": "",
        "digits": "7" * 5000, "long": "ab" * 50_000, "many": list(range(600_000)),
        "big": 10**5000, "nan": float("nan"), "inf": float("inf"),
        "deep": _deep(5000), "deep2": _deep(5000), "loop": _LOOP,
        "mixed_keys": {1: "a", "b": 2}, "tuple": (1, 2), "set": {1, 2},
    },
    "context": {"name": "Q3"},
    "steps": {"a": {"outputs": {"x": "y"}, "status": "success"}},
}

TOO_DEEP = "expression nests deeper than 64 levels (EXPRESSION_MAX_DEPTH)"
TEN = "'{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}'"


def _nested(function: str, times: int, core: str, extra: str = "") -> str:
    text = core
    for _ in range(times):
        text = f"{function}({extra}{text})"
    return text


# text, the error's class, its message, its offset in the text
SYNTAX = [
    ('"\\x41"', "invalid escape '\\x' in a string (write \\\\ for a backslash)", 1),
    ('"ok \\q"', "invalid escape '\\q' in a string (write \\\\ for a backslash)", 4),
    ('"\\u12"', "invalid escape '\\u12' in a string (\\u takes four hex digits)", 1),
    ('"\\ud800"', "invalid escape: half of a surrogate pair", 1),
    ('"\\ud800\\u0041"', "invalid escape: half of a surrogate pair", 1),
    ("'never closed", "string is never closed", 0),
    ('1 + "never closed', "string is never closed", 4),
    ("1" * 5000, "number is longer than 1,000 characters (EXPRESSION_MAX_NUMBER_CHARS)", 0),
    ("1e999", "number is too large", 0),
    ("x" * 20_001, "expression is longer than 20,000 characters (EXPRESSION_MAX_CHARS)", 20_000),
    ("(" * 330 + "1" + ")" * 330, TOO_DEEP, 64),
    ("[" * 100 + "]" * 100, TOO_DEEP, 64),
    ("!" * 100 + "true", TOO_DEEP, 64),
    ("-" * 100 + "1", TOO_DEEP, 64),
    ("f(" * 100 + ")" * 100, TOO_DEEP, 129),
    ("+".join(["1"] * 499), TOO_DEEP, 127),  # the operator that makes it 65 deep
    ("x" + ".y" * 100, TOO_DEEP, 128),
    ("x" + "[0]" * 100, TOO_DEEP, 190),
]


@pytest.mark.parametrize(("text", "message", "offset"), SYNTAX,
                         ids=[s[0][:24] for s in SYNTAX])
def test_hostile_syntax_is_a_syntax_error_with_its_offset(text: str, message: str,
                                                         offset: int) -> None:
    with pytest.raises(ExpressionSyntaxError) as info:
        parse_expression(text)
    assert (str(info.value), info.value.offset) == (message, offset)


def test_the_depth_limit_is_inclusive() -> None:
    assert evaluate(parse_expression("+".join(["1"] * 64)), SCOPE) == 64
    assert evaluate(parse_expression("(" * 63 + "1" + ")" * 63), SCOPE) == 1
    with pytest.raises(ExpressionSyntaxError, match="EXPRESSION_MAX_DEPTH"):
        parse_expression("+".join(["1"] * 65))


EVALUATION = [
    ("inputs.d[inputs.l]",
     "inputs.d[inputs.l]: an array cannot be the key of an object; use a string", 8),
    ("inputs.d[inputs.set]",
     "inputs.d[inputs.set]: an object cannot be the key of an object; use a string", 8),
    ("inputs.s < 1", "inputs.s < 1: cannot compare string with integer using '<'", 9),
    ("number(inputs.s)", "number(inputs.s): cannot turn 'xyz' into a number", 0),
    ("number(inputs.digits)", "number(inputs.digits): cannot turn "
     "'7777777777777777777777777777777777777777...' into a number", 0),
    ("inputs.big + 0.5", "inputs.big + 0.5: the sum is too large for a number", 11),
    ("fromJSON(inputs.digits)", "fromJSON(inputs.digits): fromJSON: a number is written with "
     "5,000 characters, more than 1,000 (JSON_MAX_NUMBER_CHARS)", 0),
    ("fromJSON('" + "[" * 100 + "]" * 100 + "')",
     "fromJSON('" + "[" * 47 + "...: fromJSON: arrays and objects are nested deeper than 64 "
     "levels (JSON_MAX_DEPTH)", 0),
    ("fromJSON('[1, 2')", "fromJSON('[1, 2'): fromJSON: not JSON: Expecting ',' delimiter "
     "(at char 5)", 0),
    ("inputs.many + inputs.many", "inputs.many + inputs.many: the list would hold more than "
     "1,000,000 items (EXPRESSION_MAX_ITEMS)", 12),
    ("toJSON(inputs.loop)", "toJSON(inputs.loop): toJSON(): the value holds more than "
     "1,000,000 values (EXPRESSION_MAX_ITEMS)", 0),
    ("toJSON(inputs.deep)",
     "toJSON(inputs.deep): toJSON(): the value is nested too deeply to write as JSON", 0),
    ("inputs.deep == inputs.deep2",
     "inputs.deep == inputs.deep2: the values are nested too deeply to compare", 12),
    ("toJSON(inputs.mixed_keys)", "toJSON(inputs.mixed_keys): toJSON(): cannot write the value "
     "as JSON: '<' not supported between instances of 'str' and 'int'", 0),
    ("format('{99}', 1)", "format('{99}', 1): format() has no argument {99}", 0),
    ("format('{" + "9" * 5000 + "}')", "format('{" + "9" * 48 + "...: format() has no "
     "argument {9999999999...}", 0),
    ("join(inputs.many, inputs.long)", "join(inputs.many, inputs.long): join() would be longer "
     "than 16,777,216 characters (EXPRESSION_MAX_RESULT_CHARS)", 0),
    (_nested("format", 9, "'x'", TEN + ", "), "format(" + TEN + ", format('{0}{0}{0...: "
     "format() would be longer than 16,777,216 characters (EXPRESSION_MAX_RESULT_CHARS)", 41),
    (_nested("toJSON", 40, "'x'"), "toJSON(toJSON(toJSON(toJSON(toJSON(toJSON(toJSON(toJSON("
     "t...: toJSON() would be longer than 16,777,216 characters (EXPRESSION_MAX_RESULT_CHARS)",
     112),
    ("input.x", "unknown name 'input'; use one of context, inputs, steps", 0),
    ("nosuch(1)", "unknown function 'nosuch'", 0),
]


@pytest.mark.parametrize(("text", "message", "offset"), EVALUATION,
                         ids=[e[0][:24] for e in EVALUATION])
def test_hostile_values_are_an_eval_error_naming_the_part(text: str, message: str,
                                                          offset: int) -> None:
    with pytest.raises(ExpressionEvalError) as info:
        evaluate(parse_expression(text), SCOPE)
    assert (str(info.value), info.value.offset) == (message, offset)


def test_a_huge_integer_cannot_be_written_as_text() -> None:
    with pytest.raises(ExpressionEvalError) as info:
        evaluate(parse_expression("'n = ' + inputs.big"), SCOPE)
    assert str(info.value).startswith("'n = ' + inputs.big: cannot write the value as text: "
                                      "Exceeds the limit (4300 digits)")
    assert info.value.offset == 7


def test_render_moves_the_offset_into_the_template() -> None:
    with pytest.raises(ExpressionEvalError) as info:
        render(parse_template("Hi ${{ inputs.d[inputs.l] }}!"), SCOPE)
    assert info.value.offset == len("Hi ${{ inputs.d")
    with pytest.raises(ExpressionSyntaxError) as syntax:
        parse_template('x ${{ "\\q" }}')
    assert syntax.value.offset == len('x ${{ "')
    text = "${{ inputs.long }}" * 200
    with pytest.raises(ExpressionEvalError, match="EXPRESSION_MAX_RESULT_CHARS"):
        render(parse_template("a " + text), SCOPE)


STRINGS = [
    ('"tab\\t"', "tab\t"),
    ('"\\u00e9t\\u00E9"', "été"),
    ('"\\ud83d\\ude00"', "😀"),
    ('"a\\"b"', 'a"b'),
    ('"\\\\"', "\\"),
    ('"\\/\\b\\f\\n\\r"', "/\b\f\n\r"),
    ("'\\x41'", "\\x41"),  # single quotes have no escapes
    ('"two\nlines"', "two\nlines"),
]


@pytest.mark.parametrize(("text", "value"), STRINGS, ids=[s[0] for s in STRINGS])
def test_escapes_are_decoded_as_json_does(text: str, value: str) -> None:
    assert evaluate(parse_expression(text), SCOPE) == value


def test_an_escaped_quote_does_not_end_a_template_expression() -> None:
    assert render(parse_template('${{ "a\\"}}" }}'), SCOPE) == 'a"}}'


def test_values_near_the_limits_still_work() -> None:
    assert evaluate(parse_expression("length(inputs.long + inputs.long)"), SCOPE) == 200_000
    assert evaluate(parse_expression("length(toJSON(inputs.many))"), SCOPE) == len(
        json.dumps(list(range(600_000))))
    assert evaluate(parse_expression("format('{{{0}}}', 'x')"), SCOPE) == "{x}"
    assert evaluate(parse_expression("1" * 1000), SCOPE) == int("1" * 1000)
    assert evaluate(parse_expression("toJSON(inputs.tuple)"), SCOPE) == "[1, 2]"


@given(st.text(max_size=40))
@settings(max_examples=100, deadline=None, database=None)
def test_a_json_string_literal_reads_back_as_itself(text: str) -> None:
    assert evaluate(parse_expression(json.dumps(text)), SCOPE) == text
    assert evaluate(parse_expression(json.dumps(text, ensure_ascii=False)), SCOPE) == text


# ------------------------------------------------------------------------------------ property

_ATOMS = st.sampled_from([
    *(f"inputs.{name}" for name in SCOPE["inputs"]), "context.name", "context.missing",
    "steps.a.outputs.x", "steps.a.status", "steps", "inputs", "null", "true", "false", "0",
    "-1.5", "1e308", "'x'", "''", '"\\u00e9"', "[]", "[1, 'a']", TEN, "'{0}{1}{'", "'[[[1]]]'",
    "'{\"a\": [1, {\"b\": null}]}'", "'" + "[" * 70 + "'", "always()", "success()",
])
_OPERATORS = ["+", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "and", "or"]
_FUNCTIONS = ["contains", "startsWith", "endsWith", "lower", "upper", "trim", "length", "join",
              "format", "toJSON", "fromJSON", "default", "string", "number", "failure", "nosuch"]


def _grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(_OPERATORS), inner).map(" ".join),
        st.tuples(st.sampled_from(_FUNCTIONS), st.lists(inner, max_size=4)).map(
            lambda t: f"{t[0]}({', '.join(t[1])})"),
        st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(inner, st.sampled_from(["a", "outputs", "x", "status", "__class__"])).map(
            lambda t: f"{t[0]}.{t[1]}"),
        inner.map(lambda x: f"({x})"),
        inner.map(lambda x: f"!{x}"),
        inner.map(lambda x: f"-{x}"),
        st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        inner.map(lambda x: f"format({TEN}, {x})"),
    )


_EXPRESSIONS = st.recursive(_ATOMS, _grow, max_leaves=24)
def _wrapped(opener: str, times: int, atom: str) -> str:
    closer = {"(": ")", "[": "]", "!": "", "-": ""}.get(opener, ")")
    return opener * times + atom + closer * times


def _chained(atom: str, joiner: str, times: int) -> str:
    if joiner.strip() in ("+", "&&"):
        return joiner.join([atom] * times)
    return atom + joiner * times


_REPEATED = st.tuples(st.sampled_from(["(", "[", "!", "-", "toJSON(", "format('{0}{0}', "]),
                      st.integers(1, 400), _ATOMS).map(lambda t: _wrapped(*t))
_CHAINED = st.tuples(_ATOMS, st.sampled_from([" + ", " && ", ".a", "[0]"]),
                     st.integers(1, 600)).map(lambda t: _chained(*t))


@st.composite
def _mutated(draw: st.DrawFn) -> str:
    """A generated expression with a few characters inserted or deleted."""
    text = draw(_EXPRESSIONS)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()) and text:
            text = text[:at] + text[at + 1:]
        else:
            text = text[:at] + draw(st.sampled_from(list("()[]{}'\"\\.,!+-=<>&|$ 9e"))) + text[at:]
    return text


_HOSTILE = st.one_of(_EXPRESSIONS, _REPEATED, _CHAINED, _mutated(), st.text(max_size=60))


@given(_HOSTILE)
@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_parsing_and_evaluating_raise_nothing_but_expression_errors(text: str) -> None:
    try:
        node = parse_expression(text)
    except ExpressionSyntaxError as exc:
        assert 0 <= exc.offset <= len(text), (text, exc.offset)
        return
    try:
        evaluate(node, SCOPE)
    except ExpressionEvalError as exc:
        assert exc.offset is not None and 0 <= exc.offset <= len(text), (text, exc.offset)
    with contextlib.suppress(ExpressionError):
        render(parse_template("v=${{ " + text + " }}"), SCOPE)


# --------------------------------------------- what one evaluation, and one step, build together

_X16 = "format('" + "{0}" * 16 + "',"
# 16**5 * 16 = 16 Mi characters: just under EXPRESSION_MAX_RESULT_CHARS, each on its own.
_BIG_FORMAT = _X16 * 5 + "'abcdefghijklmnop'" + ")" * 5
_MID_FORMAT = _X16 * 4 + "'abcdefghijklmnop'" + ")" * 4  # 1 Mi characters
_BIG_UPPER = "upper(lower(" + _BIG_FORMAT + "))"

# Each builds many values that are each within the per-string and per-list caps; together they
# would take gigabytes. Several spellings: a list literal, '+' of texts, nested lists, toJSON of
# a list, text around the expressions of one template.
BUDGET_CASES = [
    ("${{ [" + ",".join([_BIG_FORMAT] * 60) + "] }}", "EXPRESSION_MAX_EVALUATION_BYTES"),
    ("${{ [[" + _BIG_FORMAT + "," + _BIG_FORMAT + "],[" + _BIG_FORMAT + "," + _BIG_FORMAT
     + "]] }}", "EXPRESSION_MAX_EVALUATION_BYTES"),
    ("${{ length(" + " + ".join([_BIG_FORMAT] * 2) + ") }}", "EXPRESSION_MAX_RESULT_CHARS"),
    ("${{ [" + ",".join(["toJSON([" + _MID_FORMAT + "])"] * 60) + "] }}",
     "EXPRESSION_MAX_EVALUATION_BYTES"),
    ("x ${{ " + _BIG_FORMAT + " }} ${{ " + _BIG_FORMAT + " }} ${{ " + _BIG_FORMAT + " }} "
     "${{ " + _BIG_FORMAT + " }}", "EXPRESSION_MAX_"),
    ("${{ [" + ",".join([_BIG_UPPER] * 8) + "] }}", "EXPRESSION_MAX_EVALUATION_BYTES"),
]


@pytest.mark.parametrize(("text", "limit"), BUDGET_CASES,
                         ids=["list-of-60", "nested-lists", "plus", "tojson", "template-text",
                              "upper-lower"])
def test_what_one_evaluation_builds_is_bounded_in_total(text: str, limit: str) -> None:
    with pytest.raises(ExpressionEvalError, match=limit):
        render(parse_template(text), {})


@pytest.mark.parametrize("values", [200, 40])
def test_what_one_step_builds_is_bounded_in_total(values: int) -> None:
    from skillgrove.groups.expressions import render_value

    one = "${{ " + _BIG_FORMAT + " }}"
    with pytest.raises(ExpressionEvalError, match="EXPRESSION_MAX_STEP_BYTES"):
        render_value({"nested": [{f"k{i}": one} for i in range(values)]}, {})


def test_lists_built_from_a_callers_list_hit_the_entry_budgets() -> None:
    from skillgrove.groups.expressions import render_value

    scope = {"inputs": {"l": list(range(300_000))}}
    doubled = "inputs.l + inputs.l + inputs.l"  # builds 1.5 million entries, each list < 1M
    with pytest.raises(ExpressionEvalError, match="EXPRESSION_MAX_EVALUATION_ITEMS"):
        render(parse_template("${{ [" + ", ".join([doubled] * 3) + "] }}"), scope)
    with pytest.raises(ExpressionEvalError, match="EXPRESSION_MAX_STEP_ITEMS"):
        render_value(["${{ " + doubled + " }}"] * 5, scope)


def test_a_step_budget_in_use_still_renders_ordinary_values() -> None:
    from skillgrove.groups.expressions import render_value

    rendered = render_value({"a": "${{ format('{0}-{1}', inputs.x, 2) }}", "b": ["${{ 1 + 1 }}"]},
                            {"inputs": {"x": "q"}})
    assert rendered == {"a": "q-2", "b": [2]}


def test_a_plan_of_such_a_step_stays_small_in_memory(tmp_path: Any) -> None:
    # The shape: 'plan' of a group whose step has 200 such values peaked at gigabytes
    # and ended in a MemoryError traceback; now the step's budget runs out after a few of them.
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(r"""
        import sys
        from pathlib import Path
        from skillgrove.groups import load_group_text
        from skillgrove.runtime.runner import Runner
        from skillgrove.skills.errors import ExpressionError
        value = "${{ " + sys.argv[1] + " }}"
        withs = "".join(f"      v{i}: \"{value}\"\n" for i in range(200))
        text = ("id: g\ndescription: d\nexamples: [e]\nsteps:\n  - id: s\n    skill: x\n"
                "    with:\n" + withs)
        load = load_group_text(text, Path("g.yaml"))
        assert load.group is not None, [d.format() for d in load.diagnostics]
        try:
            Runner({"g": load.group}, {}, None).plan("g")
            print("planned")
        except ExpressionError as exc:
            print("refused", "EXPRESSION_MAX_STEP_BYTES" in str(exc))
        # VmHWM, the peak of this process's own memory: ru_maxrss would also count the
        # parent's peak at the fork (a pytest process that loaded a model: gigabytes).
        hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
        print(int(hwm.split()[1]) // 1024)
    """)
    done = subprocess.run([sys.executable, "-c", script, _BIG_FORMAT], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    verdict, peak_mb = done.stdout.split("\n")[:2]
    # A preview leaves a value it cannot render as written; either way, memory stays bounded.
    assert verdict in ("refused True", "planned"), done.stdout
    assert int(peak_mb) < 600, f"peak {peak_mb} MB"
