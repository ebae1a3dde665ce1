"""Errors of the engine and its interfaces, under the one root ``SkillgroveError``::

    SkillgroveError
     └── EngineError               something a caller asked for cannot be done; ``code`` is stable
          ├── NotFoundError        no such skill, group, run or file   (code "not_found")
          ├── InvalidRequestError  a parameter is wrong; ``field`` names it (code "invalid_request")
          │    └── BudgetError     the token budget cannot hold the smallest context block
          │                        (defined in :mod:`skillgrove.runtime.inject`)
          ├── ConfirmationRequired a run has side effects nobody confirmed (code
          │                        "needs_confirmation")
          ├── TooManyRuns          a server carries its limit of runs already (code
          │                        "too_many_runs")
          └── RunError             a run cannot start: bad inputs     (code "run_error",
                                   defined in :mod:`skillgrove.runtime.runner`)

The HTTP API turns ``code`` into the status (404, 422, 409, 429, 400) and every interface carries
``{"code", "message", "details"}`` as it is. The whole tree is exported at the top::

    from skillgrove import EngineError, NotFoundError, RunError
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillgrove.skills.diagnostics import Diagnostic, did_you_mean
from skillgrove.skills.errors import SkillgroveError


class EngineError(SkillgroveError):
    code = "error"

    def __init__(self, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = dict(details or {})

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class NotFoundError(EngineError):
    code = "not_found"

    @classmethod
    def named(cls, what: str, name: str, known: list[str] | tuple[str, ...] = (),
              where: str = "") -> NotFoundError:
        """``no skill 'pdf-to-txt' (did you mean 'pdf-to-text'?)``."""
        guess = did_you_mean(name, list(known)) if known else None
        message = f"no {what} '{name}'" + (f" {where}" if where else "")
        if guess:
            message += f" ({guess})"
        return cls(message, {"kind": what, "name": name})

    @classmethod
    def folders(cls, missing: Sequence[Path], origin: str = "") -> NotFoundError:
        """``no such folder: ../my-skills`` (``origin`` says where the name came from)."""
        listed = ", ".join(str(p) for p in missing)
        plural = "s" if len(missing) > 1 else ""
        message = f"no such folder{plural}: {listed}" + (f" ({origin})" if origin else "")
        return cls(message, {"kind": "folder", "name": listed,
                             "paths": [str(p) for p in missing]})

    @classmethod
    def with_errors(cls, what: str, name: str, errors: Sequence[Diagnostic],
                    paths: Sequence[Path], consequence: str = "cannot be used") -> NotFoundError:
        """A skill or group whose file has errors: how many, the first, and the command that
        lists them all (``group 'g' has 3 errors and cannot run; the first: g.yaml:6:12:
        ...``)."""
        count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
        first = ""
        if errors:
            top = errors[0]
            first = f"; the first: {top.location()}: {top.message}" + (
                f" ({top.hint})" if top.hint else "")
        command = " ".join(["skillgrove check", *(shlex.quote(str(p)) for p in paths)])
        return cls(f"{what} '{name}' has {count} and {consequence}{first}; `{command}` "
                   "lists them all", {"kind": what, "name": name,
                                      "errors": [d.to_dict() for d in errors]})


class InvalidRequestError(EngineError):
    code = "invalid_request"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", {"field": field})
        self.field = field


class ConfirmationRequired(EngineError):
    """A run would change the world (send mail, write files, ...) and the caller has not
    confirmed it (code "needs_confirmation"); ``details["effects"]`` maps each effect to the
    skills that have it."""

    code = "needs_confirmation"

    def __init__(self, group: str, effects: Mapping[str, tuple[str, ...]]) -> None:
        listed = "; ".join(f"{effect} ({', '.join(names)})" for effect, names in effects.items())
        super().__init__(f"group '{group}' needs confirmation before it runs: {listed}. "
                         "Confirm it (`--yes`, `confirm: true`) or allow these effects "
                         "(SKILLGROVE_ALLOW_EFFECTS)",
                         {"group": group, "effects": {k: list(v) for k, v in effects.items()}})
        self.group = group
        self.effects = dict(effects)


class TooManyRuns(EngineError):
    """A server already carries as many runs as it allows (code "too_many_runs"); the run was
    not started: try again when one has finished."""

    code = "too_many_runs"

    def __init__(self, limit: int) -> None:
        super().__init__(f"this server is running {limit} runs already, its limit: try again "
                         "when one has finished", {"limit": limit})
        self.limit = limit


CONTEXT_FIELDS = ("values", "recent_skills", "conversation")
"""The one shape of a ``context``, for search, ask, inject and runs alike."""


def context_problem(data: Any) -> tuple[str, str] | None:
    """The first mistake in a context as (field below ``context``, what is wrong), or None:
    the one set of rules the request models (:mod:`skillgrove.runtime.api`) and the engine
    apply, kept here so that a warm CLI call checks a context without loading pydantic."""
    from skillgrove.groups.expressions import type_of

    if not isinstance(data, Mapping):
        return "", ("must be an object with values, recent_skills and conversation "
                    f"(got {type_of(data)})")
    for name in data:
        if name not in CONTEXT_FIELDS:
            return str(name), unknown_context_field(str(name))
    for name, kind in (("values", Mapping), ("recent_skills", list), ("conversation", list)):
        value = data.get(name)
        if value is not None and not isinstance(value, kind):
            expected = "an object" if kind is Mapping else "a list of strings"
            return name, f"must be {expected} (got {type_of(value)})"
        if isinstance(value, list):
            for position, item in enumerate(value):
                if not isinstance(item, str):
                    return f"{name}[{position}]", f"must be a string (got {type_of(item)})"
    return None


def unknown_context_field(key: str) -> str:
    """What to say about a context key that is not one of :data:`CONTEXT_FIELDS`: most often
    a value given flat (``{"team_email": ...}``), which belongs under ``values``; a near miss
    of a field gets a did-you-mean instead. Every interface says these words (the engine, the
    HTTP API's 422, the MCP tools, the CLI's context files)::

        >>> unknown_context_field("team_email")
        'unknown field: a context is {values, recent_skills, conversation}; put what you know \
under values: {"values": {"team_email": ...}}'
        >>> unknown_context_field("value")
        "unknown field (did you mean 'values'?)"
    """
    guess = did_you_mean(key, list(CONTEXT_FIELDS))
    if guess:
        return f"unknown field ({guess})"
    quoted = json.dumps(key, ensure_ascii=False)
    return ("unknown field: a context is {values, recent_skills, conversation}; put what you "
            f'know under values: {{"values": {{{quoted}: ...}}}}')
