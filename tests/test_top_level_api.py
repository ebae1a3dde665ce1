"""What ``import skillgrove`` offers: the engine and the one error tree."""

from __future__ import annotations


def test_the_error_tree_is_exported_at_the_top() -> None:
    import skillgrove
    from skillgrove import (
        BudgetError,
        ConfirmationRequired,
        EngineError,
        InvalidRequestError,
        NotFoundError,
        RunError,
        SkillgroveError,
        TooManyRuns,
    )

    assert issubclass(EngineError, SkillgroveError)
    for error in (NotFoundError, InvalidRequestError, ConfirmationRequired, TooManyRuns,
                  RunError, BudgetError):
        assert issubclass(error, EngineError), error
        assert error.__name__ in skillgrove.__all__
    assert {NotFoundError.code, InvalidRequestError.code, RunError.code} == {
        "not_found", "invalid_request", "run_error"}
