"""Hostile skills against the executor, with real processes and sockets (issue #14).

A skill must not read what the engine did not give it (the environment of the engine or of any
other process), nor outlive its step: not with a process in a session of its own, not with a
daemon, not by holding its stdout open, not with an HTTP server that answers a byte a second.
Cancelling stops every kind of step at once. Fixture skills: ``tests/hostile/executors``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillgrove.runtime.executors import (
    Cancel,
    ExecResult,
    InProcessExecutor,
    Outcome,
    SubprocessExecutor,
    Workspace,
)
from skillgrove.skills import load_skill
from skillgrove.skills.model import Skill
from tests.helpers import write_skill

HOSTILE = Path(__file__).resolve().parent / "hostile" / "executors"
SLACK = 1.5
"""Seconds a step may take past its timeout (killing the tree, a loaded 2-core machine)."""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc; the launcher's guarantees are Linux's")

MODES = [pytest.param(True, id="pid-namespace"), pytest.param(False, id="subreaper-only")]
"""Without the sandbox (``--no-sandbox``): the launcher's own PID namespace, or none."""
RUN_MODES = [pytest.param("sandbox", id="sandbox"), pytest.param("namespace", id="pid-namespace"),
             pytest.param("plain", id="subreaper-only")]


def hostile(name: str) -> Skill:
    loaded = load_skill(HOSTILE / name / "SKILL.md", HOSTILE)
    assert loaded.skill is not None, [d.format() for d in loaded.diagnostics]
    return loaded.skill


def processes_with(marker: str) -> list[int]:
    """The live processes whose environment holds ``HOSTILE_MARKER=<marker>``: every process a
    skill started inherits it, whatever its session, parent or PID namespace."""
    needle = f"HOSTILE_MARKER={marker}\0".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                if needle in handle.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


@pytest.fixture
def marker() -> Iterator[str]:
    value = secrets.token_hex(8)
    yield value
    kill_all(processes_with(value))  # whatever a failed test left behind


def namespaces_work() -> bool:
    where = write_skill(Path(os.environ.get("TMPDIR", "/tmp")) / f"sg-ns-{os.getpid()}", "pid", """
        ---
        name: pid
        description: says its pid
        entrypoint: {command: [sh, pid.sh]}
        ---
        b
        """)
    (where.parent / "pid.sh").write_text('cat >/dev/null; echo "{\\"pid\\": $$}"\n')
    skill = load_skill(where, where.parent.parent).skill
    assert skill is not None
    result = SubprocessExecutor(sandbox=False).execute(skill, {}, timeout=30, cancel=Cancel())
    assert result.ok, result.error
    return bool(result.outputs["pid"] == 2)


# --------------------------------------------------------------------------------- environment

ENGINE = textwrap.dedent("""
    import json, subprocess, sys
    from pathlib import Path
    from skillgrove.runtime.executors import Cancel, SubprocessExecutor, skill_environment
    from skillgrove.skills import load_skill

    folder, mode = Path(sys.argv[1]), sys.argv[2]
    skill = load_skill(folder / "SKILL.md", folder.parent).skill
    if mode == "naive":  # what the executor did before: its own child, the filtered environment
        argv = [sys.executable, "-c", "import json, probe; print(json.dumps(probe.run()))"]
        done = subprocess.run(argv, cwd=folder, env=skill_environment(skill),
                              capture_output=True, check=True)
        print(done.stdout.decode())
    else:
        executor = SubprocessExecutor(pid_namespace=mode == "namespace",
                                      sandbox=mode == "sandbox")
        result = executor.execute(skill, {}, timeout=60, cancel=Cancel())
        assert result.ok, result
        print(json.dumps(result.outputs))
""")


def probe_from_an_engine(mode: str) -> tuple[dict[str, str], dict[str, object]]:
    """Run the environ probe from a separate engine process that holds secrets the probe does
    not declare; returns the secrets and what the probe reported."""
    secret = {name: f"{name.lower()}-{secrets.token_hex(12)}"
              for name in ("SECRET_TOKEN", "SMTP_PASSWORD", "SKILLGROVE_NEO4J_PASSWORD",
                           "PROBE_DECLARED")}
    done = subprocess.run([sys.executable, "-c", ENGINE, str(HOSTILE / "environ-probe"), mode],
                          env={**os.environ, **secret}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return secret, json.loads(done.stdout)


def test_the_probe_finds_the_engines_secrets_when_the_engine_is_its_plain_parent() -> None:
    # The control: without the launcher the probe reads them in /proc/<ppid>/environ.
    secret, report = probe_from_an_engine("naive")
    parent = report["read"].get(f"/proc/{report['ppid']}/environ", "")  # type: ignore[attr-defined]
    assert secret["SECRET_TOKEN"] in parent and secret["SMTP_PASSWORD"] in parent


@pytest.mark.parametrize("how", RUN_MODES)
def test_a_skill_reads_no_undeclared_secret_in_any_process(how: str) -> None:
    namespace = how != "plain"
    secret, report = probe_from_an_engine(how)
    declared = secret.pop("PROBE_DECLARED")
    assert report["declared"] == declared
    read: dict[str, str] = report["read"]  # type: ignore[assignment]
    assert any(declared in text for text in read.values()), "the probe reads its own environ"
    tried = set(read) | set(report["denied"])  # type: ignore[call-overload]
    ancestors: list[int] = report["ancestors"]  # type: ignore[assignment]
    assert ancestors and all(f"/proc/{pid}/environ" in tried for pid in ancestors)
    leaks = {path: name for path, text in read.items()
             for name, value in secret.items() if value in text}
    assert leaks == {}, f"the skill read undeclared secrets: {leaks}"
    if how == "sandbox":
        assert report["pid"] == 2, "the sandbox always has a PID namespace"
    if namespace and report["pid"] == 2:
        # In its namespace the skill sees only itself and the namespace's first process.
        assert report["visible"] == [1, 2] and ancestors == [1]


# ------------------------------------------------------------------------ processes and deadlines

def run_escaper(mode: str, marker: str, tmp_path: Path, *, how: str, timeout: float,
                cancel: Cancel | None = None) -> tuple[ExecResult, float]:
    """Run the session escaper ``how``: in the sandbox, or without it in the launcher's PID
    namespace or in none. It writes its ready file into its step folder (``tmp_path``)."""
    executor = SubprocessExecutor(environ={**os.environ, "HOSTILE_MARKER": marker},
                                  pid_namespace=how == "namespace", sandbox=how == "sandbox")
    started = time.monotonic()
    result = executor.execute(hostile("session-escaper"),
                              {"mode": mode, "ready_file": str(tmp_path / "ready")},
                              timeout=timeout, cancel=cancel or Cancel(),
                              workspace=Workspace(tmp_path, tmp_path))
    assert result.sandboxed is (how == "sandbox")
    return result, time.monotonic() - started


@pytest.mark.parametrize("how", RUN_MODES)
def test_a_setsid_grandchild_holding_stdout_ends_with_the_timeout(
        how: str, marker: str, tmp_path: Path) -> None:
    result, seconds = run_escaper("hang", marker, tmp_path, how=how, timeout=2)
    assert result.outcome is Outcome.TIMEOUT, result.error
    assert result.error == "timed out after 2 s; the process tree was killed"
    assert seconds < 2 + SLACK
    assert (tmp_path / "ready").exists(), "the escapers had started"
    assert processes_with(marker) == []


@pytest.mark.parametrize("how", RUN_MODES)
def test_a_step_that_returns_while_its_daemons_hold_stdout_ends_at_once(
        how: str, marker: str, tmp_path: Path) -> None:
    result, seconds = run_escaper("return", marker, tmp_path, how=how, timeout=60)
    assert result.outcome is Outcome.SUCCESS, result.error
    assert seconds < SLACK + 2
    assert processes_with(marker) == []


@pytest.mark.parametrize("how", RUN_MODES)
def test_cancel_stops_a_subprocess_step_and_its_setsid_grandchildren(
        how: str, marker: str, tmp_path: Path) -> None:
    cancel = Cancel()
    cancelled_at: list[float] = []

    def cancel_when_ready() -> None:
        deadline = time.monotonic() + 30
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        cancelled_at.append(time.monotonic())
        cancel.set("another step failed")

    threading.Thread(target=cancel_when_ready, daemon=True).start()
    result, _ = run_escaper("hang", marker, tmp_path, how=how, timeout=60,
                            cancel=cancel)
    assert (result.outcome, result.error) == (Outcome.CANCELLED,
                                              "cancelled: another step failed")
    assert time.monotonic() - cancelled_at[0] < SLACK
    assert processes_with(marker) == []


@pytest.mark.parametrize("how", ["sandbox", "namespace"])
def test_a_skill_that_kills_its_parent_stays_in_its_namespace(how: str, marker: str,
                                                              tmp_path: Path) -> None:
    if how == "namespace" and not namespaces_work():
        pytest.skip("no PID namespace here (unprivileged user namespaces are off)")
    result, seconds = run_escaper("kill-parent", marker, tmp_path, how=how, timeout=30)
    # Its parent is the namespace's first process, which no signal from inside reaches; its
    # setsid grandchildren die with the namespace when the step ends.
    assert result.outcome is Outcome.SUCCESS and result.outputs == {"killed": 1}, result.error
    assert seconds < 10
    assert processes_with(marker) == []


# ---------------------------------------------------------------------------------------- HTTP

class SlowServer:
    """One-connection HTTP server on 127.0.0.1 that reads the request, then either drips its
    answer a byte a second or says nothing; it notes when the client hung up."""

    ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 24\r\n\r\n"
              b'{"late": "far too late"}')

    def __init__(self, drip: bool) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/run"
        self.drip = drip
        self.hung_up = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.listener.settimeout(30)
        conn, _ = self.listener.accept()
        conn.settimeout(30)
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            if self.drip:
                for byte in self.ANSWER:  # bounded: about 100 s at most
                    try:
                        conn.sendall(bytes([byte]))
                    except OSError:
                        break
                    time.sleep(1)
            else:
                try:
                    while conn.recv(65536):
                        pass
                except OSError:
                    pass
        self.hung_up.set()

    def close(self) -> None:
        self.listener.close()


def http_skill(tmp_path: Path, url: str) -> Skill:
    where = write_skill(tmp_path, "remote", f"""
        ---
        name: remote
        description: an HTTP skill
        entrypoint: {{http: "{url}"}}
        ---
        b
        """)
    skill = load_skill(where, tmp_path).skill
    assert skill is not None
    return skill


def test_an_http_server_dripping_a_byte_a_second_cannot_hold_a_step_past_its_timeout(
        tmp_path: Path) -> None:
    server = SlowServer(drip=True)
    try:
        started = time.monotonic()
        result = SubprocessExecutor().execute(http_skill(tmp_path, server.url), {}, timeout=2,
                                              cancel=Cancel())
        seconds = time.monotonic() - started
        assert (result.outcome, result.error) == (Outcome.TIMEOUT, "timed out after 2 s")
        assert seconds < 2 + SLACK
        assert server.hung_up.wait(10), "the connection is closed, not left to drip"
    finally:
        server.close()


def test_cancel_stops_an_http_step_at_once(tmp_path: Path) -> None:
    server = SlowServer(drip=False)
    cancel = Cancel()
    timer = threading.Timer(0.5, cancel.set, args=("the run was stopped",))
    try:
        timer.start()
        started = time.monotonic()
        result = SubprocessExecutor().execute(http_skill(tmp_path, server.url), {}, timeout=60,
                                              cancel=cancel)
        seconds = time.monotonic() - started
        assert (result.outcome, result.error) == (Outcome.CANCELLED,
                                                  "cancelled: the run was stopped")
        assert seconds < 0.5 + SLACK
        assert server.hung_up.wait(10)
    finally:
        timer.cancel()
        server.close()


# ------------------------------------------------------------------------- in-process, durations

def test_cancel_stops_waiting_for_an_in_process_function(tmp_path: Path) -> None:
    where = write_skill(tmp_path, "nap", "---\nname: nap\ndescription: naps\n---\nb\n")
    skill = load_skill(where, tmp_path).skill
    assert skill is not None
    executor = InProcessExecutor({"nap": lambda: (time.sleep(5), {})[1]})
    cancel = Cancel()
    threading.Timer(0.3, cancel.set, args=("stop",)).start()
    started = time.monotonic()
    result = executor.execute(skill, {}, timeout=60, cancel=cancel)
    assert (result.outcome, result.error) == (Outcome.CANCELLED, "cancelled: stop")
    assert time.monotonic() - started < 0.3 + SLACK


@pytest.mark.parametrize("timeout", [math.inf, math.nan, -1.0, 0.0, 86_401.0])
def test_executors_take_only_finite_positive_timeouts(tmp_path: Path, timeout: float) -> None:
    skill = http_skill(tmp_path, "http://127.0.0.1:9/never")
    for executor in (SubprocessExecutor(), InProcessExecutor({"remote": dict})):
        with pytest.raises(ValueError, match="a timeout must be a finite number of seconds"):
            executor.execute(skill, {}, timeout=timeout, cancel=Cancel())


def test_a_command_that_cannot_start_is_reported_by_the_launcher(tmp_path: Path) -> None:
    where = write_skill(tmp_path, "missing", """
        ---
        name: missing
        description: names a program that is not there
        entrypoint: {command: [no-such-program-here, --flag]}
        ---
        b
        """)
    skill = load_skill(where, tmp_path).skill
    assert skill is not None
    result = SubprocessExecutor().execute(skill, {}, timeout=30, cancel=Cancel())
    assert (result.outcome, result.error, result.retryable) == (
        Outcome.ERROR, "cannot start no-such-program-here: No such file or directory", False)
