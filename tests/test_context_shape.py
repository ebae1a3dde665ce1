"""One ``context`` shape for every engine method that takes one: ``{values, recent_skills,
conversation}``. A plan or run reads ``context.values`` as ``${{ context.<key> }}``; a flat object
of values, or any other key at the top, is refused with one error that names the key and says
the fix (worded once, in runtime/errors.py). The HTTP API, the MCP tools and the CLI say the same
words: tests/test_http_server.py, tests/test_mcp_server.py and tests/test_cli_bad_input.py."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skillgrove import InvalidRequestError, Skillgrove
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.graph.toolbox import RequestContext
from skillgrove.runtime.engine import Composed
from skillgrove.runtime.paths import bundled_library

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
REPORT = str(bundled_library() / "samples" / "quarterly_report.pdf")
REQUEST = "summarize the quarterly report PDF and email the key numbers to my team"
VALUES = {"team_email": "shape@example.com", "report_name": "Q3"}

FLAT = ('context.team_email: unknown field: a context is {values, recent_skills, '
        'conversation}; put what you know under values: {"values": {"team_email": ...}}')
"""What every interface answers to a flat context whose first key is team_email."""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, encoder: CachedEncoder) -> Skillgrove:
    return Skillgrove([bundled_library()], index=tmp_path_factory.mktemp("shape") / "index",
                      encoder=encoder)


@pytest.mark.parametrize("context", [
    {"values": VALUES},
    {"values": VALUES, "recent_skills": ["pdf-to-text"], "conversation": ["mail it"]},
    RequestContext(VALUES),
], ids=["values", "whole-shape", "made"])
def test_a_plan_reads_the_values_of_the_context(engine: Skillgrove, context: Any) -> None:
    plan = engine.plan("report-analysis", {"pdf_path": REPORT}, context)
    notify = next(step for step in plan.steps if step.id == "notify")
    assert notify.skip_reason is None
    assert notify.inputs["to"] == "shape@example.com"


def test_a_run_reads_the_values_and_records_them(engine: Skillgrove, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLGROVE_OUTBOX", str(tmp_path / "outbox"))
    record = engine.run("report-analysis", {"pdf_path": REPORT},
                        {"values": VALUES, "recent_skills": ["pdf-to-text"]})
    assert record.status == "success", record.error
    assert record.step("notify").status == "success"  # type: ignore[union-attr]
    assert dict(record.context) == VALUES
    assert any("shape@example.com" in p.read_text() for p in (tmp_path / "outbox").iterdir())


CALLS: dict[str, Callable[[Skillgrove, Any], object]] = {
    "search": lambda e, c: e.search(REQUEST, c),
    "toolbox": lambda e, c: e.toolbox(REQUEST, c),
    "ask": lambda e, c: e.ask(REQUEST, c, plan_only=True),
    "inject": lambda e, c: e.inject(REQUEST, context=c),
    "plan": lambda e, c: e.plan("report-analysis", {"pdf_path": REPORT}, c),
    "run": lambda e, c: e.run("report-analysis", {"pdf_path": REPORT}, c),
    # The context's mistake comes before the question of confirming the mail.
    "run-unconfirmed": lambda e, c: e.run("report-analysis", {"pdf_path": REPORT}, c,
                                          confirm=False),
    "run_composed": lambda e, c: e.run_composed(
        Composed("", e.group("report-analysis"), ()), {"pdf_path": REPORT}, c),
}

MISTAKES = [
    pytest.param(VALUES, "context.team_email", FLAT, id="flat"),
    pytest.param({"values": VALUES, "team_email": "x"}, "context.team_email",
                 FLAT, id="flat-beside-values"),
    pytest.param({"value": VALUES}, "context.value",
                 "context.value: unknown field (did you mean 'values'?)", id="value"),
    pytest.param({"recent_skill": ["pdf-to-text"]}, "context.recent_skill",
                 "context.recent_skill: unknown field (did you mean 'recent_skills'?)",
                 id="recent_skill"),
    pytest.param({"values": VALUES, "conversations": ["hi"]}, "context.conversations",
                 "context.conversations: unknown field (did you mean 'conversation'?)",
                 id="conversations"),
    pytest.param({"values": VALUES, "recent_skills": "pdf-to-text"}, "context.recent_skills",
                 "context.recent_skills: must be a list of strings (got string)",
                 id="recent_skills-a-string"),
    pytest.param(["team@example.com"], "context",
                 "context: must be an object with values, recent_skills and conversation "
                 "(got array)", id="a-list"),
]


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
@pytest.mark.parametrize(("context", "field", "message"), MISTAKES)
def test_every_method_refuses_another_shape_in_the_same_words(
        engine: Skillgrove, call: Callable[[Skillgrove, Any], object], context: Any,
        field: str, message: str) -> None:
    before = len(engine.runs())
    with pytest.raises(InvalidRequestError) as refused:
        call(engine, context)
    assert refused.value.field == field
    assert str(refused.value) == message
    assert refused.value.to_dict() == {"code": "invalid_request", "message": message,
                                       "details": {"field": field}}
    assert len(engine.runs()) == before  # nothing ran


def test_the_readme_shows_the_refusal_as_it_comes_back(engine: Skillgrove) -> None:
    start = README.index("**One `context` shape everywhere**")
    match = re.compile(r"```text\n(.*?)```", re.S).search(README, start)
    assert match is not None
    said = []
    for context in (VALUES, {"value": VALUES}):
        with pytest.raises(InvalidRequestError) as refused:
            engine.search(REQUEST, context)
        said.append(str(refused.value))
    assert match.group(1).splitlines() == said
