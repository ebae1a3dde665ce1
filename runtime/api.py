"""The requests and answers of every interface, modelled once.

The HTTP API's bodies and responses and the MCP tools' input and output schemas all come from
here, so a field's meaning is written down once; its limits (``MAX_K``) and the words that
refuse them are :mod:`skillgrove.runtime.limits`'s, which the engine and the CLI apply too.
Requests are frozen pydantic models that refuse an unknown field with a did-you-mean::

    >>> SearchArguments.model_validate({"request": "zip and mail", "detail": "full"}).detail
    'full'
    >>> parse(SearchRequest, {"requets": "x"})
    Traceback (most recent call last):
    skillgrove.runtime.errors.InvalidRequestError: requets: unknown field (did you mean 'request'?)

Answers: :class:`CompactToolbox` is the toolbox an agent reads by default (what to use, in what
order, with which inputs, and why); the full view (``detail="full"``) is the same toolbox with
every ranked skill, score and explanation, described loosely by :class:`FullToolbox`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from skillgrove.runtime.errors import CONTEXT_FIELDS, InvalidRequestError, context_problem
from skillgrove.runtime.limits import (
    DEFAULT_K,
    MAX_K,
    MIN_BUDGET,
    MIN_K,
    MIN_REQUEST_LENGTH,
    budget_problem,
    k_problem,
    request_problem,
)
from skillgrove.skills.diagnostics import did_you_mean

__all__ = [
    "DEFAULT_K",
    "MAX_K",
    "MIN_BUDGET",
    "AskRequest",
    "CompactToolbox",
    "Detail",
    "Frozen",
    "FullToolbox",
    "GetRunRequest",
    "GetSkillRequest",
    "InjectRequest",
    "Injection",
    "NoArguments",
    "RequestContext",
    "RunAnswer",
    "RunGroupRequest",
    "RunSkillArguments",
    "RunSkillRequest",
    "SearchArguments",
    "SearchRequest",
    "answer_schema",
    "arguments_schema",
    "parse",
    "problems",
    "toolbox_output_schema",
]

Detail = Literal["compact", "full"]
_M = TypeVar("_M", bound=BaseModel)


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
        """Unknown fields, and each field's shape, in the words every interface uses
        (``context.recent_skills[1]: must be a string (got object)``)."""
        problem = context_problem(data)
        if problem is not None:
            unknown = isinstance(data, Mapping) and problem[0] in data \
                and problem[0] not in CONTEXT_FIELDS
            kind = "unknown_field" if unknown else "invalid_field"
            raise PydanticCustomError(kind, "{message}",
                                      {"field": problem[0], "message": problem[1]})
        return data

    values: dict[str, Any] | None = Field(
        default=None, description="Facts the groups can use as inputs and as the execution "
                                  "context (read as ${{ context.<key> }}), e.g. team_email.")
    recent_skills: list[str] | None = Field(
        default=None, description="Skills used recently in this conversation (names or ids).")
    conversation: list[str] | None = Field(default=None,
                                           description="The conversation so far.")


def _limited(rule: Callable[[Any], str | None]) -> AfterValidator:
    """A field checked by a rule of :mod:`skillgrove.runtime.limits`, refused in its words: the
    engine applies the same rule, so every interface says ``k: must be a whole number from 1
    to 50``. (The bounds are in the schema too, for clients that read it.)"""

    def check(value: Any) -> Any:
        problem = rule(value)
        if problem is not None:
            raise PydanticCustomError("invalid_field", "{message}", {"message": problem})
        return value

    return AfterValidator(check)


RequestText = Annotated[str, Field(json_schema_extra={"minLength": MIN_REQUEST_LENGTH},
                                   description="The task, in the user's words."),
                        _limited(request_problem)]
SkillCount = Annotated[int, Field(json_schema_extra={"minimum": MIN_K, "maximum": MAX_K},
                                  description="How many single skills to rank."),
                       _limited(k_problem)]
Budget = Annotated[Annotated[int, Field(json_schema_extra={"minimum": MIN_BUDGET})] | None,
                   Field(default=None, description="Tokens the block may take at most "
                                                   "(cl100k_base)."),
                   _limited(budget_problem)]
InjectFormat = Annotated[Literal["markdown", "xml"],
                         Field(default="markdown", description="Shape of the injected block.")]
Inputs = Annotated[dict[str, Any] | None, Field(default=None, description="The inputs, as its "
                                                "input schema declares them.")]
CONFIRM_DESCRIPTION = ("true runs it although it has side effects (sends mail, writes files, "
                       "...); without it such a run does not start and the error "
                       "needs_confirmation lists the effects. Ask the user first.")


class SearchRequest(Frozen):
    """``POST /v1/search`` (``?detail=`` is a query parameter there)."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"request": "summarize the quarterly report PDF and email the key numbers to my team"}]})

    request: RequestText
    context: RequestContext | None = None
    k: SkillCount = DEFAULT_K


class SearchArguments(SearchRequest):
    """``search_toolbox``: the search, and how much of the toolbox to answer with."""

    detail: Detail = Field(default="compact",
                           description="compact (the default): what to use, in what order, "
                                       "with which inputs, and why; full: every ranked skill "
                                       "with scores, explanations and complete schemas.")


class AskRequest(Frozen):
    """``POST /v1/ask``: search, run the chosen group when it is ready, inject."""

    request: RequestText
    context: RequestContext | None = None
    inputs: dict[str, Any] | None = Field(
        default=None,
        description="Inputs for the chosen group, over those taken from context values.")
    budget: Budget = None
    format: InjectFormat = "markdown"
    confirm: bool = Field(
        default=False, description="true runs the chosen group although it has side effects; "
                                   "without it such a group is planned, not run, and the answer "
                                   "lists them in needs_confirmation.")
    plan_only: bool = Field(default=False, description="Plan the chosen group, never run it.")


class InjectRequest(Frozen):
    """``inject``, ``POST /v1/inject``: the context block for a request, a run, or both."""

    request: str | None = Field(default=None,
                                description="The request; else the run's own request.")
    run_id: str | None = Field(default=None,
                               description="A run whose results go into the block.")
    context: RequestContext | None = None
    budget: Budget = None
    format: InjectFormat = "markdown"


class RunGroupRequest(Frozen):
    """``run_group``: run a group with its inputs."""

    group: str = Field(min_length=1, description="Group id, e.g. report-analysis.")
    inputs: Inputs = None
    context: RequestContext | None = Field(
        default=None, description="What you already know, as for search_toolbox; the group's "
                                  "expressions read context.values as ${{ context.<key> }}.")
    confirm: bool = Field(default=False, description=CONFIRM_DESCRIPTION)


class RunSkillRequest(Frozen):
    """``POST /v1/skills/{name}/runs``: run one executable skill on its own."""

    inputs: Inputs = None
    confirm: bool = Field(default=False, description=CONFIRM_DESCRIPTION)


class RunSkillArguments(RunSkillRequest):
    """``run_skill``: the skill is named in the arguments."""

    name: str = Field(min_length=1, description="Skill name.")


class GetSkillRequest(Frozen):
    name: str = Field(min_length=1, description="Skill name (or id).")
    file: str | None = Field(default=None, description="A file of the skill folder, e.g. "
                                                       "SKILL.md or main.py.")


class GetRunRequest(Frozen):
    id: str = Field(min_length=1, description="The run id (or a unique prefix).")


class NoArguments(Frozen):
    pass


def arguments_schema(model: type[BaseModel], without: tuple[str, ...] = ()) -> dict[str, Any]:
    """A request model's JSON Schema as a tool's input schema (``without``: fields another
    part of the call carries, e.g. the path)."""
    schema = model.model_json_schema(by_alias=True)
    for name in without:
        schema.get("properties", {}).pop(name, None)
    return schema


def problems(errors: Sequence[Mapping[str, Any]], strip: tuple[str, ...] = ()
             ) -> list[dict[str, str]]:
    """pydantic's errors as ``{field, message, type}``, the field dotted (``context.values``)
    and named in the message (``k: input should be ...``); ``strip``: leading parts of the
    location that are not fields (``body``, ``query``)."""
    out: list[dict[str, str]] = []
    for error in errors:
        loc = [str(part) for part in error.get("loc", ())]
        where = loc[1:] if loc and loc[0] in strip else loc
        ctx = error.get("ctx") or {}
        kind = str(error.get("type", ""))
        message = str(error.get("msg", "invalid"))
        if kind in ("unknown_field", "invalid_field"):
            where = [*where, *([str(ctx["field"])] if ctx.get("field") else [])]
        elif kind == "json_invalid":
            where = []
            message = f"invalid JSON ({ctx.get('error', 'decode error')})"
        elif kind == "missing":
            message = "field required"
        elif not where and isinstance(error.get("input"), bytes | str):
            message = "send a JSON object with Content-Type: application/json"
        field = ".".join(where) or (loc[0] if loc else "body")
        message = message[:1].lower() + message[1:]
        out.append({"field": field, "message": f"{field}: {message}", "type": kind})
    return out


def parse(model: type[_M], data: Mapping[str, Any], at: str = "") -> _M:
    """``data`` as ``model``; a mistake is an :class:`InvalidRequestError` naming the field
    (below ``at``, e.g. ``context``), worded as the HTTP API words it."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        found = problems(exc.errors())
        field = ".".join(part for part in (at, found[0]["field"]) if part)
        raise InvalidRequestError(field, found[0]["message"].split(": ", 1)[1]) from None


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


class Injection(BaseModel):
    """The context block (``inject``, ``POST /v1/inject``, an answer of ``ask``)."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(description="The block to put in the agent's prompt.")
    tokens: int = Field(description="Its size in cl100k_base tokens.")
    budget: int | None = Field(description="The budget it was built for, if any.")
    level: str = Field(description="How far the budget made the block give up sections: "
                                   "full, menu-names, no-menu, summaries, names, "
                                   "no-step-outputs, shortened, described.")
    left_out: list[str] = Field(description="What the budget left out, in words.")


class RunAnswer(BaseModel):
    """What ``run_group``, ``run_skill`` and a group's own tool answer."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    group: str = Field(description="The group id (skill:<name> for a skill run on its own).")
    status: str = Field(description="success on an answer that is not an error.")
    outputs: dict[str, Any]
    error: str | None = None
    run: dict[str, Any] = Field(description="The whole run record (get_run answers it too).")


def answer_schema(model: type[BaseModel]) -> dict[str, Any]:
    """An answer model's JSON Schema (an MCP tool's outputSchema)."""
    return model.model_json_schema(by_alias=True)


def toolbox_output_schema() -> dict[str, Any]:
    """The JSON Schema of a toolbox answer at either detail (an MCP tool's outputSchema)."""
    compact = CompactToolbox.model_json_schema(by_alias=True)
    full = FullToolbox.model_json_schema(by_alias=True)
    definitions = {**compact.pop("$defs", {}), **full.pop("$defs", {})}
    definitions.update(CompactToolbox=compact, FullToolbox=full)
    return {"type": "object",
            "anyOf": [{"$ref": "#/$defs/CompactToolbox"}, {"$ref": "#/$defs/FullToolbox"}],
            "$defs": definitions}
