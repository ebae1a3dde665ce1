"""Injection: results with provenance, instructions by importance, a budget that degrades.

The block's treatment of run values (fencing, describing, deduplication, the hard budget) on
real runs of the bundled library is in ``test_inject_block.py``."""

from __future__ import annotations

import pytest

from skillgrove.graph import EmbeddedStore, Retriever, index_library
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.graph.runlog import RunRecord, StepRecord
from skillgrove.groups import load_library
from skillgrove.runtime.inject import STAGES, BudgetError, build_injection, count_tokens
from tests.helpers import copy_fixture_library

REPORT_REQUEST = "summarize the quarterly report PDF and email the key numbers to my team"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, encoder: CachedEncoder):  # type: ignore[no-untyped-def]
    root = copy_fixture_library(tmp_path_factory.mktemp("lib"))
    body = root / "skills" / "send-email" / "SKILL.md"
    body.write_text(body.read_text() + "\nTemplates live in {baseDir}/templates.\n")
    library = load_library([root])
    store = EmbeddedStore(None)
    index_library(library, store, encoder)
    return library, Retriever(store, encoder)


def run_record() -> RunRecord:
    steps = (
        StepRecord("extract_text", "pdf-to-text", "skill", "success", {"path": "q3.pdf"},
                   {"text": "Revenue grew 12% to 4.2M. " * 40, "pages": 2}),
        StepRecord("metrics", "extract-metrics", "skill", "success", {},
                   {"metrics": [{"label": "revenue", "value": 4.2}]}),
        StepRecord("summarize", "summarize-text", "skill", "success", {},
                   {"summary": "Revenue grew 12%."}),
        StepRecord("notify", "send-email", "skill", "failure",
                   {"to": "team@example.com", "body": "Revenue grew 12%."}, {}, "SMTP refused"),
    )
    return RunRecord("r1", "report-analysis", "failure", {"pdf_path": "q3.pdf"}, {},
                     {"summary": "Revenue grew 12%."}, steps, 0.0, 1.0,
                     error="step 'notify' failed: SMTP refused")


def test_results_carry_provenance_and_instructions_follow(setup) -> None:  # type: ignore[no-untyped-def]
    library, retriever = setup
    toolbox = retriever.search(REPORT_REQUEST)
    injection = build_injection(toolbox, library.catalog.by_id(), run_record())
    text = injection.text
    assert "Group **Report analysis and notification**" in text
    assert "- **summary** (group output): Revenue grew 12%." in text
    assert "- step `notify` (send-email): failure — SMTP refused" in text
    # the failed step's inputs explain the failure; the successful steps' outputs are
    # intermediate and stay in the run record
    assert "### Step `notify` (skill `send-email`)" in text
    assert "- `notify` input `to`: team@example.com" in text
    assert "metrics.metrics" not in text and "Revenue grew 12% to 4.2M." not in text
    assert "extract_text" not in text
    # the step that did not complete gets its full instructions, {baseDir} resolved
    folder = library.skills["send-email"].folder
    assert "### send-email" in text and f"Templates live in {folder}/templates." in text
    assert "{baseDir}" not in text
    assert text.index("## Results") < text.index("## Instructions")
    assert injection.level == "full" and injection.left_out == ()
    assert injection.tokens == count_tokens(text)


def test_fallback_lists_full_text_for_top_skills_and_a_menu(setup) -> None:  # type: ignore[no-untyped-def]
    library, retriever = setup
    toolbox = retriever.search("translate this paragraph into German")
    text = build_injection(toolbox, library.catalog.by_id()).text
    assert text.startswith("# Toolbox for: translate this paragraph into German")
    assert "No prebuilt group fits" in text
    assert "### translate-text" in text and "Translate faithfully" in text
    # the runner-up scores half of translate-text: too far below to be worth listing
    assert "## Also available" not in text and "summarize-text" not in text


def test_budget_degrades_in_stages_and_says_what_it_left_out(setup) -> None:  # type: ignore[no-untyped-def]
    library, retriever = setup
    toolbox = retriever.search(REPORT_REQUEST)
    skills = library.catalog.by_id()
    full = build_injection(toolbox, skills, run_record())
    assert full.level == "full"
    order = [stage.level for stage in STAGES]
    reached = []
    for budget in range(full.tokens, 0, -10):
        try:
            injection = build_injection(toolbox, skills, run_record(), budget=budget)
        except BudgetError as exc:
            assert exc.details["minimum"] > budget and exc.field == "budget"
            break
        assert injection.tokens <= budget and injection.tokens == count_tokens(injection.text)
        reached.append(injection.level)
    else:
        raise AssertionError("no budget was too small")
    assert reached == sorted(reached, key=order.index)  # stages only ever go further
    assert {"summaries", "names"} <= set(reached)
    summarized = build_injection(toolbox, skills, run_record(), budget=full.tokens - 5)
    assert "Left out to fit the token budget: full instructions of" in summarized.text
    assert summarized.left_out and summarized.level == "summaries"


def test_a_budget_below_one_token_is_refused(setup) -> None:  # type: ignore[no-untyped-def]
    from skillgrove.runtime.errors import InvalidRequestError

    library, retriever = setup
    toolbox = retriever.search(REPORT_REQUEST)
    for budget in (0, -5):
        with pytest.raises(InvalidRequestError, match="budget: must be a positive number"):
            build_injection(toolbox, library.catalog.by_id(), budget=budget)


def test_xml_catalog_format(setup) -> None:  # type: ignore[no-untyped-def]
    library, retriever = setup
    toolbox = retriever.search("translate this paragraph into German")
    text = build_injection(toolbox, library.catalog.by_id(), fmt="xml").text
    assert text.startswith('<toolbox request="translate this paragraph into German">')
    assert "<available_skills>" in text and '<skill name="translate-text"' in text
    import xml.dom.minidom

    xml.dom.minidom.parseString(text)  # well-formed


def test_token_counts_are_real_bpe() -> None:
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
    assert count_tokens(" ".join(["hello world"] * 100)) == 200


