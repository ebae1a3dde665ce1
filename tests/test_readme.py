"""What the README's "For agents" section tells a user works as written: the Python example
runs, and the MCP host configuration starts a server an MCP client can use."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _block(after: str, language: str) -> str:
    start = README.index(after)
    match = re.compile(rf"```{language}\n(.*?)```", re.S).search(README, start)
    assert match is not None, f"no {language} block after {after!r}"
    return match.group(1)


def test_the_python_example_runs(tmp_path: Path) -> None:
    (tmp_path / "example.py").write_text(_block("### Python API", "python"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SKILLGROVE_PATH": ""}
    env.pop("SKILLGROVE_INDEX", None)
    result = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "group report-analysis ['pdf_path']"
    assert lines[1].startswith("none no group fits")
    assert lines[2] == "success 2"
    assert lines[3] == "# PDF to text"


def test_the_mcp_host_configuration_starts_a_working_server(tmp_path: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    config = json.loads(_block("### MCP", "json"))["mcpServers"]["skillgrove"]
    command = Path(sys.executable).parent / config["command"]
    args = [a if a != ".skillgrove" else str(tmp_path / "index") for a in config["args"]]
    assert command.exists(), command
    params = StdioServerParameters(command=str(command), args=args,
                                   env={**os.environ, "HF_HUB_OFFLINE": "1",
                                        "SKILLGROVE_PATH": ""}, cwd=str(tmp_path))

    async def session() -> tuple[list[str], dict[str, object]]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            tools = [tool.name for tool in (await client.list_tools()).tools]
            result = await client.call_tool("search_toolbox", {
                "request": "summarize the quarterly report PDF and email the key numbers to "
                           "my team"})
            assert not result.is_error, result.content
            return tools, dict(result.structured_content or {})

    tools, toolbox = anyio.run(session)
    assert {"search_toolbox", "get_skill", "run_group", "inject", "list_groups"} <= set(tools)
    assert toolbox["shape"] == "group"
    assert toolbox["group"]["id"] == "report-analysis"  # type: ignore[index]
