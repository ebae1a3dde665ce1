"""Skills: what a skill is (a folder with SKILL.md) and how a library of them is found on disk."""

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
