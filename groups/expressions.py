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

**Hostile text and values.** An expression comes from a group file and its values from callers
and skills, so any input ends in an :class:`~skills.errors.ExpressionError` with its position,
never in another exception. Expressions are at most ``EXPRESSION_MAX_CHARS`` long and nest at
most ``EXPRESSION_MAX_DEPTH`` levels (checked while parsing); number literals are bounded and
string escapes are decoded here, each bad one reported where it is. A string an expression
builds is at most ``EXPRESSION_MAX_RESULT_CHARS`` long and a list at most ``EXPRESSION_MAX_ITEMS``
items: ``+``, ``format``, ``join``, ``toJSON`` and ``string`` work out the size first and refuse
before allocating. What one evaluation builds altogether (every string, list and object,
intermediate ones included) is bounded too, in bytes and entries, and so is what all the
expressions of one step's ``with`` build (:func:`step_budget`): many values each under the
per-string cap cannot add up to gigabytes. (The limits live in :mod:`skills.limits`.)
"""

from __future__ import annotations

import contextlib
import json
import math
import operator
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from skillgrove.skills import boundedjson
from skillgrove.skills.errors import ExpressionEvalError, ExpressionSyntaxError
from skillgrove.skills.limits import (
    EXPRESSION_MAX_CHARS,
    EXPRESSION_MAX_DEPTH,
    EXPRESSION_MAX_EVALUATION_BYTES,
    EXPRESSION_MAX_EVALUATION_ITEMS,
    EXPRESSION_MAX_ITEMS,
    EXPRESSION_MAX_NUMBER_CHARS,
    EXPRESSION_MAX_RESULT_CHARS,
    EXPRESSION_MAX_STEP_BYTES,
    EXPRESSION_MAX_STEP_ITEMS,
)

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
  | (?P<sq>'(?:[^']|'')*')
  | (?P<dq>"[^"\\]*(?:\\.[^"\\]*)*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!+\-.,()\[\]])
    """,
    re.VERBOSE | re.DOTALL,
)
_WORD_OPS = {"and": "&&", "or": "||", "not": "!"}
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


def tokenize(text: str) -> list[Token]:
    if len(text) > EXPRESSION_MAX_CHARS:
        raise ExpressionSyntaxError(f"expression is longer than {EXPRESSION_MAX_CHARS:,} "
                                    "characters (EXPRESSION_MAX_CHARS)", EXPRESSION_MAX_CHARS)
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            if text[pos] in "'\"":
                raise ExpressionSyntaxError("string is never closed", pos)
            raise ExpressionSyntaxError(f"unexpected character {text[pos]!r}", pos)
        kind = match.lastgroup or ""
        raw = match.group()
        if kind == "num":
            tokens.append(Token("num", _number_literal(raw, pos), pos))
        elif kind == "sq":
            tokens.append(Token("str", raw[1:-1].replace("''", "'"), pos))
        elif kind == "dq":
            tokens.append(Token("str", _unescape(raw[1:-1], pos + 1), pos))
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


def _number_literal(raw: str, offset: int) -> int | float:
    if len(raw) > EXPRESSION_MAX_NUMBER_CHARS:
        raise ExpressionSyntaxError(f"number is longer than {EXPRESSION_MAX_NUMBER_CHARS:,} "
                                    "characters (EXPRESSION_MAX_NUMBER_CHARS)", offset)
    if not re.search(r"[.eE]", raw):
        return int(raw)
    value = float(raw)
    if not math.isfinite(value):
        raise ExpressionSyntaxError("number is too large", offset)
    return value


def _unescape(body: str, offset: int) -> str:
    """The value of a double-quoted string (JSON's escapes); ``offset`` is where ``body`` starts
    in the expression, so a bad escape is reported at its backslash."""
    if "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    while (slash := body.find("\\", i)) != -1:
        out.append(body[i:slash])
        code = body[slash + 1]  # the token's pattern puts a character after every backslash
        i = slash + 2
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            continue
        if code != "u":
            raise ExpressionSyntaxError(f"invalid escape {_shown_escape(code)} in a string "
                                        "(write \\\\ for a backslash)", offset + slash)
        point = _hex4(body, i, offset + slash)
        i += 4
        if 0xD800 <= point < 0xDC00 and body.startswith("\\u", i):
            low = _hex4(body, i + 2, offset + i)
            if 0xDC00 <= low < 0xE000:
                point = 0x10000 + ((point - 0xD800) << 10) + (low - 0xDC00)
                i += 6
        if 0xD800 <= point < 0xE000:
            raise ExpressionSyntaxError("invalid escape: half of a surrogate pair", offset + slash)
        out.append(chr(point))
    out.append(body[i:])
    return "".join(out)


def _hex4(body: str, at: int, offset: int) -> int:
    digits = body[at:at + 4]
    if _HEX4.fullmatch(digits) is None:
        raise ExpressionSyntaxError(f"invalid escape {_shown_escape('u' + digits)} in a "
                                    "string (\\u takes four hex digits)", offset)
    return int(digits, 16)


def _shown_escape(after: str) -> str:
    text = "\\" + after
    return f"'{text}'" if text.isprintable() else repr(text)


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


_TOO_DEEP = (f"expression nests deeper than {EXPRESSION_MAX_DEPTH} levels "
             "(EXPRESSION_MAX_DEPTH)")


class _Parser:
    """Precedence climbing. Every method returns a node and its depth (a leaf is 1), and
    ``nesting`` counts the brackets, calls and prefix operators open right now: both are checked
    against ``EXPRESSION_MAX_DEPTH``, so the recursion here (and in everything that walks the
    tree later) stays far from Python's limit whatever the text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.nesting = 0

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

    def open(self, token: Token) -> None:
        self.nesting += 1
        if self.nesting > EXPRESSION_MAX_DEPTH:
            raise ExpressionSyntaxError(_TOO_DEEP, token.offset)

    def close(self) -> None:
        self.nesting -= 1

    @staticmethod
    def deeper(token: Token, *depths: int) -> int:
        depth = 1 + max(depths, default=0)
        if depth > EXPRESSION_MAX_DEPTH:
            raise ExpressionSyntaxError(_TOO_DEEP, token.offset)
        return depth

    def parse(self) -> Node:
        if self.peek().kind == "end":
            raise ExpressionSyntaxError("empty expression", 0)
        node, _ = self.binary(0)
        token = self.peek()
        if token.kind != "end":
            raise ExpressionSyntaxError(f"unexpected {_describe(token)}", token.offset)
        return node

    def binary(self, min_prec: int) -> tuple[Node, int]:
        left, depth = self.unary()
        while True:
            token = self.peek()
            prec = _BINARY_PRECEDENCE.get(token.value) if token.kind == "op" else None
            if prec is None or prec <= min_prec:
                return left, depth
            self.take()
            right, right_depth = self.binary(prec)
            depth = self.deeper(token, depth, right_depth)
            left = Binary(token.value, left, right, token.offset)

    def unary(self) -> tuple[Node, int]:
        token = self.peek()
        if token.kind == "op" and token.value in ("!", "-"):
            self.take()
            self.open(token)
            operand, depth = self.unary()
            self.close()
            return Unary(token.value, operand, token.offset), self.deeper(token, depth)
        node, depth = self.primary()
        return self.postfix(node, depth)

    def primary(self) -> tuple[Node, int]:
        token = self.take()
        if token.kind in ("num", "str"):
            return Lit(token.value, token.offset), 1
        if token.kind == "name":
            if token.value in ("true", "false"):
                return Lit(token.value == "true", token.offset), 1
            if token.value == "null":
                return Lit(None, token.offset), 1
            if self.peek().kind == "op" and self.peek().value == "(":
                self.open(self.take())
                args = self.sequence(")")
                self.close()
                return (Call(token.value, tuple(node for node, _ in args), token.offset),
                        self.deeper(token, *(depth for _, depth in args)))
            return Name(token.value, token.offset), 1
        if token.kind == "op" and token.value == "(":
            self.open(token)
            node, depth = self.binary(0)
            self.expect(")")
            self.close()
            return node, depth
        if token.kind == "op" and token.value == "[":
            self.open(token)
            items = self.sequence("]")
            self.close()
            return (ListLit(tuple(node for node, _ in items), token.offset),
                    self.deeper(token, *(depth for _, depth in items)))
        raise ExpressionSyntaxError(f"unexpected {_describe(token)}", token.offset)

    def sequence(self, closer: str) -> list[tuple[Node, int]]:
        items: list[tuple[Node, int]] = []
        if self.peek().kind == "op" and self.peek().value == closer:
            self.take()
            return items
        while True:
            items.append(self.binary(0))
            token = self.take()
            if token.kind == "op" and token.value == closer:
                return items
            if not (token.kind == "op" and token.value == ","):
                raise ExpressionSyntaxError(
                    f"expected ',' or '{closer}' but found {_describe(token)}", token.offset)

    def postfix(self, node: Node, depth: int) -> tuple[Node, int]:
        while True:
            token = self.peek()
            if token.kind == "op" and token.value == ".":
                self.take()
                name = self.take()
                if name.kind != "name":
                    raise ExpressionSyntaxError(
                        f"expected a property name after '.' but found {_describe(name)}",
                        name.offset)
                depth = self.deeper(name, depth)
                node = Attr(node, name.value, name.offset)
            elif token.kind == "op" and token.value == "[":
                self.take()
                self.open(token)
                key, key_depth = self.binary(0)
                self.expect("]")
                self.close()
                depth = self.deeper(token, depth, key_depth)
                node = Index(node, key, token.offset)
            else:
                return node, depth


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
            if ch == "\\" and quote == '"':
                i += 1  # an escaped character, maybe a quote, never ends the string
            elif ch == quote:
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


def _too_long(what: str) -> ExpressionEvalError:
    return ExpressionEvalError(f"{what} would be longer than {EXPRESSION_MAX_RESULT_CHARS:,} "
                               "characters (EXPRESSION_MAX_RESULT_CHARS)")


def _check_length(size: int, what: str) -> None:
    if size > EXPRESSION_MAX_RESULT_CHARS:
        raise _too_long(what)


_ESCAPED_IN_JSON = re.compile(r'[\x00-\x1f"\\]')
_CONTROL_BYTES = bytes(range(32))


def _json_size(value: Any, what: str) -> int:
    """About how long ``json.dumps(value, ensure_ascii=False)`` is (never less, give or take a
    quote on a non-string key), counted without writing it: a list holding one long string a
    thousand times is refused here, not after gigabytes. Iterative, so any depth is safe, and
    bounded by ``EXPRESSION_MAX_ITEMS``, so a value that contains itself ends too."""
    size = 0
    count = 1
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            size += 2 + len(item)
            if _ESCAPED_IN_JSON.search(item) is not None:
                raw = item.encode("utf-8", "surrogatepass")
                controls = len(raw) - len(raw.translate(None, _CONTROL_BYTES))
                size += item.count('"') + item.count("\\") + 5 * controls  # \u001f at worst
        elif isinstance(item, dict | list | tuple):
            count += 2 * len(item) if isinstance(item, dict) else len(item)
            if count > EXPRESSION_MAX_ITEMS:
                raise ExpressionEvalError(f"{what}: the value holds more than "
                                          f"{EXPRESSION_MAX_ITEMS:,} values (EXPRESSION_MAX_ITEMS)")
            if isinstance(item, dict):
                size += 2 + 4 * len(item)  # braces, ': ' and ', '
                stack.extend(item.keys())
                stack.extend(item.values())
            else:
                size += 2 + 2 * len(item)
                stack.extend(item)
        elif item is None or isinstance(item, bool):
            size += 5
        elif isinstance(item, int):
            size += 2 + item.bit_length() * 31 // 100  # decimal digits, and a sign
        elif isinstance(item, float):
            size += 24
        else:
            size += 2 + 6 * len(str(item))  # written with default=str
        if size > EXPRESSION_MAX_RESULT_CHARS:
            raise _too_long(what)
    return size


def _to_json(value: Any, what: str, *, sort_keys: bool = False) -> str:
    _json_size(value, what)
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, default=str)
    except RecursionError:
        raise ExpressionEvalError(f"{what}: the value is nested too deeply to write as JSON"
                                  ) from None
    except (TypeError, ValueError) as exc:  # keys that cannot be sorted, a 5,000-digit int
        raise ExpressionEvalError(f"{what}: cannot write the value as JSON: {exc}") from None
    _check_length(len(text), what)
    return text


def _string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return _to_json(value, "the text of the value")
    if isinstance(value, str):
        return value
    try:
        return str(value)
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise ExpressionEvalError(f"cannot write the value as text: {exc}") from None


def _shown(value: Any) -> str:
    """A value in an error message, cut short."""
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:40] + "..."
        return repr(text)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return "a very large integer"
    text = _string(value) if isinstance(value, float | int) else type_of(value)
    return text


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
    if isinstance(value, str):
        text = value.strip()
        try:
            if re.fullmatch(r"[+-]?\d+", text):
                return int(text)
            return float(text)
        except ValueError:
            pass
    raise ExpressionEvalError(f"cannot turn {_shown(value)} into a number")


_FORMAT_FIELD = re.compile(r"\{\{|\}\}|\{(\d+)\}")


def _format(fmt: Any, *args: Any) -> str:
    """``format('{0} of {1} ({{x}})', 1, 2)``: the length is added up before the text is
    joined, so each argument's text is made once and no oversized result is ever built."""
    text = _string(fmt)
    pieces: list[str] = []
    texts: dict[int, str] = {}
    size = 0
    pos = 0
    for match in _FORMAT_FIELD.finditer(text):
        literal = text[pos:match.start()]
        field = match.group()
        if field in ("{{", "}}"):
            piece = field[0]
        else:
            digits = match.group(1)
            index = int(digits) if len(digits) <= 3 else len(args)
            if index >= len(args):
                shown = digits if len(digits) <= 10 else digits[:10] + "..."
                raise ExpressionEvalError(f"format() has no argument {{{shown}}}")
            if index not in texts:
                texts[index] = _string(args[index])
            piece = texts[index]
        size += len(literal) + len(piece)
        _check_length(size, "format()")
        pieces += (literal, piece)
        pos = match.end()
    pieces.append(text[pos:])
    return "".join(pieces)


def _contains(haystack: Any, needle: Any) -> bool:
    if isinstance(haystack, list):
        return any(_equal(item, needle) for item in haystack)
    if isinstance(haystack, dict):
        try:
            return needle in haystack
        except TypeError:  # an array or object is never a key
            return False
    return _string(needle).lower() in _string(haystack).lower()


def _from_json(text: Any) -> Any:
    try:
        return boundedjson.loads(_string(text))
    except boundedjson.JSONLimitError as exc:
        raise ExpressionEvalError(f"fromJSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ExpressionEvalError(f"fromJSON: not JSON: {exc.msg} (at char {exc.pos})"
                                  ) from None
    except (ValueError, RecursionError) as exc:
        raise ExpressionEvalError(f"fromJSON: not JSON: {exc}") from None


def _default(value: Any, fallback: Any) -> Any:
    return fallback if value is None or value == "" else value


def _join(items: Any, separator: Any = ",") -> str:
    if not isinstance(items, list):
        return _string(items)
    glue = _string(separator)
    size = len(glue) * max(len(items) - 1, 0)
    _check_length(size, "join()")
    pieces: list[str] = []
    for item in items:
        piece = _string(item)
        size += len(piece)
        _check_length(size, "join()")
        pieces.append(piece)
    return glue.join(pieces)


def _length(value: Any) -> int:
    return len(value) if isinstance(value, list | dict) else len(_string(value))


FUNCTIONS: Mapping[str, tuple[Callable[..., Any], int, int, str]] = {
    # name: (implementation, min args, max args, result type)
    "contains": (_contains, 2, 2, "boolean"),
    "startsWith": (lambda a, b: _string(a).lower().startswith(_string(b).lower()), 2, 2, "boolean"),
    "endsWith": (lambda a, b: _string(a).lower().endswith(_string(b).lower()), 2, 2, "boolean"),
    "lower": (lambda s: _string(s).lower(), 1, 1, "string"),
    "upper": (lambda s: _string(s).upper(), 1, 1, "string"),
    "trim": (lambda s: _string(s).strip(), 1, 1, "string"),
    "length": (_length, 1, 1, "integer"),
    "join": (_join, 1, 2, "string"),
    "format": (_format, 1, 99, "string"),
    "toJSON": (lambda x: _to_json(x, "toJSON()", sort_keys=True), 1, 1, "string"),
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
    try:
        return bool(a == b)
    except RecursionError:
        raise ExpressionEvalError("the values are nested too deeply to compare") from None


def _compare(op: str, a: Any, b: Any) -> bool:
    numeric = (int, float)
    if (isinstance(a, numeric) and isinstance(b, numeric) and not isinstance(a, bool)
            and not isinstance(b, bool)) or (isinstance(a, str) and isinstance(b, str)):
        return bool(_ORDERING[op](a, b))
    raise ExpressionEvalError(f"cannot compare {type_of(a)} with {type_of(b)} using '{op}'")


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
    """Evaluate a parsed expression against ``scope`` (``inputs``, ``context``, ``steps``).

    Every failure is an :class:`ExpressionEvalError` whose ``offset`` is where the failing part
    starts in the expression, and whose message names that part (``inputs.d[inputs.l]: an
    array cannot be the key of an object``). What it builds altogether is bounded (see the
    module docstring)."""
    with _budget("one evaluation", EXPRESSION_MAX_EVALUATION_BYTES,
                 EXPRESSION_MAX_EVALUATION_ITEMS, "EXPRESSION_MAX_EVALUATION"):
        return _eval(node, scope, statuses)


@dataclass
class _Budget:
    """What the expressions evaluated inside it may still build: bytes and entries."""

    what: str
    bytes_left: int
    items_left: int
    limit_bytes: int
    limit_items: int
    name: str


_BUDGETS: ContextVar[tuple[_Budget, ...]] = ContextVar("expression_budgets", default=())


@contextlib.contextmanager
def _budget(what: str, limit_bytes: int, limit_items: int, name: str) -> Iterator[None]:
    opened = _Budget(what, limit_bytes, limit_items, limit_bytes, limit_items, name)
    token = _BUDGETS.set((*_BUDGETS.get(), opened))
    try:
        yield
    finally:
        _BUDGETS.reset(token)


@contextlib.contextmanager
def step_budget() -> Iterator[None]:
    """Bound what every expression evaluated inside it builds altogether (one step's ``with``;
    a plan's preview of it). Nested calls share the outermost budget.

    >>> with step_budget():
    ...     render_value({"a": "${{ format('{0}', 1) }}"}, {})
    {'a': '1'}
    """
    if any(b.name == "EXPRESSION_MAX_STEP" for b in _BUDGETS.get()):
        yield
        return
    with _budget("one step", EXPRESSION_MAX_STEP_BYTES, EXPRESSION_MAX_STEP_ITEMS,
                 "EXPRESSION_MAX_STEP"):
        yield


def _charged(value: Any) -> Any:
    """``value``, which an evaluation just built, charged to every open budget."""
    budgets = _BUDGETS.get()
    if not budgets or not isinstance(value, str | list | dict):
        return value
    size = sys.getsizeof(value)
    items = len(value) if isinstance(value, list | dict) else 0
    for budget in budgets:
        budget.bytes_left -= size
        budget.items_left -= items
        if budget.bytes_left < 0:
            raise ExpressionEvalError(
                f"the values built in {budget.what} would take more than "
                f"{budget.limit_bytes:,} bytes ({budget.name}_BYTES)")
        if budget.items_left < 0:
            raise ExpressionEvalError(
                f"the values built in {budget.what} would hold more than "
                f"{budget.limit_items:,} entries ({budget.name}_ITEMS)")
    return value


def _eval(node: Node, scope: Mapping[str, Any], statuses: StepStatuses | None = None) -> Any:
    try:
        if isinstance(node, Lit):
            return node.value
        if isinstance(node, ListLit):
            return _charged([_eval(item, scope, statuses) for item in node.items])
        if isinstance(node, Name):
            if node.name not in scope:
                raise ExpressionEvalError(f"unknown name '{_cut(node.name)}'; use one of "
                                          + ", ".join(sorted(scope)), node.offset)
            return scope[node.name]
        if isinstance(node, Attr):
            return _get(_eval(node.obj, scope, statuses), node.name)
        if isinstance(node, Index):
            return _get(_eval(node.obj, scope, statuses), _eval(node.key, scope, statuses))
        if isinstance(node, Unary):
            value = _eval(node.operand, scope, statuses)
            if node.op == "!":
                return not truthy(value)
            return -_number(value)
        if isinstance(node, Binary):
            return _charged(_binary(node, scope, statuses))
        result = _call(node, scope, statuses)
        if isinstance(result, str):
            _check_length(len(result), f"{node.func}()")
        return _charged(result)
    except ExpressionEvalError as exc:
        if exc.offset is not None:
            raise
        raise ExpressionEvalError(f"{unparse(node)}: {exc}", node.offset) from None


def _get(container: Any, key: Any) -> Any:
    if isinstance(container, Mapping):
        try:
            if key in container:
                return container[key]
        except TypeError:  # unhashable
            raise ExpressionEvalError(f"{_a(type_of(key))} cannot be the key of an object; "
                                      "use a string") from None
        if key == "output" and "outputs" in container:
            return container["outputs"]
        return None
    if isinstance(container, Sequence) and not isinstance(container, str):
        if isinstance(key, int) and not isinstance(key, bool) and -len(container) <= key < len(
                container):
            return container[key]
        return None
    return None


def _a(type_name: str) -> str:
    return ("an " if type_name[0] in "aeiou" else "a ") + type_name


def _binary(node: Binary, scope: Mapping[str, Any], statuses: StepStatuses | None) -> Any:
    if node.op == "&&":
        left = _eval(node.left, scope, statuses)
        return _eval(node.right, scope, statuses) if truthy(left) else left
    if node.op == "||":
        left = _eval(node.left, scope, statuses)
        return left if truthy(left) else _eval(node.right, scope, statuses)
    left = _eval(node.left, scope, statuses)
    right = _eval(node.right, scope, statuses)
    if node.op == "==":
        return _equal(left, right)
    if node.op == "!=":
        return not _equal(left, right)
    if node.op == "+":
        if isinstance(left, str) or isinstance(right, str):
            left_text, right_text = _string(left), _string(right)
            _check_length(len(left_text) + len(right_text), "the text")
            return left_text + right_text
        if isinstance(left, list) and isinstance(right, list):
            if len(left) + len(right) > EXPRESSION_MAX_ITEMS:
                raise ExpressionEvalError(f"the list would hold more than {EXPRESSION_MAX_ITEMS:,}"
                                          " items (EXPRESSION_MAX_ITEMS)")
            return left + right
        if left is None or right is None:
            return right if left is None else left
        try:
            return _number(left) + _number(right)
        except OverflowError:  # a huge integer plus a float
            raise ExpressionEvalError("the sum is too large for a number") from None
    return _compare(node.op, left, right)


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
        raise ExpressionEvalError(f"unknown function '{_cut(node.func)}'", node.offset)
    func, low, high, _ = entry
    if not low <= len(node.args) <= high:
        raise ExpressionEvalError(f"{node.func}() takes {low}"
                                  + ("" if low == high else f" to {high}") + " arguments",
                                  node.offset)
    return func(*(_eval(arg, scope, statuses) for arg in node.args))


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def unparse(node: Node, limit: int = 60) -> str:
    """The expression's text again (normalised: spacing, quotes), cut to ``limit`` characters;
    how error messages name the part that failed."""
    return _cut(_unparse(node, limit), limit)


def _unparse(node: Node, limit: int) -> str:
    if isinstance(node, Lit):
        value = node.value
        if isinstance(value, str):
            return "'" + _cut(value, limit).replace("'", "''") + "'"
        return _string(value) if value is not None else "null"
    if isinstance(node, ListLit):
        return "[" + ", ".join(_unparse(item, limit) for item in node.items[:8]) + (
            ", ...]" if len(node.items) > 8 else "]")
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Attr):
        return f"{_operand(node.obj, 9, limit)}.{node.name}"
    if isinstance(node, Index):
        return f"{_operand(node.obj, 9, limit)}[{_unparse(node.key, limit)}]"
    if isinstance(node, Call):
        return f"{node.func}(" + ", ".join(_unparse(arg, limit) for arg in node.args[:8]) + (
            ", ...)" if len(node.args) > 8 else ")")
    if isinstance(node, Unary):
        return node.op + _operand(node.operand, 8, limit)
    prec = _BINARY_PRECEDENCE[node.op]
    return (f"{_operand(node.left, prec, limit)} {node.op} "
            f"{_operand(node.right, prec + 1, limit)}")


def _operand(node: Node, binding: int, limit: int) -> str:
    """A sub-expression, in parentheses when it binds less tightly than its place needs."""
    if isinstance(node, Binary):
        strength = _BINARY_PRECEDENCE[node.op]
    elif isinstance(node, Unary):
        strength = 8
    else:
        strength = 10
    text = _unparse(node, limit)
    return f"({text})" if strength < binding else text


def _located(exc: ExpressionEvalError, part: ExprPart) -> ExpressionEvalError:
    """An error of one ``${{ }}`` of a template, its offset moved into the template string."""
    return ExpressionEvalError(str(exc), part.offset + (exc.offset or 0))


def render(template: Template, scope: Mapping[str, Any],
           statuses: StepStatuses | None = None) -> Any:
    """The value of a template: a raw value for a lone expression, else a string. An
    :class:`ExpressionEvalError` carries its offset in the template string. Its expressions
    share one evaluation budget."""
    with _budget("one evaluation", EXPRESSION_MAX_EVALUATION_BYTES,
                 EXPRESSION_MAX_EVALUATION_ITEMS, "EXPRESSION_MAX_EVALUATION"):
        return _render(template, scope, statuses)


def _render(template: Template, scope: Mapping[str, Any], statuses: StepStatuses | None) -> Any:
    if template.is_single_expression:
        part = template.parts[0]
        assert isinstance(part, ExprPart)
        try:
            return _eval(part.node, scope, statuses)
        except ExpressionEvalError as exc:
            raise _located(exc, part) from None
    out: list[str] = []
    size = 0
    for part in template.parts:
        if isinstance(part, str):
            text = part
        else:
            try:
                text = _string(_eval(part.node, scope, statuses))
            except ExpressionEvalError as exc:
                raise _located(exc, part) from None
        size += len(text)
        if size > EXPRESSION_MAX_RESULT_CHARS:
            offset = part.offset if isinstance(part, ExprPart) else 0
            raise ExpressionEvalError(str(_too_long("the text")), offset)
        out.append(text)
    return "".join(out)


def render_value(value: Any, scope: Mapping[str, Any]) -> Any:
    """Render every template inside a nested ``with`` value (dicts and lists are walked), all
    of them within one :func:`step_budget`."""
    with step_budget():
        return _render_value(value, scope)


def _render_value(value: Any, scope: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        return render(parse_template(value), scope) if has_expression(value) else value
    if isinstance(value, dict):
        return {k: _render_value(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [_render_value(v, scope) for v in value]
    return value
