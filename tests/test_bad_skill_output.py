"""A skill's bad output fails that step with a clear error; the run is recorded and resumable.

Each case runs a real skill: a Python skill in a subprocess that prints (or returns) something
hostile, or an HTTP skill whose server on 127.0.0.1 breaks the protocol. ``skillgrove run``
must fail the step with the message in the table, record the run as a failure, print no
traceback, and ``--resume`` must complete the run once the skill is fixed.
"""

from __future__ import annotations

import json
import socket
import struct
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import replace
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from skillgrove.graph.runlog import SqliteRunLog
from skillgrove.groups import load_library
from skillgrove.runtime.cli import main
from skillgrove.runtime.executors import Cancel, InProcessExecutor, Outcome, SubprocessExecutor
from skillgrove.runtime.runner import Runner
from tests.helpers import write_group, write_skill

TOO_DEEP = "arrays and objects are nested deeper than 64 levels (JSON_MAX_DEPTH)"

# Writes raw bytes as the skill's stdout and exits before the shim can add its own JSON.
PRINTS = """
import os, sys
def run():
    sys.stdout.buffer.write({payload})
    sys.stdout.flush()
    os._exit(0)
"""
RETURNS = """
import sys
sys.set_int_max_str_digits(0)  # so that the skill can print its huge integer
def nested(levels):
    value = []
    for _ in range(levels):
        value = [value]
    return value
def run():
    return {value}
"""
FIXED = "def run():\n    return {'count': 3}\n"

# case id, the skill's main.py, the step's error (a trailing '*' means "starts with")
BAD_OUTPUTS = [
    ("deep", PRINTS.format(payload="b'{\"a\": ' + b'[' * 200_000 + b']' * 200_000 + b'}'"),
     f"output refused: {TOO_DEEP}"),
    ("a-little-too-deep", PRINTS.format(payload="b'[' * 65 + b']' * 65"),
     f"output refused: {TOO_DEEP}"),
    ("huge-integer", PRINTS.format(payload="b'{\"count\": ' + b'7' * 5000 + b'}'"),
     "output refused: a number is written with 5,000 characters, more than 1,000 "
     "(JSON_MAX_NUMBER_CHARS)"),
    ("not-json", PRINTS.format(payload="b'Done!'"),
     "output is not JSON: Expecting value: line 1 column 1 (char 0)"),
    ("nothing", PRINTS.format(payload="b''"),
     "output is not JSON: Expecting value: line 1 column 1 (char 0)"),
    ("not-utf-8", PRINTS.format(payload="b'\\xff\\xfe'"),
     "output is not JSON: 'utf-8' codec can't decode byte 0xff in position 0: invalid start "
     "byte"),
    ("not-an-object", PRINTS.format(payload="b'[1, 2]'"), "a skill must return a JSON object"),
    ("wrong-type", PRINTS.format(payload="b'{\"count\": \"many\"}'"),
     "output does not match the declared schema at count: 'many' is not of type 'integer'"),
    ("wrong-type-and-long", PRINTS.format(payload="b'{\"count\": \"' + b'x' * 100_000 + b'\"}'"),
     "output does not match the declared schema at count: '" + "x" * 299 + "..."),
    ("returns-deep", RETURNS.format(value="{'rows': nested(100)}"), f"output refused: {TOO_DEEP}"),
    ("returns-too-deep-to-print", RETURNS.format(value="{'rows': nested(200_000)}"),
     "RecursionError: maximum recursion depth exceeded*"),
    ("returns-huge-integer", RETURNS.format(value="{'count': 10 ** 5000}"),
     "output refused: a number is written with 5,001 characters, more than 1,000 "
     "(JSON_MAX_NUMBER_CHARS)"),
    # What strict JSON and UTF-8 cannot hold: refused, naming the value; the run is recorded.
    ("prints-nan", PRINTS.format(payload="b'{\"count\": NaN}'"),
     "output refused: NaN is not a JSON number (JSON has no NaN or Infinity)"),
    ("prints-infinity-in-a-list", PRINTS.format(payload="b'{\"count\": 1, \"x\": [2, -Infinity]}'"),
     "output refused: -Infinity is not a JSON number (JSON has no NaN or Infinity)"),
    ("prints-an-overflowing-float", PRINTS.format(payload="b'{\"count\": 1, \"x\": 1e999}'"),
     "output refused: inf at x is not a JSON number"),
    ("prints-a-lone-surrogate", PRINTS.format(payload="b'{\"count\": 1, \"x\": \"a\\\\ud800\"}'"),
     "output refused: the string 'a\\ud800' at x holds a lone surrogate (U+D800), which is no "
     "character"),
    ("prints-a-low-surrogate-deep", PRINTS.format(
        payload="b'{\"count\": 1, \"x\": {\"y\": [\"ok\", \"\\\\uDC80\"]}}'"),
     "output refused: the string '\\udc80' at x.y[1] holds a lone surrogate (U+DC80), which is "
     "no character"),
    ("prints-a-surrogate-key", PRINTS.format(payload="b'{\"count\": 1, \"\\\\udbff\": 2}'"),
     "output refused: the key '\\udbff' at the top holds a lone surrogate, which is no "
     "character"),
    ("returns-nan", RETURNS.format(value="{'count': 1, 'ratio': float('nan')}"),
     "output refused: NaN is not a JSON number (JSON has no NaN or Infinity)"),
    ("returns-a-lone-surrogate", RETURNS.format(value="{'count': 1, 'x': chr(0xD800)}"),
     "UnicodeEncodeError: 'utf-8' codec can't encode character '\\ud800'*"),
    ("fails-with-a-lone-surrogate",
     "def run():\n    raise ValueError('bad ' + chr(0xD800) + ' value')\n",
     "ValueError: bad \\ud800 value"),
    # What a skill writes reaches terminals: escape sequences and bidi overrides come escaped.
    ("stderr-escapes", "import os, sys\ndef run():\n    sys.stderr.write('\\x1b[2J\\x1b]0;owned"
     "\\x07 \\u202eevil\\n')\n    sys.stderr.flush()\n    os._exit(1)\n",
     "exited with code 1: \\x1b[2J\\x1b]0;owned\\x07 \\u202eevil"),
    ("raises-with-escapes", "def run():\n    raise RuntimeError('\\x1b[31mred\\x9b\\u200b')\n",
     "RuntimeError: \\x1b[31mred\\x9b\\u200b"),
]

GROUP = """
    id: emit-once
    description: Run the skill, then a step that needs what it returned.
    examples: [emit something]
    steps:
      - {id: emit, skill: emit}
      - {id: after, skill: emit, needs: [emit]}
    outputs:
      count: ${{ steps.emit.outputs.count }}
    """


def skill_md(entrypoint: str) -> str:
    return textwrap.dedent(f"""
        ---
        name: emit
        description: emit a count
        entrypoint: {entrypoint}
        outputs:
          properties:
            count: {{type: integer}}
        ---
        Emits a count.
        """)


def cli(*args: str) -> tuple[int, str]:
    out = StringIO()
    return main(list(args), out), out.getvalue()


def run_fails_then_resumes(library: Path, index: Path, expected: str, fix: Any,
                           capsys: pytest.CaptureFixture[str]) -> None:
    """``skillgrove run`` fails step 'emit' with ``expected``; the run is in the run log as a
    failure; after ``fix()`` ``--resume`` completes it."""
    code, _ = cli("run", "emit-once", "--library", str(library), "--index", str(index))
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err
    code, listing = cli("runs", "--index", str(index))
    run_id = listing.split()[0]
    assert "emit-once" in listing and "failure" in listing and "failed: emit" in listing
    record = json.loads(cli("runs", "show", run_id, "--index", str(index))[1])
    steps = {step["id"]: step for step in record["steps"]}
    assert record["status"] == "failure"
    assert steps["emit"]["status"] == "failure"
    assert steps["after"]["status"] in ("cancelled", "skipped")
    error = steps["emit"]["error"]
    if expected.endswith("*"):
        assert error.startswith(expected[:-1]), error
    else:
        assert error == expected
    assert record["error"] == f"step 'emit' failed: {error}"
    fix()
    code, text = cli("run", "emit-once", "--library", str(library), "--resume", run_id,
                     "--index", str(index))
    err = capsys.readouterr().err
    assert code == 0, err
    assert json.loads(text) == {"count": 3}
    resumed = json.loads(cli("runs", "show", cli("runs", "--index", str(index))[1].split()[0],
                             "--index", str(index))[1])
    assert resumed["status"] == "success" and resumed["resumed_from"] == run_id


@pytest.mark.parametrize(("code", "expected"), [c[1:] for c in BAD_OUTPUTS],
                         ids=[c[0] for c in BAD_OUTPUTS])
def test_bad_output_of_a_subprocess_skill_fails_the_step(
        tmp_path: Path, code: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    library = tmp_path / "lib"
    path = write_skill(library / "skills", "emit", skill_md('{python: "main.py:run"}'))
    (path.parent / "main.py").write_text(code)
    write_group(library, "emit.yaml", GROUP)
    run_fails_then_resumes(library, tmp_path / "idx", expected,
                           lambda: (path.parent / "main.py").write_text(FIXED), capsys)


# ----------------------------------------------------------------------------------------- HTTP


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk


def _answer(body: bytes, extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + extra
            + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)


class RudeServer:
    """A server on 127.0.0.1 that reads one HTTP request per connection and answers as
    ``mode`` says: ``close`` (nothing at all), ``reset`` (a TCP reset), ``garbage`` (no status
    line), ``long-header``, ``deep`` (a 200 with JSON nested 100,000 deep), ``ok``."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/run"
        self.mode = "ok"
        self.sock.settimeout(0.1)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(10)
                _read_request(conn)
                self.respond(conn)

    def respond(self, conn: socket.socket) -> None:
        if self.mode == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif self.mode == "garbage":
            conn.sendall(b"HELLO\r\n\r\n")
        elif self.mode == "long-header":
            conn.sendall(_answer(b"{}", b"X-Padding: " + b"x" * 70_000 + b"\r\n"))
        elif self.mode == "deep":
            conn.sendall(_answer(b"[" * 100_000 + b"]" * 100_000))
        elif self.mode == "ok":
            conn.sendall(_answer(b'{"count": 3}'))

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def rude_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[RudeServer]:
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    server = RudeServer()
    yield server
    server.close()


HTTP_CASES = [
    ("close", "{url} closed the connection without an HTTP response"),
    ("reset", "the connection to {url} failed while reading the response: Connection reset by "
              "peer"),
    ("garbage", "{url} did not answer with an HTTP status line (it sent 'HELLO\\r\\n')"),
    ("long-header", "{url} sent a malformed HTTP response: LineTooLong: got more than 65536 "
                    "bytes when reading header line"),
    ("deep", f"response refused: {TOO_DEEP}"),
]


@pytest.mark.parametrize(("mode", "expected"), HTTP_CASES, ids=[c[0] for c in HTTP_CASES])
def test_a_broken_http_skill_server_fails_the_step(
        tmp_path: Path, rude_server: RudeServer, mode: str, expected: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    library = tmp_path / "lib"
    write_skill(library / "skills", "emit", skill_md(f'{{http: "{rude_server.url}"}}'))
    write_group(library, "emit.yaml", GROUP)
    rude_server.mode = mode

    def fix() -> None:
        rude_server.mode = "ok"

    run_fails_then_resumes(library, tmp_path / "idx", expected.format(url=rude_server.url),
                           fix, capsys)


# ------------------------------------------------------------------ schemas that cannot apply


@pytest.mark.parametrize(("schema", "expected"), [
    ({"properties": {"count": {"$ref": "#/$defs/missing"}}},
     "the skill's output schema cannot be applied: _WrappedReferencingError: PointerToNowhere: "
     "'/$defs/missing' does not exist within"),
    ({"properties": {"count": {"pattern": "("}}},
     "the skill's output schema cannot be applied: error: missing ), unterminated subpattern"),
], ids=["dangling-ref", "pattern-not-a-regex"])
def test_an_output_schema_that_breaks_fails_the_step(tmp_path: Path, schema: dict[str, Any],
                                                     expected: str) -> None:
    """The loader refuses such schemas now; a skill built in code (or a check the loader
    misses) still must not turn the run into a traceback."""
    library_root = tmp_path / "lib"
    path = write_skill(library_root / "skills", "emit", skill_md('{python: "main.py:run"}'))
    (path.parent / "main.py").write_text("def run():\n    return {'count': '3'}\n")
    write_group(library_root, "emit.yaml", GROUP)
    library = load_library([library_root])
    assert not library.errors, [d.format() for d in library.errors]
    good = library.skills["emit"]
    broken = replace(good, outputs=schema)
    log = SqliteRunLog(tmp_path / "runs.sqlite")
    record = Runner(library.groups, {"emit": broken}, SubprocessExecutor(),
                    run_log=log).run("emit-once")
    assert record.status == "failure"
    error = record.steps[0].error or ""
    assert error.startswith(expected), error
    stored = log.get(record.id)
    assert stored is not None and stored.status == "failure" and stored.steps[0].error == error
    (path.parent / "main.py").write_text(FIXED)
    resumed = Runner(library.groups, {"emit": good}, SubprocessExecutor(),
                     run_log=log).run("emit-once", resume=stored)
    assert resumed.status == "success" and resumed.outputs == {"count": 3}


def test_an_in_process_skill_is_held_to_the_same_limits(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "emit", skill_md('{python: "main.py:run"}'))
    (path.parent / "main.py").write_text(FIXED)
    skill = load_library([tmp_path]).skills["emit"]
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    executor = InProcessExecutor({"emit": lambda: {"rows": deep}})
    result = executor.execute(skill, {}, timeout=None, cancel=Cancel())
    assert (result.outcome, result.error) == (Outcome.ERROR, TOO_DEEP)
    huge = InProcessExecutor({"emit": lambda: {"count": 10**5000}})
    result = huge.execute(skill, {}, timeout=None, cancel=Cancel())
    assert result.error == "an integer has more than 1,000 digits (JSON_MAX_NUMBER_CHARS)"
    for value, expected in [
            ({"count": 1, "r": float("inf")}, "inf at r is not a JSON number"),
            ({"count": 1, "s": ["\udc00"]}, "the string '\\udc00' at s[0] holds a lone "
             "surrogate (U+DC00), which is no character")]:
        odd = InProcessExecutor({"emit": lambda value=value: value})
        result = odd.execute(skill, {}, timeout=None, cancel=Cancel())
        assert (result.outcome, result.error) == (Outcome.ERROR, expected)


# ------------------------------------------------------- run-time schema checks: no hang, no fetch


def test_a_backtracking_output_pattern_is_not_applied_at_run_time(tmp_path: Path) -> None:
    """``^(a+)+$`` against 40 a's and a '!' backtracks for hours in Python's ``re``. The loader
    warns about the pattern; the run does not apply it, and finishes at once."""
    import time

    library_root = tmp_path / "lib"
    path = write_skill(library_root / "skills", "emit", skill_md('{python: "main.py:run"}')
                       .replace("{type: integer}", "{type: string, pattern: '^(a+)+$'}"))
    (path.parent / "main.py").write_text("def run():\n    return {'count': 'a' * 40 + '!'}\n")
    write_group(library_root, "emit.yaml", GROUP)
    library = load_library([library_root])
    assert [d.rule for d in library.diagnostics] == ["schema-pattern-risky"]
    (warning,) = library.diagnostics
    assert (warning.line, warning.column) == (7, 36), warning.format()
    started = time.perf_counter()
    record = Runner(library.groups, library.skills, SubprocessExecutor()).run("emit-once")
    assert time.perf_counter() - started < 20
    assert record.status == "success", record.error


def test_an_output_schema_never_fetches_a_remote_reference(tmp_path: Path) -> None:
    """jsonschema's default registry still fetches ``http://`` references (deprecated, not
    removed); the run-time validator resolves only inside the schema."""
    import http.server

    fetched: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        library_root = tmp_path / "lib"
        path = write_skill(library_root / "skills", "emit", skill_md('{python: "main.py:run"}'))
        (path.parent / "main.py").write_text("def run():\n    return {'count': 3}\n")
        write_group(library_root, "emit.yaml", GROUP)
        library = load_library([library_root])
        remote = f"http://127.0.0.1:{server.server_address[1]}/count.json"
        broken = replace(library.skills["emit"],
                         outputs={"properties": {"count": {"$ref": remote}}})
        record = Runner(library.groups, {"emit": broken}, SubprocessExecutor()).run("emit-once")
    finally:
        server.shutdown()
        server.server_close()
    assert record.status == "failure"
    assert (record.steps[0].error or "").startswith(
        "the skill's output schema cannot be applied"), record.steps[0].error
    assert fetched == []


def test_deeply_nested_json_given_as_an_input_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    library_root = tmp_path / "lib"
    path = write_skill(library_root / "skills", "emit", skill_md('{python: "main.py:run"}'))
    (path.parent / "main.py").write_text(FIXED)
    write_group(library_root, "take.yaml", """
        id: take-rows
        description: Take rows.
        examples: [take these rows]
        inputs:
          rows: {type: array}
        steps:
          - {id: emit, skill: emit}
        """)
    code, text = cli("run", "take-rows", "--library", str(library_root), "--index",
                     str(tmp_path / "index"), "--input", "rows=" + "[" * 200_000 + "]" * 200_000)
    err = capsys.readouterr().err
    assert code != 0 and not text
    assert err == f"skillgrove: group 'take-rows': input 'rows': {TOO_DEEP}\n"
    from skillgrove.runtime.runner import RunError, resolve_inputs

    group = load_library([library_root]).groups["take-rows"]
    deep: list[Any] = []
    for _ in range(1_000):
        deep = [deep]
    with pytest.raises(RunError, match="nested deeper than 64 levels"):
        resolve_inputs(group, {"rows": deep})
    assert resolve_inputs(group, {"rows": "[[1], [2]]"}) == {"rows": [[1], [2]]}


def test_every_interface_refuses_too_deep_inputs_and_context(tmp_path: Path) -> None:
    """The engine is what the CLI, HTTP and MCP servers call: its gate covers all of them."""
    from skillgrove.runtime.engine import Skillgrove
    from skillgrove.runtime.errors import InvalidRequestError

    library_root = tmp_path / "lib"
    path = write_skill(library_root / "skills", "emit", skill_md('{python: "main.py:run"}'))
    (path.parent / "main.py").write_text(FIXED)
    write_group(library_root, "emit.yaml", GROUP)
    engine = Skillgrove([library_root], index=tmp_path / "index")
    deep: list[Any] = []
    for _ in range(300):
        deep = [deep]
    calls = [lambda: engine.plan("emit-once", {}, {"values": {"x": deep}}),
             lambda: engine.run("emit-once", {}, {"values": {"x": deep}}),
             lambda: engine.run_skill("emit", {"x": deep}),
             lambda: engine.context({"values": {"x": deep}})]
    for call in calls:
        with pytest.raises(InvalidRequestError, match=TOO_DEEP.replace("(", r"\(")
                           .replace(")", r"\)")):
            call()
    assert engine.runs() == []


def test_a_run_whose_values_strict_json_cannot_hold_is_still_recorded(tmp_path: Path) -> None:
    # A caller's inputs (an HTTP body may hold "\ud800") and an in-process skill's error text
    # reach the run log as they are; the record is written as strict UTF-8 JSON and read back.
    library = tmp_path / "lib"
    path = write_skill(library / "skills", "emit", skill_md('{python: "main.py:run"}'))
    (path.parent / "main.py").write_text(FIXED)
    write_group(library, "emit.yaml", GROUP)
    loaded = load_library([library])
    log = SqliteRunLog(tmp_path / "runs.sqlite")

    def emit() -> dict[str, Any]:
        raise ValueError("bad \ud800 value")

    runner = Runner(loaded.groups, loaded.skills, InProcessExecutor({"emit": emit}),
                    run_log=log)
    record = runner.run("emit-once", {}, {"note": "x\udfff", "ratio": float("nan")})
    assert record.status == "failure"
    again = SqliteRunLog(tmp_path / "runs.sqlite").get(record.id)
    assert again is not None
    assert again.context == {"note": "x\ufffd", "ratio": "nan"}
    assert again.steps[0].error == "ValueError: bad \ufffd value"
    raw = log._db.execute("SELECT record FROM run").fetchone()[0]
    json.loads(raw, parse_constant=lambda name: pytest.fail(f"{name} written"))
    raw.encode("utf-8")
