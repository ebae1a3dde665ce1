"""The values retrieval answers with: a request's context, scored skills, the chosen group and
the toolbox, frozen and free of any store or model, so that every layer above (engine, views,
servers) reads the same types.

A :class:`Toolbox` is the whole answer: the group chosen (or why none was), the ranked skills, the
selected ones in the order they run (``edges``), suggestions "usually used with", and
:attr:`Toolbox.reason`, the answer in one sentence."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

NO_GROUPS = "the library has no groups"
"""Why no group answers, in a library that has none."""


@dataclass(frozen=True)
class RequestContext:
    """What the caller already knows: values, recently used skills, the conversation so far."""

    values: Mapping[str, Any] = field(default_factory=dict)
    recent_skills: tuple[str, ...] = ()
    conversation: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScoredSkill:
    id: str
    name: str
    score: float
    description: str
    available: bool
    explanation: Mapping[str, Any]


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
    explanation: Mapping[str, Any]


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
        data["reason"] = self.reason
        return data
