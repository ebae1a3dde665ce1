"""The MCP server, driven by the SDK's own client, over stdio and over streamable HTTP.

Each transport gets one real server (``skillgrove serve mcp`` in a subprocess) on its own copy
of the bundled library for the whole module; the tests talk to it through one
``ClientSession`` that lives in a blocking portal's event loop, so they read as plain calls. The
live-library test starts a server of its own, on a copy it edits while the server watches it.
Mail goes to ``SKILLGROVE_OUTBOX`` inside the test's folder (no SMTP variables reach the server).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated, ToolsListChanged
from pydantic import TypeAdapter

from skillgrove.runtime.events import Event, EventKind
from skillgrove.runtime.mcp_server import ProgressCounter, progress_message

REPO = Path(__file__).resolve().parent.parent
LIBRARY = REPO / "library"
REPORT_REQUEST = "summarize the quarterly report PDF and email the key numbers to my team"
BUILTIN_TOOLS = {"search_toolbox", "get_skill", "run_group", "run_skill", "get_run", "inject",
                 "list_groups"}
LIVE_DEADLINE = 15.0
"""Seconds this test waits between a file change and the server serving it. The change is
seen within a second or two on a quiet machine; the test checks that it is seen, not how
fast, and the test suite runs on two loaded cores (at 2 s it failed there now and then)."""

_T = TypeVar("_T")


# -- servers and clients ----------------------------------------------------------------------


def server_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMTP_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1",
               SKILLGROVE_OUTBOX=str(root / "outbox"), HOME=env.get("HOME", str(root)))
    env.pop("SKILLGROVE_PATH", None)
    return env


def serve_args(library: Path, index: Path, *extra: str) -> list[str]:
    return ["-m", "skillgrove.runtime.cli", "serve", "mcp", str(library), "--index", str(index),
            *extra]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def http_server(root: Path, library: Path) -> Iterator[str]:
    """``skillgrove serve mcp --transport http`` on a free port; yields the endpoint URL."""
    port = free_port()
    log_path = root / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, *serve_args(library, root / "index", "--transport", "http",
                                         "--port", str(port))],
            stdout=subprocess.DEVNULL, stderr=log, env=server_env(root), cwd=root)
        try:
            deadline = time.monotonic() + 60
            while "MCP server on" not in log_path.read_text():
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the server did not start:\n{log_path.read_text()}")
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@dataclass
class Connected:
    """One client session, driven synchronously from the tests."""

    portal: BlockingPortal
    session: ClientSession
    root: Path
    library: Path
    messages: list[Any] = field(default_factory=list)
    """Every notification the server sent (progress included)."""

    def run(self, make: Callable[[], Any]) -> Any:
        async def call() -> Any:
            return await make()

        return self.portal.call(call)

    def call(self, name: str, arguments: dict[str, Any] | None = None,
             progress: list[tuple[float, float | None, str | None]] | None = None,
             ) -> types.CallToolResult:
        log = progress

        async def record(progress: float, total: float | None, message: str | None) -> None:
            assert log is not None
            log.append((progress, total, message))

        callback = record if log is not None else None
        result: types.CallToolResult = self.run(lambda: self.session.call_tool(
            name, arguments or {}, progress_callback=callback))
        return result

    def data(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """The structured content of a call that must succeed."""
        result = self.call(name, arguments)
        assert not result.is_error, result.content
        assert isinstance(result.structured_content, dict)
        return result.structured_content

    def tools(self) -> dict[str, types.Tool]:
        listed: types.ListToolsResult = self.run(self.session.list_tools)
        return {tool.name: tool for tool in listed.tools}

    def resources(self) -> dict[str, types.Resource]:
        """Every resource, page after page."""
        found: dict[str, types.Resource] = {}
        for page in self.resource_pages():
            found.update({resource.uri: resource for resource in page.resources})
        return found

    def resource_pages(self) -> list[types.ListResourcesResult]:
        pages: list[types.ListResourcesResult] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor)
            listed: types.ListResourcesResult = self.run(
                lambda params=params: self.session.list_resources(params=params))
            pages.append(listed)
            cursor = listed.next_cursor
            if cursor is None:
                return pages

    def read(self, uri: str) -> types.TextResourceContents | types.BlobResourceContents:
        result: types.ReadResourceResult = self.run(lambda: self.session.read_resource(uri))
        [contents] = result.contents
        return contents

    def request(self, method: Literal["skills/list", "skills/get", "resources/directory/read",
                                      "resources/templates/list"],
                params: dict[str, Any] | None = None) -> dict[str, Any]:
        class Custom(types.Request[dict[str, Any] | None, str]):
            pass

        adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
        found: dict[str, Any] = self.run(lambda: self.session.send_request(
            Custom(method=method, params=params), adapter))
        return found

    def methods(self) -> list[str]:
        return [str(getattr(m, "method", "")) for m in list(self.messages)]


@asynccontextmanager
async def stdio_session(root: Path, library: Path,
                        messages: list[Any]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable,
                                   args=serve_args(library, root / "index"),
                                   env=server_env(root), cwd=root)
    with (root / "server.log").open("w") as log:
        async with stdio_client(params, errlog=log) as (read, write), \
                ClientSession(read, write, message_handler=_collect(messages)) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def http_session(url: str, messages: list[Any]) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write), \
            ClientSession(read, write, message_handler=_collect(messages)) as session:
        await session.initialize()
        yield session


def _collect(messages: list[Any]) -> Any:
    async def handle(message: Any) -> None:
        messages.append(message)

    return handle


def copy_library(root: Path) -> Path:
    return Path(shutil.copytree(LIBRARY, root / "library"))


def connect(stack: ExitStack, portal: BlockingPortal, transport: str, root: Path,
            library: Path) -> Connected:
    messages: list[Any] = []
    cm: AbstractAsyncContextManager[ClientSession]
    if transport == "stdio":
        cm = stdio_session(root, library, messages)
    else:
        cm = http_session(stack.enter_context(http_server(root, library)), messages)
    session = stack.enter_context(portal.wrap_async_context_manager(cm))
    return Connected(portal, session, root, library, messages)


@pytest.fixture(scope="module", params=["stdio", "http"])
def mcp(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
        ) -> Iterator[Connected]:
    root = tmp_path_factory.mktemp(f"mcp-{request.param}")
    library = copy_library(root)
    with start_blocking_portal() as portal, ExitStack() as stack:
        yield connect(stack, portal, request.param, root, library)


def wait_for(check: Callable[[], _T | None], what: str, timeout: float = LIVE_DEADLINE,
             since: float | None = None) -> tuple[_T, float]:
    """Poll ``check`` until it returns something; that value and the seconds it took."""
    start = since if since is not None else time.monotonic()
    while True:
        found = check()
        if found is not None and found is not False:
            return found, time.monotonic() - start
        if time.monotonic() - start > timeout:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(0.05)


# -- progress, without a server ---------------------------------------------------------------


def test_runner_events_become_increasing_progress_with_readable_messages() -> None:
    def event(kind: EventKind, step: str | None = None, **fields: Any) -> Event:
        return Event(kind, "r1", "g", step, **fields)

    counter = ProgressCounter(total=3)
    table = [
        (event(EventKind.RUN_STARTED), 0.5, "run r1 of g started"),
        (event(EventKind.STEP_STARTED, "a", attempt=1), 0.75, "step a started"),
        (event(EventKind.STEP_STARTED, "b", attempt=1), 0.875, "step b started"),
        (event(EventKind.STEP_FINISHED, "a", seconds=0.25), 1.0, "step a finished in 0.25 s"),
        (event(EventKind.STEP_RETRYING, "b", attempt=1, message="timed out",
               data={"delay": 0.5}), 1.5,
         "step b failed on attempt 1, retrying in 0.5 s: timed out"),
        (event(EventKind.STEP_STARTED, "b", attempt=2), 1.75, "step b started (attempt 2)"),
        (event(EventKind.RUN_STARTED, "b/"), 1.875, "sub-group g of step b started"),
        (event(EventKind.STEP_FINISHED, "b/x", seconds=0.1), 1.9375,
         "step b/x finished in 0.10 s"),
        (event(EventKind.STEP_FAILED, "b", status="failure", message="boom"), 2.0,
         "step b failed: boom"),
        (event(EventKind.STEP_SKIPPED, "c", message="a step it needs did not succeed"), 3.0,
         "step c skipped: a step it needs did not succeed"),
        (event(EventKind.RUN_FINISHED, status="failure", seconds=1.5, message="step b failed"),
         3.0, "run r1 finished: failure in 1.50 s: step b failed"),
    ]
    for given, value, message in table:
        assert (counter.update(given), progress_message(given)) == (value, message)


def test_a_run_that_ends_early_still_ends_at_its_total() -> None:
    counter = ProgressCounter(total=4)
    counter.update(Event(EventKind.STEP_FAILED, "r", "g", "a", status="failure"))
    assert counter.update(Event(EventKind.RUN_FINISHED, "r", "g", status="failure")) == 4


# -- tools ------------------------------------------------------------------------------------


def test_the_tools_include_each_exposed_group_with_its_input_schema(mcp: Connected) -> None:
    tools = mcp.tools()
    assert set(tools) >= BUILTIN_TOOLS
    assert [name for name in tools if name.startswith("group_")] == ["group_report_analysis"]
    schema = dict(tools["group_report_analysis"].input_schema)
    properties = dict(schema["properties"])
    context = properties.pop("context")
    assert context["type"] == "object" and "team_email" in context["description"]
    assert properties.pop("confirm")["type"] == "boolean"  # the group sends mail
    declared = next(g for g in mcp.data("list_groups")["groups"] if g["id"] == "report-analysis")
    assert {**schema, "properties": properties} == declared["input_schema"]
    assert set(properties) == {"pdf_path", "max_metrics", "summary_sentences"}
    assert schema["required"] == ["pdf_path"]
    assert tools["search_toolbox"].annotations is not None
    assert tools["search_toolbox"].annotations.read_only_hint is True


def test_header_checks_read_each_tool_schema_as_tools_list_advertises_it(
        tmp_path: Path) -> None:
    # The SDK checks a 2026-07-28 tools/call's Mcp-Param-* headers against the called tool's
    # input schema; the server answers from its catalog instead of a tools/list per call.
    from skillgrove.runtime.engine import Skillgrove
    from skillgrove.runtime.mcp_server import SkillgroveMCP

    engine = Skillgrove([LIBRARY], index=tmp_path / "index", auto_refresh=False)
    try:
        app = SkillgroveMCP(engine)
        assert app.server.get_tool_input_schema == app.tool_input_schema
        # Before the library is loaded: the built-in tools, and no group tool yet.
        assert app.tool_input_schema("search_toolbox") is not None
        assert app.tool_input_schema("group_report_analysis") is None
        tools = app.catalog().tools
        assert "group_report_analysis" in {tool.name for tool in tools}
        for tool in tools:
            assert app.tool_input_schema(tool.name) == tool.input_schema, tool.name
        assert app.tool_input_schema("no_such_tool") is None
    finally:
        engine.close()


def test_search_returns_the_group_for_a_request_it_fits(mcp: Connected) -> None:
    result = mcp.call("search_toolbox", {"request": REPORT_REQUEST})
    toolbox = result.structured_content
    assert not result.is_error and isinstance(toolbox, dict)
    assert toolbox["shape"] == "group"
    group = toolbox["group"]
    assert group["id"] == "report-analysis" and group["tool"] == "group_report_analysis"
    assert group["steps"][0] == {"id": "extract_text", "skill": "pdf-to-text"}
    assert [s["id"] for s in group["steps"]] == ["extract_text", "metrics", "summarize",
                                                 "figures", "notify"]
    assert ["extract_text", "metrics"] in group["edges"]
    assert group["inputs"][0] == {"name": "pdf_path", "type": "string", "required": True}
    assert group["missing_inputs"] == ["pdf_path"]
    assert group["effects"] == {"sends-email": ["send-email"]}
    assert toolbox["reason"].startswith("group 'Report analysis and notification' covers")
    text = result.content[0].text  # type: ignore[union-attr]
    assert "Group `report-analysis`" in text and "group_report_analysis" in text
    assert "Inputs: pdf_path: string (required), max_metrics: integer" in text
    assert f"Why: {toolbox['reason']}." in text


def test_search_falls_back_to_single_skills_when_no_group_fits(mcp: Connected) -> None:
    toolbox = mcp.data("search_toolbox", {"request": "translate this paragraph into German"})
    assert toolbox["shape"] != "group" and toolbox["group"] is None
    assert toolbox["fallback_reason"].startswith("no group fits")
    assert toolbox["reason"].startswith(toolbox["fallback_reason"])
    full = mcp.data("search_toolbox", {"request": "translate this paragraph into German",
                                       "detail": "full"})
    assert full["detail"] == "full" and full["reason"] == toolbox["reason"]
    assert full["skills"] and all("score" in s and "explanation" in s for s in full["skills"])


DEMO_REQUEST = "summarize this PDF report and email the key numbers to the team"
COMPACT_TOKENS = 1500
"""What the demo request's toolbox may cost an agent (cl100k_base), structured or as text."""


def test_the_demo_toolbox_is_compact_in_structured_content_and_text(mcp: Connected) -> None:
    from skillgrove.runtime.inject import count_tokens

    result = mcp.call("search_toolbox", {"request": DEMO_REQUEST})
    assert not result.is_error
    structured = result.structured_content
    assert isinstance(structured, dict) and structured["detail"] == "compact"
    text = result.content[0].text  # type: ignore[union-attr]
    sent = json.dumps(structured, ensure_ascii=False)
    assert count_tokens(sent) <= COMPACT_TOKENS, count_tokens(sent)
    assert count_tokens(text) <= COMPACT_TOKENS, count_tokens(text)
    # What to use, in what order, with which inputs, and why.
    group = structured["group"]
    assert [s["skill"] for s in group["steps"]] == [
        "pdf-to-text", "extract-metrics", "summarize-text", "markdown-table", "send-email"]
    assert ["summarize", "notify"] in group["edges"]
    assert {"name": "pdf_path", "type": "string", "required": True} in group["inputs"]
    assert structured["reason"] and "\n" not in structured["reason"]
    assert all("score" not in s and "explanation" not in s for s in structured["skills"])
    full = mcp.data("search_toolbox", {"request": DEMO_REQUEST, "detail": "full"})
    assert count_tokens(json.dumps(full, ensure_ascii=False)) > 4 * COMPACT_TOKENS
    assert full["group"]["input_schema"]["required"] == ["pdf_path"]


def test_every_tool_declares_an_output_schema_its_answers_meet(mcp: Connected) -> None:
    tools = mcp.tools()
    assert all(tool.output_schema for tool in tools.values()), [
        name for name, tool in tools.items() if not tool.output_schema]
    import jsonschema

    for detail in ("compact", "full"):
        answer = mcp.data("search_toolbox", {"request": DEMO_REQUEST, "detail": detail})
        jsonschema.validate(answer, tools["search_toolbox"].output_schema or {})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"request": "x", "shape": "group", "detail": "compact"},
                            tools["search_toolbox"].output_schema or {})


def test_get_skill_returns_instructions_and_files_with_digests(mcp: Connected) -> None:
    skill = mcp.data("get_skill", {"name": "pdf-to-text"})
    folder = mcp.library / "skills" / "pdf-to-text"
    assert skill["name"] == "pdf-to-text" and "# PDF to text" in skill["body"]
    assert skill["runnable"] is True
    files = {f["path"]: f for f in skill["files"]}
    assert {"SKILL.md", "main.py"} <= set(files)
    for path, entry in files.items():
        data = (folder / path).read_bytes()
        assert (entry["size"], entry["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    main = mcp.data("get_skill", {"name": "pdf-to-text", "file": "main.py"})
    assert main["text"] == (folder / "main.py").read_text(encoding="utf-8")
    assert main["uri"] == "skill://pdf-to-text/main.py"


def test_a_group_with_effects_runs_only_when_confirmed(mcp: Connected) -> None:
    arguments = {"group": "csv-cleanup",
                 "inputs": {"csv_path": str(mcp.library / "samples" / "customers_messy.csv"),
                            "output_dir": str(mcp.root / "unconfirmed"),
                            "notify_email": "crm@example.com"}}
    mails = set((mcp.root / "outbox").glob("*.eml"))
    refused = mcp.call("run_group", arguments)
    assert refused.is_error
    assert isinstance(refused.structured_content, dict)
    error = refused.structured_content["error"]
    assert error["code"] == "needs_confirmation"
    assert error["details"]["effects"] == {"sends-email": ["send-email"]}
    assert not (mcp.root / "unconfirmed").exists()
    assert set((mcp.root / "outbox").glob("*.eml")) == mails
    tool = mcp.tools()["group_report_analysis"]
    assert "confirm" in tool.input_schema["properties"]
    assert "sends-email (send-email)" in (tool.description or "")


def test_a_group_run_reports_every_event_as_progress(mcp: Connected) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    result = mcp.call("run_group", {
        "group": "csv-cleanup", "confirm": True,
        "inputs": {"csv_path": str(mcp.library / "samples" / "customers_messy.csv"),
                   "output_dir": str(mcp.root / "clean"), "notify_email": "crm@example.com"}},
        progress=progress)
    assert not result.is_error, result.content
    run = result.structured_content
    assert isinstance(run, dict) and run["status"] == "success"
    assert (run["outputs"]["valid_rows"], run["outputs"]["rejected_rows"]) == (5, 3)
    assert run["run"]["id"] == run["run_id"] and len(run["run"]["steps"]) == 5
    messages = [m for _, _, m in progress]
    assert messages[0] == f"run {run['run_id']} of csv-cleanup started"
    for step in ("normalize", "dedupe", "validate", "bundle", "notify"):
        assert f"step {step} started" in messages
        assert any(m and m.startswith(f"step {step} finished in ") for m in messages)
    assert messages[-1].startswith(f"run {run['run_id']} finished: success")  # type: ignore[union-attr]
    values = [value for value, _, _ in progress]
    assert values == sorted(values) and values[-1] == 5
    assert {total for _, total, _ in progress} == {5}
    [mail] = (mcp.root / "outbox").glob("*csv-clean-up*.eml")
    assert "CSV clean-up: 5 rows ready, 3 rejected" in mail.read_text()


def test_an_exposed_group_runs_as_its_own_tool(mcp: Connected) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    result = mcp.call("group_report_analysis", {
        "pdf_path": str(mcp.library / "samples" / "quarterly_report.pdf"), "max_metrics": 3,
        "context": {"values": {"team_email": "team@example.com", "report_name": "Q3 2024"}},
        "confirm": True},
        progress=progress)
    assert not result.is_error, result.content
    run = result.structured_content
    assert isinstance(run, dict) and run["group"] == "report-analysis"
    assert len(run["outputs"]["metrics"]) == 3
    assert run["outputs"]["delivered"] == "outbox"
    assert any(m == "step notify started" for _, _, m in progress)
    assert progress[-1][0] == progress[-1][1] == 5
    assert list((mcp.root / "outbox").glob("*report-summary-q3-2024*.eml"))


def test_a_skill_runs_on_its_own_and_its_run_is_kept(mcp: Connected) -> None:
    run = mcp.data("run_skill", {
        "name": "pdf-to-text",
        "inputs": {"path": str(mcp.library / "samples" / "quarterly_report.pdf")}})
    assert run["status"] == "success" and run["outputs"]["pages"] == 2
    record = mcp.data("get_run", {"id": run["run_id"]})
    assert record["id"] == run["run_id"] and record["group"] == "skill:pdf-to-text"
    assert record["outputs"] == run["outputs"]


def test_inject_returns_the_block_within_the_budget(mcp: Connected) -> None:
    run = mcp.data("run_group", {
        "group": "report-analysis", "confirm": True,
        "inputs": {"pdf_path": str(mcp.library / "samples" / "quarterly_report.pdf")}})
    full = mcp.data("inject", {"request": REPORT_REQUEST, "run_id": run["run_id"]})
    assert full["level"] == "full" and f"## Results (run {run['run_id']}" in full["text"]
    budget = full["tokens"] - 1
    block = mcp.data("inject", {"request": REPORT_REQUEST, "run_id": run["run_id"],
                                "budget": budget})
    assert block["tokens"] <= budget and block["budget"] == budget
    assert block["level"] != "full" and block["left_out"]
    assert f"## Results (run {run['run_id']}" in block["text"]
    plain = mcp.call("inject", {"request": REPORT_REQUEST, "format": "xml"})
    assert not plain.is_error
    assert plain.content[0].text.startswith("<")  # type: ignore[union-attr]


def test_list_groups_reports_every_bundled_group_valid(mcp: Connected) -> None:
    groups = mcp.data("list_groups")["groups"]
    bundled = {p.stem for p in (LIBRARY / "groups").glob("*.yaml")}
    assert {g["id"] for g in groups} == bundled
    assert {g["status"] for g in groups} == {"valid"}
    assert next(g for g in groups if g["id"] == "report-analysis")["expose"] == ["tool"]


@pytest.mark.parametrize(("tool", "arguments", "code", "message"), [
    ("run_group", {"group": "report-analysys"}, "not_found",
     "no group 'report-analysys' (did you mean 'report-analysis'?)"),
    ("get_skill", {"name": "pdf-to-txt"}, "not_found",
     "no skill 'pdf-to-txt' (did you mean 'pdf-to-text'?)"),
    ("get_run", {"id": "no-such-run"}, "not_found", "no run 'no-such-run'"),
    # The same words as the HTTP API's: one request model (skillgrove.runtime.api).
    ("search_toolbox", {}, "invalid_request", "request: field required"),
    ("search_toolbox", {"request": "x", "detail": "all"}, "invalid_request",
     "detail: input should be 'compact' or 'full'"),
    ("search_toolbox", {"requets": "x"}, "invalid_request",
     "requets: unknown field (did you mean 'request'?)"),
    ("search_toolbox", {"request": "x", "k": 51}, "invalid_request",
     "k: must be a whole number from 1 to 50"),
    ("search_toolbox", {"request": " "}, "invalid_request",
     "request: must be a non-empty string"),
    ("inject", {"request": "x", "budget": 0}, "invalid_request",
     "budget: must be a positive number of tokens"),
    ("group_report_analysys", {}, "not_found",
     "no tool 'group_report_analysys' (did you mean 'group_report_analysis'?)"),
    ("run_group", {"group": "report-analysis", "inputs": {}}, "run_error", "pdf_path"),
    ("run_skill", {"name": "pdf-to-text", "inputs": {"path": "q3.pdf", "max_pages": "two"}},
     "invalid_request", "inputs.max_pages: 'two' is not of type 'integer' (skill 'pdf-to-text')"),
    ("run_skill", {"name": "pdf-to-text", "inputs": {"pth": "q3.pdf"}}, "invalid_request",
     "inputs.pth: skill 'pdf-to-text' has no such input (did you mean 'path'?)"),
])
def test_errors_are_tool_errors_with_the_engine_message(
        mcp: Connected, tool: str, arguments: dict[str, Any], code: str, message: str) -> None:
    result = mcp.call(tool, arguments)
    assert result.is_error
    assert isinstance(result.structured_content, dict)
    error = result.structured_content["error"]
    assert error["code"] == code and message in error["message"]
    text = result.content[0].text  # type: ignore[union-attr]
    assert message in text and "Traceback" not in text


def test_run_group_takes_the_search_context_shape_and_refuses_the_flat_one(
        mcp: Connected) -> None:
    report = str(mcp.library / "samples" / "quarterly_report.pdf")
    values = {"team_email": "shape@example.com", "report_name": "Shape test"}
    searched = mcp.data("search_toolbox", {"request": REPORT_REQUEST,
                                           "context": {"values": {"pdf_path": report}}})
    assert searched["group"]["ready"] is True
    run = mcp.data("run_group", {"group": "report-analysis", "confirm": True,
                                 "inputs": {"pdf_path": report},
                                 "context": {"values": values, "recent_skills": []}})
    assert run["status"] == "success"
    assert [s["status"] for s in run["run"]["steps"] if s["id"] == "notify"] == ["success"]
    assert list((mcp.root / "outbox").glob("*shape-test*.eml"))
    flat = {"team_email": "flat@example.com", "report_name": "Flat test"}
    for tool, arguments, progress in [
            ("run_group", {"group": "report-analysis", "confirm": True,
                           "inputs": {"pdf_path": report}, "context": flat}, None),
            ("run_group", {"group": "report-analysis", "confirm": True,
                           "inputs": {"pdf_path": report}, "context": flat}, []),
            ("group_report_analysis", {"pdf_path": report, "confirm": True,
                                       "context": flat}, []),
            ("search_toolbox", {"request": REPORT_REQUEST, "context": flat}, None),
            ("inject", {"request": REPORT_REQUEST, "context": flat}, None)]:
        result = mcp.call(tool, arguments, progress)
        assert result.is_error and isinstance(result.structured_content, dict), tool
        error = result.structured_content["error"]
        assert error == {"code": "invalid_request", "details": {"field": "context.team_email"},
                         "message": 'context.team_email: unknown field: a context is {values, '
                                    'recent_skills, conversation}; put what you know under '
                                    'values: {"values": {"team_email": ...}}'}, tool
    assert not list((mcp.root / "outbox").glob("*flat-test*.eml"))  # nothing ran
    typo = mcp.call("search_toolbox", {"request": REPORT_REQUEST,
                                       "context": {"value": {"pdf_path": report}}})
    assert isinstance(typo.structured_content, dict)
    assert typo.structured_content["error"]["message"] == (
        "context.value: unknown field (did you mean 'values'?)")


def _unconfirmed_cleanup(mcp: Connected) -> dict[str, Any]:
    return {"group": "csv-cleanup",
            "inputs": {"csv_path": str(mcp.library / "samples" / "customers_messy.csv"),
                       "output_dir": str(mcp.root / "never-written"),
                       "notify_email": "crm@example.com"}}


@pytest.mark.parametrize(("tool", "arguments"), [
    ("run_group", _unconfirmed_cleanup),
    ("run_group", lambda mcp: {"group": "report-analysis", "inputs": {}}),
    ("run_group", lambda mcp: {"group": "report-analysys"}),
    ("group_report_analysis", lambda mcp: {"max_metrics": 3}),
    ("run_skill", lambda mcp: {"name": "send-email", "inputs": {"to": "a@example.com",
                                                                "subject": "s", "body": "b"}}),
], ids=["needs-confirmation", "missing-input", "unknown-group", "group-tool", "skill-effects"])
def test_a_run_error_is_the_same_typed_error_with_and_without_progress(
        mcp: Connected, tool: str, arguments: Callable[[Connected], dict[str, Any]]) -> None:
    answers = []
    for progress in (None, []):
        result = mcp.call(tool, arguments(mcp), progress=progress)
        assert result.is_error and isinstance(result.structured_content, dict)
        answers.append((result.structured_content["error"], result.content[0].text))  # type: ignore[union-attr]
    (plain, plain_text), (with_progress, progress_text) = answers
    assert plain["code"] != "internal_error" and "ExceptionGroup" not in progress_text
    assert with_progress == plain and progress_text == plain_text


def test_a_host_asking_for_progress_learns_which_effects_need_confirmation(
        mcp: Connected) -> None:
    result = mcp.call("run_group", _unconfirmed_cleanup(mcp), progress=[])
    assert isinstance(result.structured_content, dict)
    error = result.structured_content["error"]
    assert error["code"] == "needs_confirmation"
    assert error["details"]["effects"] == {"sends-email": ["send-email"]}
    assert not (mcp.root / "never-written").exists()


# -- resources ---------------------------------------------------------------------------------


def test_skills_are_resources_with_digests(mcp: Connected) -> None:
    resources = mcp.resources()
    folder = mcp.library / "skills" / "pdf-to-text"
    skill_md = resources["skill://pdf-to-text/SKILL.md"]
    assert skill_md.mime_type == "text/markdown" and skill_md.name == "pdf-to-text"
    assert skill_md.description and skill_md.description.startswith("Extract the plain text")
    for path in ("SKILL.md", "main.py"):
        data = (folder / path).read_bytes()
        listed = resources[f"skill://pdf-to-text/{path}"]
        assert listed.size == len(data)
        assert listed.meta == {"io.modelcontextprotocol.skills/digest":
                               f"sha256:{hashlib.sha256(data).hexdigest()}"}
        contents = mcp.read(f"skill://pdf-to-text/{path}")
        assert isinstance(contents, types.TextResourceContents)
        assert contents.text.encode("utf-8") == data
    manifest = json.loads(mcp.read("skill://pdf-to-text/_manifest").text)  # type: ignore[union-attr]
    assert {f["path"] for f in manifest["files"]} == {"SKILL.md", "main.py"}


def test_groups_are_generated_skill_resources(mcp: Connected) -> None:
    uri = "skill://group/report-analysis/SKILL.md"
    listed = mcp.resources()[uri]
    assert listed.name == "report-analysis" and listed.mime_type == "text/markdown"
    contents = mcp.read(uri)
    assert isinstance(contents, types.TextResourceContents)
    text = contents.text
    assert text.startswith("---\nname: report-analysis\n")
    assert "`group_report_analysis`" in text and "`team_email`" in text
    assert "1. `extract_text`: skill [`pdf-to-text`](skill://pdf-to-text/SKILL.md)" in text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert listed.meta == {"io.modelcontextprotocol.skills/digest": f"sha256:{digest}"}


def test_the_skills_extension_lists_frontmatter_and_manifests(mcp: Connected) -> None:
    listing = mcp.request("skills/list")
    entries = {entry["uri"]: entry for entry in listing["skills"]}
    entry = entries["skill://pdf-to-text/SKILL.md"]
    assert entry["frontmatter"]["name"] == "pdf-to-text"
    assert entry["frontmatter"]["inputs"]["properties"]["path"]["type"] == "string"
    data = (mcp.library / "skills" / "pdf-to-text" / "main.py").read_bytes()
    assert {"uri": "skill://pdf-to-text/main.py", "size": len(data),
            "digest": f"sha256:{hashlib.sha256(data).hexdigest()}"} in entry["resources"]
    assert "skill://group/report-analysis/SKILL.md" in entries
    got = mcp.request("skills/get", {"uri": "skill://pdf-to-text/SKILL.md"})
    assert got["skill"] == entry


def test_resources_come_in_pages(mcp: Connected) -> None:
    from skillgrove.runtime.mcp_server import RESOURCE_PAGE

    pages = mcp.resource_pages()
    assert len(pages) >= 2, "the bundled library should need more than one page"
    assert all(len(page.resources) == RESOURCE_PAGE for page in pages[:-1])
    uris = [r.uri for page in pages for r in page.resources]
    assert len(uris) == len(set(uris))  # no resource twice, none lost between pages
    skill_files = sum(1 for path in (mcp.library / "skills").rglob("*") if path.is_file()
                      and "__pycache__" not in path.parts and not path.name.startswith("."))
    assert sum(1 for uri in uris if not uri.startswith("skill://group/")
               and not uri.endswith("/_manifest")) == skill_files
    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError, match="invalid cursor"):
        mcp.run(lambda: mcp.session.list_resources(
            params=types.PaginatedRequestParams(cursor="not-a-cursor")))


def test_directories_of_skills_are_read_with_their_files_and_digests(mcp: Connected) -> None:
    from mcp.shared.exceptions import MCPError

    folder = mcp.library / "skills" / "pdf-to-text"
    listed = mcp.request("resources/directory/read", {"uri": "skill://pdf-to-text"})
    assert listed["resultType"] == "complete" and "nextCursor" not in listed
    files = {r["uri"]: r for r in listed["resources"]}
    assert set(files) == {f"skill://pdf-to-text/{p.name}" for p in folder.iterdir()
                          if p.is_file() and not p.name.startswith(".")}  # not .skill_id
    data = (folder / "main.py").read_bytes()
    assert files["skill://pdf-to-text/main.py"]["_meta"] == {
        "io.modelcontextprotocol.skills/digest": f"sha256:{hashlib.sha256(data).hexdigest()}"}
    assert files["skill://pdf-to-text/main.py"]["size"] == len(data)
    groups = mcp.request("resources/directory/read", {"uri": "skill://group"})["resources"]
    assert {"uri": "skill://group/report-analysis", "name": "report-analysis",
            "mimeType": "inode/directory"} in groups
    inside = mcp.request("resources/directory/read", {"uri": "skill://group/report-analysis"})
    assert [r["uri"] for r in inside["resources"]] == ["skill://group/report-analysis/SKILL.md"]
    with pytest.raises(MCPError, match="is not a directory resource"):
        mcp.request("resources/directory/read", {"uri": "skill://pdf-to-text/SKILL.md"})
    with pytest.raises(MCPError, match="is not a directory this server serves"):
        mcp.request("resources/directory/read", {"uri": "skill://pdf-to-txt"})


def test_resource_templates_name_the_skill_uris(mcp: Connected) -> None:
    listed: types.ListResourceTemplatesResult = mcp.run(mcp.session.list_resource_templates)
    templates = {t.name: t.uri_template for t in listed.resource_templates}
    assert templates == {"skill": "skill://{skill}/SKILL.md",
                         "skill-file": "skill://{skill}/{+path}",
                         "group": "skill://group/{group}/SKILL.md"}


def test_skills_list_pages_and_filters_by_a_search(mcp: Connected) -> None:
    from skillgrove.runtime.mcp_server import SKILLS_PAGE

    first = mcp.request("skills/list")
    everything = list(first["skills"])
    cursor = first.get("nextCursor")
    while cursor:
        page = mcp.request("skills/list", {"cursor": cursor})
        assert len(page["skills"]) <= SKILLS_PAGE
        everything += page["skills"]
        cursor = page.get("nextCursor")
    bundled = len(list((LIBRARY / "skills").glob("*/SKILL.md")))
    assert len(everything) == bundled + len(list((LIBRARY / "groups").glob("*.yaml")))
    found = mcp.request("skills/list", {"query": REPORT_REQUEST})["skills"]
    uris = [entry["uri"] for entry in found]
    assert uris[0] == "skill://group/report-analysis/SKILL.md"
    assert uris[1:6] and set(uris[1:6]) <= {
        "skill://pdf-to-text/SKILL.md", "skill://extract-metrics/SKILL.md",
        "skill://summarize-text/SKILL.md", "skill://markdown-table/SKILL.md",
        "skill://send-email/SKILL.md"}
    assert len(found) < len(everything)
    assert found[1] == next(e for e in everything if e["uri"] == uris[1])  # the same entries


def test_unknown_resources_are_invalid_params(mcp: Connected) -> None:
    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError, match=r"did you mean 'skill://pdf-to-text/SKILL\.md'"):
        mcp.read("skill://pdf-to-txt/SKILL.md")


# -- the 2026-07-28 protocol ---------------------------------------------------------------------


def test_a_2026_client_gets_tools_progress_and_change_events(tmp_path: Path) -> None:
    library = copy_library(tmp_path)
    with http_server(tmp_path, library) as url, start_blocking_portal() as portal:

        async def scenario() -> tuple[list[str], list[Any], list[Any], str]:
            log: list[Any] = []

            async def record(progress: float, total: float | None, message: str | None) -> None:
                log.append((progress, total, message))

            async with Client(url) as client:
                version = client.protocol_version
                extensions = client.server_capabilities.extensions or {}
                # The Skills extension (2026-07-28) with resources/directory/read.
                assert extensions["io.modelcontextprotocol/skills"] == {"directoryRead": True}
                tools = [tool.name for tool in (await client.list_tools()).tools]
                templates = (await client.list_resource_templates()).resource_templates
                assert "skill://{skill}/SKILL.md" in [t.uri_template for t in templates]
                listed = await client.list_resources()
                assert listed.next_cursor is not None  # paginated on this revision too
                again = await client.list_resources(cursor=listed.next_cursor)
                assert not {r.uri for r in again.resources} & {r.uri for r in listed.resources}
                result = await client.call_tool(
                    "run_skill", {"name": "pdf-to-text", "inputs": {
                        "path": str(library / "samples" / "quarterly_report.pdf")}},
                    progress_callback=record)
                assert not result.is_error
                skill_md = library / "skills" / "pdf-to-text" / "SKILL.md"
                async with client.listen(tools_list_changed=True, resources_list_changed=True,
                                         resource_subscriptions=[
                                             "skill://pdf-to-text/SKILL.md"]) as events:
                    skill_md.write_text(skill_md.read_text(encoding="utf-8").replace(
                        "Extract the plain text", "Extract every word", 1), encoding="utf-8")
                    seen = []
                    with anyio.fail_after(10):
                        async for event in events:
                            seen.append(event)
                            if isinstance(event, ResourceUpdated):
                                break
            return tools, log, seen, version

        tools, progress, seen, version = portal.call(scenario)
    assert version == "2026-07-28"
    assert "group_report_analysis" in tools
    messages = [m for _, _, m in progress]
    assert messages[0].startswith("run ") and messages[-1].startswith("run ")
    assert any(m.startswith("step ") and " finished in " in m for m in messages)
    assert progress[-1][0] == progress[-1][1] == 1
    assert ResourcesListChanged() in seen
    assert ResourceUpdated(uri="skill://pdf-to-text/SKILL.md") in seen
    assert ToolsListChanged() not in seen  # no exposed group changed


# -- the live library ------------------------------------------------------------------------------

DIGEST_GROUP = """\
id: pdf-digest
name: PDF digest
description: Summarise a PDF in a few sentences.
expose: tool
inputs:
  pdf_path: {type: string, required: true, description: The PDF to summarise.}
steps:
  - id: read
    skill: pdf-to-text
    with: {path: "${{ inputs.pdf_path }}"}
  - id: summary
    skill: summarize-text
    needs: [read]
    with: {text: "${{ steps.read.outputs.text }}", max_sentences: 2}
outputs:
  summary: ${{ steps.summary.outputs.summary }}
"""


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")  # the 2025 way, on purpose
def test_the_server_follows_the_library_as_it_changes(tmp_path: Path) -> None:
    library = copy_library(tmp_path)
    with start_blocking_portal() as portal, ExitStack() as stack:
        mcp = connect(stack, portal, "http", tmp_path, library)
        mcp.data("search_toolbox", {"request": REPORT_REQUEST})  # indexed and ready
        skill_uri = "skill://pdf-to-text/SKILL.md"
        mcp.run(lambda: mcp.session.subscribe_resource(skill_uri))

        # A skill's description changes: the new one is served, and announced.
        skill_md = library / "skills" / "pdf-to-text" / "SKILL.md"
        mcp.messages.clear()
        changed_at = time.monotonic()
        skill_md.write_text(skill_md.read_text(encoding="utf-8").replace(
            "Extract the plain text", "Extract every word", 1), encoding="utf-8")
        wait_for(lambda: (mcp.resources()[skill_uri].description or "").startswith(
            "Extract every word"), "the new description in resources/list", since=changed_at)
        wait_for(lambda: "notifications/resources/updated" in mcp.methods(),
                 "resources/updated for the subscribed SKILL.md", since=changed_at)
        assert "notifications/resources/list_changed" in mcp.methods()
        assert "notifications/tools/list_changed" not in mcp.methods()
        updated = [m for m in mcp.messages if getattr(m, "method", "") ==
                   "notifications/resources/updated"]
        assert {m.params.uri for m in updated} == {skill_uri}
        assert mcp.data("get_skill", {"name": "pdf-to-text"})["description"].startswith(
            "Extract every word")

        # A new group that exposes itself becomes a tool.
        group_file = library / "groups" / "pdf-digest.yaml"
        mcp.messages.clear()
        changed_at = time.monotonic()
        group_file.write_text(DIGEST_GROUP, encoding="utf-8")
        tool, _ = wait_for(lambda: mcp.tools().get("group_pdf_digest"),
                           "the new group's tool", since=changed_at)
        assert set(tool.input_schema["properties"]) == {"pdf_path", "context"}
        wait_for(lambda: "notifications/tools/list_changed" in mcp.methods(),
                 "tools/list_changed", since=changed_at)
        pdf = str(library / "samples" / "quarterly_report.pdf")
        assert mcp.data("group_pdf_digest", {"pdf_path": pdf})["status"] == "success"

        # Modified: its tool follows.
        mcp.messages.clear()
        changed_at = time.monotonic()
        group_file.write_text(DIGEST_GROUP.replace("in a few sentences", "in two sentences"),
                              encoding="utf-8")
        wait_for(lambda: "in two sentences" in (mcp.tools()["group_pdf_digest"].description
                                                or ""), "the new tool description",
                 since=changed_at)
        wait_for(lambda: "notifications/tools/list_changed" in mcp.methods(),
                 "tools/list_changed after the edit", since=changed_at)

        # Broken (invalid YAML, then an unknown skill): the last good version keeps serving.
        for broken, error in [
                (DIGEST_GROUP.replace("steps:\n", "steps: [\n"), "not valid YAML"),
                (DIGEST_GROUP.replace("skill: pdf-to-text", "skill: pdf-to-txt"),
                 "unknown skill 'pdf-to-txt' (did you mean 'pdf-to-text'?)")]:
            changed_at = time.monotonic()
            group_file.write_text(broken, encoding="utf-8")

            def reported(error: str = error) -> dict[str, Any] | None:
                groups = mcp.data("list_groups")["groups"]
                found = [g for g in groups if str(g.get("location")).endswith("pdf-digest.yaml")]
                if len(found) == 1 and found[0]["status"] == "last-good" \
                        and any(error in e for e in found[0]["errors"]):
                    entry: dict[str, Any] = found[0]
                    return entry
                return None

            entry, _ = wait_for(reported, f"pdf-digest reported last-good ({error})",
                                since=changed_at)
            assert entry["id"] == "pdf-digest" and "in two sentences" in entry["description"]
            assert "group_pdf_digest" in mcp.tools()
            assert mcp.data("run_group", {"group": "pdf-digest",
                                          "inputs": {"pdf_path": pdf}})["status"] == "success"
            text = mcp.read("skill://group/pdf-digest/SKILL.md").text  # type: ignore[union-attr]
            assert "Serving its last good version" in text and error in text
