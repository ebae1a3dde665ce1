"""The requests and answers of every interface, modelled once.

The HTTP API's bodies and responses, the MCP tools' input and output schemas and the CLI's
limits all come from here, so a limit (``MAX_K``) or a field's meaning is written down once.
Requests are frozen pydantic models that refuse an unknown field with a did-you-mean::

    >>> SearchRequest.model_validate({"request": "zip and mail", "detail": "full"}).detail
    'full'
    >>> SearchRequest.model_validate({"requets": "x"})
    Traceback (most recent call last):
    pydantic_core._pydantic_core.ValidationError: ... unknown field (did you mean 'request'?)

Answers: :class:`CompactToolbox` is the toolbox an agent reads by default (what to use, in what
order, with which inputs, and why); the full view (``detail="full"``) is the same toolbox with
every ranked skill, score and explanation, described loosely by :class:`FullToolbox`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from skillgrove.runtime.errors import CONTEXT_FIELDS, unknown_context_field
from skillgrove.runtime.limits import DEFAULT_K, MAX_K
from skillgrove.skills.diagnostics import did_you_mean

__all__ = [
    "DEFAULT_K",
    "MAX_K",
    "CompactToolbox",
    "Detail",
    "Frozen",
    "FullToolbox",
    "RequestContext",
    "SearchRequest",
    "toolbox_output_schema",
]

Detail = Literal["compact", "full"]


class Frozen(BaseModel):
    """A request or answer: frozen, and an unknown field is refused with a did-you-mean."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_fields_only(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            known = [info.alias or name for name, info in cls.model_fields.items()]
            accepted = {*known, *cls.model_fields}
            for name in data:
                if name not in accepted:
                    guess = did_you_mean(str(name), known)
                    raise PydanticCustomError(
                        "unknown_field", "unknown field{hint}",
                        {"field": str(name),
                         "hint": f" ({guess})" if guess else f" (fields: {', '.join(known)})"})
        return data


# -- requests ---------------------------------------------------------------------------------


class RequestContext(Frozen):
    """What the caller already knows, in one shape for search, ask, inject and runs."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"values": {"pdf_path": "/reports/q3.pdf", "team_email": "team@example.com"}}]})

    @model_validator(mode="before")
    @classmethod
    def _known_fields_only(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for name in data:
                if name not in CONTEXT_FIELDS:
                    raise PydanticCustomError("unknown_field", "{message}",
                                              {"field": str(name),
                                               "message": unknown_context_field(str(name))})
        return data

    values: dict[str, Any] | None = Field(
        default=None, description="Facts the groups can use as inputs and as the execution "
                                  "context (read as ${{ context.<key> }}), e.g. team_email.")
    recent_skills: list[str] | None = Field(
        default=None, description="Skills used recently in this conversation (names or ids).")
    conversation: list[str] | None = Field(default=None,
                                           description="The conversation so far.")


class SearchRequest(Frozen):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"request": "summarize the quarterly report PDF and email the key numbers to my team"}]})

    request: str = Field(min_length=1, description="The task, in the user's words.")
    context: RequestContext | None = None
    k: int = Field(default=DEFAULT_K, ge=1, le=MAX_K,
                   description="How many single skills to rank.")
    detail: Detail = Field(default="compact",
                           description="compact: what to use, in what order, with which "
                                       "inputs and why; full: every score and explanation.")


# -- answers ----------------------------------------------------------------------------------


class InputSignature(Frozen):
    """One input of a skill or group: what a call must send."""

    name: str
    type: str = Field(description="The JSON type, e.g. string, integer, string|array.")
    required: bool


class CompactStep(Frozen):
    model_config = ConfigDict(populate_by_name=True)

    id: str
    skill: str | None = Field(default=None, description="The skill the step runs.")
    group: str | None = Field(default=None, description="The sub-group the step runs.")
    if_: str | None = Field(default=None, alias="if",
                            description="The condition the step runs under.")


class CompactGroup(Frozen):
    id: str
    name: str
    description: str | None = None
    steps: list[CompactStep]
    edges: list[list[str]] = Field(description="[before, after] pairs of step ids.")
    inputs: list[InputSignature]
    outputs: list[str] | None = None
    effects: dict[str, list[str]] | None = Field(
        default=None, description="effect -> the skills that have it; running needs "
                                  "confirm: true.")
    unavailable_reasons: list[str] | None = None
    ready: bool = Field(description="Whether the context holds every required input.")
    missing_inputs: list[str]
    tool: str | None = Field(default=None, description="The MCP tool that runs the group.")


class CompactSkill(Frozen):
    name: str
    description: str = Field(description="The first sentence of its description.")
    inputs: list[InputSignature] | None = Field(
        default=None, description="Absent for a group's members: the group wires them.")
    runnable: bool = Field(description="Whether it runs here (else: instructions to follow).")
    id: str | None = Field(default=None, description="Given when another skill has its name.")
    path: str | None = None
    effects: list[str] | None = None
    unavailable_reasons: list[str] | None = None


class CompactSuggestion(Frozen):
    name: str
    reason: str


class CompactToolbox(Frozen):
    """The toolbox an agent reads by default."""

    request: str
    shape: Literal["group", "composed", "skill", "skills", "none"]
    reason: str = Field(description="The answer in one sentence: what was chosen and why.")
    group: CompactGroup | None
    skills: list[CompactSkill] = Field(description="What to use, in order.")
    edges: list[list[str]] = Field(description="[before, after] pairs of skill names.")
    fallback_reason: str | None
    suggestions: list[CompactSuggestion] = Field(description="Usually used with these.")
    others: list[str] = Field(description="Skills that ranked next, not selected.")
    detail: Literal["compact"]


class FullToolbox(BaseModel):
    """The full toolbox (``detail="full"``): every ranked skill with its score and
    explanation, complete schemas, the group candidates and the search's latency."""

    model_config = ConfigDict(extra="allow", frozen=True)

    request: str
    shape: str
    reason: str
    group: dict[str, Any] | None
    skills: list[dict[str, Any]]
    detail: Literal["full"]


def toolbox_output_schema() -> dict[str, Any]:
    """The JSON Schema of a toolbox answer at either detail (an MCP tool's outputSchema)."""
    compact = CompactToolbox.model_json_schema(by_alias=True)
    full = FullToolbox.model_json_schema(by_alias=True)
    definitions = {**compact.pop("$defs", {}), **full.pop("$defs", {})}
    definitions.update(CompactToolbox=compact, FullToolbox=full)
    return {"type": "object",
            "anyOf": [{"$ref": "#/$defs/CompactToolbox"}, {"$ref": "#/$defs/FullToolbox"}],
            "$defs": definitions}
