"""Diagnostics: what ``skillgrove check`` reports, one value per problem.

A diagnostic names the file, the position (1-based line and column), the rule that fired, a
message and, where it helps, a hint on how to fix it::

    library/groups/report.yaml:12:7: error: steps[1].needs: unknown step 'summarise'
        (did you mean 'summarize'?) [unknown-step]
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    severity: Severity
    rule: str
    message: str
    path: Path | None = None
    line: int | None = None
    column: int | None = None
    hint: str | None = None
    subject: str | None = None
    """The skill name, group id or step id the diagnostic is about, when there is one."""

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def location(self) -> str:
        if self.path is None:
            return "<library>"
        parts = [str(self.path)]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def format(self) -> str:
        text = f"{self.location()}: {self.severity.value}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return f"{text} [{self.rule}]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "severity": self.severity.value,
            "rule": self.rule,
            "message": self.message,
            "path": str(self.path) if self.path is not None else None,
            "line": self.line,
            "column": self.column,
            "hint": self.hint,
            "subject": self.subject,
        }


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """Return a ``did you mean 'x'?`` hint for the closest candidate, or None.

    >>> did_you_mean("summarise", ["summarize", "extract"])
    "did you mean 'summarize'?"
    """
    pool = sorted({c for c in candidates if isinstance(c, str)})
    matches = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not matches:
        lowered = {c.lower(): c for c in pool}
        if word.lower() in lowered:
            matches = [lowered[word.lower()]]
    return f"did you mean '{matches[0]}'?" if matches else None


def sort_key(d: Diagnostic) -> tuple[str, int, int, str]:
    return (str(d.path or ""), d.line or 0, d.column or 0, d.rule)
