"""The Python API reads the one context shape for runs and plans as search takes it: a group
reads ``context.values`` as ``${{ context.<key> }}`` (a flat object of values still works)."""

from __future__ import annotations

import pytest

from skillgrove import InvalidRequestError, Skillgrove
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.runtime.paths import bundled_library

REPORT = str(bundled_library() / "samples" / "quarterly_report.pdf")
VALUES = {"team_email": "shape@example.com", "report_name": "Q3"}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, encoder: CachedEncoder) -> Skillgrove:
    return Skillgrove([bundled_library()], index=tmp_path_factory.mktemp("shape") / "index",
                      encoder=encoder)


@pytest.mark.parametrize("context", [
    {"values": VALUES},
    {"values": VALUES, "recent_skills": ["pdf-to-text"], "conversation": ["mail it"]},
    VALUES,  # the flat object of values
], ids=["values", "whole-shape", "flat"])
def test_a_plan_reads_the_values_of_the_context(engine: Skillgrove,
                                                context: dict[str, object]) -> None:
    plan = engine.plan("report-analysis", {"pdf_path": REPORT}, context)
    notify = next(step for step in plan.steps if step.id == "notify")
    assert notify.skip_reason is None
    assert notify.inputs["to"] == "shape@example.com"


def test_a_context_of_the_one_shape_with_a_mistake_names_it(engine: Skillgrove) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        engine.plan("report-analysis", {"pdf_path": REPORT},
                    {"values": VALUES, "recent_skills": "pdf-to-text"})
    assert refused.value.field == "context.recent_skills"
