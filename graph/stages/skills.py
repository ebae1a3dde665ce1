"""Stage 1, candidate skills: every skill is scored by a hybrid of BM25 and its embedding's
cosine to the request, a request mostly in Chinese also through its English gloss; then the
selection keeps the skills that fit.

Rule: a skill is selected when it fits the request on its own (:func:`fits`) and scores within
``ratio`` of the best skill; a skill joined by SIMILAR_TO to one already selected is an
alternative, not a second thing asked for."""

from __future__ import annotations

from dataclasses import dataclass

from skillgrove.graph.toolbox import SkillExplanation

FIT_COSINE_SLACK = 0.02
"""How far below ``fit_cosine`` a skill's embedding may be and still fit by its score (the
request's words carry it); further below, words alone do not make a fit."""


@dataclass(frozen=True)
class SkillSettings:
    vector_weight: float = 0.5
    """The embedding's share of a skill's score, the rest BM25 (normalised to 0..1): skill
    texts are short and full of names, where BM25 judges as well as the embedding (on ToolLens
    history, 0.5 beats 0.75 by 3.5 points of recall@3)."""
    cjk_vector_weight: float = 0.25
    """The same share for a request mostly in CJK script: all-MiniLM-L6-v2 was trained on
    English, so its similarities say little there and the characters and bigrams carry it."""
    gloss: bool = True
    """Whether a request mostly in Chinese is also matched through its English dictionary gloss
    (``graph/glossary.py``)."""
    candidates: int = 50
    """How many skills each of BM25 and the vector index proposes."""
    recent_boost: float = 0.15
    """Added to the score of a skill the caller's context lists as recently used."""
    ratio: float = 0.85
    """A skill is selected beside the best one when it scores at least this share of it."""
    minimum: float = 0.25
    """A skill scoring below this is ranked but selected only by its embedding (``fit_cosine``):
    better an empty selection ("nothing here fits") than five unrelated skills."""
    most: int = 5
    """At most this many skills are selected."""
    fit_cosine: float | None = 0.2
    """A skill below ``minimum`` still fits when its embedding is at least this near the request
    and it shares a word with it: a long request shares few words with any one skill ("I'm
    preparing for the science fair and need weather data for ..."), while an off-topic one
    ("order pizza for the team") stays below 0.17 on the bundled library. None: the score alone
    decides."""
    substitutes: bool = False
    """Whether the selection may hold two skills joined by SIMILAR_TO (alternatives)."""


def fits(settings: SkillSettings, score: float, explanation: SkillExplanation) -> bool:
    """Whether a skill with this score and explanation fits the request on its own.

    Its embedding must come within ``FIT_COSINE_SLACK`` of ``fit_cosine`` (words alone do not
    make a fit: "order pizza for the team" and a tracker of teams' issues), and its score must
    reach ``minimum``, or its embedding ``fit_cosine`` with a word of the request in the skill's
    text (an embedding alone does not make a fit either: "how tall is mount everest" and a web3
    project builder, cosine 0.20, no word in common). A request mostly in CJK script, whose
    embedding says little, is judged by its score alone."""
    cosine = explanation.vector
    if settings.fit_cosine is None or cosine is None or explanation.cjk:
        return score >= settings.minimum
    if cosine < settings.fit_cosine - FIT_COSINE_SLACK:
        return False
    return score >= settings.minimum or (
        cosine >= settings.fit_cosine and bool(explanation.lexical))


def selection_cut(settings: SkillSettings, top: float) -> float:
    """The lowest score selected beside a best skill scoring ``top``."""
    return max(top * settings.ratio, min(settings.minimum, top))
