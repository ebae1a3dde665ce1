"""Where a library's runs record as edges only the data one step takes from another, a task
written after another is joined to it only when it refers back to its result ("then email
it"); the library's held-out history decides which reading it gets (``calibrate_order``)."""

from __future__ import annotations

import pytest

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.graph.indexer import index_library
from skillgrove.graph.learning import HistoryRow
from skillgrove.graph.retrieval import Retriever
from skillgrove.groups.library import load_library
from skillgrove.runtime.bench import MIN_CALIBRATION_ROWS, calibrate_order
from skillgrove.skills.loader import LoadOptions
from tests.helpers import write_skill

SKILLS = {
    "weather-forecast": "Get the weather forecast for a city for the coming days.",
    "send-email": "Send an email message to a person.",
    "set-alarm": "Set an alarm clock to ring at a given time.",
}
REFERRING = "Get the weather forecast for {city}. Then, email it to Ana."
INDEPENDENT = "Get the weather forecast for {city}. Then, set an alarm for {hour} am."
CITIES = ["Lyon", "Oslo", "Porto", "Quito", "Rome", "Sofia", "Tunis", "Lima", "Kyiv", "Bern"]


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory, encoder: CachedEncoder) -> Retriever:
    root = tmp_path_factory.mktemp("reference")
    for name, description in SKILLS.items():
        write_skill(root / "skills", name, f"---\nname: {name}\ndescription: {description}\n---\n")
    library = load_library([root], LoadOptions())
    assert not library.errors
    store = EmbeddedStore(None)
    index_library(library, store, encoder)
    return Retriever(store, encoder)


def edges(retriever: Retriever, request: str, referenced: bool) -> set[tuple[str, str]]:
    judge = Retriever(retriever.store, retriever.encoder,
                      retriever.settings.but(plan={"referenced": referenced}))
    toolbox = judge.search(request)
    names = {s.id: s.name for s in toolbox.skills}
    return {(names[a], names[b]) for a, b in toolbox.edges}


def test_a_task_that_refers_back_is_joined_either_way(retriever: Retriever) -> None:
    request = REFERRING.format(city="Lyon")
    for referenced in (False, True):
        assert edges(retriever, request, referenced) == {("weather-forecast", "send-email")}


def test_a_task_written_after_another_is_joined_only_by_default(retriever: Retriever) -> None:
    request = INDEPENDENT.format(city="Lyon", hour=7)
    assert edges(retriever, request, False) == {("weather-forecast", "set-alarm")}
    assert edges(retriever, request, True) == set()


def rows(retriever: Retriever, count: int, with_edges: bool) -> list[HistoryRow]:
    ids = {n.name: n.id for n in retriever.store.nodes()}
    pair = (ids["weather-forecast"], ids["set-alarm"])
    return [HistoryRow(str(i), INDEPENDENT.format(city=CITIES[i % 10], hour=5 + i % 4), pair,
                       (pair,) if with_edges else ())
            for i in range(count)]


def test_history_without_edges_for_written_order_turns_it_on(retriever: Retriever) -> None:
    fitted, details = calibrate_order(retriever, rows(retriever, MIN_CALIBRATION_ROWS, False))
    assert fitted.plan.referenced and details["referenced"] is True
    assert details["order_sample"] == MIN_CALIBRATION_ROWS


def test_history_with_edges_for_written_order_keeps_it(retriever: Retriever) -> None:
    fitted, details = calibrate_order(retriever, rows(retriever, MIN_CALIBRATION_ROWS, True))
    assert not fitted.plan.referenced and details["referenced"] is False


def test_too_few_rows_keep_the_default(retriever: Retriever) -> None:
    fitted, details = calibrate_order(retriever, rows(retriever, MIN_CALIBRATION_ROWS - 1,
                                                      False))
    assert not fitted.plan.referenced
    assert details == {"order_sample": MIN_CALIBRATION_ROWS - 1, "referenced": False}


def test_the_reason_says_which_task_runs_on_its_own(retriever: Retriever) -> None:
    judge = Retriever(retriever.store, retriever.encoder,
                      retriever.settings.but(plan={"referenced": True}))
    toolbox = judge.search("Get the weather forecast for Lyon. Then, email it to Ana. "
                           "Finally, set an alarm for 7 am.")
    names = {s.id: s.name for s in toolbox.skills}
    assert {(names[a], names[b]) for a, b in toolbox.edges} == {
        ("weather-forecast", "send-email")}
    assert "composed: weather-forecast -> send-email, with set-alarm on its own, ordered by " \
           "the order the request states" in toolbox.reason


def test_the_reason_tells_one_skill_for_every_task_from_tasks_without_one(
        retriever: Retriever) -> None:
    both = retriever.search("Get the weather forecast for Lyon. Then, get the weather forecast "
                            "for Oslo.")
    assert "the request asks for 2 things; one skill answers all of them" in both.reason
    lacking = retriever.search("Get the weather forecast for Lyon, then translate it into "
                               "German.")
    assert "the request asks for 2 things; only one skill here answers any of them" in \
        lacking.reason
