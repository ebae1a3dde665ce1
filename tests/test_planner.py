"""The toolbox planner: a request's parts, and the order of a composed toolbox's skills.

Tables of requests with the parts expected, and of selections with the edges expected and
which evidence gave each."""

from __future__ import annotations

import pytest

from skillgrove.graph.planner import (
    Join,
    Part,
    data_flow_edges,
    plan_edges,
    request_parts,
    stated_order,
)

PARTS = [
    # (request, [(part, join)])
    ("translate this paragraph into German",
     [("translate this paragraph into German", "first")]),
    ("Give me the forecast for Lyon, the current weather and the time zone there",
     [("Give me the forecast for Lyon", "first"), ("the current weather", "list"),
      ("the time zone there", "list")]),
    ("change my Monday alarm, then set a new one for Saturday",
     [("change my Monday alarm", "first"), ("set a new one for Saturday", "sequence")]),
    ("zip up these three files and email them to Bob",
     [("zip up these three files", "first"), ("email them to Bob", "list")]),
    ("Get the quote for a restaurant. After that, create an admin named Jo. Finally, send it.",
     [("Get the quote for a restaurant", "first"), ("create an admin named Jo", "sequence"),
      ("send it", "sequence")]),
    # A short list item is an argument of the part before it, not a task.
    ("weather in Paris and London", [("weather in Paris and London", "first")]),
    ("Search for flights and hotels", [("Search for flights and hotels", "first")]),
    # Numbers keep their commas and points.
    ("weather at 34.0522,-118.2437 please", [("weather at 34.0522,-118.2437 please", "first")]),
    # "next" and "finally" inside a clause do not sequence.
    ("remind me next Monday at 9", [("remind me next Monday at 9", "first")]),
    ("1. fetch the report\n2. summarize it for the board\n3. email the summary",
     [("fetch the report", "first"), ("summarize it for the board", "sequence"),
      ("email the summary", "sequence")]),
    ("- fetch the report\n- summarize it for the board",
     [("fetch the report", "first"), ("summarize it for the board", "list")]),
    # Ordinals and "once ..." move on to the next task too.
    ("Firstly, detect pathogens in my wheat. Secondly, retrieve the library resource info.",
     [("Firstly detect pathogens in my wheat", "first"),
      ("retrieve the library resource info", "sequence")]),
    ("Create the subnet. Once the subnet is created, retrieve the facility capacity.",
     [("Create the subnet", "first"), ("Once the subnet is created", "sequence"),
      ("retrieve the facility capacity", "list")]),
    ("send me the report once a week", [("send me the report once a week", "first")]),
    ("帮我把这份PDF报告总结一下，然后把关键数字发邮件给团队",
     [("帮我把这份PDF报告总结一下", "first"), ("把关键数字发邮件给团队", "sequence")]),
]


@pytest.mark.parametrize(("request_text", "expected"), PARTS)
def test_request_parts(request_text: str, expected: list[tuple[str, str]]) -> None:
    assert [(p.text, p.join.value) for p in request_parts(request_text)] == expected


def test_an_order_is_stated_only_by_a_sequencing_word() -> None:
    assert stated_order(request_parts("fetch the page, then summarize it"))
    assert not stated_order(request_parts("fetch the page and summarize the results"))


def parts(*joins: str) -> list[Part]:
    return [Part(f"part {i}", Join(j)) for i, j in enumerate(joins)]


PLANS = [
    # (selected, part_of, joins, declared, data flow, observed, expected edges with evidence)
    (["b", "a"], {"a": 0, "b": 1}, ("first", "sequence"), [], [], {},
     [("a", "b", "stated")]),
    # The order stated beats the order history usually took.
    (["a", "b"], {"a": 0, "b": 1}, ("first", "sequence"), [], [], {("b", "a"): 9.0},
     [("a", "b", "stated")]),
    # A declared prerequisite beats the order stated.
    (["a", "b"], {"a": 0, "b": 1}, ("first", "sequence"), [("b", "a")], [], {},
     [("b", "a", "declared")]),
    # History's direction where the request states none.
    (["a", "b"], {}, (), [], [], {("b", "a"): 3.0, ("a", "b"): 1.0},
     [("b", "a", "observed")]),
    # Data flow beats history.
    (["a", "b"], {}, (), [], [("a", "b")], {("b", "a"): 3.0}, [("a", "b", "data flow")]),
    # Listed parts that nothing else joins are chained as written.
    (["c", "a", "b"], {"a": 0, "b": 1, "c": 2}, ("first", "list", "list"), [], [], {},
     [("a", "b", "listed"), ("b", "c", "listed")]),
    # ...but not where evidence already joins them.
    (["a", "b", "c"], {"a": 0, "b": 1, "c": 2}, ("first", "list", "list"), [], [("a", "c")],
     {}, [("a", "b", "listed"), ("a", "c", "data flow")]),
    # Nothing known: no edges.
    (["a", "b"], {}, (), [], [], {}, []),
    # A part no skill answers (a sentence of details) does not break the order written.
    (["a", "b"], {"a": 0, "b": 2}, ("first", "list", "sequence"), [], [], {},
     [("a", "b", "stated")]),
    (["a", "b", "c"], {"a": 0, "b": 2, "c": 4}, ("first", "list", "list", "list", "list"), [],
     [], {}, [("a", "b", "listed"), ("b", "c", "listed")]),
]


@pytest.mark.parametrize(("selected", "part_of", "joins", "declared", "flow", "observed",
                          "expected"), PLANS)
def test_plan_edges(selected: list[str], part_of: dict[str, int], joins: tuple[str, ...],
                    declared: list[tuple[str, str]], flow: list[tuple[str, str]],
                    observed: dict[tuple[str, str], float],
                    expected: list[tuple[str, str, str]]) -> None:
    plan = plan_edges(selected, part_of=part_of, parts=parts(*joins), declared=declared,
                      data_flow=flow, observed=observed)
    assert sorted((a, b, plan.why[(a, b)]) for a, b in plan.edges) == sorted(expected)
    position = {s: i for i, s in enumerate(plan.order)}
    assert all(position[a] < position[b] for a, b in plan.edges)


def test_a_cycle_of_evidence_keeps_the_stronger_edge() -> None:
    plan = plan_edges(["a", "b", "c"], declared=[("a", "b")], data_flow=[("b", "c")],
                      observed={("c", "a"): 5.0})
    assert set(plan.edges) == {("a", "b"), ("b", "c")}


DATA_FLOW = [
    ({"a": ({"text": "string"}, {}), "b": ({}, {"text": "string"})}, [("a", "b")]),
    # Types must agree (numbers with integers do).
    ({"a": ({"text": "string"}, {}), "b": ({}, {"text": "array"})}, []),
    ({"a": ({"n": "integer"}, {}), "b": ({}, {"n": "number"})}, [("a", "b")]),
    # Undeclared types are taken on trust.
    ({"a": ({"path": ""}, {}), "b": ({}, {"path": "string"})}, [("a", "b")]),
    # A pair that flows both ways tells no order.
    ({"a": ({"x": ""}, {"y": ""}), "b": ({"y": ""}, {"x": ""})}, []),
]


@pytest.mark.parametrize(("contracts", "expected"), DATA_FLOW)
def test_data_flow_edges(contracts: dict[str, tuple[dict[str, str], dict[str, str]]],
                         expected: list[tuple[str, str]]) -> None:
    assert data_flow_edges(contracts) == expected


def test_referenced_joins_only_a_task_that_refers_back() -> None:
    """``referenced``: a task joins the one before it only by words referring back to its
    result, found in the task's part or in the details after it that no skill answers."""
    written = [Part("get the forecast for Lyon", Join.FIRST),
               Part("set an alarm for 7", Join.SEQUENCE),
               Part("email it to Ana", Join.SEQUENCE)]
    plan = plan_edges(["a", "b", "c"], part_of={"a": 0, "b": 1, "c": 2}, parts=written,
                      referenced=True)
    assert plan.edges == (("b", "c"),)
    assert plan_edges(["a", "b", "c"], part_of={"a": 0, "b": 1, "c": 2},
                      parts=written).edges == (("a", "b"), ("b", "c"))
    detailed = [Part("create the subnet", Join.FIRST),
                Part("retrieve the facility capacity", Join.SEQUENCE),
                Part("using the ID received from the previous response", Join.LIST),
                Part("validate the insurance benefits", Join.SEQUENCE)]
    plan = plan_edges(["a", "b", "c"], part_of={"a": 0, "b": 1, "c": 3}, parts=detailed,
                      referenced=True)
    assert plan.edges == (("a", "b"),) and plan.why[("a", "b")] == "stated"
