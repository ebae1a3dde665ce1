"""Retrieval as four named stages, each with its own small frozen settings (``None`` means off):

1. :mod:`.skills`: candidate skills (BM25 and vectors, the gloss for Chinese) and which fit;
2. :mod:`.groups`: candidate groups (their text and past requests, the router) and whether one
   answers;
3. :mod:`.plan`: the toolbox planner: a group, the group adapted, or a composed toolbox, and
   the order its skills run in;
4. :mod:`.suggestions`: "usually used with".

:class:`Settings` holds one of each; ``graph.retrieval.Retriever`` runs them in that order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from skillgrove.graph.stages.groups import FinalSteps, GroupSettings, Siblings
from skillgrove.graph.stages.plan import PlanSettings
from skillgrove.graph.stages.skills import SkillSettings
from skillgrove.graph.stages.suggestions import SuggestionSettings

__all__ = ["FinalSteps", "GroupSettings", "PlanSettings", "Settings", "Siblings",
           "SkillSettings", "SuggestionSettings"]

_NESTED = {"final_steps": FinalSteps, "siblings": Siblings}


@dataclass(frozen=True)
class Settings:
    skills: SkillSettings = field(default_factory=SkillSettings)
    groups: GroupSettings | None = field(default_factory=GroupSettings)
    """None: no group answers (skills only, with what was learned)."""
    plan: PlanSettings = field(default_factory=PlanSettings)
    suggestions: SuggestionSettings = field(default_factory=SuggestionSettings)
    demote_factor: float = 0.5
    """The quality filter: a skill or group that keeps failing scores this share."""

    def but(self, **stages: Mapping[str, Any] | None) -> Settings:
        """These settings with some fields of some stages changed:
        ``settings.but(groups={"threshold": 0.3}, plan={"near_miss": None})``; ``groups=None``
        turns the group stage off (changes to a stage that is off are ignored)."""
        changed: dict[str, Any] = {}
        for stage, changes in stages.items():
            if stage not in ("skills", "groups", "plan", "suggestions"):
                raise ValueError(f"no retrieval stage {stage!r}")
            current = getattr(self, stage)
            if changes is None:
                if stage != "groups":
                    raise ValueError(f"the {stage} stage cannot be turned off")
                changed[stage] = None
            elif current is not None:
                changed[stage] = replace(current, **changes)
        return replace(self, **changed)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Settings:
        """Settings as :meth:`to_json` wrote them; a field this version does not know is
        dropped (its default stays), so an index written by another version still reads."""
        data = json.loads(text)

        def build(kind: type, value: Any) -> Any:
            if not isinstance(value, Mapping):
                return value
            known = {f.name for f in fields(kind)}
            kept = {key: (build(_NESTED[key], item) if key in _NESTED and item is not None
                          else item) for key, item in value.items() if key in known}
            return kind(**kept)

        stages = {"skills": SkillSettings, "groups": GroupSettings, "plan": PlanSettings,
                  "suggestions": SuggestionSettings}
        kept: dict[str, Any] = {}
        for key, kind in stages.items():
            if key in data:
                kept[key] = None if data[key] is None else build(kind, data[key])
        if isinstance(data.get("demote_factor"), int | float):
            kept["demote_factor"] = float(data["demote_factor"])
        return cls(**kept)


DEFAULT_SETTINGS = Settings()

FITTED_KEY = "retrieval_settings"
"""Store metadata: the settings ``skillgrove index`` fitted on the library's history
(:meth:`Settings.to_json`); empty or absent, the defaults answer. A retriever made without
settings of its own reads them at each new index generation, so every process searching one
store answers with the same settings."""
FITTED_FROM_KEY = "retrieval_settings_from"
"""Store metadata: a digest of the history the settings were fitted on (they are fitted again
only when it changes)."""
FIT_DETAILS_KEY = "retrieval_fit"
"""Store metadata: how each fitted setting was chosen, and from how many held-out rows (JSON)."""
