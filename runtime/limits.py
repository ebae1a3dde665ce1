"""The limits of a request, written down once for every interface (the models of
:mod:`skillgrove.runtime.api`, the MCP tools' schemas, the CLI's arguments, the engine).

Each limit comes with the rule that checks it, in the words every interface answers with
(``k: must be a whole number from 1 to 50``): the engine applies the rules, and the request
models apply the same ones, so HTTP, MCP and the Python API refuse a value alike. This module
imports nothing, so the command line can read it before it parses its arguments::

    >>> k_problem(51)
    'must be a whole number from 1 to 50'
    >>> k_problem(DEFAULT_K) is None
    True
"""

from __future__ import annotations

MIN_K = 1
"""Single skills a search ranks at least."""
MAX_K = 50
"""Single skills a search ranks at most."""
DEFAULT_K = 10
"""Single skills a search ranks when not told."""
MIN_REQUEST_LENGTH = 1
"""Characters a request holds at least, blanks aside."""
MIN_BUDGET = 1
"""Tokens an injected block's budget must allow at least (the smallest block needs more; that
is :class:`~skillgrove.runtime.inject.BudgetError`)."""


def k_problem(k: object) -> str | None:
    """What is wrong with ``k``, how many single skills a search ranks; None when nothing."""
    if isinstance(k, bool) or not isinstance(k, int) or not MIN_K <= k <= MAX_K:
        return f"must be a whole number from {MIN_K} to {MAX_K}"
    return None


def request_problem(request: object) -> str | None:
    """What is wrong with a request (the task in the user's words); None when nothing."""
    if not isinstance(request, str) or len(request.strip()) < MIN_REQUEST_LENGTH:
        return "must be a non-empty string"
    return None


def budget_problem(budget: object) -> str | None:
    """What is wrong with a token budget (None: no budget); None when nothing."""
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)
                               or budget < MIN_BUDGET):
        return "must be a positive number of tokens"
    return None
