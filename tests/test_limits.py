"""The limits of a request live in runtime/limits.py with the words that refuse them: the engine
and the request models (the HTTP bodies, the MCP tools' arguments) apply the same rules, so a
``k``, a request or a budget out of bounds is refused alike on every interface. The servers
say these words too: tests/test_http_server.py and tests/test_mcp_server.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skillgrove import InvalidRequestError, Skillgrove
from skillgrove.runtime.api import AskRequest, InjectRequest, SearchArguments, SearchRequest, parse
from skillgrove.runtime.limits import DEFAULT_K, MAX_K, MIN_BUDGET, MIN_K
from skillgrove.runtime.paths import bundled_library

K = f"k: must be a whole number from {MIN_K} to {MAX_K}"
REQUEST = "request: must be a non-empty string"
BUDGET = "budget: must be a positive number of tokens"

MISTAKES = [
    pytest.param({"request": "x", "k": MIN_K - 1}, K, id="k-below"),
    pytest.param({"request": "x", "k": MAX_K + 1}, K, id="k-above"),
    pytest.param({"request": ""}, REQUEST, id="request-empty"),
    pytest.param({"request": "  \n"}, REQUEST, id="request-blank"),
    pytest.param({"request": "x", "budget": MIN_BUDGET - 1}, BUDGET, id="budget-zero"),
    pytest.param({"request": "x", "budget": -5}, BUDGET, id="budget-negative"),
]


def _engine_call(engine: Skillgrove, given: dict[str, Any]) -> Callable[[], object]:
    if "budget" in given:
        return lambda: engine.inject(given["request"], budget=given["budget"])
    return lambda: engine.search(given["request"], k=given.get("k", DEFAULT_K))


@pytest.mark.parametrize(("given", "message"), MISTAKES)
def test_the_engine_and_the_request_models_refuse_alike(tmp_path: Path, given: dict[str, Any],
                                                        message: str) -> None:
    # The checks come before anything is indexed: no encoder is needed.
    engine = Skillgrove([bundled_library()], index=tmp_path / "index")
    with pytest.raises(InvalidRequestError) as by_engine:
        _engine_call(engine, given)()
    assert str(by_engine.value) == message
    # inject's request may be left out (the run's own is used): only its budget is here.
    models = [InjectRequest, AskRequest] if "budget" in given else \
        [m for m in (SearchRequest, SearchArguments, AskRequest) if set(given) <= m.model_fields.keys()]
    assert models
    for model in models:
        with pytest.raises(InvalidRequestError) as by_model:
            parse(model, given)
        assert str(by_model.value) == message, model.__name__
        assert by_model.value.field == by_engine.value.field


def test_the_bounds_are_in_the_schemas_that_clients_read() -> None:
    search = SearchArguments.model_json_schema()["properties"]
    assert (search["k"]["minimum"], search["k"]["maximum"], search["k"]["default"]) == \
        (MIN_K, MAX_K, DEFAULT_K)
    assert search["request"]["minLength"] == 1
    budget = InjectRequest.model_json_schema()["properties"]["budget"]
    assert {"minimum": MIN_BUDGET, "type": "integer"} in budget["anyOf"]


@pytest.mark.parametrize("k", [MIN_K, DEFAULT_K, MAX_K])
def test_every_k_within_the_bounds_is_taken(k: int) -> None:
    assert parse(SearchRequest, {"request": "x", "k": k}).k == k
