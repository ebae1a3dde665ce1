"""The HTTP API: the engine's operations over JSON, with runs streamed as server-sent events.

    skillgrove serve http library --port 8787            # 127.0.0.1 only, no token needed
    curl -s localhost:8787/v1/search -H 'content-type: application/json' \\
         -d '{"request": "summarize the quarterly report PDF and email it to my team"}'

Endpoints (the OpenAPI description is at ``/openapi.json``, browsable at ``/docs``)::

    GET  /healthz                          the process is alive (200; never needs the token)
    GET  /readyz                           200 when the index is ready, else 503; the body is
                                           the engine's health (groups serving a last good
                                           version are listed under broken_groups)
    POST /v1/search[?detail=full]          {request, context?, k?} -> the toolbox: compact
                                           (what to use, in what order, with which inputs,
                                           why) or full (every score and explanation)
    POST /v1/ask[?detail=full]             {request, context?, inputs?, budget?, format?,
                                           confirm?, plan_only?} -> toolbox, run (when a
                                           group ran), injection, notes, plan,
                                           needs_confirmation
    POST /v1/inject                        {request?, run_id?, context?, budget?, format?} ->
                                           text, tokens, budget, level, left_out
    GET  /v1/skills                        every loaded skill
    GET  /v1/skills/{name}                 one skill: its view, instructions and files
    GET  /v1/skills/{name}/files/{path}    one file of the skill's folder, as it is
    POST /v1/skills/{name}/runs            {inputs?} -> run one executable skill on its own
    GET  /v1/groups                        every group file (valid, last-good, with errors, or
                                           a draft)
    GET  /v1/groups/{id}                   one group
    POST /v1/groups/{id}/plan              {inputs?, context?} -> levels, resolved inputs, skips
    POST /v1/groups/{id}/runs              {inputs?, context?, resume?} -> the run record (201;
                                           200 and a stream with Accept: text/event-stream)
    GET  /v1/runs?limit=20                 recent runs, newest first
    GET  /v1/groups/{id}/source            the group's file: text, data, path, sha256
    POST /v1/groups/check                  {text | document | edits, path?} -> the diagnostics
                                           `skillgrove check` gives it (with step_id, field)
    POST /v1/groups/files                  {path, text | document | edits, dry_run?,
                                           base_sha256?} -> the diff; writes when dry_run is
                                           false (only inside the library's groups folders)
    GET  /v1/skills/{name}/impact          the groups that use the skill, and which its
                                           current schema breaks
    GET  /v1/drafts                        draft groups (groups/drafts/) and their diagnostics
    POST /v1/drafts/{id}/approve           {path?} -> moves a draft that passes check into
                                           groups/: an ordinary group from then on
    DELETE /v1/drafts/{id}                 discard a draft
    GET  /v1/samples                       the library's sample files (a run's file inputs)
    GET  /studio/                          skillgrove studio, the browser editor (static
                                           files; it calls only the endpoints above)
    GET  /v1/runs/{run_id}                 one run record

**Streaming.** ``POST /v1/groups/{id}/runs`` (and ``/v1/skills/{name}/runs``) sent with
``Accept: text/event-stream`` answers with server-sent events: one ``event: <kind>`` frame per
runner event (``run_started``, ``step_started``, ``step_retrying``, ``step_skipped``,
``step_finished``, ``step_failed``, ``run_finished``; ``data`` is the event as JSON), then one
``event: result`` frame whose data is the run record. A run that cannot start (unknown group,
bad inputs) is refused with an ordinary error response before the stream opens; an unexpected
failure during the run ends the stream with an ``event: error`` frame. A client that hangs up
does not stop the run: it finishes and is recorded (``GET /v1/runs/{run_id}``). Relative paths
in inputs are the server's: they resolve against its working directory, as in ``skillgrove run``.

**Requests** are the models of :mod:`skillgrove.runtime.api` (the MCP tools take the same):
frozen, an unknown field refused with a did-you-mean, the limits written once. A ``context`` has
one shape, ``{values, recent_skills, conversation}``, in every body that takes one (search, ask,
inject, plan, run); a run's steps read its ``values`` as ``context.<key>``. Any other key (a flat
object of values) is a 422 naming it, as every interface words it (``context.team_email:
unknown field: ... put what you know under values: {"values": {"team_email": ...}}``).

**Errors** all have one shape, ``{"error": {"code", "message", "details"}}``:

    ====  ==========================  ===================================================
    400   run_error, error            a run cannot start; another engine error
    401   unauthorized                no token, or the wrong one (``WWW-Authenticate: Bearer``)
    404   not_found                   no such skill, group, run, file or route (did-you-mean)
    405   method_not_allowed          the route exists, the method does not
    409   needs_confirmation          the run has side effects; send ``confirm: true``
    413   body_too_large              the body is over ``max_body`` bytes (default 1 MiB)
    421   invalid_host                no token, and Host or Origin is not a loopback name
    429   too_many_runs               ``max_runs`` runs are going already (``Retry-After``)
    422   invalid_request             a bad field: ``details.field`` names it
    500   internal                    a bug; the traceback goes to stderr, never to the client
    503   unavailable                 ``/readyz`` only: the engine cannot even report its health
    ====  ==========================  ===================================================

**Security.** :func:`serve` binds 127.0.0.1 unless told otherwise and refuses any other address
without a token. With a token, every endpoint but ``/healthz`` wants ``Authorization: Bearer
<token>``. Without one, only loopback ``Host`` and ``Origin`` names are served, so a web page
cannot reach the API through DNS rebinding or a cross-site form (runs execute skills).

Every engine call blocks (model inference, subprocesses), so the endpoints are plain functions
that FastAPI runs in its thread pool, and a run goes to the pool (or, streamed, to a thread of
its own): concurrent clients are served side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import ipaddress
import json
import mimetypes
import socket
import sys
import threading
import traceback
from collections.abc import AsyncIterator, Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from skillgrove.graph.errors import StoreError
from skillgrove.runtime import authoring
from skillgrove.runtime.api import (
    AskRequest,
    CompactToolbox,
    Detail,
    Frozen,
    FullToolbox,
    InjectRequest,
    RequestContext,
    RunSkillRequest,
    SearchRequest,
    problems,
)
from skillgrove.runtime.api import Injection as InjectionView
from skillgrove.runtime.errors import EngineError, InvalidRequestError
from skillgrove.runtime.views import answer_view, group_view, injection_view
from skillgrove.skills.errors import SkillgroveError

if TYPE_CHECKING:
    from skillgrove.graph.runlog import RunRecord
    from skillgrove.runtime.engine import Skillgrove
    from skillgrove.runtime.events import Event
    from skillgrove.runtime.inject import Injection

__all__ = ["DEFAULT_MAX_BODY", "create_app", "is_loopback", "serve"]

DEFAULT_MAX_BODY = 1024 * 1024
DEFAULT_MAX_RUNS = 8
"""Runs a server carries at once (each may start skill processes); more get a 429."""
KEEPALIVE_SECONDS = 15.0
"""An SSE comment goes out when a run is quiet this long, so proxies keep the stream open."""
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
EVENT_STREAM = "text/event-stream"
STUDIO_PREFIX = "/studio"
STUDIO_ASSETS = Path(__file__).resolve().parent / "studio" / "dist"
STUDIO_POLICY = ("default-src 'self'; connect-src 'self'; img-src 'self' data:; "
                 "style-src 'self' 'unsafe-inline'; script-src 'self'; object-src 'none'; "
                 "base-uri 'none'; frame-ancestors 'none'; form-action 'none'")
"""The studio's Content-Security-Policy: its own files only (no inline script)."""

_STATUS_BY_CODE = {"not_found": 404, "invalid_request": 422, "run_error": 400,
                   "needs_confirmation": 409, "too_many_runs": 429}


# -- request bodies ---------------------------------------------------------------------------


_Body = Frozen
"""A request body: frozen, and an unknown field is refused with a did-you-mean."""


RequestContextBody = RequestContext
"""What the caller already knows: ``{values, recent_skills, conversation}``, nothing else."""


SearchBody = SearchRequest
AskBody = AskRequest
InjectBody = InjectRequest
SkillRunBody = RunSkillRequest


_RUN_CONTEXT = ("What you already know, as search takes it: {values: {team_email: ...}}; the "
                "steps read each value as context.<name>. Any other key is refused.")


class PlanBody(_Body):
    inputs: dict[str, Any] | None = None
    context: RequestContextBody | None = Field(default=None, description=_RUN_CONTEXT)


class RunBody(_Body):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"inputs": {"pdf_path": "samples/quarterly_report.pdf"},
         "context": {"values": {"team_email": "team@example.com", "report_name": "Q3"}}}]})

    inputs: dict[str, Any] | None = Field(default=None, description="The group's inputs.")
    context: RequestContextBody | None = Field(default=None, description=_RUN_CONTEXT)
    resume: str | None = Field(
        default=None, description="A run id whose successful steps are reused; its inputs and "
                                  "context apply unless given here.")
    confirm: bool = Field(
        default=False, description="true runs it although it has side effects (sends mail, "
                                   "writes files, ...); without it such a run is refused with "
                                   "409 needs_confirmation listing the effects.")


class _GroupSourceBody(_Body):
    text: str | None = Field(default=None, description="The whole group file, as YAML.")
    document: dict[str, Any] | None = Field(
        default=None, description="The group as a JSON object, written out as YAML.")
    edits: list[dict[str, Any]] | None = Field(
        default=None, description="Changes to the file at path, each {op: set | delete | "
                                  "append, path: 'steps[2].with.text', value}; the rest of the "
                                  "file (comments, order, layout) stays as it is.")


class CheckGroupBody(_GroupSourceBody):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"text": "id: g\ndescription: d\nsteps:\n  - id: a\n    skill: pdf-to-text\n"}]})

    path: str | None = Field(default=None, description="The group file the text is for "
                             "(relative to the groups folder, e.g. my-group.yaml); needed "
                             "with edits.")


class SaveGroupBody(_GroupSourceBody):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"path": "report-analysis.yaml", "dry_run": True,
         "edits": [{"op": "set", "path": "steps[1].with.limit", "value": 5}]}]})

    path: str = Field(min_length=1, description="Where to write: relative to the library's "
                      "groups folder (my-group.yaml), or absolute inside it.")
    dry_run: bool = Field(default=True, description="true (the default) only shows the diff; "
                                                    "false writes the file.")
    base_sha256: str | None = Field(default=None, description="The sha256 the file had when "
                                    "it was opened: a file changed since is not overwritten.")


# -- response shapes (documentation: the views are served as the engine makes them) -----------


class _View(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorInfo(BaseModel):
    code: str = Field(description="Stable: not_found, invalid_request, run_error, unauthorized, "
                                  "body_too_large, internal, ...")
    message: str
    details: dict[str, Any] = Field(description="e.g. {field} for invalid_request, "
                                                "{kind, name} for not_found.")


class ErrorBody(BaseModel):
    error: ErrorInfo


class AliveView(BaseModel):
    status: Literal["ok"]


class HealthView(BaseModel):
    ready: bool
    skills: int
    groups: int
    broken_groups: dict[str, list[str]] = Field(
        description="Groups serving their last good version, with the errors of the file.")
    last_refresh: float | None
    last_error: str | None


class SkillView(_View):
    id: str
    name: str
    description: str
    location: str | None
    input_schema: dict[str, Any]
    runnable: bool
    available: bool
    unavailable_reasons: list[str]


class SkillList(BaseModel):
    skills: list[SkillView]


class SkillFileView(BaseModel):
    path: str
    size: int
    sha256: str


class SkillDetailsView(SkillView):
    body: str = Field(description="The instructions (SKILL.md without its frontmatter).")
    files: list[SkillFileView]


class GroupView(_View):
    id: str | None
    name: str | None
    location: str
    status: Literal["valid", "last-good", "errors", "draft"]
    errors: list[str]


class GroupList(BaseModel):
    groups: list[GroupView]


class DiagnosticView(BaseModel):
    severity: Literal["error", "warning", "info"]
    rule: str
    message: str
    path: str | None
    line: int | None
    column: int | None
    hint: str | None
    subject: str | None
    step_id: str | None = Field(description="The step the diagnostic concerns, when known.")
    field: str | None = Field(description="The field of that step, e.g. with.text.")
    follow_ons: list[dict[str, Any]] | None = None


class GroupCheckView(BaseModel):
    valid: bool
    id: str | None
    text: str = Field(description="The YAML that was checked (the document written out).")
    errors: int
    warnings: int
    diagnostics: list[DiagnosticView]


class GroupSaveView(BaseModel):
    path: str = Field(description="Relative to the groups folder's parent: groups/x.yaml.")
    location: str
    created: bool
    changed: bool
    written: bool
    dry_run: bool
    diff: str = Field(description="A unified diff from the file on disk to the new text.")
    sha256: str
    valid: bool
    id: str | None
    errors: int
    warnings: int
    diagnostics: list[DiagnosticView]


class ApproveDraftBody(_Body):
    path: str | None = Field(default=None, description="The file in the groups folder it "
                             "becomes (default <id>.yaml).")


class DraftView(BaseModel):
    id: str
    name: str | None
    description: str | None
    path: str
    location: str
    steps: list[str]
    members: list[str]
    valid: bool
    errors: int
    warnings: int
    diagnostics: list[DiagnosticView]


class DraftList(BaseModel):
    drafts: list[DraftView]


class GroupSourceView(BaseModel):
    id: str
    location: str
    path: str | None = Field(description="What POST /v1/groups/files takes as path.")
    writable: bool = Field(description="Whether the file is in a groups folder of the "
                                       "library (studio can save it).")
    draft: bool = Field(description="Whether it is a draft (in groups/drafts/).")
    text: str
    sha256: str
    document: Any


ToolboxView = CompactToolbox | FullToolbox
"""A toolbox: compact by default, full with ``?detail=full``."""
DetailParam = Annotated[Detail, Query(description="compact (the default): what to use, in "
                                                  "what order, with which inputs, and why; "
                                                  "full: every ranked skill with its scores, "
                                                  "explanations and complete schemas.")]


class PlannedStepView(BaseModel):
    id: str
    target: str
    kind: str
    level: int
    needs: list[str]
    inputs: dict[str, Any]
    skip_reason: str | None
    decided_at_run_time: bool = Field(
        default=False, description="Whether it runs depends on what earlier steps return.")
    depends_on: list[str] = Field(default_factory=list,
                                  description="The steps that decide it.")


class PlanView(BaseModel):
    group: str
    inputs: dict[str, Any]
    levels: list[list[str]]
    steps: list[PlannedStepView]


class StepView(_View):
    id: str
    target: str
    kind: str
    status: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    error: str | None
    attempts: int


class RunView(_View):
    id: str
    group: str
    status: Literal["success", "failure", "cancelled"]
    inputs: dict[str, Any]
    context: dict[str, Any]
    outputs: dict[str, Any]
    steps: list[StepView]
    started_at: float
    seconds: float
    request: str | None
    resumed_from: str | None
    error: str | None
    run_dir: str | None = Field(default=None,
                                description="The folder that holds what the run's steps wrote.")


class RunList(BaseModel):
    runs: list[RunView]




class AnswerView(BaseModel):
    toolbox: ToolboxView
    run: RunView | None
    injection: InjectionView
    notes: list[str]
    plan: dict[str, Any] | None = Field(
        default=None, description="The chosen group's plan when it was not run.")
    needs_confirmation: dict[str, list[str]] = Field(
        default_factory=dict, description="Effect -> skills that kept the group from running.")


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": ErrorBody} for status in statuses}


_RUN_RESPONSES: dict[int | str, dict[str, Any]] = {
    201: {"description": "The run record (its status says whether it succeeded). With "
                         "`Accept: text/event-stream`: 200 and a stream of `event: <kind>` "
                         "frames, then `event: result` with the record.",
          "content": {EVENT_STREAM: {"schema": {"type": "string"}}}},
    **_errors(400, 404, 409, 422),
}


# -- JSON out ---------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _dumps(content: Any) -> str:
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"), default=_plain)


class _JSON(JSONResponse):
    """The engine's views as they are (no re-validation; anything odd becomes a string)."""

    def render(self, content: Any) -> bytes:
        return _dumps(content).encode("utf-8")


def _error_body(code: str, message: str, details: Mapping[str, Any] | None = None,
                ) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": dict(details or {})}}


def _error_response(status: int, code: str, message: str,
                    details: Mapping[str, Any] | None = None,
                    headers: Mapping[str, str] | None = None) -> _JSON:
    return _JSON(_error_body(code, message, details), status_code=status, headers=headers)


def _engine_error(exc: SkillgroveError) -> tuple[int, dict[str, Any]]:
    if isinstance(exc, EngineError):
        return _STATUS_BY_CODE.get(exc.code, 400), {"error": exc.to_dict()}
    return 400, _error_body("error", str(exc), {"type": type(exc).__name__})


# -- the guard: token, host, body size, and the last word on unexpected errors ----------------


class _Guard:
    """Pure ASGI middleware in front of every route. It checks the token (or, without one, that
    Host and Origin are loopback names), reads the whole body while counting its bytes (so a
    chunked body cannot slip past the limit), and turns an unexpected exception into a 500."""

    def __init__(self, app: ASGIApp, *, token: str | None, max_body: int) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        refusal = self._refusal(scope["path"], headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                await _error_response(400, "invalid_request", "Content-Length must be a number",
                                      {"field": "content-length"})(scope, receive, send)
                return
            if int(declared) > self.max_body:
                await self._too_large(scope, receive, send)
                return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_body:
                await self._too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        await self._call(scope, _replay(bytes(body), receive), send)

    def _refusal(self, path: str, headers: Mapping[str, str]) -> _JSON | None:
        if self.token is None:
            host = _hostname(headers.get("host", ""))
            origin = headers.get("origin")
            if host not in LOOPBACK_NAMES or (origin is not None
                                              and _hostname(origin) not in LOOPBACK_NAMES):
                return _error_response(
                    421, "invalid_host", "this server has no token, so it only answers "
                    "requests addressed to a loopback name (localhost, 127.0.0.1, [::1])",
                    {"host": headers.get("host"), "origin": origin})
            return None
        if path == "/healthz" or _is_studio(path):
            return None  # static files, no data: the page itself asks for the token
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and given.strip():
            if hmac.compare_digest(given.strip().encode(), self.token):
                return None
            return _error_response(401, "unauthorized", "wrong bearer token", {},
                                   {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return _error_response(401, "unauthorized",
                               "send the token as Authorization: Bearer <token>", {},
                               {"WWW-Authenticate": "Bearer"})

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = _error_response(
            413, "body_too_large", f"the request body is larger than {self.max_body} bytes",
            {"max_body": self.max_body}, {"Connection": "close"})
        await response(scope, receive, send)

    async def _call(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception:
            _log_unexpected(f"{scope.get('method')} {scope.get('path')}")
            if not started:
                await _internal()(scope, receive, send)


def _is_studio(path: str) -> bool:
    return path == STUDIO_PREFIX or path.startswith(STUDIO_PREFIX + "/")


def _headers(scope: Scope) -> dict[str, str]:
    return {key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in scope.get("headers", [])}


def _hostname(value: str) -> str:
    """``127.0.0.1:8787`` -> ``127.0.0.1``; ``http://[::1]:80`` -> ``::1``; junk -> ``""``."""
    try:
        return urlsplit(value if "//" in value else "//" + value).hostname or ""
    except ValueError:
        return ""


def _replay(body: bytes, receive: Receive) -> Receive:
    """The buffered body first, then the client's own messages (a disconnect, later)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _internal() -> _JSON:
    return _error_response(500, "internal", "internal error: the server log has the details")


def _log_unexpected(where: str) -> None:
    sys.stderr.write(f"skillgrove: unexpected error in {where}:\n{traceback.format_exc()}")
    sys.stderr.flush()


# -- validation errors ------------------------------------------------------------------------


def _validation_response(request: Request, exc: RequestValidationError) -> _JSON:
    found = problems(exc.errors(), strip=("body", "query", "path", "header"))
    first = found[0] if found else {"field": "body", "message": "body: invalid"}
    return _error_response(422, "invalid_request", "; ".join(p["message"] for p in found)
                           or first["message"], {"field": first["field"], "errors": found})


# -- the app ----------------------------------------------------------------------------------


def create_app(engine: Skillgrove, *, token: str | None = None,
               max_body: int = DEFAULT_MAX_BODY, max_runs: int = DEFAULT_MAX_RUNS) -> FastAPI:
    """The FastAPI app serving ``engine``; see the module docstring for the endpoints.

    >>> app = create_app(Skillgrove(["library"]), token="s3cret")
    >>> uvicorn.run(app, host="127.0.0.1", port=8787)     # what :func:`serve` does
    """
    if not isinstance(max_body, int) or max_body < 0:
        raise InvalidRequestError("max_body", "must be a number of bytes (0 or more)")
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
        raise InvalidRequestError("max_runs", "must be a number of runs (1 or more)")
    app = FastAPI(
        title="skillgrove",
        summary="Group-structured skill graph engine: retrieve toolboxes of agent skills, run "
                "groups as DAGs, inject the results.",
        version=_version(),
        redoc_url=None,
    )
    app.state.run_slots = _RunSlots(max_runs)
    app.add_middleware(_Guard, token=token, max_body=max_body)
    _add_error_handlers(app)
    app.include_router(_health_routes(engine))
    app.include_router(_api_routes(engine))
    _mount_studio(app)
    if token:
        _require_bearer_in_schema(app)
    return app


def _mount_studio(app: FastAPI) -> None:
    """The studio's built files at /studio/ (when the package has them)."""
    from starlette.responses import RedirectResponse
    from starlette.staticfiles import StaticFiles

    if not (STUDIO_ASSETS / "index.html").is_file():
        return
    files = StaticFiles(directory=STUDIO_ASSETS, html=True)

    async def studio(scope: Scope, receive: Receive, send: Send) -> None:
        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      (b"content-security-policy", STUDIO_POLICY.encode()),
                                      (b"x-content-type-options", b"nosniff"),
                                      (b"referrer-policy", b"no-referrer")]
            await send(message)

        await files(scope, receive, secured)

    @app.get(STUDIO_PREFIX, include_in_schema=False)
    def studio_root() -> Response:
        return RedirectResponse(STUDIO_PREFIX + "/")

    app.mount(STUDIO_PREFIX, studio, name="studio")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("skillgrove")
    except PackageNotFoundError:
        return "0"


def _add_error_handlers(app: FastAPI) -> None:
    async def on_engine_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, SkillgroveError)
        if isinstance(exc, StoreError):
            raise exc  # the server's own storage, not the request: a 500, logged in full
        status, body = _engine_error(exc)
        return _JSON(body, status_code=status)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return _validation_response(request, exc)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        headers = {key.lower(): value for key, value in (exc.headers or {}).items()}
        if exc.status_code == 404:
            return _error_response(
                404, "not_found", f"no route {request.method} {request.url.path} (the API is "
                "under /v1; /openapi.json lists it)",
                {"kind": "route", "name": request.url.path}, headers)
        if exc.status_code == 405:
            return _error_response(
                405, "method_not_allowed", f"{request.method} is not allowed on "
                f"{request.url.path} (allowed: {headers.get('allow', '?')})",
                {"allowed": headers.get("allow", "").replace(" ", "").split(",")}, headers)
        return _error_response(exc.status_code, "http_error", str(exc.detail), {}, headers)

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        return _internal()  # reached only when the guard itself fails; uvicorn logs it

    app.add_exception_handler(SkillgroveError, on_engine_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)


def _require_bearer_in_schema(app: FastAPI) -> None:
    from fastapi.openapi.utils import get_openapi

    def schema() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(title=app.title, version=app.version, summary=app.summary,
                               routes=app.routes)
            spec.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer"}}
            for path, operations in spec.get("paths", {}).items():
                if path != "/healthz":
                    for operation in operations.values():
                        operation["security"] = [{"bearer": []}]
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = schema  # type: ignore[method-assign]


def _health_routes(engine: Skillgrove) -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/healthz", response_model=AliveView, summary="The process is alive")
    def healthz() -> Response:
        return _JSON({"status": "ok"})

    @router.get("/readyz", response_model=HealthView, summary="Ready to answer",
                responses={503: {"model": HealthView,
                                 "description": "Not indexed yet, or the store is down."}})
    def readyz() -> Response:
        try:
            health = engine.health()
        except Exception as exc:  # a store that is down makes the server not ready, not broken
            return _error_response(503, "unavailable", f"{type(exc).__name__}: {exc}")
        return _JSON(health.to_dict(), status_code=200 if health.ready else 503)

    return router


SkillName = Annotated[str, PathParam(description="A skill's name (or id).")]
GroupId = Annotated[str, PathParam(description="A group's id.")]


def _api_routes(engine: Skillgrove) -> APIRouter:
    router = APIRouter(prefix="/v1", responses=_errors(401, 413, 422, 500))

    @router.post("/search", response_model=ToolboxView, tags=["retrieval"],
                 summary="The toolbox for a request: a group, or single skills")
    def search(body: SearchBody, detail: DetailParam = "compact") -> Response:
        return _JSON(engine.toolbox(body.request, _context(body.context), body.k, detail))

    @router.post("/ask", response_model=AnswerView, tags=["retrieval"],
                 summary="Search, run the chosen group when it is ready, build the context "
                         "block")
    def ask(body: AskBody, detail: DetailParam = "compact") -> Response:
        answer = engine.ask(body.request, _context(body.context), body.inputs,
                            budget=body.budget, fmt=body.format, confirm=body.confirm,
                            plan_only=body.plan_only)
        return _JSON(answer_view(answer, engine.views, detail))

    @router.post("/inject", response_model=InjectionView, tags=["retrieval"],
                 summary="The context block for a request, a run, or both")
    def inject(body: InjectBody) -> Response:
        injection = engine.inject(body.request, run_id=body.run_id,
                                  context=_context(body.context), budget=body.budget,
                                  fmt=body.format)
        return _JSON(_injection(injection))

    @router.get("/skills", response_model=SkillList, tags=["skills"],
                summary="Every loaded skill")
    def skills() -> Response:
        loaded = engine.library.skills
        views = engine.views
        return _JSON({"skills": [views.loaded(loaded[name]) for name in sorted(loaded)]})

    @router.get("/skills/{name}", response_model=SkillDetailsView, tags=["skills"],
                summary="One skill: its view, instructions and files",
                responses=_errors(404))
    def skill(name: SkillName) -> Response:
        return _JSON(engine.skill(name).to_dict())

    @router.get("/skills/{name}/files/{file_path:path}", tags=["skills"],
                summary="One file of a skill's folder, as it is",
                response_class=Response, responses={
                    200: {"description": "The file's bytes.",
                          "content": {"application/octet-stream": {}}}, **_errors(404)})
    def skill_file(name: SkillName, file_path: Annotated[str, PathParam(
            description="Relative to the skill folder, e.g. SKILL.md or scripts/run.py.")],
                   ) -> Response:
        data = engine.skill_file(name, file_path)
        kind = mimetypes.guess_type(file_path)[0]
        if kind is None:
            kind = "text/markdown" if file_path.endswith(".md") else "application/octet-stream"
        return Response(data, media_type=kind, headers={"X-Content-Type-Options": "nosniff"})

    @router.post("/skills/{name}/runs", status_code=201, tags=["runs"],
                 response_model=RunView, responses=_RUN_RESPONSES,
                 summary="Run one executable skill on its own")
    async def run_skill(name: SkillName, request: Request,
                        body: SkillRunBody | None = None) -> Response:
        given = body or SkillRunBody()
        return await _run_response(request, lambda on_event: engine.run_skill(
            name, given.inputs, on_event=on_event, confirm=given.confirm))

    @router.get("/groups", response_model=GroupList, tags=["groups"],
                summary="Every group file: valid, serving its last good version, or with "
                        "errors")
    def groups() -> Response:
        return _JSON({"groups": engine.groups()})

    @router.get("/groups/{group_id}", response_model=GroupView, tags=["groups"],
                summary="One group", responses=_errors(404))
    def group(group_id: GroupId) -> Response:
        found = engine.group(group_id)
        view = next((g for g in engine.groups() if g.get("id") == found.id), None)
        if view is None:  # reloaded between the two calls
            view = {**group_view(found, engine.library.skills, engine.library.groups),
                    "status": "valid",
                    "errors": []}
        return _JSON(view)

    @router.get("/groups/{group_id}/source", response_model=GroupSourceView, tags=["authoring"],
                summary="The group's file: its text, its data and where it is",
                responses=_errors(404))
    def group_source(group_id: GroupId) -> Response:
        return _JSON(authoring.group_source(engine, group_id))

    @router.post("/groups/check", response_model=GroupCheckView, tags=["authoring"],
                 summary="Check group YAML as `skillgrove check` does; nothing is written")
    def check_group(body: CheckGroupBody) -> Response:
        return _JSON(authoring.check_group(engine, _source(body), body.path))

    @router.post("/groups/files", response_model=GroupSaveView, tags=["authoring"],
                 summary="Save a group file (a diff only, unless dry_run is false)")
    def save_group(body: SaveGroupBody) -> Response:
        return _JSON(authoring.save_group(engine, body.path, _source(body),
                                          dry_run=body.dry_run, base_sha256=body.base_sha256))

    @router.get("/samples", tags=["authoring"],
                summary="The library's sample files (what a run's file input can be given)")
    def list_samples() -> Response:
        return _JSON({"samples": authoring.samples(engine)})

    @router.get("/skills/{name}/impact", tags=["authoring"],
                summary="The groups that use a skill, and which its current schema breaks")
    def skill_impact(name: SkillName) -> Response:
        return _JSON(engine.impact(name).to_dict())

    @router.get("/drafts", response_model=DraftList, tags=["authoring"],
                summary="Draft groups (from `groups suggest`) with their diagnostics")
    def list_drafts() -> Response:
        return _JSON({"drafts": authoring.drafts(engine)})

    @router.post("/drafts/{draft_id}/approve", tags=["authoring"], responses=_errors(404),
                 summary="Approve a draft that passes check: it becomes an ordinary group")
    def approve_draft(draft_id: Annotated[str, PathParam(description="The draft's id.")],
                      body: ApproveDraftBody | None = None) -> Response:
        return _JSON(authoring.approve_draft(engine, draft_id, (body or ApproveDraftBody()).path))

    @router.delete("/drafts/{draft_id}", tags=["authoring"], responses=_errors(404),
                   summary="Discard a draft (its file is deleted)")
    def discard_draft(draft_id: Annotated[str, PathParam(description="The draft's id.")],
                      ) -> Response:
        return _JSON(authoring.discard_draft(engine, draft_id))

    @router.post("/groups/{group_id}/plan", response_model=PlanView, tags=["groups"],
                 summary="How the group would run: levels, resolved inputs, skips",
                 responses=_errors(400, 404))
    def plan(group_id: GroupId, body: PlanBody | None = None) -> Response:
        given = body or PlanBody()
        return _JSON(dataclasses.asdict(engine.plan(group_id, given.inputs,
                                                    _context(given.context))))

    @router.post("/groups/{group_id}/runs", status_code=201, tags=["runs"],
                 response_model=RunView, responses=_RUN_RESPONSES,
                 summary="Run the group (streamed with Accept: text/event-stream)")
    async def run_group(group_id: GroupId, request: Request,
                        body: RunBody | None = None) -> Response:
        given = body or RunBody()
        return await _run_response(request, lambda on_event: engine.run(
            group_id, given.inputs, _context(given.context), on_event=on_event,
            resume=given.resume,
            confirm=given.confirm))

    @router.get("/runs", response_model=RunList, tags=["runs"], summary="Recent runs")
    def runs(limit: Annotated[int, Query(ge=1, le=1000)] = 20) -> Response:
        return _JSON({"runs": [run.to_dict() for run in engine.runs(limit)]})

    @router.get("/runs/{run_id}", response_model=RunView, tags=["runs"],
                summary="One run record", responses=_errors(404))
    def get_run(run_id: str) -> Response:
        return _JSON(engine.get_run(run_id).to_dict())

    return router


def _source(body: _GroupSourceBody) -> authoring.Source:
    return authoring.Source(text=body.text, document=body.document, edits=body.edits)


def _context(body: RequestContextBody | None) -> dict[str, Any] | None:
    return body.model_dump(exclude_none=True) if body is not None else None


def _injection(injection: Injection) -> dict[str, Any]:
    return injection_view(injection)


# -- runs, plain or streamed ------------------------------------------------------------------


RunStarter = Callable[[Callable[["Event"], None]], "RunRecord"]


class _RunSlots:
    """How many runs the server carries at once: a slot is taken before a run starts and given
    back when it ends, however it ends."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._free = threading.BoundedSemaphore(limit)

    def guarded(self, start: RunStarter) -> RunStarter | None:
        """``start`` holding a slot until it returns, or None when every slot is taken."""
        if not self._free.acquire(blocking=False):
            return None

        def run(on_event: Callable[[Event], None]) -> RunRecord:
            try:
                return start(on_event)
            finally:
                self._free.release()

        return run


async def _run_response(request: Request, start: RunStarter) -> Response:
    slots: _RunSlots = request.app.state.run_slots
    guarded = slots.guarded(start)
    if guarded is None:
        return _error_response(429, "too_many_runs", f"this server is running {slots.limit} "
                               "runs already, its limit: try again when one has finished",
                               {"limit": slots.limit}, {"Retry-After": "1"})
    start = guarded
    if EVENT_STREAM not in request.headers.get("accept", ""):
        record = await run_in_threadpool(start, _ignore)
        return _JSON(record.to_dict(), status_code=201,
                     headers={"Location": f"/v1/runs/{record.id}"})
    return await _event_stream(start, f"{request.method} {request.url.path}")


def _ignore(event: Event) -> None:
    """The sink of a run nobody streams."""


async def _event_stream(start: RunStarter, where: str) -> Response:
    """The run goes on in a thread of its own, which hands each report to the event loop; the
    stream holds no worker thread while it waits. The first report is awaited before the
    response starts, so a run that cannot start gets an ordinary error response."""
    loop = asyncio.get_running_loop()
    reports: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def report(kind: str, value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: the server is stopping
            loop.call_soon_threadsafe(reports.put_nowait, (kind, value))

    def work() -> None:
        try:
            report("result", start(lambda event: report("event", event)))
        except Exception as exc:
            report("error", (exc, traceback.format_exc()))

    threading.Thread(target=work, name="skillgrove-run", daemon=True).start()
    first = await reports.get()
    if first[0] == "error":
        raise first[1][0]

    async def frames() -> AsyncIterator[str]:
        kind, value = first
        while True:
            if kind == "event":
                yield _frame(str(value.kind), value.to_dict())
            elif kind == "result":
                yield _frame("result", value.to_dict())
                return
            else:
                exc, text = value
                if isinstance(exc, SkillgroveError):
                    yield _frame("error", _engine_error(exc)[1])
                else:
                    sys.stderr.write(f"skillgrove: unexpected error in {where}:\n{text}")
                    yield _frame("error", _internal_body())
                return
            while True:
                try:
                    kind, value = await asyncio.wait_for(reports.get(), KEEPALIVE_SECONDS)
                    break
                except TimeoutError:
                    yield ": keepalive\n\n"

    return StreamingResponse(frames(), media_type=EVENT_STREAM,
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _internal_body() -> dict[str, Any]:
    return _error_body("internal", "internal error: the server log has the details")


def _frame(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {_dumps(data)}\n\n"


# -- serving ----------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses; a hostname is not resolved."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def serve(engine: Skillgrove, *, host: str = "127.0.0.1", port: int = 8787,
          token: str | None = None, max_body: int = DEFAULT_MAX_BODY,
          watch: bool = True, announce: Callable[[str], None] | None = None,
          max_runs: int = DEFAULT_MAX_RUNS) -> None:
    """Serve ``engine`` over HTTP until interrupted. Any address but loopback needs a token.

    >>> serve(Skillgrove(["library"]), port=8787)            # blocks; Ctrl-C stops it
    """
    import uvicorn

    if not token and not is_loopback(host):
        raise InvalidRequestError("host", f"refusing to serve on {host} without a token: "
                                  "pass --token (or set SKILLGROVE_TOKEN), or bind 127.0.0.1")
    if not 0 <= port <= 65535:
        raise InvalidRequestError("port", f"{port} is not a port number")
    app = create_app(engine, token=token, max_body=max_body, max_runs=max_runs)
    listener = _listen(host, port)
    watcher = engine.watch() if watch else None
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"skillgrove: HTTP API on http://{shown}:{listener.getsockname()[1]}/v1 "
                     f"(OpenAPI at /openapi.json"
                     f"{'; studio at /studio/' if (STUDIO_ASSETS / 'index.html').is_file() else ''}"
                     f"{'; bearer token required' if token else ''})\n")
    if announce is not None:
        announce(f"http://{shown}:{listener.getsockname()[1]}")
    config = uvicorn.Config(app, log_level="info", server_header=False,
                            timeout_graceful_shutdown=5)
    try:
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        listener.close()
        if watcher is not None:
            watcher.stop()
        engine.close()


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that a port in use is one clear error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
    # without it a small response waits 40 ms for the client's delayed ACK.
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host.strip("[]"), port))
    except OSError as exc:
        listener.close()
        raise InvalidRequestError("port", f"cannot listen on {host}:{port}: "
                                  f"{exc.strerror or exc} (is another server running?)") from exc
    return listener
