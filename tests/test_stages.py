"""Retrieval's stages one at a time (``graph/stages``), as tables: what fits, what the selection
keeps, what is suggested and why, and the settings that turn each stage off (None).

The stages running together on a real library are in ``test_library_retrieval.py`` (requests
and the toolboxes they get, in order, with each stage on and off)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from skillgrove.graph.model import Edge, EdgeKind, NodeKind, NodeRecord
from skillgrove.graph.stages import (
    DEFAULT_SETTINGS,
    FinalSteps,
    GroupSettings,
    PlanSettings,
    Settings,
    Siblings,
    SkillSettings,
)
from skillgrove.graph.stages.skills import balanced_weight, fits, selection_cut
from skillgrove.graph.stages.suggestions import SuggestionSettings, suggest
from skillgrove.graph.toolbox import SkillExplanation

# -- stage 1: candidate skills ----------------------------------------------------------------

# (what the request is, score, explanation, fits by default)
FITS: list[tuple[str, float, SkillExplanation, bool]] = [
    ("words and embedding agree", 0.40, SkillExplanation(vector=0.45, lexical=0.3), True),
    ("a long request, few shared words", 0.19, SkillExplanation(vector=0.23, lexical=0.05), True),
    ("the embedding alone: no shared word", 0.19, SkillExplanation(vector=0.23, lexical=0.0), False),
    ("words alone: the embedding far off", 0.30, SkillExplanation(vector=0.10, lexical=0.6), False),
    ("within the slack, carried by the score", 0.26, SkillExplanation(vector=0.19, lexical=0.2), True),
    ("within the slack, too weak a score", 0.20, SkillExplanation(vector=0.19, lexical=0.2), False),
    ("mostly CJK: the score alone", 0.26, SkillExplanation(vector=0.05, lexical=0.4, cjk=True), True),
    ("mostly CJK, below the bar", 0.20, SkillExplanation(vector=0.60, lexical=0.1, cjk=True), False),
    ("no vector evidence (fast route)", 0.30, SkillExplanation(lexical=0.3), True),
]


@pytest.mark.parametrize(("case", "score", "explanation", "expected"), FITS,
                         ids=[row[0] for row in FITS])
def test_what_fits_a_request_on_its_own(case: str, score: float,
                                        explanation: SkillExplanation, expected: bool) -> None:
    assert fits(SkillSettings(), score, explanation) is expected


def test_without_the_embedding_rule_the_score_alone_decides() -> None:
    off = SkillSettings(fit_cosine=None)
    assert fits(off, 0.30, SkillExplanation(vector=0.10, lexical=0.6))
    assert not fits(off, 0.19, SkillExplanation(vector=0.23, lexical=0.05))


# (best score, the lowest score selected beside it)
CUTS = [(0.80, 0.68), (0.40, 0.34), (0.26, 0.25), (0.20, 0.20)]


@pytest.mark.parametrize(("top", "cut"), CUTS)
def test_the_selection_keeps_skills_near_the_best(top: float, cut: float) -> None:
    assert selection_cut(SkillSettings(), top) == pytest.approx(cut)


# (candidates as (cosine, lexical), the embedding's balanced share)
BALANCES = [
    # The words spread the candidates as far as the embedding: equal shares.
    ([(0.5, 0.3), (0.2, 0.0)], 0.5),
    # The embedding spreads them three times as far: the words count three times as much.
    ([(0.6, 0.1), (0.3, 0.0), (0.4, 0.05)], 0.25),
    # The words spread them further: the embedding still counts at most half.
    ([(0.5, 0.9), (0.4, 0.0)], 0.5),
    # No candidate shares a word with the request: as at equal shares.
    ([(0.5, 0.0), (0.3, 0.0)], 0.5),
    ([], 0.5),
]


@pytest.mark.parametrize(("evidence", "share"), BALANCES)
def test_the_embedding_and_the_words_count_by_how_far_they_spread_the_candidates(
        evidence: list[tuple[float, float]], share: float) -> None:
    assert balanced_weight(evidence) == pytest.approx(share)


def test_a_balanced_share_ranks_as_min_max_fusion() -> None:
    candidates = [(0.62, 0.10), (0.40, 0.20), (0.55, 0.05), (0.30, 0.0), (0.50, 0.15)]
    share = balanced_weight(candidates)
    mixed = sorted(range(5), key=lambda i: -(share * candidates[i][0]
                                              + (1 - share) * candidates[i][1]))
    cosines, lexicals = zip(*candidates, strict=True)

    def rescaled(values: Sequence[float], value: float) -> float:
        return (value - min(values)) / (max(values) - min(values))

    fused = sorted(range(5), key=lambda i: -(rescaled(cosines, candidates[i][0])
                                             + rescaled(lexicals, candidates[i][1])))
    assert share < 0.5 and mixed == fused


# -- stage 4: suggestions ---------------------------------------------------------------------


class _Reads:
    """A library of a few nodes and edges, read as a search reads the store."""

    def __init__(self, nodes: Sequence[NodeRecord], edges: Sequence[Edge],
                 vectors: Mapping[str, Sequence[float]] | None = None) -> None:
        self.nodes = {n.id: n for n in nodes}
        self.edges = list(edges)
        self.vectors = {nid: np.array(v, dtype=np.float32) for nid, v in (vectors or {}).items()}

    def fetch(self, nodes: Iterable[str] = (), vectors: Iterable[str] = (),
              neighbors: Iterable[str] = ()) -> None:
        pass

    def node(self, node_id: str) -> NodeRecord | None:
        return self.nodes.get(node_id)

    def vector(self, node_id: str) -> Any:
        return self.vectors.get(node_id)

    def neighbors(self, node_id: str, kinds: Sequence[EdgeKind] | None = None,
                  ) -> list[tuple[Edge, NodeRecord]]:
        out = []
        for edge in self.edges:
            if kinds is not None and edge.kind not in kinds:
                continue
            if node_id in (edge.src, edge.dst):
                other = edge.dst if edge.src == node_id else edge.src
                out.append((edge, self.nodes[other]))
        return out


def _skill(name: str, **data: Any) -> NodeRecord:
    return NodeRecord(name, NodeKind.SKILL, name, name, name, data)


LIBRARY = _Reads(
    [_skill("pdf-to-text"), _skill("summarize"), _skill("send-email"), _skill("zip"),
     _skill("ocr", companions=[{"id": "pdf-to-text", "name": "pdf-to-text",
                                "reason": "its text names pdf-to-text"}]),
     _skill("pdf-to-text-copy"),
     NodeRecord("report", NodeKind.GROUP, "report", "", "",
                {"members": ["pdf-to-text", "summarize", "send-email"]})],
    [Edge(EdgeKind.CONTAINS, "report", "pdf-to-text"),
     Edge(EdgeKind.CO_USED, "zip", "send-email", 3.0),
     Edge(EdgeKind.FLOWS_TO, "summarize", "send-email"),
     Edge(EdgeKind.SIMILAR_TO, "pdf-to-text", "pdf-to-text-copy", 0.9)])

# (the selection, suggested (name, why) in order)
SUGGESTED = [
    (["pdf-to-text"], [("send-email", "in group 'report' with pdf-to-text"),
                       ("summarize", "in group 'report' with pdf-to-text")]),
    (["zip"], [("send-email", "used with zip 3x")]),
    (["send-email"], [("zip", "used with send-email 3x"),
                      ("summarize", "runs before send-email in a group")]),
    (["ocr"], [("pdf-to-text", "ocr: its text names pdf-to-text")]),
    (["pdf-to-text", "summarize", "send-email"], [("zip", "used with send-email 3x")]),
]


@pytest.mark.parametrize(("selected", "expected"), SUGGESTED)
def test_what_is_usually_used_with_the_selection(selected: list[str],
                                                 expected: list[tuple[str, str]]) -> None:
    found = suggest(LIBRARY, selected, set(selected), SuggestionSettings())
    assert [(s.name, s.reason) for s in found] == expected


def test_a_substitute_is_never_a_suggestion() -> None:
    found = suggest(LIBRARY, ["pdf-to-text"], {"pdf-to-text"}, SuggestionSettings())
    assert "pdf-to-text-copy" not in {s.name for s in found}


def test_companions_the_library_names_go_closest_to_the_request_first_each_selected_in_turn(
        ) -> None:
    """Every companion a library names weighs the same: the request orders them, and each
    selected skill's closest comes before any selected skill's second."""
    def named(*names: str) -> list[dict[str, str]]:
        return [{"id": n, "name": n, "reason": "named"} for n in names]

    library = _Reads(
        [_skill("slides", companions=named("art", "charts", "pptx")),
         _skill("deck", companions=named("image-gen")),
         *(_skill(n) for n in ("art", "charts", "pptx", "image-gen"))], [],
        vectors={"art": [0.0, 1.0], "charts": [0.6, 0.8], "pptx": [1.0, 0.0],
                 "image-gen": [0.0, 1.0]})
    request = np.array([1.0, 0.0], dtype=np.float32)
    found = suggest(library, ["slides", "deck"], {"slides", "deck"}, SuggestionSettings(),
                    request)
    assert [s.name for s in found] == ["pptx", "image-gen", "charts", "art"]
    unordered = suggest(library, ["slides", "deck"], {"slides", "deck"}, SuggestionSettings())
    assert [s.name for s in unordered] == ["art", "image-gen", "charts", "pptx"]


def test_suggestions_are_capped() -> None:
    found = suggest(LIBRARY, ["send-email"], {"send-email"}, SuggestionSettings(count=1))
    assert [s.name for s in found] == ["zip"]


# -- the settings -----------------------------------------------------------------------------


def test_a_stage_setting_changes_alone() -> None:
    changed = DEFAULT_SETTINGS.but(groups={"threshold": 0.3}, plan={"near_miss": 0.05})
    assert changed.groups == GroupSettings(threshold=0.3)
    assert changed.plan == PlanSettings(near_miss=0.05)
    assert changed.skills == DEFAULT_SETTINGS.skills


def test_the_group_stage_turns_off_and_stays_off() -> None:
    off = DEFAULT_SETTINGS.but(groups=None)
    assert off.groups is None
    assert off.but(groups={"threshold": 0.3}).groups is None
    with pytest.raises(ValueError, match="cannot be turned off"):
        DEFAULT_SETTINGS.but(plan=None)
    with pytest.raises(ValueError, match="no retrieval stage 'nope'"):
        DEFAULT_SETTINGS.but(nope={})


def test_fitted_settings_read_back_as_written() -> None:
    fitted = DEFAULT_SETTINGS.but(
        skills={"vector_weight": 0.25, "minimum": 0.1},
        groups={"final_steps": FinalSteps(8.0, 0.25), "siblings": Siblings(8.0),
                "top_lead": 0.9, "one_skill_margin": None, "fast_route": 0.7},
        plan={"near_miss": 0.02, "stand_in": 0.0})
    assert Settings.from_json(fitted.to_json()) == fitted
    assert Settings.from_json(DEFAULT_SETTINGS.but(groups=None).to_json()).groups is None


def test_a_setting_this_version_does_not_know_is_dropped() -> None:
    text = ('{"skills": {"minimum": 0.1, "retired_knob": 3}, '
            '"groups": {"siblings": {"weight": 4.0, "overlap": 0.3, "old": 1}}}')
    read = Settings.from_json(text)
    assert read.skills == SkillSettings(minimum=0.1)
    assert read.groups is not None and read.groups.siblings == Siblings(4.0, 0.3)


# -- the answer's one sentence ----------------------------------------------------------------

# (what the stages noted, the sentence a user reads)
REASONS = [
    ("the library has no groups; the request asks for 2 things; 2 skills answer them; "
     "composed: pdf -> send-mail, ordered by the order the request states",
     "the library has no groups; composed: pdf -> send-mail, ordered by the order the request "
     "states"),
    ("no group fits: the best, 'Report', scores 0.31, below the threshold 0.35; composed: pdf "
     "-> send-mail, ordered by data flow (an output feeds an input)",
     "no group covers all of the request; composed: pdf -> send-mail, ordered by data flow (an "
     "output feeds an input)"),
    # A group was matched and set aside: the sentence says so, not that none covers it.
    ("the group 'Report' does more than asked: 'pdf' (one of its steps) scores 0.60, 0.27 "
     "ahead of every other step (the group 0.62); its other 4 steps are not asked for; the "
     "request asks for 2 things; 2 skills answer them; composed: pdf -> send-mail, ordered by "
     "data flow (an output feeds an input)",
     "the group 'Report' does more than asked: 'pdf' (one of its steps) scores 0.60, 0.27 "
     "ahead of every other step (the group 0.62); composed: pdf -> send-mail, ordered by data "
     "flow (an output feeds an input)"),
]


@pytest.mark.parametrize(("noted", "said"), REASONS)
def test_a_composed_toolbox_says_its_order_in_one_sentence(noted: str, said: str) -> None:
    from skillgrove.graph.toolbox import Toolbox

    toolbox = Toolbox("r", None, noted, (), ("a", "b"), (), (), 0.0, (("a", "b"),))
    assert toolbox.reason == said
