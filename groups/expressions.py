"""``${{ ... }}`` expressions: a small, safe language of our own (never ``eval``).

Values come from three roots: ``inputs`` (the group's inputs), ``context`` (the caller's execution
context) and ``steps.<id>.outputs.<name>`` (``output`` is accepted too, and ``steps.<id>.status``
is ``success``, ``failure`` or ``skipped``).

Syntax, close to GitHub Actions::

    literals      'text'  "text"  42  3.5  true  false  null  [1, 'a']
    access        inputs.pdf_path   steps.extract.outputs.text   context['team-email']   xs[0]
    operators     ==  !=  <  <=  >  >=   &&  ||  !   (and, or, not also work)   +  (add / concat)
    functions     contains(a, b)  startsWith(a, b)  endsWith(a, b)  lower(s)  upper(s)  trim(s)
                  length(x)  join(list, sep)  format('{0} and {1}', a, b)  toJSON(x)  fromJSON(s)
                  default(x, fallback)  string(x)  number(x)
                  always()  success()  failure()   (only in a step's ``if``)

A string that is exactly one ``${{ }}`` yields the value itself (a number stays a number); text
around or between expressions makes the result a string. A missing property yields ``null``.

>>> render(parse_template("Report: ${{ context.name }}"), {"context": {"name": "Q3"}})
'Report: Q3'
>>> render(parse_template("${{ inputs.n + 1 }}"), {"inputs": {"n": 2}})
3
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillgrove.skills.errors import ExpressionEvalError, ExpressionSyntaxError

ROOTS = ("inputs", "context", "steps")
STATUS_FUNCTIONS = ("always", "success", "failure")

# --------------------------------------------------------------------------------------- tokens


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # num, str, name, op, end
    value: Any
    offset: int


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<str>'(?:[^']|'')*'|"(?:[^"\\]|\\.)*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!+\-.,()\[\]])
    """,
    re.VERBOSE,
)
_WORD_OPS = {"and": "&&", "or": "||", "not": "!"}


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            raise ExpressionSyntaxError(f"unexpected character {text[pos]!r}", pos)
        kind = match.lastgroup or ""
        raw = match.group()
        if kind == "num":
            tokens.append(Token("num", float(raw) if re.search(r"[.eE]", raw) else int(raw), pos))
        elif kind == "str":
            value = raw[1:-1].replace("''", "'") if raw[0] == "'" else json.loads(raw)
            tokens.append(Token("str", value, pos))
        elif kind == "name":
            if raw in _WORD_OPS:
                tokens.append(Token("op", _WORD_OPS[raw], pos))
            else:
                tokens.append(Token("name", raw, pos))
        elif kind == "op":
            tokens.append(Token("op", raw, pos))
        pos = match.end()
    tokens.append(Token("end", None, len(text)))
    return tokens


# ------------------------------------------------------------------------------------------ AST


@dataclass(frozen=True, slots=True)
class Lit:
    value: Any
    offset: int


@dataclass(frozen=True, slots=True)
class ListLit:
    items: tuple[Node, ...]
    offset: int


@dataclass(frozen=True, slots=True)
class Name:
    name: str
    offset: int


@dataclass(frozen=True, slots=True)
class Attr:
    obj: Node
    name: str
    offset: int


@dataclass(frozen=True, slots=True)
class Index:
    obj: Node
    key: Node
    offset: int


@dataclass(frozen=True, slots=True)
class Call:
    func: str
    args: tuple[Node, ...]
    offset: int


@dataclass(frozen=True, slots=True)
class Unary:
    op: str
    operand: Node
    offset: int


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    left: Node
    right: Node
    offset: int


Node = Lit | ListLit | Name | Attr | Index | Call | Unary | Binary

_BINARY_PRECEDENCE = {
    "||": 1,
    "&&": 2,
    "==": 3, "!=": 3,
    "<": 4, "<=": 4, ">": 4, ">=": 4,
    "+": 5,
}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    def peek(self) -> Token:
        return self.tokens[self.i]

    def take(self) -> Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def expect(self, op: str) -> Token:
        token = self.take()
        if token.kind != "op" or token.value != op:
            raise ExpressionSyntaxError(f"expected '{op}' but found {_describe(token)}",
                                        token.offset)
        return token

    def parse(self) -> Node:
        if self.peek().kind == "end":
            raise ExpressionSyntaxError("empty expression", 0)
        node = self.binary(0)
        token = self.peek()
        if token.kind != "end":
            raise ExpressionSyntaxError(f"unexpected {_describe(token)}", token.offset)
        return node

    def binary(self, min_prec: int) -> Node:
        left = self.unary()
        while True:
            token = self.peek()
            prec = _BINARY_PRECEDENCE.get(token.value) if token.kind == "op" else None
            if prec is None or prec <= min_prec:
                return left
            self.take()
            right = self.binary(prec)
            left = Binary(token.value, left, right, token.offset)

    def unary(self) -> Node:
        token = self.peek()
        if token.kind == "op" and token.value == "!":
            self.take()
            return Unary("!", self.unary(), token.offset)
        if token.kind == "op" and token.value == "-":
            self.take()
            return Unary("-", self.unary(), token.offset)
        return self.postfix(self.primary())

    def primary(self) -> Node:
        token = self.take()
        if token.kind in ("num", "str"):
            return Lit(token.value, token.offset)
        if token.kind == "name":
            if token.value in ("true", "false"):
                return Lit(token.value == "true", token.offset)
            if token.value == "null":
                return Lit(None, token.offset)
            if self.peek().kind == "op" and self.peek().value == "(":
                self.take()
                args = self.sequence(")")
                return Call(token.value, args, token.offset)
            return Name(token.value, token.offset)
        if token.kind == "op" and token.value == "(":
            node = self.binary(0)
            self.expect(")")
            return node
        if token.kind == "op" and token.value == "[":
            return ListLit(self.sequence("]"), token.offset)
        raise ExpressionSyntaxError(f"unexpected {_describe(token)}", token.offset)

    def sequence(self, closer: str) -> tuple[Node, ...]:
        items: list[Node] = []
        if self.peek().kind == "op" and self.peek().value == closer:
            self.take()
            return ()
        while True:
            items.append(self.binary(0))
            token = self.take()
            if token.kind == "op" and token.value == closer:
                return tuple(items)
            if not (token.kind == "op" and token.value == ","):
                raise ExpressionSyntaxError(
                    f"expected ',' or '{closer}' but found {_describe(token)}", token.offset)

    def postfix(self, node: Node) -> Node:
        while True:
            token = self.peek()
            if token.kind == "op" and token.value == ".":
                self.take()
                name = self.take()
                if name.kind != "name":
                    raise ExpressionSyntaxError(
                        f"expected a property name after '.' but found {_describe(name)}",
                        name.offset)
                node = Attr(node, name.value, name.offset)
            elif token.kind == "op" and token.value == "[":
                self.take()
                key = self.binary(0)
                self.expect("]")
                node = Index(node, key, token.offset)
            else:
                return node


def _describe(token: Token) -> str:
    if token.kind == "end":
        return "end of expression"
    return f"'{token.value}'" if token.kind != "str" else "a string"


def parse_expression(text: str) -> Node:
    """Parse the inside of ``${{ }}``; raises :class:`ExpressionSyntaxError` with the offset."""
    return _Parser(text).parse()


# ------------------------------------------------------------------------------------ templates


@dataclass(frozen=True, slots=True)
class ExprPart:
    source: str
    node: Node
    offset: int
    """Offset of the expression text (inside the braces) within the template string."""


@dataclass(frozen=True, slots=True)
class Template:
    source: str
    parts: tuple[str | ExprPart, ...]

    @property
    def is_single_expression(self) -> bool:
        return len(self.parts) == 1 and isinstance(self.parts[0], ExprPart)

    @property
    def expressions(self) -> tuple[ExprPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ExprPart))


_OPEN = "${{"
_CLOSE = "}}"


def parse_template(source: str) -> Template:
    """Split a string into literal text and ``${{ }}`` expressions, parsing each expression."""
    parts: list[str | ExprPart] = []
    pos = 0
    while True:
        start = source.find(_OPEN, pos)
        if start == -1:
            if pos < len(source):
                parts.append(source[pos:])
            break
        if start > pos:
            parts.append(source[pos:start])
        inner_start = start + len(_OPEN)
        end = _find_close(source, inner_start)
        if end == -1:
            raise ExpressionSyntaxError("'${{' is never closed with '}}'", start)
        inner = source[inner_start:end]
        try:
            node = parse_expression(inner)
        except ExpressionSyntaxError as exc:
            raise ExpressionSyntaxError(str(exc), inner_start + exc.offset) from None
        parts.append(ExprPart(inner, node, inner_start))
        pos = end + len(_CLOSE)
    # A single expression padded with whitespace still yields its raw value.
    stripped = [p for p in parts if not (isinstance(p, str) and not p.strip())]
    if len(stripped) == 1 and isinstance(stripped[0], ExprPart):
        parts = stripped
    return Template(source, tuple(parts))


def _find_close(source: str, pos: int) -> int:
    quote: str | None = None
    i = pos
    while i < len(source):
        ch = source[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif source.startswith(_CLOSE, i):
            return i
        i += 1
    return -1


def has_expression(value: str) -> bool:
    return _OPEN in value


# ----------------------------------------------------------------------------------- references


@dataclass(frozen=True, slots=True)
class Reference:
    """A static path into the scope, such as ``steps.extract.outputs.text``."""

    root: str
    path: tuple[str | int, ...]
    offset: int

    @property
    def dotted(self) -> str:
        out = self.root
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else f".{part}"
        return out


def references(node: Node) -> Iterator[Reference]:
    """Every maximal static reference in an expression (``inputs.x``, ``steps.a.outputs.b``)."""
    chain = _static_chain(node)
    if chain is not None:
        root, path, offset = chain
        yield Reference(root, path, offset)
        return
    for child in _children(node):
        yield from references(child)


def _static_chain(node: Node) -> tuple[str, tuple[str | int, ...], int] | None:
    if isinstance(node, Name):
        return node.name, (), node.offset
    if isinstance(node, Attr):
        inner = _static_chain(node.obj)
        return None if inner is None else (inner[0], (*inner[1], node.name), inner[2])
    if isinstance(node, Index) and isinstance(node.key, Lit) and isinstance(
            node.key.value, str | int) and not isinstance(node.key.value, bool):
        inner = _static_chain(node.obj)
        return None if inner is None else (inner[0], (*inner[1], node.key.value), inner[2])
    return None


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Attr):
        return (node.obj,)
    if isinstance(node, Index):
        return (node.obj, node.key)
    if isinstance(node, Call | ListLit):
        return node.args if isinstance(node, Call) else node.items
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Binary):
        return (node.left, node.right)
    return ()


def calls(node: Node) -> Iterator[Call]:
    if isinstance(node, Call):
        yield node
    for child in _children(node):
        yield from calls(child)


def walk(node: Node) -> Iterator[Node]:
    """``node`` and every node below it, parents first."""
    yield node
    for child in _children(node):
        yield from walk(child)


def start_offset(node: Node) -> int:
    """Where the text of ``node`` begins (an operator's or a property's own offset is not the
    start: ``steps.a.outputs.x == 1`` begins at ``steps``)."""
    return min(n.offset for n in walk(node))


# ----------------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class StepStatuses:
    """What ``success()``, ``failure()`` and ``always()`` see: the statuses of a step's needs."""

    needs: Mapping[str, str]


def _string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def truthy(value: Any) -> bool:
    if isinstance(value, float) and value != value:  # NaN
        return False
    return bool(value)


def _number(value: Any) -> float | int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    if value is None:
        return 0
    try:
        text = str(value).strip()
        return int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text)
    except ValueError as exc:
        raise ExpressionEvalError(f"cannot turn {value!r} into a number") from exc


def _format(fmt: Any, *args: Any) -> str:
    def sub(match: re.Match[str]) -> str:
        index = int(match.group(1))
        if index >= len(args):
            raise ExpressionEvalError(f"format() has no argument {{{index}}}")
        return _string(args[index])

    text = re.sub(r"\{(\d+)\}", sub, _string(fmt).replace("{{", "\0").replace("}}", "\1"))
    return text.replace("\0", "{").replace("\1", "}")


def _contains(haystack: Any, needle: Any) -> bool:
    if isinstance(haystack, list):
        return any(_equal(item, needle) for item in haystack)
    if isinstance(haystack, dict):
        return needle in haystack
    return _string(needle).lower() in _string(haystack).lower()


def _from_json(text: Any) -> Any:
    try:
        return json.loads(_string(text))
    except json.JSONDecodeError as exc:
        raise ExpressionEvalError(f"fromJSON: not JSON: {exc.msg}") from exc


def _default(value: Any, fallback: Any) -> Any:
    return fallback if value is None or value == "" else value


def _join(items: Any, separator: Any = ",") -> str:
    if not isinstance(items, list):
        return _string(items)
    return _string(separator).join(_string(i) for i in items)


FUNCTIONS: Mapping[str, tuple[Callable[..., Any], int, int, str]] = {
    # name: (implementation, min args, max args, result type)
    "contains": (_contains, 2, 2, "boolean"),
    "startsWith": (lambda a, b: _string(a).lower().startswith(_string(b).lower()), 2, 2, "boolean"),
    "endsWith": (lambda a, b: _string(a).lower().endswith(_string(b).lower()), 2, 2, "boolean"),
    "lower": (lambda s: _string(s).lower(), 1, 1, "string"),
    "upper": (lambda s: _string(s).upper(), 1, 1, "string"),
    "trim": (lambda s: _string(s).strip(), 1, 1, "string"),
    "length": (lambda x: len(x) if isinstance(x, list | dict) else len(_string(x)), 1, 1,
               "integer"),
    "join": (_join, 1, 2, "string"),
    "format": (_format, 1, 99, "string"),
    "toJSON": (lambda x: json.dumps(x, ensure_ascii=False, sort_keys=True), 1, 1, "string"),
    "fromJSON": (_from_json, 1, 1, ""),
    "default": (_default, 2, 2, ""),
    "string": (_string, 1, 1, "string"),
    "number": (_number, 1, 1, "number"),
}
FUNCTION_NAMES = (*FUNCTIONS, *STATUS_FUNCTIONS)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b if isinstance(a, bool) and isinstance(b, bool) else False
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return bool(a == b)


def _compare(op: str, a: Any, b: Any, offset: int) -> bool:
    numeric = (int, float)
    if (isinstance(a, numeric) and isinstance(b, numeric) and not isinstance(a, bool) \
            and not isinstance(b, bool)) or (isinstance(a, str) and isinstance(b, str)):
        pass
    else:
        raise ExpressionEvalError(
            f"cannot compare {type_of(a)} with {type_of(b)} using '{op}' (at {offset})")
    return bool(_ORDERING[op](a, b))


_ORDERING: Mapping[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


def type_of(value: Any) -> str:
    """The JSON type name of a value: null, boolean, integer, number, string, array, object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def evaluate(node: Node, scope: Mapping[str, Any], statuses: StepStatuses | None = None) -> Any:
    """Evaluate a parsed expression against ``scope`` (``inputs``, ``context``, ``steps``)."""
    if isinstance(node, Lit):
        return node.value
    if isinstance(node, ListLit):
        return [evaluate(item, scope, statuses) for item in node.items]
    if isinstance(node, Name):
        if node.name not in scope:
            raise ExpressionEvalError(f"unknown name '{node.name}'; use one of "
                                      + ", ".join(sorted(scope)))
        return scope[node.name]
    if isinstance(node, Attr):
        return _get(evaluate(node.obj, scope, statuses), node.name)
    if isinstance(node, Index):
        return _get(evaluate(node.obj, scope, statuses), evaluate(node.key, scope, statuses))
    if isinstance(node, Unary):
        value = evaluate(node.operand, scope, statuses)
        if node.op == "!":
            return not truthy(value)
        return -_number(value)
    if isinstance(node, Binary):
        return _binary(node, scope, statuses)
    return _call(node, scope, statuses)


def _get(container: Any, key: Any) -> Any:
    if isinstance(container, Mapping):
        if key in container:
            return container[key]
        if key == "output" and "outputs" in container:
            return container["outputs"]
        return None
    if isinstance(container, Sequence) and not isinstance(container, str):
        if isinstance(key, int) and not isinstance(key, bool) and -len(container) <= key < len(
                container):
            return container[key]
        return None
    return None


def _binary(node: Binary, scope: Mapping[str, Any], statuses: StepStatuses | None) -> Any:
    if node.op == "&&":
        left = evaluate(node.left, scope, statuses)
        return evaluate(node.right, scope, statuses) if truthy(left) else left
    if node.op == "||":
        left = evaluate(node.left, scope, statuses)
        return left if truthy(left) else evaluate(node.right, scope, statuses)
    left = evaluate(node.left, scope, statuses)
    right = evaluate(node.right, scope, statuses)
    if node.op == "==":
        return _equal(left, right)
    if node.op == "!=":
        return not _equal(left, right)
    if node.op == "+":
        if isinstance(left, str) or isinstance(right, str):
            return _string(left) + _string(right)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        if left is None or right is None:
            return right if left is None else left
        return _number(left) + _number(right)
    return _compare(node.op, left, right, node.offset)


def _call(node: Call, scope: Mapping[str, Any], statuses: StepStatuses | None) -> Any:
    if node.func in STATUS_FUNCTIONS:
        needs = statuses.needs if statuses is not None else {}
        if node.func == "always":
            return True
        if node.func == "success":
            return all(s == "success" for s in needs.values())
        return any(s == "failure" for s in needs.values())
    entry = FUNCTIONS.get(node.func)
    if entry is None:
        raise ExpressionEvalError(f"unknown function '{node.func}'")
    func, low, high, _ = entry
    if not low <= len(node.args) <= high:
        raise ExpressionEvalError(f"{node.func}() takes {low}"
                                  + ("" if low == high else f" to {high}") + " arguments")
    return func(*(evaluate(arg, scope, statuses) for arg in node.args))


def render(template: Template, scope: Mapping[str, Any],
           statuses: StepStatuses | None = None) -> Any:
    """The value of a template: a raw value for a lone expression, else a string."""
    if template.is_single_expression:
        part = template.parts[0]
        assert isinstance(part, ExprPart)
        return evaluate(part.node, scope, statuses)
    out: list[str] = []
    for part in template.parts:
        out.append(part if isinstance(part, str) else _string(
            evaluate(part.node, scope, statuses)))
    return "".join(out)


def render_value(value: Any, scope: Mapping[str, Any]) -> Any:
    """Render every template inside a nested ``with`` value (dicts and lists are walked)."""
    if isinstance(value, str):
        return render(parse_template(value), scope) if has_expression(value) else value
    if isinstance(value, dict):
        return {k: render_value(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, scope) for v in value]
    return value
