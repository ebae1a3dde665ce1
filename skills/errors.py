"""The one exception hierarchy of skillgrove.

Every error skillgrove raises on purpose derives from :class:`SkillgroveError`::

    SkillgroveError
     ├── LibraryError            a library (skills and groups) has errors; carries the diagnostics
     ├── ExpressionError         a ``${{ }}`` expression is wrong
     │    ├── ExpressionSyntaxError   it does not parse (carries the offset)
     │    └── ExpressionEvalError     it cannot be evaluated with these values (offset too)
     └── (graph and runtime add their own subclasses: StoreError, RunError, ...)

User mistakes are reported as :class:`~skills.diagnostics.Diagnostic` values, collected all at once;
an exception is raised only when a caller asks for a library that must be clean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skillgrove.skills.diagnostics import Diagnostic


class SkillgroveError(Exception):
    """Root of every error skillgrove raises on purpose."""


class LibraryError(SkillgroveError):
    """A library of skills and groups has errors; ``diagnostics`` holds all of them."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        lines = [d.format() for d in self.diagnostics[:20]]
        more = len(self.diagnostics) - len(lines)
        if more > 0:
            lines.append(f"... and {more} more")
        super().__init__("\n".join(lines) or "library has errors")


class ExpressionError(SkillgroveError):
    """A ``${{ }}`` expression is wrong."""


class ExpressionSyntaxError(ExpressionError):
    """An expression does not parse; ``offset`` is the 0-based position in the expression text."""

    def __init__(self, message: str, offset: int = 0) -> None:
        self.offset = offset
        super().__init__(message)


class ExpressionEvalError(ExpressionError):
    """An expression parsed but cannot be evaluated with the given values; ``offset``, when
    known, is the 0-based position of the part that failed (in the expression text for
    ``evaluate``, in the template string for ``render``)."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        super().__init__(message)
