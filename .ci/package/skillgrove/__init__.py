"""skillgrove: a group-structured skill graph engine for AI agents.

Everything an agent or a script needs goes through one object::

    >>> from skillgrove import Skillgrove
    >>> engine = Skillgrove(["library"])           # library folders, earliest first
    >>> engine.index()                              # builds ./.skillgrove/graph.sqlite
    >>> toolbox = engine.search("summarize the quarterly report PDF and email it")
    >>> toolbox.shape, toolbox.group.id

The four layers are sub-packages: ``skillgrove.skills`` (what a skill is),
``skillgrove.groups`` (what a group is), ``skillgrove.graph`` (stores, embeddings, retrieval)
and ``skillgrove.runtime`` (runner, injection, the engine, CLI and servers).

This file is the root of the installed package. In the repository it lives in
``.ci/package/skillgrove``, beside links to the four top-level folders, so that an editable
install exposes the same ``skillgrove.*`` names as the wheel (``pyproject.toml``). Importing it
is cheap: the engine, and with it the model and the stores, load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillgrove.graph.retrieval import RequestContext, Toolbox
    from skillgrove.runtime.engine import Skillgrove
    from skillgrove.runtime.errors import (
        ConfirmationRequired,
        EngineError,
        InvalidRequestError,
        NotFoundError,
        TooManyRuns,
    )
    from skillgrove.runtime.inject import BudgetError
    from skillgrove.runtime.runner import RunError
    from skillgrove.skills.errors import SkillgroveError

__all__ = ["BudgetError", "ConfirmationRequired", "EngineError", "InvalidRequestError",
           "NotFoundError", "RequestContext", "RunError", "Skillgrove", "SkillgroveError",
           "TooManyRuns", "Toolbox", "__version__"]

_LAZY = {
    "Skillgrove": "skillgrove.runtime.engine",
    "RequestContext": "skillgrove.graph.retrieval",
    "Toolbox": "skillgrove.graph.retrieval",
    # The one error tree (drawn in skillgrove.runtime.errors): catch SkillgroveError for all
    # of them, EngineError for what a caller asked that cannot be done (each has a ``code``).
    "SkillgroveError": "skillgrove.skills.errors",
    "EngineError": "skillgrove.runtime.errors",
    "NotFoundError": "skillgrove.runtime.errors",
    "InvalidRequestError": "skillgrove.runtime.errors",
    "ConfirmationRequired": "skillgrove.runtime.errors",
    "TooManyRuns": "skillgrove.runtime.errors",
    "BudgetError": "skillgrove.runtime.inject",
    "RunError": "skillgrove.runtime.runner",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("skillgrove")
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'skillgrove' has no attribute {name!r}")
