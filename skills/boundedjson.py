"""Reading JSON that someone else wrote: a skill's stdout, an HTTP skill's response, ``fromJSON``.

``json.loads`` trusts its text. ``[`` repeated 200,000 times raises RecursionError, a 5,000-digit
integer raises ValueError, and a value nested a few hundred levels deep parses but breaks what
recurses into it later (the output schema check, the run log). :func:`loads` refuses such text
before parsing it, with a :class:`JSONLimitError` that says what was too big;
:func:`value_problem` asks the same of a Python value that did not come from text (what an
in-process skill returns).

>>> loads('{"rows": [[1, 2], [3]]}')
{'rows': [[1, 2], [3]]}
>>> loads("[" * 65 + "]" * 65)
Traceback (most recent call last):
skillgrove.skills.boundedjson.JSONLimitError: arrays and objects are nested deeper than 64 levels (JSON_MAX_DEPTH)
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from typing import Any

from skillgrove.skills.limits import JSON_MAX_DEPTH, JSON_MAX_NUMBER_CHARS


class JSONLimitError(ValueError):
    """The text is JSON, or may be, but nested too deeply or holding a number too long; the
    message names the limit."""


# What is left of JSON text for counting depth: brackets and quotes ("{}" counted as "[]").
_BRACKETS_AND_QUOTES = (bytes.maketrans(b"{}", b"[]"),
                        bytes(b for b in range(256) if b not in b'[]{}"'))
_STRING = re.compile(rb'"[^"]*"')


def loads(text: str) -> Any:
    """``json.loads`` that refuses nesting deeper than ``JSON_MAX_DEPTH`` and numbers written
    with more than ``JSON_MAX_NUMBER_CHARS`` characters (:class:`JSONLimitError`). Text that is
    not JSON raises ``json.JSONDecodeError`` as usual; both are ``ValueError``s."""
    if not _depth_within(text, JSON_MAX_DEPTH):
        # Too deep, or not JSON at all (then the count means nothing): parsing tells which.
        # Beyond Python's recursion limit json.loads raises RecursionError, which it does safely.
        with contextlib.suppress(RecursionError):
            _parse(text)
        raise JSONLimitError(_TOO_DEEP)
    return _parse(text)


_TOO_DEEP = f"arrays and objects are nested deeper than {JSON_MAX_DEPTH} levels (JSON_MAX_DEPTH)"
_LONG_DIGITS = re.compile(f"[0-9]{{{JSON_MAX_NUMBER_CHARS + 1}}}")


def _parse(text: str) -> Any:
    value = _parse_numbers(text)
    if _MAYBE_UNKEEPABLE.search(text) is not None:  # else no walk: text of 10 MiB is common
        problem = _strings_problem(value)
        if problem is not None:
            raise JSONLimitError(problem)
    return value


# Only these make a lone surrogate or an infinite float: an escape \uD800-\uDFFF, or a number
# with a three-digit exponent or 309 digits (past the largest float).
_MAYBE_UNKEEPABLE = re.compile(r"\\u[dD][89a-fA-F]|[eE][+-]?[0-9]{3}|[0-9]{309}")


def _refuse_constant(name: str) -> Any:
    raise JSONLimitError(f"{name} is not a JSON number (JSON has no NaN or Infinity)")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _strings_problem(value: Any) -> str | None:
    """Why strings (keys included) or numbers in a parsed value cannot be kept: a lone
    surrogate (``"\\ud800"``: no character, not encodable as UTF-8), or a float that is not
    finite (NaN, Infinity); None when there is none."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found is not None:
                return (f"the string {_shown(item)} at {where or 'the top'} holds a lone "
                        f"surrogate (U+{ord(found.group()):04X}), which is no character")
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{item!r} at {where or 'the top'} is not a JSON number"
        elif isinstance(item, dict):
            for key, child in item.items():
                key_text = str(key)
                if isinstance(key, str) and _SURROGATE.search(key):
                    return (f"the key {_shown(key)} at {where or 'the top'} holds a lone "
                            "surrogate, which is no character")
                stack.append((child, f"{where}.{key_text}" if where else key_text))
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{where}[{index}]") for index, child in enumerate(item))
    return None


def _shown(text: str) -> str:
    """A string as an escaped, short literal (safe in any message or terminal)."""
    shown = ascii(text[:40])
    return shown + ("..." if len(text) > 40 else "")


def _parse_numbers(text: str) -> Any:
    if _LONG_DIGITS.search(text) is None:
        return json.loads(text, parse_constant=_refuse_constant)

    # Some run of digits is long, maybe inside a string: only a number that long is refused.
    def bounded(kind: type[int] | type[float]) -> Any:
        def parse(raw: str) -> int | float:
            if len(raw) > JSON_MAX_NUMBER_CHARS:
                raise JSONLimitError(f"a number is written with {len(raw):,} characters, more "
                                     f"than {JSON_MAX_NUMBER_CHARS:,} (JSON_MAX_NUMBER_CHARS)")
            return kind(raw)
        return parse

    return json.loads(text, parse_int=bounded(int), parse_float=bounded(float),
                      parse_constant=_refuse_constant)


def _depth_within(text: str, max_depth: int) -> bool:
    """Whether JSON text nests no deeper than ``max_depth``, counted with C-speed string
    operations only (a loop over 10 MiB in Python takes seconds). Exact for JSON; for text that
    is not JSON the answer may be either."""
    if text.count("[") + text.count("{") <= max_depth:
        return True
    # Inside strings only \\ and \" matter (an escaped quote does not end the string).
    if "\\" in text:
        text = text.replace("\\\\", "").replace('\\"', "")
    reduced = text.encode("utf-8", "surrogatepass").translate(*_BRACKETS_AND_QUOTES)
    # Dropping every adjacent pair of quotes removes empty strings and joins neighbours; what
    # a string held never counts, so nothing outside strings changes.
    reduced = _STRING.sub(b"", reduced.replace(b'""', b""))
    for _ in range(max_depth):  # each pass removes the innermost level
        if not reduced:
            return True
        shorter = reduced.replace(b"[]", b"")
        if len(shorter) == len(reduced):
            return False
        reduced = shorter
    return not reduced


def value_problem(value: Any) -> str | None:
    """Why a Python value could not have come from :func:`loads`: nested too deep, or an integer
    with too many digits; None when it is within the limits. Iterative, so any depth is safe."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    max_bits = int(JSON_MAX_NUMBER_CHARS * 3.33) + 1  # about that many decimal digits
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            if depth >= JSON_MAX_DEPTH:
                return _TOO_DEEP
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, int) and item.bit_length() > max_bits:
            return (f"an integer has more than {JSON_MAX_NUMBER_CHARS:,} digits "
                    "(JSON_MAX_NUMBER_CHARS)")
    return _strings_problem(value)


def keepable(value: Any) -> Any:
    """``value`` with what strict JSON and UTF-8 cannot hold replaced: a lone surrogate by
    U+FFFD, a NaN or infinite float by its name as a string. For records that must always be
    written and read back (a run's inputs, errors and outputs), whatever a skill printed.

    >>> keepable({"x": "a\\ud800", "y": [float("nan")]})
    {'x': 'a\\ufffd', 'y': ['nan']}
    """
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {keepable(k) if isinstance(k, str) else k: keepable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [keepable(v) for v in value]
    return value
