"""Fuzzing the three parsers: SKILL.md, group files and ``${{ }}`` expressions.

The inputs are not random text: they are built from the syntax the parsers read (YAML block and
flow collections, tags such as ``!!float`` and ``!!timestamp``, anchors and aliases, merge keys,
huge numbers, deep nesting, JSON Schema with ``$ref`` and ``pattern``, step graphs, expressions
with every operator and function), then sometimes damaged by a few edits. A loader must answer
every one with diagnostics, and an expression with a value or an :class:`ExpressionError`; any
other exception is a bug.

Here each target gets a short budget; ``bench/fuzz.py`` runs the same targets on 10,000 inputs
each and prints what escaped.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillgrove.groups.expressions import (
    StepStatuses,
    evaluate,
    parse_expression,
    parse_template,
    render,
)
from skillgrove.groups.loader import load_group_text
from skillgrove.groups.validate import validate_group
from skillgrove.skills.errors import SkillgroveError
from skillgrove.skills.loader import discover_skills, load_skill

FIXTURE_LIBRARY = Path(__file__).resolve().parent / "fixtures" / "library"

# -- pieces of YAML --------------------------------------------------------------------------------

TAGS = ("!!float", "!!int", "!!timestamp", "!!binary", "!!str", "!!bool", "!!null", "!!set",
        "!!omap", "!!seq", "!!map", "!!merge", "!local", "!!python/object/apply:os.system",
        "!!python/name:os.system", "!<tag:yaml.org,2002:int>")
SPECIAL_SCALARS = (
    "~", "null", "yes", "no", "on", "off", "true", "False", ".inf", "-.inf", ".nan", ".NaN",
    "1e400", "-1e400", "0x", "0x1F", "0o17", "0b101", "1_000", "1:20", "2024-02-30",
    "2020-13-01", "2024-02-28", "2020-01-01T25:00:00", "2001-12-14t21:59:43.10-05:00", "abc",
    "''", '""', "'it''s'", '"\\u00e9\\x41\\t"', '"\\ud800"', "'a: b'", "a: b", "- x", "#c",
    "|", ">", "|-\n  text", "@x", "`x`", "%x", "? x", "<<", "=", "\t", "\x07", "\x00", "é",
    "\u2028", "\ufeff", "${{ inputs.x }}", "${{ steps.s0.outputs.text }}", "${{", "}}",
    "${{ (((( }}", "30s", "500ms", "2m", "1h", "999999h", "-5", "0", "0.0", "10e9",
)
KEYS = ("name", "description", "inputs", "outputs", "entrypoint", "requires", "tags",
        "version", "enabled", "depends_on", "effects", "metadata", "license", "allowed-tools",
        "compatibility", "x", "<<", "? [a]", "'quoted key'", "1", "null", "true", "2024-01-01")
ANCHORS = ("a", "b", "c")


class Raw(str):
    """YAML text to put in a document as it is (not quoted)."""


def _render_flow(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_render_flow(k)}: {_render_flow(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_render_flow(v) for v in value) + "]"
    return json.dumps(value)


scalars = st.one_of(
    st.sampled_from(SPECIAL_SCALARS),
    st.integers(-10**30, 10**30).map(str),
    st.integers(1, 6000).map(lambda n: "9" * n),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
    st.text(alphabet="ab:-[]{}&*!|>'\"#,? \t\n%@`\\", max_size=12),
    st.tuples(st.sampled_from(TAGS), st.sampled_from(SPECIAL_SCALARS)).map(" ".join),
).map(Raw)

flow_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: Raw("[" + ", ".join(xs) + "]")),
        st.lists(st.tuples(st.sampled_from(KEYS), inner), max_size=4).map(
            lambda kv: Raw("{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}")),
        st.tuples(st.sampled_from(ANCHORS), inner).map(lambda t: Raw(f"&{t[0]} {t[1]}")),
        st.sampled_from(ANCHORS).map(lambda a: Raw(f"*{a}")),
        st.tuples(st.sampled_from(TAGS), inner).map(lambda t: Raw(f"{t[0]} {t[1]}")),
        st.tuples(st.integers(1, 1200), inner).map(
            lambda t: Raw("[" * t[0] + t[1] + "]" * t[0])),
        st.lists(st.sampled_from(ANCHORS), min_size=1, max_size=9).map(
            lambda names: Raw("[" + ", ".join(f"*{n}" for n in names) + "]")),
    ),
    max_leaves=10,
)


def _alias_bomb(levels: int) -> str:
    text = 'b0: &b0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    for i in range(1, levels):
        text += f"b{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 9) + "]\n"
    return text


# A block value: flow text, or a nested block mapping or list, rendered with indentation.
block_values = st.recursive(
    flow_values.map(lambda v: ("flow", v)),
    lambda inner: st.one_of(
        st.lists(st.tuples(st.sampled_from(KEYS), inner), max_size=4).map(lambda kv: ("map", kv)),
        st.lists(inner, max_size=4).map(lambda xs: ("seq", xs)),
        st.tuples(st.sampled_from(ANCHORS), inner).map(lambda t: ("anchor", t)),
    ),
    max_leaves=12,
)


def render_block(value: Any, indent: int) -> str:
    kind, body = value
    pad = " " * indent
    if kind == "flow":
        return " " + body + "\n"
    if kind == "anchor":
        name, inner = body
        return f" &{name}" + render_block(inner, indent)
    if kind == "map":
        if not body:
            return " {}\n"
        return "\n" + "".join(f"{pad}{key}:{render_block(item, indent + 2)}" for key, item in body)
    if not body:
        return " []\n"
    return "\n" + "".join(f"{pad}-{render_block(item, indent + 2)}" for item in body)


edits = st.lists(st.tuples(st.floats(0, 1), st.sampled_from(("insert", "delete", "cut")),
                           st.sampled_from(list(":-[]{}&*!|>'\"#\t\n %@`\\\x00é"))),
                 max_size=3)


def damaged(text: str, changes: list[tuple[float, str, str]]) -> str:
    for where, how, char in changes:
        at = int(where * len(text))
        if how == "insert":
            text = text[:at] + char + text[at:]
        elif how == "delete":
            text = text[:at] + text[at + 1:]
        else:
            text = text[:at]
    return text


# -- JSON Schema, as skills write it ----------------------------------------------------------

PATTERNS = ("^(a+)+$", "(a|aa)*", "^[a-z0-9-]+$", "(", "a{2,}", "\\d+", "[", "(?P<x>a)(?P=x)")
schema_leaves = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "number", "boolean",
                                                    "array", "object", "nope"])}),
    st.fixed_dictionaries({"type": st.just("string"), "pattern": st.sampled_from(PATTERNS)},
                          optional={"default": st.one_of(st.text(alphabet="ab!", max_size=60),
                                                         st.integers())}),
    st.fixed_dictionaries({"$ref": st.sampled_from(["#", "#/properties/a", "#/$defs/d",
                                                    "#/nope", "http://127.0.0.1:9/x", "#/a~1b",
                                                    "https://json-schema.org/draft/2020-12/schema",
                                                    "#/%25"])},
                          optional={"default": st.one_of(st.integers(), st.text(max_size=5))}),
    st.just({"type": "array", "uniqueItems": True, "default": [{} for _ in range(50)]}),
)
schemas = st.recursive(
    schema_leaves,
    lambda inner: st.one_of(
        st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3).map(
            lambda props: {"type": "object", "properties": props}),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: {"allOf": xs}),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: {"anyOf": xs}),
        inner.map(lambda x: {"not": x}),
        inner.map(lambda x: {"type": "array", "items": x}),
        inner.map(lambda x: {"$defs": {"d": x}, "$ref": "#/$defs/d"}),
    ),
    max_leaves=8,
)

entrypoints = st.one_of(
    st.just(Raw("{python: run.py:main}")),
    st.sampled_from(["1", ".inf", "-1", "1e400", "10e9", "0", "'30'", "99999999999999999999"]).map(
        lambda t: Raw("{python: run.py:main, timeout: " + t + "}")),
    st.just(Raw("{command: [sh, -c, 'touch EXECUTED']}")),
    st.just(Raw("{http: 'http://127.0.0.1:9/'}")),
    flow_values,
)


@st.composite
def skill_documents(draw: st.DrawFn) -> str:
    """A SKILL.md: frontmatter fields biased to the ones the loader reads, then a body."""
    fields: list[tuple[str, str]] = [("name", "fuzz"), ("description", "A fuzzed skill.")]
    if draw(st.booleans()):
        fields.append(("inputs", _render_flow(draw(schemas))))
    if draw(st.booleans()):
        fields.append(("outputs", _render_flow(draw(schemas))))
    if draw(st.booleans()):
        fields.append(("entrypoint", draw(entrypoints)))
    text = "".join(f"{key}: {value}\n" for key, value in fields)
    if draw(st.booleans()):
        text += "".join(f"{key}:{render_block(value, 2)}" for key, value in
                        draw(st.lists(st.tuples(st.sampled_from(KEYS), block_values),
                                      max_size=4)))
    if draw(st.integers(0, 9)) == 0:
        text = _alias_bomb(draw(st.integers(2, 9))) + text
    fence = draw(st.sampled_from(["---\n", "---\n", "---\n", "\ufeff---\n", "--- \n", ""]))
    end = draw(st.sampled_from(["---\n", "---\n", "...\n", ""]))
    return damaged(fence + text + end + "# Body\n\nDo the thing.\n", draw(edits))


# -- group files --------------------------------------------------------------------------------

STEP_IDS = ("s0", "s1", "s2", "s3")
SKILL_NAMES = ("summarize-text", "pdf-to-text", "extract-metrics", "send-email", "nope")


@st.composite
def expressions(draw: st.DrawFn) -> str:
    return draw(expression_text)


atoms = st.one_of(
    st.sampled_from(["'text'", "'it''s'", '"\\u00e9"', '"\\ud800"', "\"bad \\q\"", "42", "-1",
                     "3.5", "1e999", "1e-999", "true", "false", "null", "inputs.x", "inputs.n",
                     "inputs.l", "inputs.d", "context.name", "context['team-email']",
                     "steps.s0.outputs.text", "steps.s0.status", "steps.nope.outputs.x",
                     "inputs", "steps", "nothing", "'" + "a" * 100 + "'"]),
    st.integers(1, 5000).map(lambda n: "9" * n),
    st.text(alphabet="abc.'\"[](),!=<>&|+-_ 0123456789${}", max_size=10),
)
OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "&&", "||", "+", "-", "and", "or")
FUNCTION_NAMES = ("contains", "startsWith", "endsWith", "lower", "upper", "trim", "length",
                  "join", "format", "toJSON", "fromJSON", "default", "string", "number",
                  "always", "success", "failure", "nope")
expression_text = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(OPERATORS), inner).map(" ".join),
        st.tuples(st.sampled_from(["!", "-", "not "]), inner).map("".join),
        inner.map(lambda e: f"({e})"),
        st.tuples(st.sampled_from(FUNCTION_NAMES), st.lists(inner, max_size=3)).map(
            lambda t: f"{t[0]}({', '.join(t[1])})"),
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(inner, st.sampled_from(["x", "outputs", "0", "length"])).map(".".join),
        st.tuples(st.integers(1, 400), inner).map(lambda t: "(" * t[0] + t[1] + ")" * t[0]),
        st.tuples(st.integers(1, 400), inner).map(lambda t: "!" * t[0] + t[1]),
        st.tuples(st.integers(2, 12), inner).map(
            lambda t: "format('{0}{0}{0}{0}', " * t[0] + t[1] + ")" * t[0]),
    ),
    max_leaves=10,
)
templates = st.tuples(st.sampled_from(["", "text ", "${{ ", "}} "]), expression_text,
                      st.sampled_from([" }}", " }} and ${{ inputs.x }}", "", " }"])).map(
    lambda t: t[0] + "${{ " + t[1] + t[2])


@st.composite
def group_documents(draw: st.DrawFn) -> str:
    """A group file: a few steps over a small set of ids (so needs form chains and cycles),
    with ``with``, ``if``, ``retry`` and ``timeout`` values from the pools above."""
    lines = [f"id: {draw(st.sampled_from(['fuzz', 'fuzz', '', 'bad id', '[x]', '1']))}",
             "description: A fuzzed group.", "examples: [x]"]
    if draw(st.booleans()):
        lines.append("inputs:")
        for name in draw(st.lists(st.sampled_from(["x", "n", "l", "d"]), max_size=3)):
            kind = draw(st.sampled_from(["string", "integer", "array", "object", "nope"]))
            lines.append(f"  {name}: {{type: {kind}, default: {draw(flow_values)}}}")
    lines.append("steps:")
    for _ in range(draw(st.integers(0, 5))):
        lines.append(f"  - id: {draw(st.sampled_from(STEP_IDS))}")
        lines.append(f"    skill: {draw(st.sampled_from(SKILL_NAMES))}")
        needs = draw(st.lists(st.sampled_from(STEP_IDS), max_size=3))
        if needs:
            lines.append(f"    needs: [{', '.join(needs)}]")
        if draw(st.booleans()):
            lines.append(f"    with: {{text: {json.dumps(draw(templates))}, "
                         f"max_sentences: {draw(flow_values)}}}")
        if draw(st.booleans()):
            lines.append(f"    if: {json.dumps(draw(expression_text))}")
        if draw(st.integers(0, 3)) == 0:
            lines.append(f"    timeout: {draw(st.sampled_from(SPECIAL_SCALARS))}")
        if draw(st.integers(0, 3)) == 0:
            lines.append("    retry: {max_attempts: " + draw(st.sampled_from(
                ["3", "0", "1000000", ".inf"])) + ", backoff_factor: " + draw(st.sampled_from(
                ["2", "1e300", ".nan", "-1"])) + ", max_interval: " + draw(st.sampled_from(
                ["1m", ".inf", "1e400", "'soon'"])) + "}")
    if draw(st.booleans()):
        lines.append("outputs:")
        lines.append(f"  out: {json.dumps(draw(templates))}")
    text = "\n".join(lines) + "\n"
    if draw(st.booleans()):
        text += "".join(f"{key}:{render_block(value, 2)}" for key, value in
                        draw(st.lists(st.tuples(st.sampled_from(KEYS), block_values),
                                      max_size=3)))
    if draw(st.integers(0, 9)) == 0:
        text = _alias_bomb(draw(st.integers(2, 9))) + text
    return damaged(text, draw(edits))


# -- the targets ------------------------------------------------------------------------------------

class SkillTarget:
    """Loads a SKILL.md from one scratch folder (with a ``run.py`` beside it)."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="skillgrove-fuzz-")
        self.root = Path(self._tmp.name)
        self.folder = self.root / "fuzz"
        self.folder.mkdir()
        (self.folder / "run.py").write_text("def main(**inputs):\n    return {}\n")

    def __call__(self, text: str) -> None:
        path = self.folder / "SKILL.md"
        path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
        load_skill(path, self.root)
        assert not (self.folder / "EXECUTED").exists()


_CATALOG = discover_skills([FIXTURE_LIBRARY])


def group_target(text: str) -> None:
    load = load_group_text(text, Path("fuzz.yaml"))
    if load.group is not None:
        validate_group(load.group, _CATALOG.active, {load.group.id: load.group}, text)


SCOPE = {
    "inputs": {"x": "text", "n": 3, "l": [1, "a", None], "d": {"a": {"b": [1, 2]}}},
    "context": {"name": "Q3", "team-email": "a@b.c"},
    "steps": {"s0": {"outputs": {"text": "out", "n": 2.5}, "status": "success"}},
}


def expression_target(text: str) -> None:
    statuses = StepStatuses({"s0": "success"})
    try:
        node = parse_expression(text)
    except SkillgroveError:
        pass
    else:
        with contextlib.suppress(SkillgroveError):
            evaluate(node, SCOPE, statuses)
    with contextlib.suppress(SkillgroveError):
        render(parse_template(f"a ${{{{ {text} }}}} b"), SCOPE, statuses)


TARGETS: dict[str, tuple[st.SearchStrategy[str], Callable[[], Callable[[str], None]]]] = {
    "SKILL.md": (skill_documents(), SkillTarget),
    "group file": (group_documents(), lambda: group_target),
    "expression": (st.one_of(expression_text, templates), lambda: expression_target),
}
"""Each fuzz target: the inputs it takes, and a factory for the function that must not raise
anything but a :class:`SkillgroveError` (the loaders must not raise at all)."""

FUZZ_SETTINGS = settings(
    max_examples=200, deadline=None, database=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)


_skill_target = SkillTarget()


@FUZZ_SETTINGS
@given(skill_documents())
def test_fuzz_skill_md(text: str) -> None:
    _skill_target(text)


@FUZZ_SETTINGS
@given(group_documents())
def test_fuzz_group_file(text: str) -> None:
    group_target(text)


@FUZZ_SETTINGS
@given(st.one_of(expression_text, templates))
def test_fuzz_expressions(text: str) -> None:
    expression_target(text)
