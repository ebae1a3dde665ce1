"""Stage 2, candidate groups: every group is scored by a hybrid of its embedding's cosine to
the request and BM25, over its own text and the past requests it answered (its examples); with
two or more groups a router fitted on those requests says which group is meant.

Rule: the likeliest group answers when its score clears ``threshold`` and one of its steps is
among the skills that fit the request best; otherwise no group does, and the planner composes a
toolbox from the skills."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FinalSteps:
    """The request's evidence for a group's final steps (the skills no other step waits for:
    what the group is *for*), added to the router's log-belief when it ranks its first ten:
    ``log(belief) + weight * evidence``. A router fitted on two requests per group mistakes a
    shared word ("Amazon", "log in") for the task; the final step's own description does not."""

    weight: float
    vector_share: float = 0.5
    """The embedding's share of that evidence (the rest is BM25)."""


@dataclass(frozen=True)
class Siblings:
    """The request's own words, where the router's likeliest candidates are siblings (groups
    whose final steps are named alike but for a part: "...-by-country", "...-by-city"): each
    sibling's distinguishing part is matched with every word of the request by the embedding
    ("Canada" is nearer "country" than "city"), centred on the siblings' mean, and added to the
    log-belief with ``weight``. A router fitted on a few requests per group has seen "Japan"
    and "New York", not "Canada"; the words of the names have."""

    weight: float
    overlap: float = 0.3
    """Groups are siblings of the router's first candidate when the words of their final
    steps' names overlap with its own by at least this share (Jaccard)."""


@dataclass(frozen=True)
class GroupSettings:
    threshold: float = 0.35
    """The score a group needs to answer (0.35 calibrated on the bundled library)."""
    cjk_threshold: float = 0.20
    """The same bar for a request mostly in CJK script, whose vector side is damped."""
    cjk_min_lexical: float = 0.05
    """A request mostly in CJK script gets a group only with at least this lexical evidence
    for it (vectors alone say little there)."""
    margin: float = 0.0
    """How far the chosen group must lead the runner-up."""
    vector_weight: float = 0.75
    """The embedding's share of a group's and an example's score, the rest BM25."""
    candidates: int = 50
    """How many groups each of BM25 and the vector index proposes."""
    example_candidates: int = 200
    """How many past requests (examples) are matched without a router."""
    example_top: int = 1
    """A group's example score is the mean of its best this many examples (1: the best
    alone; several is k-nearest-neighbour voting over past requests)."""
    whole_weight: float = 0.0
    """How much a group's own text counts against its example vote (0: the better of the two;
    otherwise ``whole_weight * text + (1 - whole_weight) * examples``)."""
    router_min_confidence: float = 0.0
    """With a router, the chosen group must hold at least this share of its belief."""
    fast_route: float | None = None
    """With a router whose words alone are at least this sure, the request is answered without
    embedding it (``Retriever._fast_route``); only where every request is routed to a group
    (``threshold`` not above 0). None: never (the default; fitted on held-out history, where
    the fast route must be as accurate as the full one on the rows it takes)."""
    clear_router: float = 0.6
    """A request whose group the router holds at least this likely, alone, is clear: the
    conversation does not change its answer."""
    runner_up_ratio: float = 0.9
    """Without a router, groups scoring at least this share of the chosen group's score are
    close runner-ups; their other members lead the single-skill ranking."""
    runner_up_min: float = 0.01
    """With a router, skills of other groups whose combined belief reaches this share follow
    the chosen group's members in the ranking, likeliest first."""
    final_steps: FinalSteps | None = None
    """See :class:`FinalSteps` (None: the router alone ranks; fitted on history)."""
    siblings: Siblings | None = None
    """See :class:`Siblings`. None, the default: left out of one dev set at a time, two of the
    three choices turn it off (ToolLens's held-out history: 93.4 set F1 off, 92.8 at 8;
    ToolLinkOS's: 94.1 off, 94.8 at 8); fitted on a library's own held-out history."""
    support_depth: int | None = 5
    """A group answers only when one of its steps is among this many best-ranked skills for
    the request: a group matched by the domain's words alone ("search a title, then fetch its
    details" for every request about films) is left for the skills the request names (None:
    off)."""
    top_lead: float | None = 0.9
    """A group answers only when the skill that fits the request best is in one of the
    candidate groups, or one of the group's steps scores at least this share of it, or the
    group itself scores above that skill (``Retriever.unsupported``): a group that shares only
    prerequisites with the skill a request names is not the task asked for, and a toolbox
    composed around that skill answers (a task history has not seen). None: off."""
    one_skill_margin: float | None = 0.0
    """The best single skill is the answer instead of the chosen group when it scores at least
    the group's score plus this (None: never; fitted on history)."""
    step_lead: float | None = 0.15
    """The best single skill is also the answer when it is one of the group's steps, scores at
    least ``step_ratio`` of the group's score, and leads every other step by this much: the
    request asks for that step alone (None: never; fitted on history)."""
    step_ratio: float = 0.85
