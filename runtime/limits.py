"""The limits of a request, written down once for every interface (the models of
:mod:`skillgrove.runtime.api`, the MCP tools' schemas, the CLI's arguments, the engine).

This module imports nothing, so the command line can read it before it parses its arguments.
"""

from __future__ import annotations

MAX_K = 50
"""Single skills a search ranks at most."""
DEFAULT_K = 10
"""Single skills a search ranks when not told."""
MIN_BUDGET = 1
"""Tokens an injected block's budget must allow at least (the smallest block needs more; that
is :class:`~skillgrove.runtime.inject.BudgetError`)."""
