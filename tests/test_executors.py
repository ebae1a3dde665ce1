"""Executing real skills in subprocesses: JSON in and out, timeouts, output caps, environment."""

from __future__ import annotations

import http.server
import json
import os
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillgrove.groups import load_library
from skillgrove.runtime.executors import Cancel, Outcome, SubprocessExecutor, Workspace
from skillgrove.runtime.runner import EventRecorder, Runner
from skillgrove.skills import load_skill
from skillgrove.skills.model import Skill
from tests.helpers import write_group, write_skill


def skill(root: Path, name: str, frontmatter: str, files: dict[str, str]) -> Skill:
    path = write_skill(root, name, f"---\nname: {name}\ndescription: test skill\n"
                       + textwrap.dedent(frontmatter).strip() + "\n---\nbody\n")
    for file, text in files.items():
        (path.parent / file).write_text(textwrap.dedent(text))
    loaded = load_skill(path, root)
    assert loaded.skill is not None, [d.format() for d in loaded.diagnostics]
    return loaded.skill


def test_python_entrypoint_json_in_and_out(tmp_path: Path) -> None:
    add = skill(tmp_path, "add", """
        entrypoint: {python: "main.py:run"}
        outputs: {properties: {sum: {type: number}, cwd: {type: string}}}
        """, {"main.py": """
        import os
        def run(a, b):
            return {"sum": a + b, "cwd": os.getcwd()}
        """})
    result = SubprocessExecutor().execute(add, {"a": 2, "b": 3.5}, timeout=30, cancel=Cancel())
    assert result.outcome is Outcome.SUCCESS, result.error
    assert result.outputs == {"sum": 5.5, "cwd": str(add.folder)}


def test_python_error_and_retryable_error(tmp_path: Path) -> None:
    bad = skill(tmp_path, "bad", 'entrypoint: {python: "main.py:run"}', {"main.py": """
        class ServiceRetryableError(Exception):
            pass
        def run(mode):
            if mode == "retry":
                raise ServiceRetryableError("busy, try later")
            raise ValueError("no such invoice: 42")
        """})
    executor = SubprocessExecutor()
    plain = executor.execute(bad, {"mode": "fail"}, timeout=30, cancel=Cancel())
    assert (plain.outcome, plain.error, plain.retryable) == (
        Outcome.ERROR, "ValueError: no such invoice: 42", False)
    retry = executor.execute(bad, {"mode": "retry"}, timeout=30, cancel=Cancel())
    assert retry.retryable and retry.error == "ServiceRetryableError: busy, try later"


def test_output_schema_is_enforced(tmp_path: Path) -> None:
    wrong = skill(tmp_path, "wrong", """
        entrypoint: {python: "main.py:run"}
        outputs: {properties: {count: {type: integer}}, required: [count]}
        """, {"main.py": "def run():\n    return {'count': 'many'}\n"})
    result = SubprocessExecutor().execute(wrong, {}, timeout=30, cancel=Cancel())
    assert result.outcome is Outcome.ERROR
    assert result.error == ("output does not match the declared schema at count: 'many' is not "
                            "of type 'integer'")


def test_a_step_is_told_its_run_folder_and_its_own_folder(tmp_path: Path) -> None:
    where = skill(tmp_path, "where", 'entrypoint: {python: "main.py:run"}', {"main.py": """
        import os
        def run():
            return {k: os.environ.get(k) for k in ("SKILLGROVE_RUN_DIR", "SKILLGROVE_STEP_DIR")}
        """})
    run_dir, step_dir = tmp_path / "runs" / "r1", tmp_path / "runs" / "r1" / "step"
    inside = SubprocessExecutor().execute(where, {}, timeout=30, cancel=Cancel(),
                                          workspace=Workspace(run_dir, step_dir))
    assert inside.outputs == {"SKILLGROVE_RUN_DIR": str(run_dir),
                              "SKILLGROVE_STEP_DIR": str(step_dir)}
    alone = SubprocessExecutor().execute(where, {}, timeout=30, cancel=Cancel())
    assert alone.outputs == {"SKILLGROVE_RUN_DIR": None, "SKILLGROVE_STEP_DIR": None}


def test_cancel_kills_the_tree_and_says_why(tmp_path: Path) -> None:
    hang = skill(tmp_path, "hang", "entrypoint: {command: [sleep, '300']}", {})
    cancel = Cancel()
    threading.Timer(0.5, cancel.set, args=("the run was interrupted",)).start()
    started = time.perf_counter()
    result = SubprocessExecutor().execute(hang, {}, timeout=60, cancel=cancel)
    assert time.perf_counter() - started < 10
    assert (result.outcome, result.error) == (Outcome.CANCELLED,
                                              "cancelled: the run was interrupted")


def test_command_entrypoint_gets_only_declared_environment(tmp_path: Path) -> None:
    env_skill = skill(tmp_path, "envy", """
        entrypoint:
          command: [python3, tool.py]
          env: [SG_VISIBLE]
        """, {"tool.py": """
        import json, os, sys
        data = json.load(sys.stdin)
        print(json.dumps({"keys": sorted(k for k in os.environ if k.startswith("SG_")),
                          "echo": data["x"]}))
        """})
    executor = SubprocessExecutor(environ={**os.environ, "SG_VISIBLE": "1", "SG_SECRET": "2"})
    result = executor.execute(env_skill, {"x": "héllo"}, timeout=30, cancel=Cancel())
    assert result.outputs == {"keys": ["SG_VISIBLE"], "echo": "héllo"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def test_hanging_command_is_killed_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    hang = skill(tmp_path, "hang", """
        entrypoint: {command: [sh, run.sh]}
        """, {"run.sh": f"sleep 300 &\necho $! > {pid_file}\nsleep 300\n"})
    started = time.perf_counter()
    # Outside a PID namespace, so that the pid the skill writes is this process's pid too
    # (tests/test_executor_isolation.py covers the namespace).
    executor = SubprocessExecutor(pid_namespace=False, sandbox=False)
    result = executor.execute(hang, {}, timeout=1.0, cancel=Cancel())
    assert time.perf_counter() - started < 10
    assert result.outcome is Outcome.TIMEOUT
    assert result.error == "timed out after 1 s; the process tree was killed"
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the grandchild must die with the tree"


def test_a_skill_printing_100_mb_is_cut_off_at_the_cap(tmp_path: Path) -> None:
    loud = skill(tmp_path, "loud", 'entrypoint: {python: "main.py:run"}', {"main.py": """
        import sys
        def run():
            chunk = "x" * (1024 * 1024)
            for _ in range(100):
                sys.stdout.write(chunk)
            return {}
        """})
    started = time.perf_counter()
    result = SubprocessExecutor(output_cap=5 * 1024 * 1024).execute(loud, {}, timeout=60,
                                                                    cancel=Cancel())
    assert result.outcome is Outcome.ERROR
    assert result.error == "output exceeded the 5,242,880-byte cap; the process was killed"
    assert time.perf_counter() - started < 30


def test_neither_stops_the_runner(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    skill(root / "skills", "hang", "entrypoint: {command: [sleep, '300'], timeout: 1}", {})
    skill(root / "skills", "loud", "entrypoint: {command: ['yes']}", {})
    skill(root / "skills", "fine", 'entrypoint: {python: "main.py:run"}',
          {"main.py": "def run():\n    return {'ok': True}\n"})
    write_group(root, "g.yaml", """
        id: survive
        description: d
        examples: [e]
        steps:
          - {id: hang, skill: hang, continue_on_error: true}
          - {id: loud, skill: loud, continue_on_error: true}
          - {id: fine, skill: fine, needs: [hang, loud]}
        outputs: {ok: "${{ steps.fine.outputs.ok }}"}
        """)
    library = load_library([root])
    assert not library.errors, [d.format() for d in library.errors]
    events = EventRecorder()
    runner = Runner(library.groups, library.skills,
                    SubprocessExecutor(output_cap=2 * 1024 * 1024), events=events)
    record = runner.run("survive")
    assert record.status == "success" and record.outputs == {"ok": True}
    errors = {s.id: s.error for s in record.steps}
    assert errors["hang"] == "timed out after 1 s; the process tree was killed"
    assert errors["loud"] == "output exceeded the 2,097,152-byte cap; the process was killed"


@pytest.fixture
def http_skill_server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if body.get("busy"):
                self.send_response(503)
                self.end_headers()
                return
            payload = json.dumps({"upper": body["text"].upper()}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/run"
    server.shutdown()


def test_http_entrypoint(tmp_path: Path, http_skill_server: str) -> None:
    upper = skill(tmp_path, "upper", f"entrypoint: {{http: '{http_skill_server}'}}", {})
    executor = SubprocessExecutor()
    ok = executor.execute(upper, {"text": "hi"}, timeout=10, cancel=Cancel())
    assert ok.outputs == {"upper": "HI"}
    busy = executor.execute(upper, {"text": "hi", "busy": True}, timeout=10, cancel=Cancel())
    assert busy.outcome is Outcome.ERROR and busy.retryable
    assert busy.error == f"HTTP 503 from {http_skill_server}"


def test_relative_path_inputs_point_to_the_callers_directory(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    skill(root / "skills", "read-first-line", """
        entrypoint: {python: "main.py:run"}
        inputs:
          properties:
            path: {type: string, format: path}
            label: {type: string}
        outputs: {properties: {line: {type: string}, label: {type: string}}}
        """, {"main.py": "def run(path, label):\n"
                         "    return {'line': open(path).readline().strip(), 'label': label}\n"})
    write_group(root, "g.yaml", """
        id: first-line
        description: d
        examples: [e]
        inputs: {file: {type: string, required: true}}
        steps:
          - id: read
            skill: read-first-line
            with: {path: "${{ inputs.file }}", label: notes.txt}
        outputs: {line: "${{ steps.read.outputs.line }}", label: "${{ steps.read.outputs.label }}"}
        """)
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("first line\nsecond\n")
    library = load_library([root])
    from skillgrove.runtime.runner import RunOptions

    runner = Runner(library.groups, library.skills, SubprocessExecutor(),
                    options=RunOptions(workdir=work))
    record = runner.run("first-line", {"file": "notes.txt"})
    assert record.status == "success", record.error
    assert record.outputs == {"line": "first line", "label": "notes.txt"}
    assert record.step("read").inputs["path"] == str(work / "notes.txt")  # type: ignore[union-attr]
