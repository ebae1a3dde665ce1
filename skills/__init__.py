"""Skills: what a skill is (a folder with SKILL.md) and how a library of them is found on disk.

The names below load on first use, so that importing one small module of this package (the
errors, the diagnostics) does not pull in YAML and JSON Schema. :func:`lazy_attribute` does
that for the other layers' packages too (``groups``, ``graph``), each with its own table.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillgrove.skills.diagnostics import Diagnostic, Severity, did_you_mean
    from skillgrove.skills.errors import (
        ExpressionError,
        ExpressionEvalError,
        ExpressionSyntaxError,
        LibraryError,
        SkillgroveError,
    )
    from skillgrove.skills.loader import (
        LoadOptions,
        SkillCatalog,
        SkillLoad,
        discover_skills,
        load_skill,
    )
    from skillgrove.skills.model import Availability, Entrypoint, Requirements, Skill
    from skillgrove.skills.safety import SafetyPolicy

_WHERE = {
    "Diagnostic": "diagnostics", "Severity": "diagnostics", "did_you_mean": "diagnostics",
    "ExpressionError": "errors", "ExpressionEvalError": "errors",
    "ExpressionSyntaxError": "errors", "LibraryError": "errors", "SkillgroveError": "errors",
    "LoadOptions": "loader", "SkillCatalog": "loader", "SkillLoad": "loader",
    "discover_skills": "loader", "load_skill": "loader",
    "Availability": "model", "Entrypoint": "model", "Requirements": "model", "Skill": "model",
    "SafetyPolicy": "safety",
}

__all__ = [
    "Availability",
    "Diagnostic",
    "Entrypoint",
    "ExpressionError",
    "ExpressionEvalError",
    "ExpressionSyntaxError",
    "LibraryError",
    "LoadOptions",
    "Requirements",
    "SafetyPolicy",
    "Severity",
    "Skill",
    "SkillCatalog",
    "SkillLoad",
    "SkillgroveError",
    "did_you_mean",
    "discover_skills",
    "load_skill",
]


def lazy_attribute(package: str, where: Mapping[str, str], namespace: MutableMapping[str, Any],
                   name: str) -> Any:
    """The body of a package's module ``__getattr__`` (PEP 562): ``name`` imported from the
    sub-module ``where[name]`` of ``package`` on first use, and kept in ``namespace`` (the
    package's globals) so later lookups do not come here again.

    >>> def __getattr__(name: str) -> Any:  # in a package's __init__.py
    ...     return lazy_attribute(__name__, {"Skill": "model"}, globals(), name)
    """
    module = where.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{package}.{module}"), name)
    namespace[name] = value
    return value


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _WHERE, globals(), name)
