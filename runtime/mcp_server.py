"""The MCP server: the engine's tools, its skills as resources, its changes as notifications.

    skillgrove serve mcp library                   # stdio, for a host that starts the server
    skillgrove serve mcp library --transport http  # streamable HTTP on 127.0.0.1:8765/mcp

>>> from skillgrove import Skillgrove
>>> from skillgrove.runtime import mcp_server
>>> mcp_server.serve(Skillgrove(["library"]), transport="http", port=8765)  # blocks

It is built on the low-level ``mcp.server.Server`` of the official SDK (2.x), because the tool
list and the resources are not fixed: they follow the library as it changes on disk. Every
handler calls only the engine (:class:`skillgrove.runtime.engine.Skillgrove`), in a worker thread
(model inference and skill subprocesses block), so concurrent clients are served.

**Tools.** Each returns the engine's JSON view as structured content and a short text that an
agent can act on when its host shows only text:

- ``search_toolbox(request, context?, k?)``: the toolbox for a task — a group with its steps,
  edges and input schema, or single skills with scores, reasons and "usually used with".
- ``get_skill(name, file?)``: a skill's view, instructions and files (size, sha256), or one file.
- ``run_group(group, inputs?, context?)``: run a group; every runner event is a progress
  notification (total = the group's steps). Returns outputs, status, run id and the record.
- ``run_skill(name, inputs?)``: run one executable skill on its own (with progress).
- ``get_run(id)``: a run record. ``inject(request?, run_id?, budget?, format?, context?)``: the
  context block for the agent. ``list_groups()``: every group file, ``valid``, ``last-good``
  (serving its last good version; the errors of the file on disk) or ``errors``.
- ``group_<id>`` (``-`` becomes ``_``): one tool per group whose file says ``expose: tool``; its
  input schema is exactly the group's declared inputs plus an optional ``context`` object.

Engine errors come back as tool errors (``isError``) carrying ``{code, message, details}``.

**Resources**, as the MCP Skills extension (SEP-2640, ``io.modelcontextprotocol/skills``)
defines them, plus the two conventions FastMCP's skills provider adds::

    skill://<skill>/SKILL.md           the skill's SKILL.md (text/markdown)
    skill://<skill>/<path>             every other file of its folder
    skill://<skill>/_manifest          JSON: every file with its size and sha256 digest
    skill://group/<group id>/SKILL.md  a generated SKILL.md for a group: inputs, context, steps

Every resource carries its ``size`` and ``_meta["io.modelcontextprotocol.skills/digest"]``
(``sha256:<hex>`` of the bytes ``resources/read`` returns, which are served unchanged). The
extension's ``skills/list`` and ``skills/get`` return each skill's verbatim frontmatter and its
complete file manifest; groups are listed there too, under the ``group`` prefix. The server
declares ``directoryRead``: ``resources/directory/read`` lists the direct children of a skill's
folder (``skill://pdf-to-text``), of its subfolders and of ``skill://group``, subfolders as
``inode/directory`` resources. ``resources/list`` (``RESOURCE_PAGE`` a page), directory reads and
``skills/list`` (``SKILLS_PAGE`` entries a page) are paginated with opaque cursors;
``resources/templates/list`` names the three URI shapes above.

**Search as discovery** (skillgrove's own, in the extension's spirit: the Final text leaves
query-filtered discovery for later): ``skills/list`` with ``params.query`` lists the entries of
what skillgrove's search finds for that request, best first (the group that fits, its skills,
the other ranked skills, what is usually used with them), so a host with a large catalog loads
a handful of entries rather than every one.

**Notifications.** The engine calls the server after every re-index (``engine.on_change``; with
``watch=True`` the engine also watches the library folders). The server then compares the new
tool list and resources with the ones it last announced and tells every connected client what
changed. Clients of the handshake protocol (up to 2025-11-25) get
``notifications/tools/list_changed``, ``notifications/resources/list_changed`` and
``notifications/resources/updated`` (for the URIs they subscribed to) on their connection's
standalone channel: the server keeps each such connection from its first request until it
closes. Clients of the 2026-07-28 protocol get the same events on their
``subscriptions/listen`` stream, through the SDK's subscription bus.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import logging
import math
import mimetypes
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import quote

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
import yaml
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from skillgrove.groups.model import GROUP_TOOL_PREFIX, group_tool_name
from skillgrove.runtime.api import (
    DEFAULT_K,
    GetRunRequest,
    GetSkillRequest,
    Injection,
    InjectRequest,
    NoArguments,
    RequestContext,
    RunAnswer,
    RunGroupRequest,
    RunSkillArguments,
    SearchArguments,
    answer_schema,
    arguments_schema,
    parse,
    toolbox_output_schema,
)
from skillgrove.runtime.errors import (
    EngineError,
    InvalidRequestError,
    NotFoundError,
    TooManyRuns,
)
from skillgrove.runtime.events import Event, EventKind
from skillgrove.skills._yaml import YamlSyntaxError, load_located
from skillgrove.skills.errors import SkillgroveError

if TYPE_CHECKING:
    from skillgrove.graph.runlog import RunRecord
    from skillgrove.groups.model import Group
    from skillgrove.runtime.engine import Skillgrove

__all__ = ["GROUP_TOOL_PREFIX", "SKILLS_EXTENSION", "SkillgroveMCP", "group_tool_name",
           "progress_message", "serve"]

logger = logging.getLogger("skillgrove.mcp")

SERVER_NAME = "skillgrove"
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
"""The MCP Skills extension (SEP-2640): ``skills/list``, ``skills/get``, ``skill://`` URIs."""
DIGEST_META_KEY = "io.modelcontextprotocol.skills/digest"
EVENT_META_KEY = "skillgrove/event"
"""The ``_meta`` key of a progress notification that carries the runner event as JSON."""
GROUP_URI_PREFIX = "group"
"""``skill://group/<id>/SKILL.md``: the organisational prefix of the generated group skills."""
MANIFEST_FILE = "_manifest"
CONTEXT_ARGUMENT = "context"
CONFIRM_ARGUMENT = "confirm"
_CONFIRM_SCHEMA = {"type": "boolean", "default": False,
                   "description": "true runs it although it has side effects (sends mail, "
                                  "writes files, ...); without it such a run does not start "
                                  "and the error `needs_confirmation` lists the effects. Ask "
                                  "the user first."}
TEXT_LIMIT = 6000
"""Characters of JSON a text rendering shows before it points at the structured content."""

INSTRUCTIONS = """\
skillgrove keeps groups (validated pipelines of skills that together solve a recurring task)
next to the skills themselves.
1. Call search_toolbox with the user's request (and, in context.values, what you already know,
   e.g. file paths or addresses). It returns a group or, when none fits, single skills.
2. A group: run it with run_group (or its own group_* tool) and the inputs its schema lists,
   with the same context ({"values": {...}}); progress arrives as notifications. A group with
   side effects (sending mail, ...) runs only with confirm: true: ask the user first.
   Single skills: read their instructions with get_skill (or the skill://<name>/SKILL.md
   resource) and follow them; executable ones run with run_skill.
3. inject returns a context block (results and the instructions still needed) within a token
   budget. Give paths as absolute paths: the server resolves relative ones against its own
   working directory.
"""

_T = TypeVar("_T")
EventCallback = Callable[[Event], None]
ToolHandler = Callable[[ServerRequestContext[Any], dict[str, Any]], Awaitable[types.CallToolResult]]


DEFAULT_MAX_RUNS = 8
"""Runs one MCP server carries at once; a run tool called beyond it is a too_many_runs error."""


def serve(engine: Skillgrove, *, transport: Literal["stdio", "http"] = "stdio",
          host: str = "127.0.0.1", port: int = 8765, watch: bool = True,
          token: str | None = None, max_runs: int = DEFAULT_MAX_RUNS) -> None:
    """Serve ``engine`` over MCP until the client (stdio) or a signal (HTTP) ends it.

    ``watch``: re-index the library as its files change and announce the changes; without it
    the engine still re-indexes a changed library before a search (and the change is announced
    then). The streamable HTTP endpoint is ``http://<host>:<port>/mcp``. Over HTTP, as with the
    HTTP API, any address but loopback needs ``token``, which every request must then carry
    as ``Authorization: Bearer <token>``.
    """
    if transport not in ("stdio", "http"):
        raise InvalidRequestError("transport", f"unknown transport '{transport}' "
                                  "(use stdio or http)")
    if transport == "http":
        check_binding(host, token)
    app = SkillgroveMCP(engine, max_runs=max_runs)
    watcher = engine.watch() if watch else None
    if watcher is None:
        # Load the model and index now rather than on the first search.
        threading.Thread(target=engine.refresh, name="skillgrove-warmup", daemon=True).start()
    try:
        if transport == "stdio":
            anyio.run(app.run_stdio)
        else:
            anyio.run(app.run_http, host, port, token)
    finally:
        if watcher is not None:
            watcher.stop()


def check_binding(host: str, token: str | None) -> None:
    """Refuse to serve MCP over HTTP off loopback without a token (the HTTP API's rule)."""
    from skillgrove.runtime.http_server import is_loopback

    if not token and not is_loopback(host):
        raise InvalidRequestError("host", f"refusing to serve MCP on {host} without a token: "
                                  "pass --token (or set SKILLGROVE_TOKEN), or bind 127.0.0.1")


class BearerGuard:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``
    (compared in constant time); others get a 401 in the HTTP API's error shape."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                given = value
        scheme, _, credential = given.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), self.token):
            await self.app(scope, receive, send)
            return
        message = "wrong bearer token" if given else ("this server needs a bearer token: send "
                                                      "it as Authorization: Bearer <token>")
        body = json.dumps({"error": {"code": "unauthorized", "message": message,
                                     "details": {}}}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})




# -- the catalog: tools and resources of one loaded library ---------------------------------------


@dataclass(frozen=True)
class _Resource:
    uri: str
    name: str
    description: str
    mime_type: str
    size: int
    sha256: str
    skill: str | None = None
    """Read through ``engine.skill_file(skill, path)``; else ``content`` is served."""
    path: str | None = None
    content: bytes | None = None

    def listing(self) -> types.Resource:
        return types.Resource(uri=self.uri, name=self.name, description=self.description,
                              mime_type=self.mime_type, size=self.size,
                              _meta={DIGEST_META_KEY: f"sha256:{self.sha256}"})

    def fingerprint(self) -> tuple[str, str, str, str, int, str]:
        return (self.uri, self.name, self.description, self.mime_type, self.size, self.sha256)


@dataclass(frozen=True)
class _SkillEntry:
    """One ``Skill`` entry of the Skills extension."""

    uri: str
    frontmatter: Mapping[str, Any]
    files: tuple[_Resource, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"uri": self.uri, "frontmatter": dict(self.frontmatter),
                "resources": [{"uri": f.uri, "digest": f"sha256:{f.sha256}", "size": f.size}
                              for f in self.files]}


@dataclass(frozen=True)
class _Catalog:
    library: object
    """The engine's ``Library`` this was built from (compared by identity)."""
    tools: tuple[types.Tool, ...]
    group_tools: Mapping[str, str]
    """Tool name -> group id, for the groups exposed as tools."""
    context_inputs: frozenset[str]
    """The group tools whose group declares an input named ``context``."""
    resources: Mapping[str, _Resource]
    skills: tuple[_SkillEntry, ...]
    confirm_inputs: frozenset[str] = frozenset()
    """The group tools whose group declares an input named ``confirm``."""
    directories: Mapping[str, list[str]] = field(default_factory=dict)
    """Directory URI -> its direct children, for resources/directory/read."""

    def tool_fingerprint(self) -> list[dict[str, Any]]:
        return [tool.model_dump(by_alias=True, exclude_none=True) for tool in self.tools]

    def resource_fingerprint(self) -> list[tuple[str, str, str, str, int, str]]:
        return [r.fingerprint() for r in self.resources.values()]


def _skill_uri(skill: str, path: str = "SKILL.md") -> str:
    return f"skill://{quote(skill, safe='')}/{quote(path, safe='/')}"


def _group_uri(group_id: str) -> str:
    return f"skill://{GROUP_URI_PREFIX}/{quote(group_id, safe='')}/SKILL.md"


def _mime_type(path: str) -> str:
    if path.lower().endswith(".md"):
        return "text/markdown"
    return mimetypes.guess_type(path)[0] or "text/plain"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _jsonable(value: Any) -> Any:
    """Plain JSON values (paths, dates and the like become strings)."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def frontmatter_of(text: str) -> dict[str, Any]:
    """The YAML frontmatter of a SKILL.md as JSON values (``{}`` without one)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            try:
                data = load_located("\n".join(lines[1:end]), line_offset=1).value
            except YamlSyntaxError:
                return {}
            return _jsonable(data) if isinstance(data, dict) else {}
    return {}


_CONTEXT_REFERENCE = re.compile(r"\bcontext\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)"
                                r"|\[\s*['\"]([^'\"]+)['\"]\s*\])")


def context_keys(group: Group) -> list[str]:
    """The execution-context values a group's expressions read (``${{ context.team_email }}``)."""
    found: dict[str, None] = {}

    def scan(value: Any) -> None:
        if isinstance(value, str):
            for dotted, quoted in _CONTEXT_REFERENCE.findall(value):
                found.setdefault(dotted or quoted, None)
        elif isinstance(value, Mapping):
            for item in value.values():
                scan(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                scan(item)

    for step in group.steps:
        scan(step.if_)
        scan(dict(step.with_))
    scan(dict(group.outputs))
    return list(found)


def _group_skill_md(view: Mapping[str, Any], group: Group, tool: str | None) -> str:
    """A SKILL.md for a group: what it does, how to run it, its inputs, context and steps."""
    front = {"name": group.id, "description": group.description[:1024],
             "metadata": {"skillgrove-kind": "group", "skillgrove-steps": len(group.steps)}}
    lines = ["---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip(), "---",
             "", f"# {group.name}", "", group.description, "",
             "This is a skillgrove **group**: a validated pipeline of skills that the server runs "
             "for you, step by step.", ""]
    how = f'Run it with the `run_group` tool (`group: "{group.id}"`)'
    lines += [how + (f" or with its own tool `{tool}`." if tool else "."), ""]
    if view.get("status") == "last-good":
        lines += ["**Serving its last good version**: the file on disk has errors:", ""]
        lines += [f"- {error}" for error in view.get("errors", [])] + [""]
    schema = view.get("input_schema", {})
    required = set(schema.get("required", []))
    if schema.get("properties"):
        lines += ["## Inputs", ""]
        for name, prop in schema["properties"].items():
            detail = "required" if name in required else (
                f"default {json.dumps(prop['default'], ensure_ascii=False)}" if "default" in prop
                else "optional")
            text = f" — {prop['description']}" if prop.get("description") else ""
            lines.append(f"- `{name}` ({prop.get('type', 'any')}, {detail}){text}")
        lines.append("")
    keys = context_keys(group)
    if keys:
        lines += ["## Context", "",
                  "Values the steps read from the execution context (`context.values` of "
                  "run_group: `{\"values\": {...}}`): "
                  + ", ".join(f"`{k}`" for k in keys) + ".", ""]
    lines += ["## Steps", ""]
    for number, step in enumerate(group.steps, 1):
        target = (f"skill [`{step.skill}`]({_skill_uri(step.skill)})" if step.skill
                  else f"group [`{step.group}`]({_group_uri(step.group or '')})")
        extra = []
        if step.needs:
            extra.append("after " + ", ".join(f"`{n}`" for n in step.needs))
        if step.if_:
            extra.append(f"only if `{step.if_}`")
        lines.append(f"{number}. `{step.id}`: {target}" + (f" ({'; '.join(extra)})" if extra
                                                            else ""))
    lines.append("")
    if group.outputs:
        lines += ["## Outputs", "", ", ".join(f"`{name}`" for name in group.outputs), ""]
    if group.examples:
        lines += ["## Examples", ""] + [f"- {example}" for example in group.examples] + [""]
    return "\n".join(lines)


# -- the built-in tools ---------------------------------------------------------------------------

_REQUEST_CONTEXT_SCHEMA: dict[str, Any] = {
    **RequestContext.model_json_schema(),
    "description": "What you already know: {values: {pdf_path: ..., team_email: ...}, "
                   "recent_skills: [names], conversation: [recent messages]}. Values go under "
                   "values; any other key is refused.",
}
_RUN_CONTEXT_SCHEMA: dict[str, Any] = {
    **_REQUEST_CONTEXT_SCHEMA,
    "description": "What you already know, as for search_toolbox: {values: {team_email: ...}, "
                   "recent_skills, conversation}. The group's expressions read context.values "
                   "as ${{ context.<key> }}; its SKILL.md resource lists the keys it uses.",
}
_READ_ONLY = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
_RUNS = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)


@dataclass(frozen=True)
class _ToolSpec:
    name: str
    title: str
    description: str
    model: type[BaseModel]
    """The arguments, as a request model of :mod:`skillgrove.runtime.api`."""
    annotations: types.ToolAnnotations
    output: Mapping[str, Any] | None = None

    def tool(self) -> types.Tool:
        return types.Tool(name=self.name, title=self.title, description=self.description,
                          input_schema=arguments_schema(self.model),
                          annotations=self.annotations,
                          output_schema=dict(self.output) if self.output else None)


def _answer(properties: Mapping[str, Any], required: Sequence[str]) -> dict[str, Any]:
    """An output schema that names what an answer always carries (and allows more)."""
    return {"type": "object", "properties": dict(properties), "required": list(required)}


_STRING = {"type": "string"}
_RUN_ANSWER = answer_schema(RunAnswer)
_SKILL_ANSWER = {"type": "object", "anyOf": [
    _answer({"name": _STRING, "description": _STRING, "body": _STRING,
             "input_schema": {"type": "object"}, "runnable": {"type": "boolean"},
             "files": {"type": "array"}, "uri": _STRING},
            ["name", "body", "input_schema", "files"]),
    _answer({"skill": _STRING, "file": _STRING, "uri": _STRING, "size": {"type": "integer"},
             "sha256": _STRING, "text": _STRING, "base64": _STRING},
            ["skill", "file", "uri", "size", "sha256"])]}
_RECORD_ANSWER = _answer({"id": _STRING, "group": _STRING, "status": _STRING,
                          "outputs": {"type": "object"}, "steps": {"type": "array"}},
                         ["id", "group", "status"])
_INJECT_ANSWER = answer_schema(Injection)
_GROUPS_ANSWER = _answer({"groups": {"type": "array", "items": {"type": "object"}}},
                         ["groups"])


BUILTIN_TOOLS: tuple[_ToolSpec, ...] = (
    _ToolSpec(
        "search_toolbox", "Find the toolbox for a task",
        "Find what solves a request: a group (a ready pipeline of skills: its steps, their "
        "order and its inputs) or, when no group fits, the single skills to use, in order, "
        "with their inputs and what is usually used with them; and why, in one sentence. "
        "Start here.",
        SearchArguments, _READ_ONLY, toolbox_output_schema()),
    _ToolSpec(
        "get_skill", "Read a skill",
        "A skill's instructions (the SKILL.md body), its input schema, whether it can run here, "
        "and the files of its folder with size and sha256; with `file`, that file's text.",
        GetSkillRequest, _READ_ONLY, _SKILL_ANSWER),
    _ToolSpec(
        "run_group", "Run a group",
        "Run a group (a pipeline of skills) with its inputs; progress notifications follow each "
        "step. Returns the outputs, the status, the run id and the run record.",
        RunGroupRequest, _RUNS, _RUN_ANSWER),
    _ToolSpec(
        "run_skill", "Run one skill",
        "Run one executable skill on its own with its inputs (its input_schema; checked "
        "before it runs).",
        RunSkillArguments, _RUNS, _RUN_ANSWER),
    _ToolSpec(
        "get_run", "Read a run record",
        "A run record by id (or a unique prefix): status, inputs, outputs and every step.",
        GetRunRequest, _READ_ONLY, _RECORD_ANSWER),
    _ToolSpec(
        "inject", "Context block for the agent",
        "The context block to put in the agent's prompt for a request, a run, or both: the "
        "results and the instructions still needed, within a token budget.",
        InjectRequest, _READ_ONLY, _INJECT_ANSWER),
    _ToolSpec(
        "list_groups", "List the groups",
        "Every group file of the library: valid, last-good (serving its last good version "
        "while the file on disk has errors, which are listed) or errors.",
        NoArguments, _READ_ONLY, _GROUPS_ANSWER),
)
"""The built-in tools; their arguments are the request models of :mod:`skillgrove.runtime.api`
(the HTTP API's bodies), so both validate alike and say the same."""


# -- progress -------------------------------------------------------------------------------------


_STEP_DONE = frozenset({EventKind.STEP_FINISHED, EventKind.STEP_SKIPPED, EventKind.STEP_FAILED})


@dataclass
class ProgressCounter:
    """Turns runner events into increasing progress values out of ``total`` (the steps).

    A finished, skipped or failed top-level step counts 1; the events in between (a start, a
    retry, the steps of a sub-group) move halfway closer to the next whole number; the end of
    the run is ``total``.
    """

    total: int
    done: int = 0
    since: int = 0
    last: float = 0.0

    def update(self, event: Event) -> float:
        top_level = event.step is not None and "/" not in event.step
        if event.kind in _STEP_DONE and top_level:
            self.done += 1
            self.since = 0
            value = float(self.done)
        elif event.kind is EventKind.RUN_FINISHED and event.step is None:
            value = float(self.total)
        else:
            self.since += 1
            value = self.done + 1 - 0.5 ** self.since
        self.last = max(self.last, min(value, float(self.total)))
        return self.last


def progress_message(event: Event) -> str:
    """``step extract_text finished in 0.12 s`` and the like."""
    kind, step = event.kind, event.step
    detail = f": {event.message}" if event.message else ""
    if kind is EventKind.RUN_STARTED:
        return (f"run {event.run_id} of {event.group} started" if step is None
                else f"sub-group {event.group} of step {step.rstrip('/')} started")
    if kind is EventKind.RUN_FINISHED:
        where = f"run {event.run_id}" if step is None else f"sub-group {event.group}"
        return f"{where} finished: {event.status} in {event.seconds or 0:.2f} s{detail}"
    if kind is EventKind.STEP_STARTED:
        again = f" (attempt {event.attempt})" if event.attempt and event.attempt > 1 else ""
        return f"step {step} started{again}"
    if kind is EventKind.STEP_RETRYING:
        delay = event.data.get("delay")
        wait = f", retrying in {delay} s" if delay is not None else ", retrying"
        return f"step {step} failed on attempt {event.attempt}{wait}{detail}"
    if kind is EventKind.STEP_SKIPPED:
        return f"step {step} skipped{detail}"
    if kind is EventKind.STEP_FINISHED:
        return f"step {step} finished in {event.seconds or 0:.2f} s{detail}"
    if event.status == "cancelled":
        reason = (event.message or "").removeprefix("cancelled: ")
        return f"step {step} cancelled" + (f": {reason}" if reason else "")
    return f"step {step} failed{detail}"


def _progress_token(ctx: ServerRequestContext[Any]) -> str | int | None:
    meta = (ctx.params or {}).get("_meta")
    token = meta.get("progressToken") if isinstance(meta, Mapping) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


# -- text renderings ------------------------------------------------------------------------------


def _json_text(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    if len(text) > TEXT_LIMIT:
        text = text[:TEXT_LIMIT] + "\n… (cut; the structured content has all of it)"
    return text


def _inputs_text(schema: Mapping[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    lines = []
    for name, prop in (schema.get("properties") or {}).items():
        if name in required:
            detail = "required"
        elif "default" in prop:
            detail = f"default {json.dumps(prop['default'], ensure_ascii=False)}"
        else:
            detail = "optional"
        text = f": {prop['description']}" if prop.get("description") else ""
        lines.append(f"  - {name} ({prop.get('type', 'any')}, {detail}){text}")
    return lines


def _signature_text(inputs: Sequence[Mapping[str, Any]]) -> str:
    """``pdf_path: string (required), max_metrics: integer``."""
    return ", ".join(f"{i['name']}: {i['type']}" + (" (required)" if i["required"] else "")
                     for i in inputs) or "none"


def render_toolbox(view: Mapping[str, Any]) -> str:
    """The compact toolbox as text: what to use, in what order, with which inputs, and why."""
    lines: list[str] = []
    group = view.get("group")
    if group:
        lines.append(f"Group `{group['id']}` ({group.get('name')}): "
                     f"{group.get('description') or ''}".rstrip(": "))
    elif view.get("shape") == "composed":
        lines.append("No group fits this request: a toolbox was composed from the skills it "
                     "needs and their prerequisites.")
    elif view.get("shape") in ("skill", "skills"):
        lines.append("No group fits this request: use the selected single skill"
                     + ("." if view.get("shape") == "skill" else "s."))
    else:
        lines.append("Nothing in the library fits this request well.")
    lines.append(f"Why: {view.get('reason')}.")
    if group:
        steps = group.get("steps") or []
        if steps:
            lines.append("Steps: " + ", ".join(
                f"{s['id']} ({s.get('skill') or s.get('group')})"
                + (f" if {s['if']}" if s.get("if") else "") for s in steps))
            lines.append("Order: " + (", ".join(f"{a} -> {b}" for a, b in group.get("edges")
                                                or []) or "none"))
        lines.append(f"Inputs: {_signature_text(group.get('inputs') or [])}.")
        if group.get("missing_inputs"):
            lines.append("Still needed: " + ", ".join(group["missing_inputs"]) + ".")
        elif group.get("ready"):
            lines.append("Ready: the context holds every required input.")
        if group.get("unavailable_reasons"):
            lines.append("Cannot run here: " + "; ".join(group["unavailable_reasons"]))
        if group.get("effects"):
            lines.append("Side effects: " + "; ".join(
                f"{effect} ({', '.join(names)})" for effect, names in group["effects"].items())
                + "; pass confirm: true once the user agrees.")
        run = (f'Run it with run_group(group="{group["id"]}", inputs={{...}}, '
               'context={"values": {...}})')
        tool = group.get("tool")
        lines.append(run + (f" or the tool {tool}." if tool else "."))
    elif view.get("edges"):
        lines.append("Order: " + ", ".join(f"{a} -> {b}" for a, b in view["edges"]))
    fallback = str(view.get("fallback_reason") or "")
    if fallback and fallback not in str(view.get("reason")):
        lines.append(f"Why no group: {fallback}")
    skills = view.get("skills") or []
    if skills:
        lines.append("Its skills:" if group else "Skills, in order:")
        for skill in skills:
            how = "runnable with run_skill" if skill.get("runnable") else "instructions only"
            if skill.get("unavailable_reasons"):
                how = "unavailable: " + "; ".join(skill["unavailable_reasons"])
            if skill.get("effects"):
                how += ", effects " + ", ".join(skill["effects"])
            where = f" (id {skill['id']}, at {skill.get('path')})" if skill.get("id") else ""
            lines.append(f"  - {skill['name']}{where} ({how}): {skill.get('description')}")
            if skill.get("inputs") is not None:
                lines.append(f"    inputs: {_signature_text(skill['inputs'])}")
    suggestions = view.get("suggestions") or []
    if suggestions:
        lines.append("Usually used with: " + ", ".join(
            f"{s['name']} ({s['reason']})" for s in suggestions))
    lines.append("Read a skill's instructions with get_skill(name) or the resource "
                 "skill://<name>/SKILL.md; search_toolbox with detail=\"full\" gives every "
                 "score and explanation.")
    return "\n".join(lines)


def render_skill(details: Mapping[str, Any]) -> str:
    how = "runnable with run_skill" if details.get("runnable") else "instructions only"
    if not details.get("available", True):
        how = "unavailable here: " + "; ".join(details.get("unavailable_reasons") or [])
    lines = [f"# {details['name']} ({how})", "", str(details.get("description", "")), "",
             str(details.get("body", "")).strip(), "", "Files:"]
    lines += [f"  - {f['path']} ({f['size']} bytes, sha256:{f['sha256']}) {f.get('uri', '')}"
              for f in details.get("files", [])]
    props = (details.get("input_schema") or {}).get("properties")
    if props:
        lines += ["Inputs:", *_inputs_text(details["input_schema"])]
    return "\n".join(lines)


def render_run(record: Mapping[str, Any]) -> str:
    lines = [f"Run {record['id']} of {record['group']}: {record['status']} in "
             f"{record.get('seconds', 0):.2f} s."]
    if record.get("error"):
        lines.append(f"Error: {record['error']}")
    steps = record.get("steps") or []
    if steps:
        lines.append("Steps: " + ", ".join(f"{s['id']} {s['status']}" for s in steps))
    lines += ["Outputs:", _json_text(record.get("outputs") or {}),
              f'The full record: get_run(id="{record["id"]}").']
    return "\n".join(lines)


def render_groups(groups: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for group in groups:
        steps = group.get("steps")
        what = f": {group.get('name')}" + (f", {len(steps)} steps" if steps else "")
        lines.append(f"- {group.get('id') or group.get('location')} ({group['status']}){what}")
        lines += [f"    {error}" for error in group.get("errors") or []]
    return "\n".join(lines) or "The library has no groups."


def _result(data: Mapping[str, Any], text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=_jsonable(dict(data)), is_error=error)


def _error_result(error: Mapping[str, Any]) -> types.CallToolResult:
    return _result({"error": dict(error)}, f"Error ({error.get('code')}): {error.get('message')}",
                   error=True)


# -- change notifications -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Change:
    tools: bool
    resources: bool
    updated: frozenset[str]
    """URIs whose content changed or that are gone."""


@dataclass
class _Peer:
    """A handshake-era client connection, with the resources it subscribed to."""

    connection: Connection
    uris: set[str] = field(default_factory=set)


class _Announcer:
    """Sends change notifications to every connected client, from any thread."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self._peers: dict[int, _Peer] = {}
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._send, self._receive = anyio.create_memory_object_stream[_Change](math.inf)

    def peer(self, ctx: ServerRequestContext[Any]) -> _Peer | None:
        """The handshake-era connection of ``ctx``, remembered until it closes."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return None  # notified through subscriptions/listen instead
        # ServerSession is made per request; the per-client Connection behind it (its
        # standalone channel and its exit stack) is what outlives the request.
        connection = getattr(ctx.session, "_connection", None)
        if not isinstance(connection, Connection) or not connection.has_standalone_channel:
            return None
        key = id(connection)
        found = self._peers.get(key)
        if found is None:
            found = self._peers[key] = _Peer(connection)
            connection.exit_stack.callback(self._peers.pop, key, None)
        return found

    async def track(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        """Middleware: every inbound message registers its connection."""
        self.peer(ctx)
        return await call_next(ctx)

    def submit(self, change: _Change) -> None:
        """Queue ``change`` for delivery (from a worker thread or the watcher)."""
        token = self._token
        if token is None:
            return  # not serving yet: nobody to tell
        try:
            anyio.from_thread.run_sync(self._send.send_nowait, change, token=token)
        except Exception as exc:  # the loop is gone (shutting down)
            logger.debug("change not announced: %s", exc)

    async def run(self) -> None:
        self._token = anyio.lowlevel.current_token()
        try:
            async with self._receive:
                async for change in self._receive:
                    await self._broadcast(change)
        finally:
            self._token = None
            self.listen.close()

    async def _broadcast(self, change: _Change) -> None:
        if change.tools:
            await self.bus.publish(ToolsListChanged())
        if change.resources:
            await self.bus.publish(ResourcesListChanged())
        for uri in sorted(change.updated):
            await self.bus.publish(ResourceUpdated(uri=uri))
        for peer in list(self._peers.values()):
            connection = peer.connection
            if not connection.initialized.is_set():
                continue
            if change.tools:
                await connection.send_tool_list_changed()
            if change.resources:
                await connection.send_resource_list_changed()
            for uri in sorted(change.updated & peer.uris):
                await connection.send_resource_updated(uri)


class _Server(Server[Any]):
    """The low-level server, announcing ``listChanged`` to handshake-era clients on every
    transport (the streamable HTTP manager asks for the options without arguments)."""

    def create_initialization_options(
            self, notification_options: NotificationOptions | None = None,
            experimental_capabilities: dict[str, dict[str, Any]] | None = None,
            extensions: dict[str, dict[str, Any]] | None = None) -> InitializationOptions:
        options = notification_options or NotificationOptions(tools_changed=True,
                                                              resources_changed=True)
        return super().create_initialization_options(options, experimental_capabilities,
                                                     extensions)


class _SkillParams(types.RequestParams):
    uri: str


class _SkillsListParams(types.PaginatedRequestParams):
    query: str | None = None
    """skillgrove's own: list the skills its search ranks for this request, best first (a
    group that fits comes first), rather than the whole catalog."""


class _DirectoryParams(types.PaginatedRequestParams):
    uri: str


RESOURCE_PAGE = 100
"""Resources (and directory children) per page of resources/list and resources/directory/read."""
SKILLS_PAGE = 100
"""Entries per page of skills/list (an entry, with all its files, is never split)."""
DIRECTORY_MIME = "inode/directory"
RESOURCE_TEMPLATES = (
    types.ResourceTemplate(
        name="skill", title="A skill's instructions", uri_template="skill://{skill}/SKILL.md",
        description="The SKILL.md of a skill, by name: its frontmatter and instructions.",
        mime_type="text/markdown"),
    types.ResourceTemplate(
        name="skill-file", title="A file of a skill",
        uri_template="skill://{skill}/{+path}",
        description="Any file of a skill's folder, by its path in the folder (skills/get and "
                    "resources/directory/read list them)."),
    types.ResourceTemplate(
        name="group", title="A group as a skill",
        uri_template=f"skill://{GROUP_URI_PREFIX}/{{group}}/SKILL.md",
        description="A generated SKILL.md for a group: what it does, how to run it, its "
                    "inputs, context and steps.", mime_type="text/markdown"),
)


def _page_of(items: Sequence[_T], cursor: str | None, size: int) -> tuple[list[_T], str | None]:
    """One page of ``items`` from ``cursor`` (an opaque offset) and the cursor of the next."""
    start = 0
    if cursor:
        try:
            start = int(base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii"))
        except (ValueError, UnicodeError):
            start = -1
        if not 0 <= start <= len(items):
            raise MCPError(code=types.INVALID_PARAMS,
                           message=f"invalid cursor '{cursor}': pass back a nextCursor as given")
    end = start + size
    following = base64.urlsafe_b64encode(str(end).encode()).decode("ascii") \
        if end < len(items) else None
    return list(items[start:end]), following


def _directories(resources: Mapping[str, _Resource]) -> dict[str, list[str]]:
    """Directory URI -> its direct children (file and directory URIs), for every directory
    of the served skill files: ``skill://pdf-to-text`` -> ``[.../SKILL.md, .../main.py]``;
    ``skill://group`` -> the groups' folders. The generated ``_manifest`` of each skill is not
    a file of its folder and is left out (a host compares a listing with the skill's entry)."""
    children: dict[str, dict[str, None]] = {}
    for uri in resources:
        if not uri.startswith("skill://") or uri.endswith("/" + MANIFEST_FILE):
            continue
        parts = uri.removeprefix("skill://").split("/")
        for depth in range(1, len(parts)):
            parent = "skill://" + "/".join(parts[:depth])
            child = "skill://" + "/".join(parts[:depth + 1])
            children.setdefault(parent, {})[child] = None
    return {parent: sorted(found) for parent, found in children.items()}


# -- the server -----------------------------------------------------------------------------------


class SkillgroveMCP:
    """The MCP server of one engine: ``server`` is the SDK's low-level server, ready for any
    transport; :meth:`run_stdio` and :meth:`run_http` serve it."""

    def __init__(self, engine: Skillgrove, *, max_runs: int = DEFAULT_MAX_RUNS) -> None:
        self.engine = engine
        self.max_runs = max_runs
        self._run_slots = threading.BoundedSemaphore(max_runs)
        self.announcer = _Announcer()
        self._lock = threading.RLock()
        self._current: _Catalog | None = None
        self._announced: _Catalog | None = None
        self._builtins: dict[str, ToolHandler] = {
            "search_toolbox": self._search_toolbox, "get_skill": self._get_skill,
            "run_group": self._run_group, "run_skill": self._run_skill,
            "get_run": self._get_run, "inject": self._inject, "list_groups": self._list_groups}
        self._models = {spec.name: spec.model for spec in BUILTIN_TOOLS}
        self._builtin_schemas = {spec.name: spec.tool().input_schema for spec in BUILTIN_TOOLS}
        self.server = _Server(
            SERVER_NAME, version=_version(), title="skillgrove",
            description="Group-structured skill graph: toolboxes of agent skills, run as DAGs.",
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            on_list_resources=self._list_resources, on_read_resource=self._read_resource,
            on_list_resource_templates=self._list_templates,
            on_subscribe_resource=self._subscribe, on_unsubscribe_resource=self._unsubscribe,
            on_subscriptions_listen=self.announcer.listen,
            get_tool_input_schema=self.tool_input_schema)
        self.server.middleware.append(self.announcer.track)
        self.server.extensions[SKILLS_EXTENSION] = {"directoryRead": True}
        self.server.add_request_handler("resources/directory/read", _DirectoryParams,
                                        self._directory_read)
        self.server.add_request_handler("skills/list", _SkillsListParams,
                                        self._skills_list)
        self.server.add_request_handler("skills/get", _SkillParams, self._skills_get)
        engine.on_change(self._on_change)

    # -- transports ------------------------------------------------------------------------------

    async def run_stdio(self) -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write), anyio.create_task_group() as tasks:
            tasks.start_soon(self.announcer.run)
            await self.server.run(read, write, self.server.create_initialization_options())
            tasks.cancel_scope.cancel()

    async def run_http(self, host: str = "127.0.0.1", port: int = 8765,
                       token: str | None = None) -> None:
        import uvicorn

        check_binding(host, token)
        app: Any = self.server.streamable_http_app(host=host)
        if token:
            app = BearerGuard(app, token)
        # Open SSE streams would hold a graceful shutdown forever: give them two seconds.
        http = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                             lifespan="on", timeout_graceful_shutdown=2))
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self.announcer.run)
            tasks.start_soon(self._announce_ready, http, host, port)
            await http.serve()
            tasks.cancel_scope.cancel()

    @staticmethod
    async def _announce_ready(http: Any, host: str, port: int) -> None:
        while not http.started:
            await anyio.sleep(0.05)
        shown = f"[{host}]" if ":" in host else host
        sys.stderr.write(f"skillgrove: MCP server on http://{shown}:{port}/mcp "
                         "(streamable HTTP)\n")
        sys.stderr.flush()

    # -- the catalog -----------------------------------------------------------------------------

    def catalog(self) -> _Catalog:
        """The tools and resources of the library as the engine holds it now (blocking)."""
        with self._lock:
            library = self.engine.library
            if self._current is None or self._current.library is not library:
                self._current = self._build(library)
                if self._announced is None:
                    self._announced = self._current
            return self._current

    async def _catalog(self) -> _Catalog:
        return await anyio.to_thread.run_sync(self.catalog)

    def tool_input_schema(self, name: str) -> Mapping[str, Any] | None:
        """A tool's input schema, for the SDK's check of ``Mcp-Param-*`` headers on every
        2026-07-28 ``tools/call`` (``None``: nothing to check).

        Without it the SDK answers that check by running the whole ``tools/list`` handler on
        the event loop for every call: a worker-thread hop for the catalog and every tool with
        its output schema serialized, about half of the loop's busy time under 16 concurrent
        searches. This reads without blocking: the built-in tools' schemas are fixed, and a
        group tool's comes from the catalog as last built, which every re-index rebuilds at
        once (:meth:`_on_change`); before the first build there is no group tool to check.
        """
        builtin = self._builtin_schemas.get(name)
        if builtin is not None:
            return builtin
        catalog = self._current
        if catalog is None or name not in catalog.group_tools:
            return None
        return next((tool.input_schema for tool in catalog.tools if tool.name == name), None)

    def _build(self, library: Any) -> _Catalog:
        resources: dict[str, _Resource] = {}
        entries: list[_SkillEntry] = []
        for name in sorted(library.skills):
            try:
                entry = self._skill_entry(name)
            except (SkillgroveError, OSError) as exc:
                logger.warning("skill '%s' not served: %s", name, exc)
                continue
            entries.append(entry)
            for item in entry.files:
                resources[item.uri] = item
            manifest = json.dumps({"skill": name, "files": [
                {"path": f.path, "size": f.size, "hash": f"sha256:{f.sha256}"}
                for f in entry.files]}, indent=2).encode()
            uri = _skill_uri(name, MANIFEST_FILE)
            resources[uri] = _Resource(uri, f"{name}/{MANIFEST_FILE}",
                                       f"The files of skill {name} with size and sha256.",
                                       "application/json", len(manifest), _sha256(manifest),
                                       content=manifest)
        tools = [spec.tool() for spec in BUILTIN_TOOLS]
        group_tools: dict[str, str] = {}
        context_inputs: set[str] = set()
        confirm_inputs: set[str] = set()
        for view in self.engine.groups():
            if view.get("status") not in ("valid", "last-good") or not view.get("id"):
                continue
            group = self.engine.group(view["id"])
            tool = None
            if "tool" in (view.get("expose") or ()):
                tool = group_tool_name(group.id)
                if tool in group_tools:
                    logger.warning("group '%s' not exposed: tool %s is group '%s'", group.id,
                                   tool, group_tools[tool])
                    tool = None
                else:
                    group_tools[tool] = group.id
                    tools.append(_group_tool(tool, view, group,
                                             self.engine.effects(group.id)))
                    if group.input(CONTEXT_ARGUMENT) is not None:
                        context_inputs.add(tool)
                    if group.input(CONFIRM_ARGUMENT) is not None:
                        confirm_inputs.add(tool)
            text = _group_skill_md(view, group, tool).encode("utf-8")
            uri = _group_uri(group.id)
            item = _Resource(uri, group.id, group.description, "text/markdown", len(text),
                             _sha256(text), content=text)
            resources[uri] = item
            entries.append(_SkillEntry(uri, frontmatter_of(text.decode("utf-8")), (item,)))
        return _Catalog(library, tuple(tools), group_tools, frozenset(context_inputs), resources,
                        tuple(entries), frozenset(confirm_inputs), _directories(resources))

    def _skill_entry(self, name: str) -> _SkillEntry:
        details = self.engine.skill(name)
        files: list[_Resource] = []
        frontmatter: dict[str, Any] = {}
        for item in details.files:
            uri = _skill_uri(name, item.path)
            if item.path == "SKILL.md":
                text = self.engine.skill_file(name, "SKILL.md").decode("utf-8", "replace")
                frontmatter = frontmatter_of(text)
                description = str(frontmatter.get("description") or details.view["description"])
                files.insert(0, _Resource(uri, str(frontmatter.get("name") or name),
                                          description, "text/markdown", item.size, item.sha256,
                                          skill=name, path=item.path))
            else:
                files.append(_Resource(uri, f"{name}/{item.path}", f"File of skill {name}.",
                                       _mime_type(item.path), item.size, item.sha256,
                                       skill=name, path=item.path))
        frontmatter.setdefault("name", name)
        frontmatter.setdefault("description", details.view["description"])
        return _SkillEntry(_skill_uri(name), frontmatter, tuple(files))

    def _on_change(self, library: Any) -> None:
        """After every re-index (in the thread that re-indexed): announce what changed."""
        try:
            with self._lock:  # re-indexes may end in two threads at once: one diff at a time
                old, new = self._announced, self.catalog()
                self._announced = new
            if old is None or old is new:
                return
            gone = set(old.resources) - set(new.resources)
            changed = {uri for uri, item in new.resources.items()
                       if uri in old.resources and old.resources[uri].sha256 != item.sha256}
            change = _Change(tools=old.tool_fingerprint() != new.tool_fingerprint(),
                             resources=old.resource_fingerprint() != new.resource_fingerprint(),
                             updated=frozenset(gone | changed))
        except Exception:  # never break the engine's re-index
            logger.exception("could not compute the library's changes")
            return
        if change.tools or change.resources or change.updated:
            self.announcer.submit(change)

    # -- request handlers ------------------------------------------------------------------------

    async def _list_tools(self, ctx: ServerRequestContext[Any],
                          params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list((await self._catalog()).tools))

    async def _call_tool(self, ctx: ServerRequestContext[Any],
                         params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        try:
            builtin = self._builtins.get(params.name)
            if builtin is not None:
                given = parse(self._models[params.name], arguments)
                return await builtin(ctx, given.model_dump(exclude_unset=True, by_alias=True))
            catalog = await self._catalog()
            group_id = catalog.group_tools.get(params.name)
            if group_id is None:
                raise NotFoundError.named("tool", params.name, [t.name for t in catalog.tools])
            inputs = dict(arguments)
            # A group that declares an input named "context" takes no separate context.
            context = None if params.name in catalog.context_inputs \
                else inputs.pop(CONTEXT_ARGUMENT, None)
            confirm = bool(inputs.pop(CONFIRM_ARGUMENT, False)) \
                if params.name not in catalog.confirm_inputs else False
            return await self._run(ctx, group_id, inputs, context, confirm)
        except EngineError as exc:
            return _error_result(exc.to_dict())
        except SkillgroveError as exc:
            return _error_result({"code": "error", "message": str(exc), "details": {}})
        except Exception as exc:
            logger.exception("tool %s failed", params.name)
            return _error_result({"code": "internal_error",
                                  "message": f"{type(exc).__name__}: {exc}", "details": {}})

    async def _list_resources(self, ctx: ServerRequestContext[Any],
                              params: types.PaginatedRequestParams | None,
                              ) -> types.ListResourcesResult:
        catalog = await self._catalog()
        page, following = _page_of(list(catalog.resources.values()),
                                   params.cursor if params else None, RESOURCE_PAGE)
        return types.ListResourcesResult(resources=[r.listing() for r in page],
                                         next_cursor=following)

    async def _list_templates(self, ctx: ServerRequestContext[Any],
                              params: types.PaginatedRequestParams | None,
                              ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=list(RESOURCE_TEMPLATES))

    async def _directory_read(self, ctx: ServerRequestContext[Any],
                              params: _DirectoryParams) -> dict[str, Any]:
        catalog = await self._catalog()
        uri = params.uri.rstrip("/")
        children = catalog.directories.get(uri)
        if children is None:
            what = ("is not a directory resource" if uri in catalog.resources
                    else "is not a directory this server serves")
            raise MCPError(code=types.INVALID_PARAMS, message=f"{params.uri} {what}",
                           data={"uri": params.uri})
        page, following = _page_of(children, params.cursor, RESOURCE_PAGE)
        listed = []
        for child in page:
            found = catalog.resources.get(child)
            listing = found.listing() if found is not None else types.Resource(
                uri=child, name=child.rsplit("/", 1)[-1], mime_type=DIRECTORY_MIME)
            listed.append(listing.model_dump(by_alias=True, exclude_none=True, mode="json"))
        out: dict[str, Any] = {"resources": listed, "resultType": "complete"}
        if following:
            out["nextCursor"] = following
        return out

    async def _read_resource(self, ctx: ServerRequestContext[Any],
                             params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        catalog = await self._catalog()
        found = catalog.resources.get(params.uri)
        if found is None:
            error = NotFoundError.named("resource", params.uri, list(catalog.resources))
            raise MCPError(code=types.INVALID_PARAMS, message=error.message,
                           data={"uri": params.uri})
        data = found.content
        if data is None:
            assert found.skill is not None and found.path is not None
            try:
                data = await anyio.to_thread.run_sync(self.engine.skill_file, found.skill,
                                                      found.path)
            except (EngineError, OSError) as exc:
                raise MCPError(code=types.INVALID_PARAMS, message=str(exc),
                               data={"uri": params.uri}) from None
        meta = {DIGEST_META_KEY: f"sha256:{_sha256(data)}"}
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            blob = base64.b64encode(data).decode("ascii")
            mime = "application/octet-stream" if found.mime_type.startswith("text/") \
                else found.mime_type
            return types.ReadResourceResult(contents=[types.BlobResourceContents(
                uri=params.uri, blob=blob, mime_type=mime, _meta=meta)])
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=params.uri, text=text, mime_type=found.mime_type, _meta=meta)])

    async def _subscribe(self, ctx: ServerRequestContext[Any],
                         params: types.SubscribeRequestParams) -> types.EmptyResult:
        peer = self.announcer.peer(ctx)
        if peer is not None:
            peer.uris.add(params.uri)
        return types.EmptyResult()

    async def _unsubscribe(self, ctx: ServerRequestContext[Any],
                           params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        peer = self.announcer.peer(ctx)
        if peer is not None:
            peer.uris.discard(params.uri)
        return types.EmptyResult()

    async def _skills_list(self, ctx: ServerRequestContext[Any],
                           params: _SkillsListParams | None) -> dict[str, Any]:
        catalog = await self._catalog()
        entries = list(catalog.skills)
        query = params.query if params is not None else None
        if query is not None:
            entries = await anyio.to_thread.run_sync(self._searched, catalog, query)
        page, following = _page_of(entries, params.cursor if params else None, SKILLS_PAGE)
        out: dict[str, Any] = {"skills": [entry.to_dict() for entry in page], "ttlMs": 0,
                               "cacheScope": "private", "resultType": "complete"}
        if following:
            out["nextCursor"] = following
        return out

    def _searched(self, catalog: _Catalog, query: str) -> list[_SkillEntry]:
        """The entries of what a search for ``query`` finds, best first: the group that fits,
        then the ranked skills (the selected ones first) and what is usually used with them."""
        if not query.strip():
            raise MCPError(code=types.INVALID_PARAMS, message="query: must be a non-empty string")
        toolbox = self.engine.search(query)
        by_uri = {entry.uri: entry for entry in catalog.skills}
        loaded = self.engine.library.catalog.by_id()
        selected = set(toolbox.selected)
        # The selected skills in the toolbox's order (a group member may not be ranked).
        names = [loaded[sid].name for sid in toolbox.selected if sid in loaded]
        names += [s.name for s in toolbox.skills if s.id not in selected]
        names += [s.name for s in toolbox.suggestions]
        uris = [_group_uri(toolbox.group.id.removeprefix("group:"))] if toolbox.group else []
        uris += [_skill_uri(name) for name in names]
        return [by_uri[uri] for uri in dict.fromkeys(uris) if uri in by_uri]

    async def _skills_get(self, ctx: ServerRequestContext[Any],
                          params: _SkillParams) -> dict[str, Any]:
        catalog = await self._catalog()
        entry = next((e for e in catalog.skills if e.uri == params.uri), None)
        if entry is None:
            error = NotFoundError.named("skill", params.uri, [e.uri for e in catalog.skills])
            raise MCPError(code=types.INVALID_PARAMS, message=error.message,
                           data={"uri": params.uri})
        return {"skill": entry.to_dict(), "ttlMs": 0, "cacheScope": "private",
                "resultType": "complete"}

    # -- the tools -------------------------------------------------------------------------------

    async def _search_toolbox(self, ctx: ServerRequestContext[Any],
                              args: dict[str, Any]) -> types.CallToolResult:
        detail = args.get("detail", "compact")

        def search() -> types.CallToolResult:
            # One worker-thread hop for the whole answer (the catalog, the search and the
            # rendering), so the event loop, which every client shares, only sends it.
            catalog = self.catalog()
            tools = {gid: name for name, gid in catalog.group_tools.items()}
            toolbox = self.engine.search(args["request"], args.get("context"),
                                         args.get("k", DEFAULT_K))
            views = self.engine.views
            compact = views.compact(toolbox, tools)
            view = compact if detail == "compact" else views.view(toolbox, detail)
            return _result(view, render_toolbox(compact))

        return await anyio.to_thread.run_sync(search)

    async def _get_skill(self, ctx: ServerRequestContext[Any],
                         args: dict[str, Any]) -> types.CallToolResult:
        details = (await anyio.to_thread.run_sync(self.engine.skill, args["name"])).to_dict()
        name = details["name"]
        file = args.get("file")
        if file is None:
            details["uri"] = _skill_uri(name)
            for item in details["files"]:
                item["uri"] = _skill_uri(name, item["path"])
            return _result(details, render_skill(details))
        data = await anyio.to_thread.run_sync(self.engine.skill_file, name, file)
        out: dict[str, Any] = {"skill": name, "file": file, "uri": _skill_uri(name, file),
                               "size": len(data), "sha256": _sha256(data)}
        try:
            out["text"] = data.decode("utf-8")
            text = out["text"]
        except UnicodeDecodeError:
            out["base64"] = base64.b64encode(data).decode("ascii")
            text = f"{file} is binary ({len(data)} bytes); its bytes are in base64."
        return _result(out, text)

    async def _run_group(self, ctx: ServerRequestContext[Any],
                         args: dict[str, Any]) -> types.CallToolResult:
        return await self._run(ctx, args["group"], args.get("inputs"), args.get("context"),
                               bool(args.get(CONFIRM_ARGUMENT, False)))

    async def _run(self, ctx: ServerRequestContext[Any], group_id: str,
                   inputs: Mapping[str, Any] | None,
                   context: Mapping[str, Any] | None, confirm: bool) -> types.CallToolResult:
        # One context shape for every tool ({values, recent_skills, conversation}): the engine
        # refuses any other, and the run reads its values.
        group = await anyio.to_thread.run_sync(self.engine.group, group_id)
        record = await self._with_progress(
            ctx, len(group.steps),
            lambda on_event: self.engine.run(group.id, inputs, context, on_event=on_event,
                                             confirm=confirm))
        return _run_result(record)

    async def _run_skill(self, ctx: ServerRequestContext[Any],
                         args: dict[str, Any]) -> types.CallToolResult:
        confirm = bool(args.get(CONFIRM_ARGUMENT, False))
        record = await self._with_progress(
            ctx, 1, lambda on_event: self.engine.run_skill(args["name"], args.get("inputs"),
                                                           on_event=on_event, confirm=confirm))
        return _run_result(record)

    async def _get_run(self, ctx: ServerRequestContext[Any],
                       args: dict[str, Any]) -> types.CallToolResult:
        record = await anyio.to_thread.run_sync(self.engine.get_run, args["id"])
        data = record.to_dict()
        return _result(data, render_run(data))

    async def _inject(self, ctx: ServerRequestContext[Any],
                      args: dict[str, Any]) -> types.CallToolResult:
        injection = await anyio.to_thread.run_sync(
            lambda: self.engine.inject(args.get("request"), run_id=args.get("run_id"),
                                       context=args.get("context"), budget=args.get("budget"),
                                       fmt=args.get("format", "markdown")))
        data = {"text": injection.text, "tokens": injection.tokens, "budget": injection.budget,
                "level": injection.level, "left_out": list(injection.left_out)}
        return _result(data, injection.text)

    async def _list_groups(self, ctx: ServerRequestContext[Any],
                           args: dict[str, Any]) -> types.CallToolResult:
        groups = await anyio.to_thread.run_sync(self.engine.groups)
        return _result({"groups": groups}, render_groups(groups))

    async def _with_progress(self, ctx: ServerRequestContext[Any], total: int,
                             work: Callable[[EventCallback | None], _T]) -> _T:
        """Run ``work(on_event)`` (a run) in a worker thread, holding one of the server's run
        slots (none free: :class:`TooManyRuns`); its events become progress notifications of
        this request, in order, all sent before the result."""
        if not self._run_slots.acquire(blocking=False):
            raise TooManyRuns(self.max_runs)
        try:
            return await self._progress(ctx, total, work)
        finally:
            self._run_slots.release()

    async def _progress(self, ctx: ServerRequestContext[Any], total: int,
                        work: Callable[[EventCallback | None], _T]) -> _T:
        token = _progress_token(ctx)
        if token is None:
            return await anyio.to_thread.run_sync(work, None)
        send, receive = anyio.create_memory_object_stream[Event](math.inf)
        loop = anyio.lowlevel.current_token()

        def on_event(event: Event) -> None:  # in the runner's threads
            with contextlib.suppress(Exception):
                anyio.from_thread.run_sync(send.send_nowait, event, token=loop)

        async def report() -> None:
            counter = ProgressCounter(max(total, 1))
            async with receive:
                async for event in receive:
                    notification = types.ProgressNotification(
                        params=types.ProgressNotificationParams(
                            progress_token=token, progress=counter.update(event),
                            total=counter.total, message=progress_message(event),
                            _meta={EVENT_META_KEY: _jsonable(event.to_dict())}))
                    try:
                        await ctx.session.send_notification(notification,
                                                            related_request_id=ctx.request_id)
                    except Exception as exc:  # the client left; keep draining
                        logger.debug("progress not sent: %s", exc)

        # The work's own error is raised after the task group has closed: raised inside it,
        # anyio would wrap it in an ExceptionGroup, and a client that asked for progress would
        # get an internal error where one that did not gets the engine's typed error.
        failure: Exception | None = None
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(report)
            try:
                result = await anyio.to_thread.run_sync(work, on_event)
            except Exception as exc:
                failure = exc
            finally:
                send.close()
        if failure is not None:
            raise failure
        return result


def _run_result(record: RunRecord) -> types.CallToolResult:
    data = record.to_dict()
    out = {"run_id": record.id, "group": record.group, "status": record.status,
           "outputs": data["outputs"], "error": record.error, "run": data}
    return _result(out, render_run(data), error=record.status != "success")


def _group_tool(name: str, view: Mapping[str, Any], group: Group,
                effects: Mapping[str, Sequence[str]]) -> types.Tool:
    schema = json.loads(json.dumps(view["input_schema"]))
    properties = schema.setdefault("properties", {})
    keys = context_keys(group)
    if CONTEXT_ARGUMENT not in properties:
        described = dict(_RUN_CONTEXT_SCHEMA)
        if keys:
            described["description"] = ("What you already know: {values: {...}, "
                                         "recent_skills, conversation}; this group reads "
                                         + ", ".join(f"values.{key}" for key in keys) + ".")
        properties[CONTEXT_ARGUMENT] = described
    if effects and CONFIRM_ARGUMENT not in properties:
        properties[CONFIRM_ARGUMENT] = dict(_CONFIRM_SCHEMA)
    steps = " -> ".join(f"{s.id} ({s.target})" for s in group.steps)
    changes = (" Side effects: " + "; ".join(f"{e} ({', '.join(n)})" for e, n in effects.items())
               + "; pass confirm: true once the user agrees.") if effects else ""
    return types.Tool(name=name, title=group.name,
                      description=f"{group.description}\n\nRuns the skillgrove group "
                                  f"'{group.id}': {steps}. Progress arrives as notifications."
                                  f"{changes}",
                      input_schema=schema, annotations=_RUNS, output_schema=_RUN_ANSWER,
                      _meta={"skillgrove/group": group.id})


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("skillgrove")
    except PackageNotFoundError:  # pragma: no cover - a bare checkout
        return "unknown"
