"""Stage 2, candidate groups: every group is scored by a hybrid of its embedding's cosine to
the request and BM25, over its own text and the past requests it answered (its examples); with
two or more groups a router fitted on those requests says which group is meant.

Rule: the likeliest group answers when its score clears ``threshold`` and one of its steps is
among the skills that fit the request best; otherwise no group does, and the planner composes a
toolbox from the skills."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from skillgrove.graph.documents import example_id
from skillgrove.graph.model import (
    GroupNode,
    NodeKind,
    NodeRecord,
    SkillNode,
    demotion,
    group_of,
    members_of,
)
from skillgrove.graph.planner import request_parts, stated_order
from skillgrove.graph.router import GroupRouter
from skillgrove.graph.stages.skills import BALANCED_MOST
from skillgrove.graph.toolbox import (
    MORE_THAN_ASKED,
    NO_GROUPS,
    ExampleMatch,
    GroupChoice,
    GroupExplanation,
    RequestContext,
    RunnerUp,
    ScoredSkill,
    SiblingMatch,
    SkillExplanation,
)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from skillgrove.graph.embeddings import Encoder
    from skillgrove.graph.retrieval import _IndexState, _Reads, _WordVectors
    from skillgrove.graph.stages import Settings


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
    router: bool = True
    """Whether the router (``graph/router.py``) says which group is meant; off, the group with
    the best score (its text and past requests, ``vector_weight``) is. Fitted on history: a
    router fitted on one or two past requests a group can choose worse than their words."""
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
    embedding it (``GroupRules._fast_route``); only where every request is routed to a group
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


def single_step_lead(top: ScoredSkill, group: GroupChoice,
                     skills: Sequence[ScoredSkill]) -> float | None:
    """How far ``top``, a step of ``group``, scores ahead of the group's next best step in
    ``skills`` (a step not ranked there counts as 0); None when ``top`` is not a step."""
    if top.id not in group.members:
        return None
    others = [s.score for s in skills if s.id in group.members and s.id != top.id]
    return top.score - max(others, default=0.0)


def _choice(record: NodeRecord, score: float, threshold: float,
            explanation: GroupExplanation, context: RequestContext) -> GroupChoice:
    """The chosen group as the toolbox shows it, with the inputs the context still lacks."""
    missing = tuple(_missing_inputs(record, context))
    explanation = replace(explanation, threshold=threshold)
    if missing:
        explanation = replace(explanation, missing_inputs=missing)
    node = GroupNode(record)
    return GroupChoice(
        id=record.id, name=record.name, score=round(score, 4), members=node.members,
        member_names=node.member_names, edges=node.edges,
        missing_inputs=missing, ready=not missing, explanation=explanation)


BELIEF_FLOOR = 0.01
"""The router's belief counts for at least this much when the final steps' evidence is
weighed against it: its posteriors saturate near 0 and 1 on a few examples per group, and a
candidate it gives 1e-12 should still win when the request plainly asks for its last step."""


def weigh_final_steps(candidates: Sequence[tuple[float, Sequence[tuple[float, float]]]],
                      weight: float, share: float, bonus: Sequence[float] = (),
                      ) -> tuple[int, float]:
    """(index, evidence) of the candidate, given as (router belief, the (cosine, lexical)
    evidence of each final step), with the best ``log(belief) + weight * evidence + bonus``:
    the evidence is its best final step's ``share * cosine + (1 - share) * lexical``, the
    belief floored at ``BELIEF_FLOOR``, the bonus (the weighed sibling evidence) 0 where not
    given; the first of equals wins (the router's order).

    >>> weigh_final_steps([(0.6, [(0.2, 0.0)]), (0.4, [(0.5, 0.0)])], 0.0, 1.0)
    (0, 0.2)
    >>> weigh_final_steps([(0.6, [(0.2, 0.0)]), (0.4, [(0.5, 0.0)])], 0.0, 1.0, [0.0, 1.0])
    (1, 0.5)
    """
    best: tuple[float, int, float] | None = None
    for at, (belief, pairs) in enumerate(candidates):
        evidence = max((share * cosine + (1 - share) * lexical for cosine, lexical in pairs),
                       default=0.0)
        score = math.log(max(belief, BELIEF_FLOOR)) + weight * evidence
        if at < len(bonus):
            score += bonus[at]
        if best is None or score > best[0] + 1e-12:
            best = (score, at, evidence)
    assert best is not None, "no candidates"
    return best[1], best[2]


SIBLING_CANDIDATES = 3
"""Siblings are looked for among the router's first three candidates: further down, its
belief is too small for a word to matter, and unrelated groups would blur the comparison."""


STAND_IN_OVERLAP = 0.5
"""A skill stands in for a final step only when their names share at least half their words."""


STAND_IN_MIN_SIMILARITY = 0.5
"""...and when a word of the request is at least this like the part that sets it apart (the
word itself, a synonym, "Canada" for "country"): a part nothing in the request names is
left to the group."""


@dataclass(frozen=True)
class StandIn:
    """The chosen group with a sibling in place of a final step (see ``GroupRules._stand_in``)."""
    members: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    reason: str
    notes: StandInNotes


@dataclass(frozen=True)
class StandInNotes:
    """What the stand-in's members say in their explanations (``SkillExplanation``)."""
    stand_in_for: str
    word: str
    part: str
    instead_of: str
    gain: float


@dataclass(frozen=True)
class SiblingEvidence:
    part: str
    """The words of the group's final steps' names that its siblings' names lack."""
    word: str
    """The request's word nearest that part."""
    lead: float
    """Their similarity less the mean over the siblings' parts."""


def request_terms(text: str) -> list[str]:
    """The words of a request that could name a part, lower-cased, each once: not numbers, not
    lower-case words of one or two letters ("in", "my"; "LA" and "UK" stay). Each is embedded
    on its own, so every word left out saves time.

    >>> request_terms("What's the rent in LA for 2 rooms in 2024? my LA flat")
    ["what's", 'the', 'rent', 'la', 'for', 'rooms', 'flat']
    """
    return list(dict.fromkeys(
        word.lower() for word in _REQUEST_WORD.findall(text)
        if not word.isdigit() and (len(word) > 2 or word.isupper())))


def name_words(names: Iterable[str]) -> tuple[str, ...]:
    """The words of skill names, in order of first appearance.

    >>> name_words(["get-life-expectancy-by-sub-region", "set_wifi_status"])
    ('get', 'life', 'expectancy', 'by', 'sub', 'region', 'set', 'wifi', 'status')
    """
    return tuple(dict.fromkeys(w for name in names for w in _NAME_WORD.findall(name.lower())))


def overlap_of(a: Iterable[str], b: Iterable[str]) -> float:
    """The Jaccard overlap of two sets of words (0 for two empty ones)."""
    first, second = set(a), set(b)
    return len(first & second) / len(first | second) if first | second else 0.0


def distinguishing_parts(candidates: Sequence[Sequence[str]], overlap: float) -> dict[int, str]:
    """Index -> the part that sets a candidate apart, for the first candidate and those whose
    words overlap with its own by at least ``overlap`` (Jaccard): the words it has and none of
    the others in that family has, joined in their order. Empty unless two candidates have
    such a part.

    >>> distinguishing_parts([("get", "rent", "by", "country"), ("get", "rent", "by", "sub",
    ...                       "region"), ("play", "song")], 0.3)
    {0: 'country', 1: 'sub region'}
    """
    if not candidates or not candidates[0]:
        return {}
    family = [i for i, words in enumerate(candidates)
              if words and overlap_of(candidates[0], words) >= overlap]
    parts: dict[int, str] = {}
    for i in family:
        others = {w for j in family if j != i for w in candidates[j]}
        own = [w for w in candidates[i] if w not in others]
        if own:
            parts[i] = " ".join(own)
    return parts if len(parts) >= 2 else {}


def _final_members(group: NodeRecord | None) -> list[str]:
    """The skill ids of a group's final steps: those no other step needs."""
    if group is None:
        return []
    steps = GroupNode(group).steps
    members = list(GroupNode(group).members)
    needed = {need for step in steps for need in step.get("needs", ())}
    out: list[str] = []
    ids = iter(members)
    for step in steps:
        if step.get("kind") != "skill":
            continue
        member = next(ids, None)
        if member is not None and step.get("id") not in needed:
            out.append(member)
    return out


def _missing_inputs(group: NodeRecord, context: RequestContext) -> list[str]:
    return [spec["name"] for spec in GroupNode(group).inputs
            if spec.get("required") and not spec.get("has_default")
            and context.values.get(spec["name"]) in (None, "")]


_REQUEST_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")


_NAME_WORD = re.compile(r"[a-z0-9]+")


class GroupRules:
    """The group stage's rules, as methods of :class:`graph.retrieval.Retriever` (whose store
    reads, settings and skill ranking they use): which group the request means (the router,
    final steps, siblings, examples), whether it answers (threshold, support, one skill), and
    how it is adapted (near miss, stand-in, runner-ups first)."""

    if TYPE_CHECKING:
        # What these rules read of the retriever they are part of (``graph.retrieval.Retriever``).
        settings: Settings
        encoder: Encoder
        _groups: GroupSettings
        _words: _WordVectors

        @property
        def _reads(self) -> _Reads: ...

        def _reading(self) -> AbstractContextManager[None]: ...

        def _refresh(self) -> _IndexState: ...

        def _router_for(self, state: _IndexState) -> GroupRouter | None: ...

        def fits(self, skill: ScoredSkill) -> bool: ...

        def _hybrid(self, kind: NodeKind, query: str, vector: Any, k: int,
                    weight: float) -> dict[str, tuple[float, float, float]]: ...

        def _adjusted(self, score: float, recently_used: bool, demoted: bool) -> float: ...

        def _skill_weight(self, query: str, vector: Any) -> float: ...

        def _hybrid_one(self, nid: str, vector: Any, weight: float | None,
                        lexical: float = 0.0) -> tuple[float, float, float]: ...

    def _near_miss(self, group: GroupChoice, candidates: Sequence[tuple[str, float]],
                   query: str, vector: Any, context: RequestContext,
                   weight: float | None) -> GroupChoice:
        """The chosen group, or a likely alternative that differs from it by one or two skills
        when the request's evidence for those skills says so.

        Learned toolboxes often differ by one skill (the same prerequisites, another target).
        For each runner-up the router gives at least ``near_miss_min_belief``, the gain is the
        evidence (single-skill score) of the skills it adds minus that of the skills it drops,
        each measured against the chosen group's mean member evidence; the best gain above
        ``near_miss_margin`` wins."""
        margin = self.settings.plan.near_miss
        if margin is None:
            return group
        skill_weight = self._skill_weight(query, vector) if weight is None else weight
        lexical = dict(self._reads.text_search(NodeKind.SKILL, query,
                                               self.settings.skills.candidates))
        memo: dict[str, float] = {}

        def evidence(sid: str) -> float:
            if sid not in memo:
                memo[sid] = self._hybrid_one(sid, vector, skill_weight,
                                             lexical.get(sid, 0.0))[0]
            return memo[sid]

        chosen = set(group.members)
        if not chosen:
            return group
        reads = self._reads
        reads.fetch(nodes=[gid for gid, _ in candidates[1:6]])
        reads.fetch(nodes=[m for gid, _ in candidates[1:6] for m in members_of(reads.node(gid))],
                    vectors=[*group.members, *(m for gid, _ in candidates[1:6]
                                               for m in members_of(reads.node(gid)))])
        level = sum(evidence(m) for m in chosen) / len(chosen)
        best: tuple[float, NodeRecord, float] | None = None
        for gid, belief in candidates[1:6]:
            if gid == group.id or belief < self.settings.plan.near_miss_min_belief:
                continue
            record = self._reads.node(gid)
            if record is None or demotion(record) or self._unavailable_members(record):
                continue
            members = set(GroupNode(record).members)
            added, dropped = members - chosen, chosen - members
            if (not added and not dropped) or len(added) + len(dropped) > 2:
                continue
            gain = (sum(evidence(m) - level for m in added)
                    - sum(evidence(m) - level for m in dropped))
            if gain > margin and (best is None or gain > best[0]):
                best = (gain, record, belief)
        if best is None:
            return group
        gain, record, belief = best
        explanation = replace(group.explanation, near_miss_of=group.name,
                              near_miss_gain=round(gain, 4), router=round(belief, 4))
        return _choice(record, group.score, group.explanation.threshold or 0.0, explanation,
                       context)

    def _stand_in(self, group: GroupChoice, candidates: Sequence[tuple[str, float]],
                  query: str, vector: Any) -> StandIn | None:
        """The chosen group with a sibling in place of its target (the final step nearest the
        request), when the request names the sibling's part (a word at least
        ``STAND_IN_MIN_SIMILARITY`` like it) and no candidate group ends with it (see
        ``PlanSettings.stand_in``); None otherwise. Other final steps are left
        alone: a setter no step waits for is no target."""
        margin = self.settings.plan.stand_in
        if margin is None:
            return None
        reads = self._reads
        record = reads.node(group.id)
        finals = _final_members(record)
        reads.fetch(vectors=finals)
        nearness = {f: float(v @ vector) for f in finals if (v := reads.vector(f)) is not None}
        terms = request_terms(query)
        if not nearness or not terms:
            return None
        final = max(nearness, key=lambda f: (nearness[f], f))
        covered = {m for gid, _ in candidates for m in _final_members(reads.node(gid))}
        hits = [sid for sid, _ in reads.text_search(NodeKind.SKILL, query,
                                                    self.settings.skills.candidates)
                if sid not in group.members and sid not in covered]
        reads.fetch(nodes=[final, *hits])
        target = reads.node(final)
        if target is None:
            return None
        mine = name_words([target.name])
        pairs: list[tuple[str, str, str]] = []  # (sibling, the target's part, the sibling's)
        for sid in hits:
            record = reads.node(sid)
            theirs = name_words([record.name]) if record is not None else ()
            if overlap_of(mine, theirs) < STAND_IN_OVERLAP:
                continue
            old = " ".join(w for w in mine if w not in theirs)
            new = " ".join(w for w in theirs if w not in mine)
            if old and new:
                pairs.append((sid, old, new))
        if not pairs:
            return None
        nearest = self._words.nearest(
            terms, list(dict.fromkeys(p for _, old, new in pairs for p in (old, new))))
        gain, sibling, old, new = max((nearest[new][0] - nearest[old][0], sid, old, new)
                                      for sid, old, new in pairs)
        if gain <= margin or nearest[new][0] < STAND_IN_MIN_SIMILARITY:
            return None
        renamed = self._renamed(group.members, final, sibling, old.split(), new.split())
        members = tuple(renamed.get(m, m) for m in group.members)
        names = {m: reads.node(m).name for m in {*group.members, *members}  # type: ignore[union-attr]
                 if reads.node(m) is not None}
        by_name = {name: sid for sid, name in names.items()}
        edges = tuple((renamed.get(by_name.get(a, a), by_name.get(a, a)),
                       renamed.get(by_name.get(b, b), by_name.get(b, b))) for a, b in group.edges)
        word = nearest[new][1]
        replaced = ", ".join(f"'{names.get(n, n)}' for '{names.get(o, o)}'"
                             for o, n in renamed.items())
        reason = (f"no group does this: '{group.name}' with {replaced} (the request's "
                  f"'{word}' is nearer '{new}' than '{old}')")
        return StandIn(members, edges, reason, StandInNotes(group.name, word, new, old,
                                                            round(gain, 4)))

    def _renamed(self, members: Sequence[str], final: str, sibling: str, old: Sequence[str],
                 new: Sequence[str]) -> dict[str, str]:
        """Member id -> the id of the skill named like it with ``new`` words for ``old`` ones
        (the final step -> its sibling; `amazon-user-login` -> `ebay-user-login` where that
        skill exists)."""
        reads = self._reads
        out = {final: sibling}
        for member in members:
            record = reads.node(member)
            if member == final or record is None:
                continue
            words = list(name_words([record.name]))
            at = next((i for i in range(len(words) - len(old) + 1)
                       if words[i: i + len(old)] == list(old)), None)
            if at is None:
                continue
            wanted = tuple([*words[:at], *new, *words[at + len(old):]])
            found = reads.text_search(NodeKind.SKILL, " ".join(wanted), 5)
            reads.fetch(nodes=[sid for sid, _ in found])
            for sid, _ in found:
                other = reads.node(sid)
                if other is not None and name_words([other.name]) == wanted and sid not in members:
                    out[member] = sid
                    break
        return out

    def _scored(self, ids: Sequence[str], skills: Sequence[ScoredSkill],
                notes: StandInNotes) -> list[ScoredSkill]:
        """``ids`` as ranked skills: their scores in ``skills`` (else the best there), with
        ``notes`` added to their explanations."""
        by_id = {s.id: s for s in skills}
        top = skills[0].score if skills else 0.0
        out = []
        for sid in ids:
            record = self._reads.node(sid)
            if record is None:
                continue
            old = by_id.get(sid)
            out.append(ScoredSkill(sid, record.name, old.score if old else top,
                                   SkillNode(record).description,
                                   SkillNode(record).available,
                                   replace(old.explanation if old else SkillExplanation(),
                                           **asdict(notes))))
        return out

    def _glossed_group(self, request: str, glossed: tuple[str, Any], context: RequestContext,
                       state: _IndexState, skills: Sequence[ScoredSkill],
                       group: GroupChoice | None, candidates: list[tuple[str, float]],
                       reason: str | None,
                       ) -> tuple[GroupChoice | None, list[tuple[str, float]], str | None]:
        """For a request mostly in Chinese that no group fits as written: the group its
        English gloss fits, held to the English threshold, when the best skill for the
        request is one of its steps (a dictionary's senses are noisy: the skills must agree).
        Otherwise what the request as written gave."""
        text, vector = glossed
        found, _, found_candidates = self._group_tier(request, text, vector, context, state,
                                                      None)
        if found is None or not skills or skills[0].id not in found.members:
            return group, candidates, reason
        return replace(found, explanation=replace(found.explanation, gloss=text)), \
            found_candidates, None

    def unsupported(self, group: GroupChoice, skills: Sequence[ScoredSkill],
                    candidates: Sequence[tuple[str, float]] = ()) -> str | None:
        """Why ``group`` does not answer the request, or None.

        The skill that fits the request best (``fits``) must be in a group: when no candidate
        group holds it (``top_in_a_group``), no group covers the request, and a toolbox
        composed around that skill answers instead (a task history has not seen: the
        groups found share its prerequisites, not its target). And one of the group's steps
        must be among the first ``group_support_depth`` skills the request ranks: a group
        matched by the domain's words alone ("search a title, then fetch its details" for
        every request about films) is left for the skills the request names."""
        cover = group.explanation.tasks_covered
        if self.settings.plan.task_cover is not None and cover is not None:
            if cover[0] < self.settings.plan.task_cover * cover[1]:
                return (f"the group '{group.name}' covers {cover[0]} of the {cover[1]} tasks "
                        "the request states")
            if self.settings.plan.first_task \
                    and group.explanation.first_task_covered is False:
                # The later tasks act on what the first makes ("..., then email it"): a
                # group that does not do the first is another workflow that ends alike.
                return (f"the group '{group.name}' does not do the first of the {cover[1]} "
                        "tasks the request states")
        if not skills or not self.fits(skills[0]) or skills[0].explanation.gloss is not None:
            return None
        top = skills[0]
        lead = self._groups.top_lead
        if lead is not None and top.id not in group.members and \
                group.score < self._against_groups(top):
            reads = self._reads
            reads.fetch(nodes=[gid for gid, _ in candidates])
            held = {m for gid, _ in candidates for m in members_of(reads.node(gid))}
            steps = set(group.members)
            nearest = max((s.score for s in skills if s.id in steps), default=0.0)
            if top.id not in held and nearest < lead * top.score:
                return (f"no group holds '{top.name}', the skill that fits the request best; "
                        f"'{group.name}' shares other steps with it")
        depth = self._groups.support_depth
        if depth is None or set(group.members) & {s.id for s in skills[:depth]}:
            return None
        return (f"the group '{group.name}' fits the words, but none of its steps is among the "
                f"{depth} skills that fit the request best (first: '{top.name}')")

    def _against_groups(self, skill: ScoredSkill) -> float:
        """A skill's score on the scale a group's score is weighed against: as ranked where the
        embedding's share is set, and with it counting as much as the words
        (``BALANCED_MOST``) where the share is balanced for each request (the margins and
        ratios between a skill and a group were set on that scale)."""
        notes = skill.explanation
        if self.settings.skills.vector_weight is not None or notes.vector is None or notes.cjk:
            return skill.score
        return self._adjusted(
            BALANCED_MOST * notes.vector + (1 - BALANCED_MOST) * (notes.lexical or 0.0),
            bool(notes.recently_used), bool(notes.demoted))

    def one_skill_fits_better(self, group: GroupChoice, skills: Sequence[ScoredSkill],
                               request: str = "") -> str | None:
        """Why the answer is one skill rather than ``group``, or None when the group stands.

        A group wins only when the request needs what the group does. It does not when the
        best single skill explains the request at least as well as the whole group does
        (``single_skill_margin``), nor when that skill is one of the group's steps, nearly as
        good as the group and far ahead of every other step (``single_step_lead``): either
        way the group's other steps are work nobody asked for. A request that states several
        tasks in turn ("check the invoice and add it to the ledger, then email finance") asks
        for more than one skill: there the group's cover of those tasks decides
        (``unsupported``), not this rule."""
        if not skills or not self.fits(skills[0]) or (request and stated_order(
                request_parts(request))):
            return None
        top = skills[0]
        if top.explanation.gloss is not None:
            # Matched through a dictionary's translation, against a group matched on the
            # request's own words: the translation ranks skills, it does not overrule.
            return None
        lead = single_step_lead(top, group, skills)
        inside = "one of its steps" if top.id in group.members else "not one of its steps"
        extra = len(group.members) - (1 if top.id in group.members else 0)
        margin, step_lead = self._groups.one_skill_margin, self._groups.step_lead
        score = self._against_groups(top)
        if margin is not None and score >= group.score + margin:
            why = f"scores {score:.2f}, the group {group.score:.2f}"
        elif (step_lead is not None and lead is not None and lead >= step_lead
              and score >= self._groups.step_ratio * group.score):
            why = (f"scores {score:.2f}, {lead:.2f} ahead of every other step (the group "
                   f"{group.score:.2f})")
        else:
            return None
        return (f"the group '{group.name}' {MORE_THAN_ASKED}: '{top.name}' ({inside}) {why}; "
                f"its other {extra} steps are not asked for")

    def _fast_route(self, query: str, context: RequestContext, router: GroupRouter | None,
                    ) -> tuple[GroupChoice, list[tuple[str, float]]] | None:
        """The group, chosen from the request's words alone, when the router's lexical half is
        at least ``fast_route_confidence`` sure: the request is then never embedded.

        Only where every request is routed to a group (``group_threshold`` not above 0: the
        similarity bar needs the embedding) and the chosen group needs no second look
        (not demoted, every member available); anything else takes the full path."""
        least = self._groups.fast_route
        if least is None or self._groups.threshold > 0 \
                or self._groups.support_depth is not None or self._groups.top_lead is not None:
            return None
        if router is None or router.lexical is None:
            return None
        ranked = router.lexical_top(query, 10)
        confidence, best_id = ranked[0]
        if confidence < least:
            return None
        reads = self._reads
        reads.fetch(nodes=[gid for _, gid in ranked])
        reads.fetch(nodes=[m for _, gid in ranked for m in members_of(reads.node(gid))])
        record = self._reads.node(best_id)
        if record is None or demotion(record) or self._unavailable_members(record):
            return None
        explanation = GroupExplanation(router=round(confidence, 4), route="lexical")
        choice = _choice(record, confidence, self._groups.threshold, explanation, context)
        return choice, [(gid, round(p, 4)) for p, gid in ranked]

    def _close_runner_ups_first(self, group: GroupChoice,
                                candidates: Sequence[tuple[str, float]],
                                skills: list[ScoredSkill], k: int) -> list[ScoredSkill]:
        """Put the members of groups that scored almost as well as the chosen one at the head of
        the single-skill ranking: when two learned toolboxes differ by one skill, the other
        one's skill is the likeliest missing piece.

        With a router, "almost as well" is its belief: a skill's share is the summed
        posterior of the other groups holding it, and every skill with at least
        ``runner_up_min`` leads, likeliest first. Without one, groups scoring at least
        ``runner_up_ratio`` of the chosen group's similarity lead, in their order."""
        routed = group.explanation.router is not None
        chosen = set(group.members)
        share: dict[str, float] = {}
        source: dict[str, tuple[str, float]] = {}
        cutoff = group.score * self._groups.runner_up_ratio
        reads = self._reads
        reads.fetch(nodes=[gid for gid, _ in candidates[1:]])
        reads.fetch(nodes=[m for gid, _ in candidates[1:] for m in members_of(reads.node(gid))])
        for rank, (gid, score) in enumerate(candidates[1:]):
            if not routed and (score < cutoff or score <= 0):
                break
            record = self._reads.node(gid)
            for member in members_of(record):
                if member in chosen:
                    continue
                # Similarity mode keeps group order: earlier groups' members come first.
                share[member] = share.get(member, 0.0) + (score if routed else -rank)
                source.setdefault(member, (gid, score))
        if routed:
            share = {m: v for m, v in share.items() if v >= self._groups.runner_up_min}
        by_id = {s.id: s for s in skills}
        front: list[ScoredSkill] = []
        for member in sorted(share, key=lambda m: -share[m]):
            node = self._reads.node(member)
            if node is None:
                continue
            base = by_id.get(member)
            gid, score = source[member]
            explanation = replace(base.explanation if base else SkillExplanation(),
                                  runner_up_group=RunnerUp(gid, score))
            front.append(ScoredSkill(member, node.name, base.score if base else 0.0,
                                     SkillNode(node).description,
                                     SkillNode(node).available, explanation))
        ahead = {f.id for f in front}
        rest = [s for s in skills if s.id not in ahead]
        return (front + rest)[: max(k, len(front))]

    def _fetch_routed(self, gids: Sequence[str], best_id: str, query: str, vector: Any,
                      state: _IndexState) -> None:
        """With a router, once the ranked groups and the skill candidates are read: the
        records and vectors the rest of the search reads of what they name (the chosen
        group's examples, every ranked group's members) and the vectors of the lexical-only
        candidates."""
        reads = self._reads
        _, lexical_only = reads.candidates(NodeKind.SKILL, query, vector,
                                           self.settings.skills.candidates)
        record = reads.node(best_id)
        eids = self._example_ids(best_id, record, state) if record is not None else []
        members = [m for gid in gids for m in members_of(reads.node(gid))]
        reads.fetch(nodes=[*eids, *members],
                    vectors=[*eids, best_id, *lexical_only,
                             *(members if self.settings.plan.near_miss is not None else ())])

    def _fetch_similar(self, query: str, vector: Any) -> None:
        """Without a router: the records and vectors of every kind's candidates, in two waves:
        the candidates; then the groups their examples name, the candidate groups' members
        and the vectors of the lexical-only candidates."""
        reads = self._reads
        groups, groups_lexical = reads.candidates(NodeKind.GROUP, query, vector,
                                                  self._groups.candidates)
        examples, examples_lexical = reads.candidates(NodeKind.EXAMPLE, query, vector,
                                                      self._groups.example_candidates)
        skills, skills_lexical = reads.candidates(NodeKind.SKILL, query, vector,
                                                  self.settings.skills.candidates)
        reads.fetch(nodes=[*groups, *examples, *skills])
        named = [gid for gid in (group_of(reads.node(eid)) for eid in examples) if gid]
        members = [m for gid in groups for m in members_of(reads.node(gid))]
        listed = set(groups)
        reads.fetch(nodes=[*named, *members],
                    vectors=[*groups_lexical, *examples_lexical, *skills_lexical,
                             *(gid for gid in named if gid not in listed)])

    def _group_tier(self, request: str, query: str, vector: Any, context: RequestContext,
                    state: _IndexState, weight: float | None = None,
                    ) -> tuple[GroupChoice | None, str | None, list[tuple[str, float]]]:
        router = self._router_for(state)
        confidence: float | None = None
        if router is None:
            self._fetch_similar(query, vector)
            group_weight = self._groups.vector_weight if weight is None else weight
            whole = self._hybrid(NodeKind.GROUP, query, vector, self._groups.candidates,
                                 group_weight)
            examples = self._hybrid(NodeKind.EXAMPLE, query, vector, self._groups.example_candidates,
                                    group_weight)
            fits = self._group_fits(whole, examples, set(whole), vector, weight)
            if not fits:
                return None, NO_GROUPS, []
            scored = sorted(((score, gid, why) for gid, (score, why) in fits.items()),
                            key=lambda t: (-t[0], t[1]))
            candidates = [(gid, round(score, 4)) for score, gid, _ in scored[:5]]
            best_score, best_id, explanation = scored[0]
            runner_up = scored[1][0] if len(scored) > 1 else 0.0
        else:
            ranked = router.top(query, vector, 10)
            skills, _ = self._reads.candidates(NodeKind.SKILL, query, vector,
                                               self.settings.skills.candidates)
            self._reads.fetch(nodes=[*(gid for _, gid in ranked), *skills])
            for index, (p, gid) in enumerate(ranked):
                record = self._reads.node(gid)
                if record is not None and demotion(record):
                    ranked[index] = (p * self.settings.demote_factor, gid)
            ranked.sort(key=lambda t: (-t[0], t[1]))
            candidates = [(gid, round(p, 4)) for p, gid in ranked]
            confidence, best_id = ranked[0]
            targeted = self._by_final_steps(ranked, query, vector, weight)
            if targeted is not None:
                confidence, best_id = targeted[0], targeted[1]
            self._fetch_routed([gid for _, gid in ranked], best_id, query, vector, state)
            # Only the chosen group's similarity is needed (for the threshold): its examples
            # are the only ones scored.
            examples = self._examples_of(best_id, query, vector, state, weight)
            lexical = dict(self._reads.text_search(NodeKind.GROUP, query,
                                                   self._groups.candidates))
            whole = {best_id: self._hybrid_one(best_id, vector, weight,
                                               lexical.get(best_id, 0.0))}
            fits = self._group_fits(whole, examples, {best_id}, vector, weight)
            best_score, explanation = fits[best_id]
            explanation = replace(explanation, router=round(confidence, 4))
            if targeted is not None:
                if self._groups.final_steps is not None:
                    explanation = replace(explanation, final_step_evidence=round(targeted[2], 4))
                sibling = targeted[3]
                if sibling is not None:
                    explanation = replace(explanation, sibling_evidence=SiblingMatch(
                        sibling.part, sibling.word, round(sibling.lead, 4)))
                if best_id != ranked[0][1]:
                    explanation = replace(explanation, router_first=self._reads.node(
                        ranked[0][1]).name)  # type: ignore[union-attr]
            runner_up = -1.0  # the router ranks; the margin rule is for similarity alone
        threshold = self._groups.threshold if weight is None else self._groups.cjk_threshold
        if best_score < threshold:
            name = self._reads.node(best_id).name  # type: ignore[union-attr]
            return None, (f"no group fits: the best, '{name}', scores {best_score:.2f}, below "
                          f"the threshold {threshold:.2f}"), candidates
        if weight is not None and threshold > 0:
            # The embedding knows little of CJK text, so a CJK request needs some lexical
            # evidence for the group (its text or its best example), not vectors alone.
            best_lexical = max(explanation.lexical or 0.0, explanation.example.lexical
                               if explanation.example is not None else 0.0)
            if best_lexical < self._groups.cjk_min_lexical:
                name = self._reads.node(best_id).name  # type: ignore[union-attr]
                return None, (f"no group fits: the best, '{name}', shares almost no words with "
                              f"the request (lexical {best_lexical:.2f}, needs "
                              f"{self._groups.cjk_min_lexical:.2f} for a request in CJK script)"), \
                    candidates
        if confidence is not None and confidence < self._groups.router_min_confidence:
            name = self._reads.node(best_id).name  # type: ignore[union-attr]
            return None, (f"no group is clearly meant: the likeliest, '{name}', has only "
                          f"{confidence:.0%} of the router's belief (needs "
                          f"{self._groups.router_min_confidence:.0%})"), candidates
        if best_score - runner_up < self._groups.margin:
            return None, "two groups fit equally well; falling back to skills", candidates
        record = self._reads.node(best_id)
        assert record is not None
        unavailable = self._unavailable_members(record)
        if unavailable:
            return None, (f"group '{record.name}' fits, but its skills are unavailable here: "
                          + "; ".join(unavailable)), candidates
        return _choice(record, best_score, threshold, explanation, context), None, candidates

    def _by_final_steps(self, ranked: Sequence[tuple[float, str]], query: str, vector: Any,
                        weight: float | None,
                        ) -> tuple[float, str, float, SiblingEvidence | None] | None:
        """(router belief, group id, evidence, its sibling evidence) of the router candidate
        that scores best once the request's evidence for each candidate's final steps (see
        ``GroupSettings.final_steps``) and its words for the part that sets siblings apart
        (``GroupSettings.siblings``) are weighed in; None when neither applies."""
        final, kin = self._groups.final_steps, self._groups.siblings
        siblings = self._sibling_evidence(ranked, query, kin.overlap) \
            if weight is None and kin is not None else {}
        if (final is None and not siblings) or not ranked:
            return None
        pairs = self._final_step_pairs(ranked, query, vector) if final is not None else {}
        share = (final or FinalSteps(0.0)).vector_share if weight is None else weight
        at, evidence = weigh_final_steps(
            [(belief, pairs.get(gid, [])) for belief, gid in ranked],
            final.weight if final is not None else 0.0, share,
            [kin.weight * siblings[gid].lead if kin is not None and gid in siblings else 0.0
             for _, gid in ranked])
        return ranked[at][0], ranked[at][1], evidence, siblings.get(ranked[at][1])

    def _sibling_evidence(self, ranked: Sequence[tuple[float, str]], query: str,
                          overlap: float) -> dict[str, SiblingEvidence]:
        """Group id -> how much better than its siblings the request's words match the part
        of its final steps' names that sets it apart (see ``GroupSettings.siblings``);
        empty when the router's first candidates are not siblings."""
        if len(ranked) < 2:
            return {}
        top = [gid for _, gid in ranked[:SIBLING_CANDIDATES]]
        reads = self._reads
        finals = {gid: _final_members(reads.node(gid)) for gid in top}
        reads.fetch(nodes=[m for ids in finals.values() for m in ids])
        words = {gid: name_words(r.name for m in ids if (r := reads.node(m)) is not None)
                 for gid, ids in finals.items()}
        parts = distinguishing_parts([words[gid] for gid in top], overlap)
        if len(parts) < 2:
            return {}
        request_words = request_terms(query)
        if not request_words:
            return {}
        best = self._words.nearest(request_words, list(dict.fromkeys(parts.values())))
        mean = sum(best[p][0] for p in parts.values()) / len(parts)
        return {top[i]: SiblingEvidence(phrase, best[phrase][1], best[phrase][0] - mean)
                for i, phrase in parts.items()}

    def _final_step_pairs(self, ranked: Sequence[tuple[float, str]], query: str, vector: Any,
                          ) -> dict[str, list[tuple[float, float]]]:
        """Group id -> the (cosine, lexical) evidence of each of its final steps."""
        reads = self._reads
        finals = {gid: _final_members(reads.node(gid)) for _, gid in ranked}
        reads.fetch(vectors=[m for ids in finals.values() for m in ids])
        lexical = dict(reads.text_search(NodeKind.SKILL, query,
                                         self.settings.skills.candidates))
        return {gid: [self._hybrid_one(m, vector, 1.0, lexical.get(m, 0.0))[1:] for m in ids]
                for gid, ids in finals.items()}

    def final_step_evidence(self, request: str,
                            ) -> list[tuple[float, tuple[str, ...], list[tuple[float, float]],
                                            float]]:
        """For calibration: the router's top ten for ``request`` as (belief, members, the
        (cosine, lexical) evidence of each final step, the sibling evidence's lead), so that
        ``target_weight``, ``target_vector_weight`` and ``sibling_weight`` can be tried
        without searching again."""
        with self._reading():
            state = self._refresh()
            router = self._router_for(state)
            if router is None:
                return []
            vector = self.encoder.encode([request])[0]
            ranked = router.top(request, vector, 10)
            self._reads.fetch(nodes=[gid for _, gid in ranked])
            pairs = self._final_step_pairs(ranked, request, vector)
            siblings = self._sibling_evidence(
                ranked, request, (self._groups.siblings or Siblings(0.0)).overlap)
            return [(belief, GroupNode(record).members, pairs[gid],
                     siblings[gid].lead if gid in siblings else 0.0)
                    for belief, gid in ranked if (record := self._reads.node(gid)) is not None]

    def _examples_of(self, gid: str, query: str, vector: Any, state: _IndexState,
                     weight: float | None) -> dict[str, tuple[float, float, float]]:
        """The hybrid scores of one group's examples (no search over every example: their
        vectors are read by id, the lexical side from the usual BM25 candidates)."""
        record = self._reads.node(gid)
        if record is None:
            return {}
        w = self._groups.vector_weight if weight is None else weight
        lexical = dict(self._reads.text_search(NodeKind.EXAMPLE, query,
                                               self._groups.candidates))
        out: dict[str, tuple[float, float, float]] = {}
        eids = self._example_ids(gid, record, state)
        self._reads.fetch(vectors=eids)
        for eid in eids:
            stored = self._reads.vector(eid)
            if stored is None:
                continue
            cosine = float(stored @ vector)
            lex = lexical.get(eid, 0.0)
            out[eid] = (w * cosine + (1 - w) * lex, cosine, lex)
        return out

    @staticmethod
    def _example_ids(gid: str, record: NodeRecord, state: _IndexState) -> list[str]:
        memo = state.memo
        eids: list[str] | None = memo.get(("examples", gid)) if memo is not None else None
        if eids is None:
            eids = [example_id(gid, str(text)) for text in GroupNode(record).examples]
            if memo is not None:
                memo[("examples", gid)] = eids
        return eids

    def _group_fits(self, whole: Mapping[str, tuple[float, float, float]],
                    examples: Mapping[str, tuple[float, float, float]], gids: set[str],
                    vector: Any, weight: float | None,
                    ) -> dict[str, tuple[float, GroupExplanation]]:
        """Group id -> (similarity, explanation): the better of the group's own text and its
        best example (or their blend, see ``whole_weight``), halved when demoted. Scores the
        groups in ``gids`` plus those with example hits."""
        reads = self._reads
        reads.fetch(nodes=[*gids, *examples])
        named = {group_of(reads.node(eid)) for eid in examples} - {""}
        reads.fetch(nodes=named, vectors=[gid for gid in named | gids if gid not in whole])
        per_group: dict[str, list[tuple[float, float, float, str]]] = {}
        for eid, hit in examples.items():
            record = self._reads.node(eid)
            gid = group_of(record)
            if gid and record is not None:
                per_group.setdefault(gid, []).append((*hit, record.text))
        best_example: dict[str, tuple[float, float, float, str]] = {}
        for gid, hits in per_group.items():
            hits.sort(key=lambda h: -h[0])
            top = hits[: self._groups.example_top]
            best_example[gid] = (sum(h[0] for h in top) / len(top), *hits[0][1:])
        out: dict[str, tuple[float, GroupExplanation]] = {}
        for gid in gids | set(best_example):
            record = self._reads.node(gid)
            if record is None:
                continue
            score, cosine, lexical = whole.get(gid) or self._hybrid_one(gid, vector, weight)
            example: ExampleMatch | None = None
            matched: str | None = None
            if gid in best_example:
                ex_score, ex_cos, ex_lex, ex_text = best_example[gid]
                example = ExampleMatch(ex_text, round(ex_cos, 4), round(ex_lex, 4))
                if self._groups.whole_weight > 0:
                    score = self._groups.whole_weight * score + (1 - self._groups.whole_weight) * ex_score
                elif ex_score > score:
                    score = ex_score
                    matched = "example"
            demoted = demotion(record)
            if demoted:
                score *= self.settings.demote_factor
            out[gid] = (score, GroupExplanation(
                vector=round(cosine, 4), lexical=round(lexical, 4), example=example,
                matched=matched, demoted=demoted or None, score=round(score, 4)))
        return out

    def _unavailable_members(self, group: NodeRecord) -> list[str]:
        out = []
        self._reads.fetch(nodes=members_of(group))
        for member in GroupNode(group).members:
            record = self._reads.node(member)
            if record is None:
                out.append(f"{member} is not indexed")
            elif not SkillNode(record).available:
                reasons = ", ".join(SkillNode(record).unavailable_reasons)
                out.append(f"{record.name} ({reasons})")
        return out
