"""Skills: what a skill is (a folder with SKILL.md) and how a library of them is found on disk."""

from skills.diagnostics import Diagnostic, Severity, did_you_mean
from skills.errors import (
    ExpressionError,
    ExpressionEvalError,
    ExpressionSyntaxError,
    LibraryError,
    SkillgroveError,
)
from skills.loader import LoadOptions, SkillCatalog, SkillLoad, discover_skills, load_skill
from skills.model import Availability, Entrypoint, Requirements, Skill
from skills.safety import SafetyPolicy

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
