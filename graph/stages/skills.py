"""Stage 1, candidate skills: every skill is scored by a hybrid of BM25 and its embedding's
cosine to the request, a request mostly in Chinese also through its English gloss; then the
selection keeps the skills that fit.

Rule: a skill is selected when it fits the request on its own (:func:`fits`) and scores within
``ratio`` of the best skill; a skill joined by SIMILAR_TO to one already selected is an
alternative, not a second thing asked for."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from skillgrove.graph.toolbox import SkillExplanation

FIT_COSINE_SLACK = 0.02
"""How far below ``fit_cosine`` a skill's embedding may be and still fit by its score (the
request's words carry it); further below, words alone do not make a fit."""


@dataclass(frozen=True)
class SkillSettings:
    vector_weight: float | None = 0.5
    """The embedding's share of a skill's score, the rest BM25 (normalised to 0..1): skill
    texts are short and full of names, where BM25 judges as well as the embedding (on ToolLens
    history, 0.5 beats 0.75 by 3.5 points of recall@3). None: balanced for each request
    (:func:`balanced_weight`), so that words which tell its candidates apart count as much as
    the embedding and words all of them share count little; a library's history chooses it
    where it wins there (ToolLens does). Not the default: with no history it lifts the dev sets
    in flat mode and the bundled library, but costs 0.6 to 4.3 points of set F1 on short-history
    cuts of the dev sets."""
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


BALANCED_MOST = 0.5
"""The most the embedding counts in a balanced score: as much as the words, never more. A
request no candidate shares a word with ("how do I tie a bowline knot") then scores as it did
at equal shares, and the bar that keeps such a request from a skill (``minimum``) means the
same."""


def balanced_weight(evidence: Iterable[tuple[float, float]]) -> float:
    """The embedding's share of the score that makes the cosine and the lexical score count
    alike among a request's candidates ((cosine, lexical) pairs): each in proportion to how
    far it spreads them, which ranks as the sum of both rescaled to 0..1 does (min-max
    fusion), at most ``BALANCED_MOST``. Where the words tell the candidates apart more than
    the embedding does (an API's name in the request), they count more.

    >>> round(balanced_weight([(0.5, 0.1), (0.3, 0.0), (0.2, 0.05)]), 2)
    0.25
    >>> balanced_weight([(0.5, 0.0), (0.3, 0.0)])
    0.5
    """
    pairs = list(evidence)
    cosines = [cosine for cosine, _ in pairs]
    lexicals = [lexical for _, lexical in pairs]
    spread_cosine = max(cosines, default=0.0) - min(cosines, default=0.0)
    spread_lexical = max(lexicals, default=0.0) - min(lexicals, default=0.0)
    if spread_lexical <= 1e-9:
        return BALANCED_MOST  # the words tell none of them apart
    return min(BALANCED_MOST, spread_lexical / (spread_cosine + spread_lexical))


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
