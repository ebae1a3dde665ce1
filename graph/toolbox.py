"""The values retrieval answers with: a request's context, scored skills, the chosen group and
the toolbox, frozen and free of any store or model, so that every layer above (engine, views,
servers) reads the same types.

A :class:`Toolbox` is the whole answer: the group chosen (or why none was), the ranked skills, the
selected ones in the order they run (``edges``), suggestions "usually used with", and
:attr:`Toolbox.reason`, the answer in one sentence. Each ranked skill carries a
:class:`SkillExplanation` and the chosen group a :class:`GroupExplanation`: what each stage
found, one typed field each (None where it said nothing); ``to_dict()`` is their JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

NO_GROUPS = "the library has no groups"
"""Why no group answers, in a library that has none."""
MORE_THAN_ASKED = "does more than asked"
"""How a group set aside for a skill that explains the request alone is said (the group stage's
``one_skill_fits_better``); a composed toolbox's sentence keeps it."""


@dataclass(frozen=True)
class RequestContext:
    """What the caller already knows: values, recently used skills, the conversation so far."""

    values: Mapping[str, Any] = field(default_factory=dict)
    recent_skills: tuple[str, ...] = ()
    conversation: tuple[str, ...] = ()


class _Explained:
    """What the explanations share: unset fields (None) are left out of :meth:`to_dict`, the
    shape the servers and ``--json`` print."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for item in fields(self):  # type: ignore[arg-type]
            value = getattr(self, item.name)
            if value is None:
                continue
            if hasattr(value, "to_dict"):
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = list(value)
            out[item.name] = value
        return out


@dataclass(frozen=True)
class ExampleMatch(_Explained):
    """A group's best past request (example) for this request."""

    text: str
    vector: float
    lexical: float


@dataclass(frozen=True)
class SiblingMatch(_Explained):
    """The request's word for the part of a name that sets sibling groups apart
    (``GroupSettings.siblings``): the part, the word, and how far it leads."""

    part: str
    word: str
    lead: float


@dataclass(frozen=True)
class RunnerUp(_Explained):
    """A group that scored almost as well as the chosen one, holding this skill."""

    id: str
    score: float


@dataclass(frozen=True)
class SkillExplanation(_Explained):
    """Why a skill ranks where it does and why it was picked; None where a stage said
    nothing."""

    vector: float | None = None
    """Cosine of the skill's text to the request."""
    lexical: float | None = None
    """BM25 of the request against the skill's text, normalised to 0..1."""
    vector_share: float | None = None
    """The embedding's share of the score, the rest the lexical score's (balanced for each
    request unless the library sets it): ``score = vector_share * vector + (1 - vector_share)
    * lexical`` before a boost or a demotion."""
    cjk: bool | None = None
    """The request is mostly in CJK script (its own weights and threshold)."""
    gloss: str | None = None
    """The English gloss of a Chinese request, when that matched better."""
    recently_used: bool | None = None
    demoted: str | None = None
    """Why the quality filter lowered the score (failed runs)."""
    score: float | None = None
    task: int | None = None
    """The task (1-based part) of the request this skill answers."""
    beside_group: str | None = None
    """Added beside this group for a task the group does not serve."""
    prerequisite_of: str | None = None
    """The selected skill that declares this one as a prerequisite."""
    companion_of: str | None = None
    """A declared dependent of this prerequisite, likely a next step (ranked, not selected)."""
    companion_of_id: str | None = None
    similar: float | None = None
    runner_up_group: RunnerUp | None = None
    stand_in_for: str | None = None
    """The group whose final step this skill stands in for (``PlanSettings.stand_in``), with
    the request's ``word`` nearer its ``part`` than the step's (``instead_of``) by ``gain``."""
    word: str | None = None
    part: str | None = None
    instead_of: str | None = None
    gain: float | None = None


@dataclass(frozen=True)
class GroupExplanation(_Explained):
    """Why a group was chosen; None where a stage said nothing."""

    vector: float | None = None
    lexical: float | None = None
    example: ExampleMatch | None = None
    matched: str | None = None
    """``example`` when the best past request scored above the group's own text."""
    demoted: str | None = None
    score: float | None = None
    router: float | None = None
    """The router's belief in this group."""
    route: str | None = None
    """``lexical`` when the request's words alone chose it (never embedded)."""
    final_step_evidence: float | None = None
    sibling_evidence: SiblingMatch | None = None
    router_first: str | None = None
    """The router's own first choice, when the final steps or siblings chose another."""
    near_miss_of: str | None = None
    near_miss_gain: float | None = None
    gloss: str | None = None
    tasks_covered: tuple[int, int] | None = None
    """(tasks of the request whose best skill is a step, tasks stated in turn)."""
    first_task_covered: bool | None = None
    order: str | None = None
    """Set when an edge was turned round to the order the request states."""
    threshold: float | None = None
    missing_inputs: tuple[str, ...] | None = None

    @property
    def belief(self) -> float:
        """The router's belief in the group, 1.0 where no router chose it."""
        return 1.0 if self.router is None else self.router


@dataclass(frozen=True)
class ScoredSkill:
    id: str
    name: str
    score: float
    description: str
    available: bool
    explanation: SkillExplanation


@dataclass(frozen=True)
class Suggestion:
    id: str
    name: str
    weight: float
    reason: str


@dataclass(frozen=True)
class GroupChoice:
    id: str
    name: str
    score: float
    members: tuple[str, ...]
    member_names: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    missing_inputs: tuple[str, ...]
    ready: bool
    explanation: GroupExplanation


@dataclass(frozen=True)
class Toolbox:
    request: str
    group: GroupChoice | None
    fallback_reason: str | None
    skills: tuple[ScoredSkill, ...]
    selected: tuple[str, ...]
    """Skill ids the toolbox itself selects: the group's members, else its cut of the ranking."""
    suggestions: tuple[Suggestion, ...]
    group_candidates: tuple[tuple[str, float], ...]
    latency_ms: float
    edges: tuple[tuple[str, str], ...] = ()
    """Without a group: which selected skill feeds which (declared prerequisites), making the
    toolbox a composed one."""

    @property
    def shape(self) -> str:
        """``group``, ``composed`` (skills joined by edges), ``skill`` (one), ``skills``
        (several, unconnected) or ``none``."""
        if self.group is not None:
            return "composed" if len(self.selected) > len(self.group.members) else "group"
        if self.edges:
            return "composed"
        return {0: "none", 1: "skill"}.get(len(self.selected), "skills")

    @property
    def reason(self) -> str:
        """The answer in one sentence a user can check: what was chosen and why, and for a
        composed toolbox the order its skills go in."""
        names = {s.id: s.name for s in self.skills}
        if self.group is not None:
            members = self.group.member_names or self.group.members
            said = (f"group '{self.group.name}' covers the request "
                    f"({' -> '.join(members)})")
            extra = [names.get(sid, sid) for sid in self.selected
                     if sid not in self.group.members]
            if extra:
                said += f"; added {', '.join(extra)} for what it does not cover"
            return said
        chosen = [names.get(sid, sid) for sid in self.selected]
        if self.fallback_reason and "composed: " in self.fallback_reason:
            # The planner's sentence, not every note the stages before it left ("the request
            # asks for 2 things; 2 skills answer them"): the order and what gave it.
            planned = self.fallback_reason[self.fallback_reason.index("composed: "):]
            if self.fallback_reason.startswith(NO_GROUPS):
                return f"{NO_GROUPS}; {planned}"
            first = self.fallback_reason.split("; ", 1)[0]
            if MORE_THAN_ASKED in first:
                return f"{first}; {planned}"
            return f"no group covers all of the request; {planned}"
        why = f"{self.fallback_reason}; " if self.fallback_reason else ""
        if not chosen:
            return why + "nothing in the library fits this request"
        if len(chosen) == 1:
            return why + f"one skill fits: {chosen[0]}"
        if self.edges:
            return why + f"composed: {', '.join(chosen)}, in this order"
        return why + f"several skills, no order between them: {', '.join(chosen)}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for item, skill in zip(data["skills"], self.skills, strict=True):
            item["explanation"] = skill.explanation.to_dict()
        if self.group is not None:
            data["group"]["explanation"] = self.group.explanation.to_dict()
        data["reason"] = self.reason
        return data
