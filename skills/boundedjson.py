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
    if _LONG_DIGITS.search(text) is None:
        return json.loads(text)

    # Some run of digits is long, maybe inside a string: only a number that long is refused.
    def bounded(kind: type[int] | type[float]) -> Any:
        def parse(raw: str) -> int | float:
            if len(raw) > JSON_MAX_NUMBER_CHARS:
                raise JSONLimitError(f"a number is written with {len(raw):,} characters, more "
                                     f"than {JSON_MAX_NUMBER_CHARS:,} (JSON_MAX_NUMBER_CHARS)")
            return kind(raw)
        return parse

    return json.loads(text, parse_int=bounded(int), parse_float=bounded(float))


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
    return None
