"""Running one skill: a Python callable or a command in a subprocess, or an HTTP endpoint.

Every execution gets a timeout that kills the whole process tree (the child runs in its own
session, and the session's process group is killed), an output cap (reading stops and the tree is
killed once stdout passes it), a working directory inside the skill folder, and only the
environment variables the skill declares (``requires.env`` and ``entrypoint.env``) plus a minimal
base (PATH, HOME, LANG, TMPDIR). Cancelling (:class:`Cancel`) kills the tree the same way.

Inside a run, a skill also gets its :class:`Workspace`: ``SKILLGROVE_RUN_DIR`` (the run's own
folder) and ``SKILLGROVE_STEP_DIR`` (this step's folder inside it, which exists). A skill that
writes files writes them there unless its inputs name another place; the folder outlives the run,
so a resumed run still finds them.

A failure is *retryable* when the skill says so: a Python skill raises an exception whose class
name ends in ``RetryableError`` (or ``ConnectionError``/``TimeoutError``), a command exits with
75 (EX_TEMPFAIL), an HTTP endpoint answers 429, 502, 503 or 504.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from jsonschema import Draft202012Validator

from skillgrove.skills.model import Skill

DEFAULT_TIMEOUT = 300.0
DEFAULT_OUTPUT_CAP = 10 * 1024 * 1024
EX_TEMPFAIL = 75
_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "TZ")

# Runs inside the child: import the skill's file by path, call the function with the JSON
# inputs, print the JSON result. Errors become a JSON line on stderr's last line.
_PYTHON_SHIM = r"""
import importlib.util, json, sys, traceback
path, func = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("skill_entrypoint", path)
module = importlib.util.module_from_spec(spec)
sys.path.insert(0, sys.argv[3])
try:
    spec.loader.exec_module(module)
    result = getattr(module, func)(**json.load(sys.stdin))
    sys.stdout.write(json.dumps(result, ensure_ascii=False, default=str))
except BaseException as exc:
    name = type(exc).__name__
    retryable = name.endswith("RetryableError") or isinstance(exc, (ConnectionError, TimeoutError))
    sys.stderr.write(traceback.format_exc()[-4000:])
    sys.stderr.write("\n" + json.dumps({"__skill_error__": f"{name}: {exc}", "retryable": retryable}))
    sys.exit(3)
"""


class Outcome(StrEnum):
    SUCCESS = "success"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class ExecResult:
    outcome: Outcome
    outputs: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    retryable: bool = False
    seconds: float = 0.0
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.SUCCESS


class Cancel:
    """A cancellation flag an executor checks, with the process to kill when it is set.

    >>> cancel = Cancel()
    >>> cancel.set("another step failed")
    >>> cancel.is_set(), cancel.reason
    (True, 'another step failed')
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._kill: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self.reason: str | None = None
        """Why it was cancelled (the first reason given)."""

    def set(self, reason: str | None = None) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason
            self._event.set()
            if self._kill is not None:
                self._kill()

    def is_set(self) -> bool:
        return self._event.is_set()

    def on_cancel(self, kill: Callable[[], None] | None) -> None:
        with self._lock:
            self._kill = kill
            if kill is not None and self._event.is_set():
                kill()


RUN_DIR_ENV = "SKILLGROVE_RUN_DIR"
STEP_DIR_ENV = "SKILLGROVE_STEP_DIR"


@dataclass(frozen=True)
class Workspace:
    """Where a step of a run writes: the run's folder and the step's own folder inside it
    (``<run>/<step>``, ``<run>/<step>/<sub-step>`` in a sub-group)."""

    run_dir: Path
    step_dir: Path

    def environment(self) -> dict[str, str]:
        return {RUN_DIR_ENV: str(self.run_dir), STEP_DIR_ENV: str(self.step_dir)}


class Executor(Protocol):
    def execute(self, skill: Skill, inputs: Mapping[str, Any], *, timeout: float | None,
                cancel: Cancel, workspace: Workspace | None = None) -> ExecResult: ...


def skill_environment(skill: Skill, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    source = os.environ if environ is None else environ
    names = list(_BASE_ENV) + list(skill.requires.env)
    if skill.entrypoint is not None:
        names += list(skill.entrypoint.env)
    env = {name: source[name] for name in names if name in source}
    env.setdefault("PATH", os.defpath)
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def validate_outputs(skill: Skill, outputs: Any) -> str | None:
    """Why ``outputs`` break the skill's output schema, or None."""
    if skill.outputs is None:
        return None if isinstance(outputs, Mapping) else "a skill must return a JSON object"
    errors = sorted(Draft202012Validator(dict(skill.outputs)).iter_errors(outputs),
                    key=lambda e: list(e.path))
    if not errors:
        return None
    where = ".".join(str(p) for p in errors[0].path) or "output"
    return f"output does not match the declared schema at {where}: {errors[0].message}"


class SubprocessExecutor:
    """Python and command entrypoints in a subprocess; HTTP entrypoints with urllib."""

    def __init__(self, *, output_cap: int = DEFAULT_OUTPUT_CAP, python: str = sys.executable,
                 environ: Mapping[str, str] | None = None) -> None:
        self.output_cap = output_cap
        self.python = python
        self.environ = environ

    def execute(self, skill: Skill, inputs: Mapping[str, Any], *, timeout: float | None,
                cancel: Cancel, workspace: Workspace | None = None) -> ExecResult:
        entry = skill.entrypoint
        if entry is None:
            return ExecResult(Outcome.ERROR, error=f"skill '{skill.name}' is instruction-only")
        limit = timeout or entry.timeout or DEFAULT_TIMEOUT
        started = time.perf_counter()
        if entry.kind == "http":
            result = self._http(entry.target, entry.method, dict(entry.headers), inputs, limit)
        else:
            if entry.kind == "python":
                file, func = entry.target.rsplit(":", 1)
                argv = [self.python, "-c", _PYTHON_SHIM, str(skill.folder / file), func,
                        str(skill.folder)]
            else:
                argv = list(entry.argv)
            env = skill_environment(skill, self.environ)
            if workspace is not None:
                env.update(workspace.environment())
            result = self._process(argv, skill, env, inputs, limit, cancel)
        seconds = time.perf_counter() - started
        if result.ok:
            problem = validate_outputs(skill, result.outputs)
            if problem:
                return ExecResult(Outcome.ERROR, result.outputs, problem, False, seconds,
                                  result.stderr_tail)
        return ExecResult(result.outcome, result.outputs, result.error, result.retryable,
                          seconds, result.stderr_tail)

    def _process(self, argv: list[str], skill: Skill, env: Mapping[str, str],
                 inputs: Mapping[str, Any], limit: float, cancel: Cancel) -> ExecResult:
        try:
            proc = subprocess.Popen(
                argv, cwd=skill.folder, env=dict(env),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True)
        except OSError as exc:
            return ExecResult(Outcome.ERROR, error=f"cannot start {argv[0]}: {exc.strerror}")
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

        cancel.on_cancel(kill)
        timer = threading.Timer(limit, kill)
        timer.daemon = True
        timer.start()
        stdout = bytearray()
        stderr = bytearray()
        over_cap = False

        def drain_stderr() -> None:
            assert proc.stderr is not None
            for chunk in iter(lambda: proc.stderr.read(65536), b""):  # type: ignore[union-attr]
                stderr.extend(chunk)
                del stderr[:-65536]

        err_thread = threading.Thread(target=drain_stderr, daemon=True)
        err_thread.start()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(json.dumps(dict(inputs), ensure_ascii=False).encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass
            while True:
                chunk = proc.stdout.read(65536)
                if not chunk:
                    break
                stdout.extend(chunk)
                if len(stdout) > self.output_cap:
                    over_cap = True
                    kill()
                    break
            proc.wait()
        finally:
            timer.cancel()
            cancel.on_cancel(None)
            # The tree may still hold the pipes (a grandchild); make sure it is gone.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            err_thread.join(timeout=2)
        tail = bytes(stderr).decode("utf-8", "replace")
        if cancel.is_set():
            return ExecResult(Outcome.CANCELLED, error=_cancelled(cancel),
                              stderr_tail=tail[-2000:])
        if over_cap:
            return ExecResult(Outcome.ERROR, error=f"output exceeded the {self.output_cap:,}-byte "
                              "cap; the process was killed", stderr_tail=tail[-2000:])
        if killed.is_set():
            return ExecResult(Outcome.TIMEOUT, error=f"timed out after {limit:g} s; the process "
                              "tree was killed", retryable=True, stderr_tail=tail[-2000:])
        if proc.returncode != 0:
            message, retryable = _error_from_stderr(tail, proc.returncode)
            return ExecResult(Outcome.ERROR, error=message, retryable=retryable,
                              stderr_tail=tail[-2000:])
        try:
            outputs = json.loads(bytes(stdout).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return ExecResult(Outcome.ERROR, error=f"output is not JSON: {exc}",
                              stderr_tail=tail[-2000:])
        if not isinstance(outputs, dict):
            return ExecResult(Outcome.ERROR, error="a skill must return a JSON object",
                              stderr_tail=tail[-2000:])
        return ExecResult(Outcome.SUCCESS, outputs, stderr_tail=tail[-2000:])

    def _http(self, url: str, method: str, headers: dict[str, str], inputs: Mapping[str, Any],
              limit: float) -> ExecResult:
        body = json.dumps(dict(inputs), ensure_ascii=False).encode()
        request = urllib.request.Request(url, data=body, method=method, headers={
            "Content-Type": "application/json", "Accept": "application/json", **headers})
        try:
            with urllib.request.urlopen(request, timeout=limit) as response:
                data = response.read(self.output_cap + 1)
        except urllib.error.HTTPError as exc:
            return ExecResult(Outcome.ERROR, error=f"HTTP {exc.code} from {url}",
                              retryable=exc.code in (429, 502, 503, 504))
        except TimeoutError:
            return ExecResult(Outcome.TIMEOUT, error=f"timed out after {limit:g} s",
                              retryable=True)
        except urllib.error.URLError as exc:
            return ExecResult(Outcome.ERROR, error=f"cannot reach {url}: {exc.reason}",
                              retryable=True)
        if len(data) > self.output_cap:
            return ExecResult(Outcome.ERROR, error=f"response exceeded the {self.output_cap:,}"
                              "-byte cap")
        try:
            outputs = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return ExecResult(Outcome.ERROR, error=f"response is not JSON: {exc}")
        if not isinstance(outputs, dict):
            return ExecResult(Outcome.ERROR, error="the endpoint must return a JSON object")
        return ExecResult(Outcome.SUCCESS, outputs)


def _cancelled(cancel: Cancel) -> str:
    return "cancelled" + (f": {cancel.reason}" if cancel.reason else "")


def _error_from_stderr(stderr: str, code: int) -> tuple[str, bool]:
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    if last.startswith('{"__skill_error__"'):
        try:
            data = json.loads(last)
            return str(data["__skill_error__"]), bool(data.get("retryable"))
        except (json.JSONDecodeError, KeyError):
            pass
    message = f"exited with code {code}" + (f": {last[:300]}" if last else "")
    return message, code == EX_TEMPFAIL


class InProcessExecutor:
    """Runs registered Python functions in this process: for tests, benchmarks and embedding.
    A function cannot be killed: a cancelled run waits for it to return. It gets no
    :class:`Workspace` (the environment is the process's own).

    >>> executor = InProcessExecutor({"add": lambda a, b: {"sum": a + b}})
    """

    def __init__(self, functions: Mapping[str, Callable[..., Mapping[str, Any]]]) -> None:
        self.functions = dict(functions)

    def execute(self, skill: Skill, inputs: Mapping[str, Any], *, timeout: float | None,
                cancel: Cancel, workspace: Workspace | None = None) -> ExecResult:
        func = self.functions.get(skill.name)
        if func is None:
            return ExecResult(Outcome.ERROR, error=f"no function registered for '{skill.name}'")
        started = time.perf_counter()
        result: dict[str, Any] = {}

        def call() -> None:
            try:
                result["value"] = func(**inputs)
            except BaseException as exc:  # reported, not raised: it is the skill's failure
                result["error"] = exc

        if timeout is None:
            call()
        else:
            worker = threading.Thread(target=call, daemon=True)
            worker.start()
            worker.join(timeout)
            if worker.is_alive():
                return ExecResult(Outcome.TIMEOUT, error=f"timed out after {timeout:g} s",
                                  retryable=True, seconds=time.perf_counter() - started)
        seconds = time.perf_counter() - started
        if cancel.is_set():
            return ExecResult(Outcome.CANCELLED, error=_cancelled(cancel), seconds=seconds)
        if "error" in result:
            exc = result["error"]
            name = type(exc).__name__
            retryable = name.endswith("RetryableError") or isinstance(
                exc, ConnectionError | TimeoutError)
            return ExecResult(Outcome.ERROR, error=f"{name}: {exc}", retryable=retryable,
                              seconds=seconds)
        value = result.get("value")
        problem = validate_outputs(skill, value)
        if problem:
            return ExecResult(Outcome.ERROR, error=problem, seconds=seconds)
        return ExecResult(Outcome.SUCCESS, dict(value or {}), seconds=seconds)

