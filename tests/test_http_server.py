"""``skillgrove serve http``: the HTTP API as a client sees it.

A real server process on 127.0.0.1 (the CLI, as a user starts it) serves the bundled library;
httpx drives every endpoint. A second server, started with ``--token`` and ``--no-watch``, checks
the token and an unexpected failure. Runs read the samples in ``library/samples``; mail lands as
``.eml`` files in the server's ``$SKILLGROVE_OUTBOX``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from skillgrove.runtime.api import CompactToolbox, FullToolbox
from skillgrove.runtime.http_server import (
    AnswerView,
    ErrorBody,
    GroupList,
    GroupView,
    HealthView,
    InjectionView,
    PlanView,
    RunList,
    RunView,
    SkillDetailsView,
    SkillList,
)
from skillgrove.runtime.paths import bundled_library

LIBRARY = bundled_library()
SAMPLES = LIBRARY / "samples"
REPORT = str(SAMPLES / "quarterly_report.pdf")
GROUP_REQUEST = "summarize the quarterly report PDF and email the key numbers to my team"
FALLBACK_REQUEST = "translate this paragraph into German"
TOKEN = "s3cret-token"
REPORT_RUN = {"inputs": {"pdf_path": REPORT},
              "context": {"values": {"team_email": "team@larkspur.example",
                                     "report_name": "Q3 2024"}},
              "confirm": True}  # the group sends mail


# -- servers --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    index: Path
    outbox: Path

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_server(folder: Path, *extra: str, ready: bool = True,
                 library: Path = LIBRARY) -> Server:
    """``skillgrove serve http`` on ``library``, as a user starts it."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    outbox = folder / "outbox"
    env = {**os.environ, "SKILLGROVE_OUTBOX": str(outbox), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    env.pop("SKILLGROVE_TOKEN", None)
    log = folder / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "skillgrove.runtime.cli", "serve", "http", str(library),
             "--index", str(folder / "index"), "--port", str(port), *extra],
            cwd=folder, env=env, stdout=sink, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", process, log, folder / "index", outbox)
    try:
        _wait_for(server, "/healthz")
        if ready:
            _wait_for(server, "/readyz", timeout=240)
    except BaseException:
        stop_server(server)
        raise
    return server


def _wait_for(server: Server, path: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"the server exited with {server.process.returncode}:\n"
                        f"{server.log_text()[-3000:]}")
        try:
            if httpx.get(server.url + path, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{path} not 200 within {timeout} s:\n{server.log_text()[-3000:]}")


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("http"))
    yield running
    stop_server(running)


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Never indexed (``--no-watch``, and no test here searches it)."""
    running = start_server(tmp_path_factory.mktemp("http-token"), "--token", TOKEN,
                           "--no-watch", ready=False)
    yield running
    stop_server(running)


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        yield http


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The one error shape: exactly {"error": {"code", "message", "details"}}."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    ErrorBody.model_validate(body)
    assert body["error"]["code"] == code
    assert "Traceback" not in response.text
    error: dict[str, Any] = body["error"]
    return error


# -- health ---------------------------------------------------------------------------------------


def test_healthz_says_alive_and_readyz_gives_the_engine_health(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    health = HealthView.model_validate(ready.json())
    assert health.ready and health.groups == 11 and health.skills == 48
    assert health.broken_groups == {}


# -- retrieval ------------------------------------------------------------------------------------


def test_search_chooses_the_report_group(client: httpx.Client) -> None:
    response = client.post("/v1/search", json={"request": GROUP_REQUEST})
    assert response.status_code == 200
    toolbox = CompactToolbox.model_validate(response.json())
    assert toolbox.shape == "group"
    assert toolbox.group is not None and toolbox.group.id == "report-analysis"
    assert {"pdf-to-text", "extract-metrics", "send-email"} <= {s.name for s in toolbox.skills}
    assert toolbox.request == GROUP_REQUEST


def test_search_falls_back_when_no_group_fits(client: httpx.Client) -> None:
    response = client.post("/v1/search?detail=full", json={"request": FALLBACK_REQUEST,
                                                           "k": 3})
    toolbox = FullToolbox.model_validate(response.json())
    assert toolbox.shape != "group" and toolbox.group is None
    assert toolbox.model_extra is not None
    assert "no group fits" in toolbox.model_extra["fallback_reason"]
    assert len(toolbox.skills) <= 3 and all("score" in s for s in toolbox.skills)


def test_the_demo_toolbox_is_compact_unless_full_detail_is_asked_for(
        client: httpx.Client) -> None:
    from skillgrove.runtime.inject import count_tokens

    request = {"request": "summarize this PDF report and email the key numbers to the team"}
    compact = client.post("/v1/search", json=request)
    assert count_tokens(compact.text) <= 1500, count_tokens(compact.text)
    toolbox = CompactToolbox.model_validate(compact.json())
    assert toolbox.group is not None and toolbox.group.inputs[0].name == "pdf_path"
    assert toolbox.reason.startswith("group 'Report analysis and notification'")
    full = client.post("/v1/search", params={"detail": "full"}, json=request)
    assert count_tokens(full.text) > 4 * 1500
    assert full.json()["group"]["input_schema"]["required"] == ["pdf_path"]
    wrong = assert_error(client.post("/v1/search", params={"detail": "all"}, json=request),
                         422, "invalid_request")
    assert wrong["details"]["field"] == "detail"


def test_search_reads_the_context(client: httpx.Client) -> None:
    body = {"request": GROUP_REQUEST, "context": {"values": {"pdf_path": REPORT}}}
    group = client.post("/v1/search", json=body).json()["group"]
    assert group["ready"] is True and group["missing_inputs"] == []
    group = client.post("/v1/search", json={"request": GROUP_REQUEST}).json()["group"]
    assert group["ready"] is False and group["missing_inputs"] == ["pdf_path"]


ONE_SHAPE_ROUTES = {
    "/v1/search": {"request": GROUP_REQUEST},
    "/v1/ask": {"request": GROUP_REQUEST},
    "/v1/inject": {"request": GROUP_REQUEST},
    "/v1/groups/report-analysis/plan": {"inputs": {"pdf_path": REPORT}},
    "/v1/groups/report-analysis/runs": {"inputs": {"pdf_path": REPORT}, "confirm": True},
}


@pytest.mark.parametrize(("path", "body"), ONE_SHAPE_ROUTES.items(), ids=ONE_SHAPE_ROUTES.keys())
def test_a_context_has_one_shape_and_a_flat_one_is_refused(client: httpx.Client, server: Server,
                                                           path: str, body: dict[str, Any],
                                                           ) -> None:
    runs = len(client.get("/v1/runs", params={"limit": 1000}).json()["runs"])
    flat = {**body, "context": {"team_email": "flat@larkspur.example"}}
    error = assert_error(client.post(path, json=flat), 422, "invalid_request")
    assert error["details"]["field"] == "context.team_email"
    assert error["message"] == (
        'context.team_email: unknown field: a context is {values, recent_skills, '
        'conversation}; put what you know under values: {"values": {"team_email": ...}}')
    typo = {**body, "context": {"value": {"pdf_path": REPORT}}}
    error = assert_error(client.post(path, json=typo), 422, "invalid_request")
    assert error["message"] == "context.value: unknown field (did you mean 'values'?)"
    assert error["details"]["field"] == "context.value"
    assert len(client.get("/v1/runs", params={"limit": 1000}).json()["runs"]) == runs  # none ran
    assert not any("flat@larkspur.example" in p.read_text() for p in server.outbox.glob("*.eml"))


def test_a_streamed_run_refuses_a_flat_context_before_the_stream_opens(
        client: httpx.Client) -> None:
    # What the studio's run form posts: its context went out flat until #27.
    flat = {**REPORT_RUN, "context": {"team_email": "flat@larkspur.example"}}
    response = client.post("/v1/groups/report-analysis/runs", json=flat,
                           headers={"Accept": "text/event-stream"})
    error = assert_error(response, 422, "invalid_request")
    assert error["details"]["field"] == "context.team_email"
    assert "put what you know under values" in error["message"]


def test_a_run_reads_the_values_of_the_search_context_shape(client: httpx.Client,
                                                             server: Server) -> None:
    values = {"team_email": "values@larkspur.example", "report_name": "Values shape"}
    run = client.post("/v1/groups/report-analysis/runs", json={
        "inputs": {"pdf_path": REPORT}, "confirm": True,
        "context": {"values": values, "recent_skills": ["pdf-to-text"]}}).json()
    assert run["status"] == "success"
    assert [s["status"] for s in run["steps"] if s["id"] == "notify"] == ["success"]
    assert any("values@larkspur.example" in p.read_text() for p in server.outbox.glob("*.eml"))
    plan = client.post("/v1/groups/report-analysis/plan", json={
        "inputs": {"pdf_path": REPORT}, "context": {"values": values}}).json()
    notify = next(s for s in plan["steps"] if s["id"] == "notify")
    assert notify["inputs"]["to"] == "values@larkspur.example"
    wrong = client.post("/v1/groups/report-analysis/runs", json={
        "inputs": {"pdf_path": REPORT}, "confirm": True,
        "context": {"values": values, "recent_skills": "pdf-to-text"}})
    assert assert_error(wrong, 422, "invalid_request")["details"]["field"] == \
        "context.recent_skills"


def test_concurrent_searches_are_served_side_by_side(client: httpx.Client,
                                                     server: Server) -> None:
    results: list[int] = []

    def one() -> None:
        with httpx.Client(base_url=server.url, timeout=60) as own:
            results.append(own.post("/v1/search", json={"request": GROUP_REQUEST}).status_code)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [200] * 8


def test_inject_for_a_request(client: httpx.Client) -> None:
    response = client.post("/v1/inject", json={"request": GROUP_REQUEST, "budget": 2000})
    injection = InjectionView.model_validate(response.json())
    assert "report-analysis" in injection.text
    assert injection.budget == 2000 and injection.tokens > 0
    xml = client.post("/v1/inject", json={"request": GROUP_REQUEST, "format": "xml"}).json()
    assert xml["text"].startswith("<toolbox")


def test_ask_runs_the_chosen_group_and_injects_the_results(client: httpx.Client,
                                                            server: Server) -> None:
    values = {"pdf_path": REPORT, "team_email": "ask@larkspur.example", "report_name": "Ask"}
    response = client.post("/v1/ask", json={"request": GROUP_REQUEST,
                                            "context": {"values": values}, "confirm": True})
    answer = AnswerView.model_validate(response.json())
    assert answer.toolbox.shape == "group"
    assert answer.run is not None and answer.run.status == "success"
    assert answer.run.id in answer.injection.text
    assert any("ask@larkspur.example" in p.read_text() for p in server.outbox.glob("*.eml"))


def test_ask_plans_a_group_with_effects_until_it_is_confirmed(client: httpx.Client,
                                                               server: Server) -> None:
    values = {"pdf_path": REPORT, "team_email": "unconfirmed@larkspur.example"}
    for _ in range(2):  # asking twice sends nothing twice
        answer = client.post("/v1/ask", json={"request": GROUP_REQUEST,
                                              "context": {"values": values}}).json()
        assert answer["run"] is None
        assert answer["needs_confirmation"] == {"sends-email": ["send-email"]}
        assert answer["plan"]["group"] == "report-analysis"
    assert not [p for p in server.outbox.glob("*.eml") if "unconfirmed@" in p.read_text()]
    refused = client.post("/v1/groups/report-analysis/runs",
                          json={**REPORT_RUN, "confirm": False})
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "needs_confirmation"
    assert error["details"]["effects"] == {"sends-email": ["send-email"]}


# -- the library ----------------------------------------------------------------------------------


def test_skills_one_skill_and_one_of_its_files(client: httpx.Client) -> None:
    listed = SkillList.model_validate(client.get("/v1/skills").json())
    names = [s.name for s in listed.skills]
    assert len(names) == 48 and names == sorted(names) and "pdf-to-text" in names

    skill = SkillDetailsView.model_validate(client.get("/v1/skills/pdf-to-text").json())
    assert skill.runnable and skill.body.startswith("# PDF to text")
    assert {"SKILL.md", "main.py"} <= {f.path for f in skill.files}

    file = client.get("/v1/skills/pdf-to-text/files/SKILL.md")
    assert file.status_code == 200
    assert file.headers["content-type"].startswith("text/markdown")
    assert file.content == (LIBRARY / "skills" / "pdf-to-text" / "SKILL.md").read_bytes()
    error = assert_error(client.get("/v1/skills/pdf-to-text/files/SKIL.md"), 404, "not_found")
    assert "did you mean 'SKILL.md'?" in error["message"]


def test_groups_one_group_and_its_plan(client: httpx.Client) -> None:
    groups = GroupList.model_validate(client.get("/v1/groups").json()).groups
    assert len(groups) == 11 and all(g.status == "valid" for g in groups)

    group = GroupView.model_validate(client.get("/v1/groups/report-analysis").json())
    assert group.id == "report-analysis" and group.errors == []
    assert group.model_dump()["input_schema"]["required"] == ["pdf_path"]

    response = client.post("/v1/groups/report-analysis/plan",
                           json={"inputs": {"pdf_path": "q3.pdf"}})
    plan = PlanView.model_validate(response.json())
    assert plan.levels == [["extract_text"], ["metrics"], ["summarize", "figures"], ["notify"]]
    notify = next(s for s in plan.steps if s.id == "notify")
    assert notify.skip_reason  # no team_email in the context


# -- runs -----------------------------------------------------------------------------------------


def test_run_a_group_then_read_it_back(client: httpx.Client, server: Server) -> None:
    response = client.post("/v1/groups/report-analysis/runs", json=REPORT_RUN)
    assert response.status_code == 201, response.text
    run = RunView.model_validate(response.json())
    assert run.status == "success"
    assert response.headers["location"] == f"/v1/runs/{run.id}"
    assert run.outputs["delivered"] == "outbox" and run.outputs["metrics"]
    assert [s.status for s in run.steps] == ["success"] * 5
    mail = [p for p in server.outbox.glob("*.eml") if "Q3 2024" in p.read_text()]
    assert mail

    assert client.get(f"/v1/runs/{run.id}").json() == response.json()
    runs = RunList.model_validate(client.get("/v1/runs", params={"limit": 50}).json()).runs
    assert run.id in [r.id for r in runs]


def read_events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    frames: list[tuple[str, dict[str, Any]]] = []
    kind, data = "", ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data += line.removeprefix("data: ")
        elif not line and kind:
            frames.append((kind, json.loads(data)))
            kind, data = "", ""
    return frames


def test_a_run_streamed_as_server_sent_events(client: httpx.Client) -> None:
    with client.stream("POST", "/v1/groups/report-analysis/runs", json=REPORT_RUN,
                       headers={"Accept": "text/event-stream"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = read_events(response)

    kinds = [kind for kind, _ in frames]
    assert kinds[0] == "run_started" and kinds[-2:] == ["run_finished", "result"]
    events = [data for kind, data in frames[:-1]]
    assert all(e["kind"] == kind for (kind, _), e in zip(frames, events, strict=False))
    order = [(e["kind"], e.get("step")) for e in events]
    for step in ("extract_text", "metrics", "summarize", "figures", "notify"):
        assert order.index(("step_started", step)) < order.index(("step_finished", step))
    # Each step starts only after the steps it needs have finished.
    for before, after in [("extract_text", "metrics"), ("metrics", "summarize"),
                          ("metrics", "figures"), ("summarize", "notify"),
                          ("figures", "notify")]:
        assert order.index(("step_finished", before)) < order.index(("step_started", after))

    record = RunView.model_validate(frames[-1][1])
    assert record.status == "success" and record.id == events[0]["run_id"]
    assert client.get(f"/v1/runs/{record.id}").json() == frames[-1][1]


def test_a_client_that_hangs_up_does_not_stop_the_run(client: httpx.Client) -> None:
    with client.stream("POST", "/v1/groups/report-analysis/runs", json=REPORT_RUN,
                       headers={"Accept": "text/event-stream"}) as response:
        lines = response.iter_lines()
        assert next(lines) == "event: run_started"
        run_id = json.loads(next(lines).removeprefix("data: "))["run_id"]
    deadline = time.monotonic() + 30
    while (found := client.get(f"/v1/runs/{run_id}")).status_code == 404:
        assert time.monotonic() < deadline, "the run was not recorded"
        time.sleep(0.1)
    assert found.json()["status"] == "success"


def test_a_run_that_cannot_start_is_refused_before_the_stream_opens(
        client: httpx.Client) -> None:
    response = client.post("/v1/groups/report-analysis/runs", json={"inputs": {}},
                           headers={"Accept": "text/event-stream"})
    error = assert_error(response, 400, "run_error")
    assert "missing required input 'pdf_path'" in error["message"]


def test_a_run_needing_confirmation_is_the_same_error_streamed_or_not(
        client: httpx.Client) -> None:
    body = {**REPORT_RUN, "confirm": False}
    plain = client.post("/v1/groups/report-analysis/runs", json=body)
    streamed = client.post("/v1/groups/report-analysis/runs", json=body,
                           headers={"Accept": "text/event-stream"})
    assert assert_error(plain, 409, "needs_confirmation") == \
        assert_error(streamed, 409, "needs_confirmation")


def test_resume_reuses_the_successful_steps(client: httpx.Client) -> None:
    first = client.post("/v1/groups/report-analysis/runs", json=REPORT_RUN).json()
    again = client.post("/v1/groups/report-analysis/runs",
                        json={"resume": first["id"], "confirm": True})
    assert again.status_code == 201
    resumed = RunView.model_validate(again.json())
    assert resumed.resumed_from == first["id"] and resumed.status == "success"
    assert resumed.inputs == first["inputs"]


def test_run_one_skill_on_its_own(client: httpx.Client) -> None:
    response = client.post("/v1/skills/pdf-to-text/runs", json={"inputs": {"path": REPORT}})
    assert response.status_code == 201, response.text
    run = RunView.model_validate(response.json())
    assert run.group == "skill:pdf-to-text" and run.status == "success"
    assert "Revenue" in run.outputs["text"]


# -- errors ---------------------------------------------------------------------------------------

ERRORS = [
    # method, path, body, status, code, details.field (or None), text in the message
    ("POST", "/v1/search", {}, 422, "invalid_request", "request", "request: field required"),
    ("POST", "/v1/search", {"requets": "x"}, 422, "invalid_request", "requets",
     "did you mean 'request'?"),
    ("POST", "/v1/search", {"request": "x", "k": 0}, 422, "invalid_request", "k",
     "k: must be a whole number from 1 to 50"),
    ("POST", "/v1/search", {"request": ""}, 422, "invalid_request", "request",
     "request: must be a non-empty string"),
    ("POST", "/v1/ask", {"request": "x", "budget": 0}, 422, "invalid_request", "budget",
     "budget: must be a positive number of tokens"),
    ("POST", "/v1/search", {"request": "   "}, 422, "invalid_request", "request",
     "request: must be a non-empty string"),
    ("POST", "/v1/search", {"request": "x", "context": {"values": [1]}}, 422,
     "invalid_request", "context.values", "context.values: must be an object (got array)"),
    ("POST", "/v1/search", {"request": "x", "context": {"conversation": ["hi", 2]}}, 422,
     "invalid_request", "context.conversation[1]",
     "context.conversation[1]: must be a string (got integer)"),
    ("POST", "/v1/search", b'{"request": ', 422, "invalid_request", "body", "invalid JSON"),
    ("POST", "/v1/inject", {}, 422, "invalid_request", "request", "give a request or a run id"),
    ("POST", "/v1/inject", {"request": "x", "format": "html"}, 422, "invalid_request",
     "format", "'markdown' or 'xml'"),
    ("GET", "/v1/runs?limit=0", None, 422, "invalid_request", "limit", "limit: "),
    ("POST", "/v1/skills/writing-tone-guide/runs", {}, 422, "invalid_request", "skill",
     "instruction-only"),
    ("GET", "/v1/groups/report-analysys", None, 404, "not_found", None,
     "no group 'report-analysys' (did you mean 'report-analysis'?)"),
    ("POST", "/v1/groups/report-analysys/runs", {}, 404, "not_found", None,
     "did you mean 'report-analysis'?"),
    ("POST", "/v1/groups/nope/plan", {}, 404, "not_found", None, "no group 'nope'"),
    ("GET", "/v1/skills/pdf-to-txt", None, 404, "not_found", None,
     "did you mean 'pdf-to-text'?"),
    ("GET", "/v1/runs/0123456789ab", None, 404, "not_found", None, "no run '0123456789ab'"),
    ("GET", "/v1/nothing-here", None, 404, "not_found", None, "no route GET /v1/nothing-here"),
    ("DELETE", "/v1/search", None, 405, "method_not_allowed", None, "allowed: POST"),
    ("POST", "/v1/groups/report-analysis/runs", {"inputs": {"pdf_path": 3}}, 400,
     "run_error", None, "input 'pdf_path' must be string"),
    ("POST", "/v1/skills/pdf-to-text/runs", {"inputs": {"path": "q3.pdf", "max_pages": "two"}},
     422, "invalid_request", "inputs.max_pages",
     "inputs.max_pages: 'two' is not of type 'integer' (skill 'pdf-to-text')"),
    ("POST", "/v1/skills/pdf-to-text/runs", {"inputs": {"pth": "q3.pdf"}}, 422,
     "invalid_request", "inputs.pth",
     "inputs.pth: skill 'pdf-to-text' has no such input (did you mean 'path'?)"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "code", "field", "text"), ERRORS)
def test_errors_have_one_shape(client: httpx.Client, method: str, path: str, body: Any,
                               status: int, code: str, field: str | None, text: str) -> None:
    content = body if isinstance(body, bytes) else None
    response = client.request(method, path, json=None if content else body, content=content,
                              headers={"content-type": "application/json"} if content else None)
    error = assert_error(response, status, code)
    assert text in error["message"]
    if field is not None:
        assert error["details"]["field"] == field


def test_a_body_that_is_not_json_says_how_to_send_it(client: httpx.Client) -> None:
    response = client.post("/v1/search", content=b"request=hello",
                           headers={"content-type": "application/x-www-form-urlencoded"})
    error = assert_error(response, 422, "invalid_request")
    assert "Content-Type: application/json" in error["message"]


def test_a_body_over_the_limit_is_refused(client: httpx.Client) -> None:
    big = {"request": "x" * (1024 * 1024)}
    error = assert_error(client.post("/v1/search", json=big), 413, "body_too_large")
    assert error["details"] == {"max_body": 1024 * 1024}

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts what arrives
        yield b'{"request": "'
        for _ in range(200):
            yield b"x" * 8192
        yield b'"}'

    chunked = client.post("/v1/search", content=chunks(),
                          headers={"content-type": "application/json"})
    assert_error(chunked, 413, "body_too_large")
    assert client.post("/v1/search", json={"request": "x" * 1000}).status_code == 200


def test_a_foreign_host_is_refused_without_a_token(client: httpx.Client) -> None:
    """DNS rebinding: a web page's request arrives with its own Host (or Origin)."""
    error = assert_error(client.get("/v1/groups", headers={"Host": "evil.example"}), 421,
                         "invalid_host")
    assert error["details"]["host"] == "evil.example"
    assert_error(client.get("/v1/groups", headers={"Origin": "https://evil.example"}), 421,
                 "invalid_host")
    assert client.get("/v1/groups", headers={"Origin": "http://localhost:3000"}).is_success


def test_openapi_describes_the_bodies_and_the_error_shape(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    assert {"/healthz", "/readyz", "/v1/search", "/v1/ask", "/v1/inject", "/v1/skills",
            "/v1/skills/{name}", "/v1/skills/{name}/files/{file_path}",
            "/v1/skills/{name}/runs", "/v1/groups", "/v1/groups/{group_id}",
            "/v1/groups/{group_id}/plan", "/v1/groups/{group_id}/runs", "/v1/runs",
            "/v1/runs/{run_id}",
            # authoring (skillgrove studio uses these; tests/test_studio_api.py)
            "/v1/groups/check", "/v1/groups/files", "/v1/groups/{group_id}/source",
            "/v1/skills/{name}/impact", "/v1/drafts", "/v1/drafts/{draft_id}",
            "/v1/drafts/{draft_id}/approve", "/v1/samples"} == set(spec["paths"])
    search = spec["paths"]["/v1/search"]["post"]
    body_ref = search["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = spec["components"]["schemas"][body_ref.rsplit("/", 1)[1]]
    assert body["required"] == ["request"] and body["additionalProperties"] is False
    assert search["responses"]["422"]["content"]["application/json"]["schema"]["$ref"] \
        .endswith("/ErrorBody")
    run = spec["paths"]["/v1/groups/{group_id}/runs"]["post"]["responses"]["201"]
    assert "text/event-stream" in run["content"]


# -- the token ------------------------------------------------------------------------------------


def test_with_a_token_every_endpoint_but_healthz_needs_it(token_server: Server) -> None:
    url = token_server.url
    assert httpx.get(url + "/healthz").status_code == 200
    for path in ("/v1/groups", "/readyz", "/openapi.json", "/v1/no-such-route"):
        missing = httpx.get(url + path)
        assert_error(missing, 401, "unauthorized")
        assert missing.headers["www-authenticate"] == "Bearer"
    wrong = httpx.get(url + "/v1/groups", headers={"Authorization": "Bearer not-it"})
    assert_error(wrong, 401, "unauthorized")
    assert wrong.headers["www-authenticate"].startswith("Bearer")
    good = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(url + "/v1/groups", headers=good).status_code == 200
    # --no-watch and never searched: not indexed, so not ready.
    ready = httpx.get(url + "/readyz", headers=good)
    assert ready.status_code == 503 and ready.json()["ready"] is False
    spec = httpx.get(url + "/openapi.json", headers=good).json()
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_an_unexpected_failure_is_a_500_without_the_traceback(token_server: Server) -> None:
    """A run log that is not a database: nothing the client did, so 500, logged to stderr."""
    token_server.index.mkdir(parents=True, exist_ok=True)
    (token_server.index / "runs.sqlite").write_bytes(b"this is not a database\n" * 100)
    response = httpx.get(token_server.url + "/v1/runs",
                         headers={"Authorization": f"Bearer {TOKEN}"})
    error = assert_error(response, 500, "internal")
    assert error["details"] == {} and "database" not in error["message"]
    deadline = time.monotonic() + 5
    while "DatabaseError" not in token_server.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "Traceback" in token_server.log_text()
    assert "unexpected error in GET /v1/runs" in token_server.log_text()


def test_serve_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    env = {**os.environ}
    env.pop("SKILLGROVE_TOKEN", None)
    done = subprocess.run(
        [sys.executable, "-m", "skillgrove.runtime.cli", "serve", "http", str(LIBRARY),
         "--index", str(tmp_path / "index"), "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == ("skillgrove: host: refusing to serve on 0.0.0.0 without a token: "
                           "pass --token (or set SKILLGROVE_TOKEN), or bind 127.0.0.1\n")


def test_serve_says_so_when_the_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "skillgrove.runtime.cli", "serve", "http", str(LIBRARY),
             "--index", str(tmp_path / "index"), "--port", str(port), "--no-watch"],
            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == (f"skillgrove: port: cannot listen on 127.0.0.1:{port}: Address "
                           "already in use (is another server running?)\n")


def test_the_listening_socket_says_it_is_tcp() -> None:
    """asyncio sets TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP; without it each
    small response waited 40 ms for the client's delayed ACK."""
    from skillgrove.runtime.http_server import _listen

    listener = _listen("127.0.0.1", 0)
    try:
        assert listener.proto == socket.IPPROTO_TCP
    finally:
        listener.close()
