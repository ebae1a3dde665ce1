"""Diagnostics: what ``skillgrove check`` reports, one value per problem.

A diagnostic names the file, the position (1-based line and column), the rule that fired, a
message and, where it helps, a hint on how to fix it::

    library/groups/report.yaml:12:7: error: steps[1].needs: unknown step 'summarise'
        (did you mean 'summarize'?) [unknown-step]

Errors that one fix clears are one diagnostic: the root cause, with the others it causes folded
under it as ``follow_ons`` (printed indented below it, counted once)::

    library/groups/report.yaml:12:7: error: steps[1].needs: unknown step 'summarise'
        (did you mean 'summarize'?; fixing it also clears the 1 error below) [unknown-step]
        library/groups/report.yaml:15:15: steps[1].with.text: step 'b' uses steps.summarize
            but does not run after it [not-upstream]
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
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
    follow_ons: tuple[Diagnostic, ...] = ()
    """Problems this one causes: fixing it clears them too (see the module docstring)."""

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
        """One line, then one indented line per follow-on."""
        text = f"{self.location()}: {self.severity.value}: {self.message}"
        notes = [self.hint] if self.hint else []
        if self.follow_ons:
            count = len(self.follow_ons)
            notes.append(f"fixing it also clears the {count} error{'s' if count > 1 else ''} "
                         "below")
        if notes:
            text += f" ({'; '.join(notes)})"
        lines = [f"{text} [{self.rule}]"]
        lines.extend(f"    {d.location()}: {d.message} [{d.rule}]" for d in self.follow_ons)
        return "\n".join(lines)

    def folding(self, follow_ons: Sequence[Diagnostic]) -> Diagnostic:
        """This diagnostic with ``follow_ons`` (and theirs) folded under it."""
        if not follow_ons:
            return self
        flat = [leaf for d in follow_ons for leaf in (replace(d, follow_ons=()), *d.follow_ons)]
        return replace(self, follow_ons=(*self.follow_ons, *flat))

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values; ``follow_ons`` only when there are some."""
        data = self._fields()
        if self.follow_ons:
            data["follow_ons"] = [d.to_dict() for d in self.follow_ons]
        return data

    def _fields(self) -> dict[str, Any]:
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
    match = closest(word, candidates)
    return f"did you mean '{match}'?" if match else None


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``word`` is most likely a misspelling of (letter case aside), or None.

    >>> closest("Summarise", ["summarize", "extract"])
    'summarize'
    """
    pool = sorted({c for c in candidates if isinstance(c, str)})
    matches = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not matches:
        lowered = {c.lower(): c for c in pool}
        if word.lower() in lowered:
            matches = [lowered[word.lower()]]
    if not matches and len(word) >= 3:  # a shortened name: 'pdf' for 'pdf_path'
        matches = [c for c in pool if c.lower().startswith(word.lower())][:2]
        matches = matches if len(matches) == 1 else []
    return matches[0] if matches else None


def sort_key(d: Diagnostic) -> tuple[str, int, int, str]:
    return (str(d.path or ""), d.line or 0, d.column or 0, d.rule)
