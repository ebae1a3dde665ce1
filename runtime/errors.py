"""Errors of the engine and its interfaces, under the one root ``SkillgroveError``::

    SkillgroveError
     └── EngineError               something a caller asked for cannot be done; ``code`` is stable
          ├── NotFoundError        no such skill, group, run or file   (code "not_found")
          ├── InvalidRequestError  a parameter is wrong; ``field`` names it (code "invalid_request")
          └── RunError             a run cannot start: bad inputs     (code "run_error",
                                   defined in :mod:`skillgrove.runtime.runner`)

The HTTP API turns ``code`` into the status (404, 422, 400) and every interface carries
``{"code", "message", "details"}`` as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skillgrove.skills.diagnostics import did_you_mean
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


class InvalidRequestError(EngineError):
    code = "invalid_request"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", {"field": field})
        self.field = field
