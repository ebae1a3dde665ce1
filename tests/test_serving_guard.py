"""Serving rules that a hostile caller (or a skill) probes (issue #26): MCP over HTTP needs a
bearer token off loopback exactly like the HTTP API, and a run id is matched exactly, never as
a pattern. Real servers in subprocesses, real requests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from skillgrove.graph.runlog import RunRecord, SqliteRunLog
from tests.helpers import write_skill

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "probe", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}


def small_library(root: Path) -> Path:
    where = write_skill(root / "lib", "echo", """
        ---
        name: echo
        description: Says what it is given.
        entrypoint: {python: main.py:run}
        ---
        b
        """)
    (where.parent / "main.py").write_text("def run(**kw):\n    return kw\n")
    return root / "lib"


def cli_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SKILLGROVE_TOKEN"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1",
               SKILLGROVE_INDEX=str(root / "index"))
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::"])
def test_mcp_over_http_off_loopback_refuses_without_a_token(tmp_path: Path, host: str) -> None:
    lib = small_library(tmp_path)
    done = subprocess.run([sys.executable, "-m", "skillgrove.runtime.cli", "serve", "mcp",
                           str(lib), "--transport", "http", "--host", host, "--port",
                           str(free_port()), "--no-watch"],
                          env=cli_env(tmp_path), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert f"refusing to serve MCP on {host} without a token" in done.stderr, done.stderr
    assert "--token" in done.stderr and "Traceback" not in done.stderr


@contextmanager
def mcp_server(root: Path, token: str) -> Iterator[str]:
    lib = small_library(root)
    port = free_port()
    log_path = root / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "skillgrove.runtime.cli", "serve", "mcp", str(lib),
             "--transport", "http", "--port", str(port), "--token", token, "--no-watch"],
            stdout=subprocess.DEVNULL, stderr=log, env=cli_env(root), cwd=root,
            stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 90
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


def test_mcp_over_http_with_a_token_answers_only_requests_that_carry_it(tmp_path: Path) -> None:
    with mcp_server(tmp_path, "s3cret-token") as url:
        bare = httpx.post(url, json=INITIALIZE, headers=MCP_HEADERS, timeout=30)
        wrong = httpx.post(url, json=INITIALIZE, timeout=30,
                           headers={**MCP_HEADERS, "Authorization": "Bearer s3cret-tokeN"})
        basic = httpx.post(url, json=INITIALIZE, timeout=30,
                           headers={**MCP_HEADERS, "Authorization": "Basic s3cret-token"})
        right = httpx.post(url, json=INITIALIZE, timeout=30,
                           headers={**MCP_HEADERS, "Authorization": "Bearer s3cret-token"})
    for refused in (bare, wrong, basic):
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] == "unauthorized"
        assert refused.headers["www-authenticate"].startswith("Bearer")
    assert right.status_code == 200, right.text
    assert "serverInfo" in right.text


# ------------------------------------------------------------------------------------ run ids

def record(run_id: str, started_at: float) -> RunRecord:
    return RunRecord(run_id, "g", "success", {}, {}, {}, (), started_at, 0.1)


@pytest.mark.parametrize("pattern", ["%", "_", "a%", "abc_ef%", "%f", "abcdef"])
def test_a_run_id_is_matched_exactly_never_as_a_pattern(tmp_path: Path, pattern: str) -> None:
    log = SqliteRunLog(tmp_path / "runs.sqlite")
    log.record(record("abcdef123456", 1.0))
    log.record(record("0123456789ab", 2.0))
    assert log.get(pattern) is None
    found = log.get("abcdef123456")
    assert found is not None and found.id == "abcdef123456"


def test_the_http_api_answers_a_pattern_run_id_with_404(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from skillgrove import Skillgrove
    from skillgrove.runtime.http_server import create_app

    lib = small_library(tmp_path)
    engine = Skillgrove([lib], index=tmp_path / "index")
    run = engine.run_skill("echo", {"word": "hi"})
    with TestClient(create_app(engine), base_url="http://127.0.0.1") as client:
        assert client.get(f"/v1/runs/{run.id}").status_code == 200
        for pattern in ("%25", "_", run.id[:6] + "%25", run.id[:-1] + "_"):
            answer = client.get(f"/v1/runs/{pattern}")
            assert answer.status_code == 404, (pattern, answer.text)


# ------------------------------------------------------------------------- concurrent runs

@contextmanager
def http_api(root: Path, *extra: str) -> Iterator[str]:
    where = write_skill(root / "lib", "slow", """
        ---
        name: slow
        description: Takes a while.
        inputs: {properties: {seconds: {type: number}}}
        entrypoint: {python: main.py:run}
        ---
        b
        """)
    (where.parent / "main.py").write_text(
        "import time\ndef run(seconds):\n    time.sleep(seconds)\n    return {'slept': seconds}\n")
    port = free_port()
    log_path = root / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "skillgrove.runtime.cli", "serve", "http", str(root / "lib"),
             "--port", str(port), "--no-watch", *extra],
            stdout=log, stderr=log, env=cli_env(root), cwd=root, stdin=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 90
            while True:
                try:
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the server did not start:\n{log_path.read_text()}")
                time.sleep(0.1)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "event-stream"])
def test_runs_over_the_servers_limit_get_429_and_a_slot_frees_when_a_run_ends(
        tmp_path: Path, stream: bool) -> None:
    from concurrent.futures import ThreadPoolExecutor

    headers = {"Accept": "text/event-stream"} if stream else {}
    with http_api(tmp_path, "--max-runs", "2") as base:
        def start(seconds: float) -> httpx.Response:
            return httpx.post(f"{base}/v1/skills/slow/runs", json={"inputs": {
                "seconds": seconds}}, headers=headers, timeout=60)

        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(start, [3.0] * 6))
        codes = sorted(a.status_code for a in answers)
        refused = [a for a in answers if a.status_code == 429]
        assert codes.count(429) == 4, codes
        assert codes.count(429) + codes.count(200 if stream else 201) == 6, codes
        assert refused[0].json()["error"]["code"] == "too_many_runs"
        assert refused[0].headers["retry-after"] == "1"
        again = start(0.1)  # both earlier runs have ended: their slots are free
        assert again.status_code == (200 if stream else 201), again.text


def _mcp_call(url: str, headers: dict[str, str], body: dict[str, object]) -> dict[str, object]:
    """One JSON-RPC request over streamable HTTP; the response (JSON, or the last SSE data)."""
    import json

    answer = httpx.post(url, json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    if answer.headers.get("content-type", "").startswith("application/json"):
        return dict(answer.json())
    data = [line[5:].strip() for line in answer.text.splitlines() if line.startswith("data:")]
    return dict(json.loads(data[-1]))


def test_mcp_run_tools_over_the_servers_limit_are_refused(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    where = write_skill(tmp_path / "lib", "slow", """
        ---
        name: slow
        description: Takes a while.
        inputs: {properties: {seconds: {type: number}}}
        entrypoint: {python: main.py:run}
        ---
        b
        """)
    (where.parent / "main.py").write_text(
        "import time\ndef run(seconds):\n    time.sleep(seconds)\n    return {'slept': seconds}\n")
    port = free_port()
    log_path = tmp_path / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "skillgrove.runtime.cli", "serve", "mcp", str(tmp_path / "lib"),
             "--transport", "http", "--port", str(port), "--no-watch", "--max-runs", "1"],
            stdout=subprocess.DEVNULL, stderr=log, env=cli_env(tmp_path), cwd=tmp_path,
            stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 90
            while "MCP server on" not in log_path.read_text():
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the server did not start:\n{log_path.read_text()}")
                time.sleep(0.05)
            url = f"http://127.0.0.1:{port}/mcp"
            first = httpx.post(url, json=INITIALIZE, headers=MCP_HEADERS, timeout=30)
            headers = {**MCP_HEADERS, **{k: v for k, v in first.headers.items()
                                         if k.lower() == "mcp-session-id"}}
            httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                       headers=headers, timeout=30)

            def call(number: int) -> dict[str, object]:
                return _mcp_call(url, headers, {
                    "jsonrpc": "2.0", "id": 10 + number, "method": "tools/call",
                    "params": {"name": "run_skill",
                               "arguments": {"name": "slow", "inputs": {"seconds": 3}}}})

            with ThreadPoolExecutor(3) as pool:
                answers = list(pool.map(call, range(3)))
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    results = [a["result"] for a in answers]
    refused = [r for r in results if r.get("isError")]  # type: ignore[union-attr]
    assert len(refused) == 2, results
    assert all("too_many_runs" in str(r) for r in refused)
    assert sum(1 for r in results if not r.get("isError")) == 1  # type: ignore[union-attr]
