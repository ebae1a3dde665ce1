"""Running one skill: a Python callable or a command in a subprocess, or an HTTP endpoint.

Every execution gets a wall-clock deadline, an output cap (reading stops and the tree is killed
once stdout passes it), a working directory inside the skill folder, and only the environment
variables the skill declares (``requires.env`` and ``entrypoint.env``) plus a minimal base (PATH,
HOME, LANG, TMPDIR). Cancelling (:class:`Cancel`) stops it the same way as the deadline.

In the sandbox (:mod:`skillgrove.runtime.sandbox`, the default) a skill process is started as
``bwrap ... -- ARGV`` with the skill's filtered environment, and bwrap's PID namespace holds
the tree: killing bwrap kills it all. Without the sandbox a command is not started directly
but through :mod:`skillgrove.runtime.launcher`, itself started with the skill's filtered
environment. The launcher adopts every orphaned descendant (a child
subreaper), puts the skill in a PID namespace of its own where the kernel allows it, drops the
capabilities that read other processes' memory, and at the deadline, on cancel, or when the skill
exits, kills the whole tree, ``setsid`` daemons included. This process makes itself non-dumpable
before the first launch, so the kernel refuses other processes of the same user (a skill that
walks ``/proc``) its ``/proc/<pid>/environ``. The engine stops reading when the launcher is gone
and never waits on a pipe that an escaped process holds open. An HTTP endpoint gets the same
total deadline (not one per read) and is cut off on cancel.

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
import ctypes
import functools
import http.client
import json
import math
import os
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO, Any, Protocol

from skillgrove.runtime import sandbox as sandbox_module
from skillgrove.skills import boundedjson
from skillgrove.skills.limits import DURATION_MAX_SECONDS
from skillgrove.skills.loader import run_time_validator
from skillgrove.skills.model import Skill
from skillgrove.skills.secrets import owner_listed, secret_reason

DEFAULT_TIMEOUT = 300.0
DEFAULT_OUTPUT_CAP = 10 * 1024 * 1024
EX_TEMPFAIL = 75
_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "TZ")
LAUNCHER = Path(__file__).with_name("launcher.py")
STOP_GRACE = 2.0
"""Seconds the launcher gets to kill the tree and exit before its session is killed outright."""
DRAIN_GRACE = 0.5
"""Seconds the pipes are still read after the launcher exited (then whatever holds them is
ignored)."""

# Runs inside the child: import the skill's file by path, call the function with the JSON
# inputs, print the JSON result. Errors become a JSON line on stderr's last line. It imports as
# little as it can before the skill's own code (importlib.machinery is loaded at start-up;
# importlib.util and traceback would add some 15 ms to every step). Its fourth argument, when
# not empty, is this execution's own bytecode cache: set here, after the interpreter started
# from its installation's bytecode, so the start-up modules are not compiled again each time,
# and in the environment for any Python the skill starts.
_PYTHON_SHIM = r"""
import json, sys
from importlib.machinery import ModuleSpec, SourceFileLoader
path, func, folder, pycache = sys.argv[1:5]
if pycache:
    import os
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"] = pycache
loader = SourceFileLoader("skill_entrypoint", path)
spec = ModuleSpec("skill_entrypoint", loader, origin=path)
spec.has_location = True
module = type(sys)("skill_entrypoint")
module.__spec__, module.__loader__, module.__file__ = spec, loader, path
sys.modules["skill_entrypoint"] = module
sys.path.insert(0, folder)
try:
    loader.exec_module(module)
    result = getattr(module, func)(**json.load(sys.stdin))
    sys.stdout.write(json.dumps(result, ensure_ascii=False, default=str))
except BaseException as exc:
    import traceback
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
    sandboxed: bool = False
    """The skill ran in the operating-system sandbox (:mod:`skillgrove.runtime.sandbox`)."""

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


OUTBOX_ENV = "SKILLGROVE_OUTBOX"
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


def skill_environment(skill: Skill, environ: Mapping[str, str] | None = None, *,
                      pycache: str | None = None, sandboxed: bool = False) -> dict[str, str]:
    """The environment a skill's process gets: the variables it declares (``requires.env``,
    ``entrypoint.env``) that are set, less the engine's secrets (a skill that declares one
    does not load; see :mod:`skillgrove.skills.secrets`), plus a minimal base. In the sandbox
    ``HOME`` and ``TMPDIR`` are its private ones and ``PATH`` is the engine's.

    ``pycache``: where Python compiles, a folder that is this execution's alone (bytecode found
    anywhere else, a ``__pycache__`` beside the source included, is never read). In the sandbox
    there is none: the Python installation is read-only there (its own bytecode, written by
    whoever installed it, is used as it is), and every ``__pycache__`` of the skill's folder is
    covered by an empty tmpfs of this execution (see :meth:`SubprocessExecutor.mounts`).
    """
    source = os.environ if environ is None else environ
    base = [n for n in _BASE_ENV if not (sandboxed and n in ("HOME", "TMPDIR"))]
    names = base + list(skill.requires.env)
    if skill.entrypoint is not None:
        names += list(skill.entrypoint.env)
    listed = owner_listed(source)
    env = {name: source[name] for name in names if name in source
           and secret_reason(name, effects=skill.effects, owner_listed=listed) is None}
    env.setdefault("PATH", os.defpath)
    if sandboxed:
        env["HOME"] = sandbox_module.SANDBOX_HOME
        env["TMPDIR"] = sandbox_module.SANDBOX_TMP
    env["PYTHONIOENCODING"] = "utf-8"
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if not sandboxed:
        env["PYTHONPYCACHEPREFIX"] = pycache or _NO_PYCACHE
    return env


_NO_PYCACHE = "/nonexistent/skillgrove-pycache"
"""Where a caller that gives no cache of its own sends bytecode: nowhere (it cannot be made)."""


@contextlib.contextmanager
def _private_pycache(sandboxed: bool) -> Iterator[str | None]:
    """A bytecode cache for one execution, deleted afterwards: a fresh folder (None in the
    sandbox, where the skill's ``__pycache__`` folders are covered by tmpfs instead)."""
    if sandboxed:
        yield None
        return
    folder = tempfile.mkdtemp(prefix="skillgrove-pyc-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _bytecode_folders(skill: Skill) -> tuple[Path, ...]:
    """The ``__pycache__`` folders in the skill's folder (links not followed): the sandbox covers
    each with an empty tmpfs, so the skill compiles into a cache of this execution only and no
    bytecode that came with the library (or that anything else left there) is ever run."""
    found = []
    for folder, subfolders, _ in os.walk(skill.folder):
        if "__pycache__" in subfolders:
            found.append(Path(folder) / "__pycache__")
    return tuple(found)


_OUTBOXES_LOCK = threading.Lock()
_OUTBOX_USERS: dict[str, int] = {}
"""Steps running now that have the outbox of that path mounted."""
_OUTBOXES_MADE: set[str] = set()
"""Outboxes this process made for the sandbox to mount (removed by the last user if empty)."""


@contextlib.contextmanager
def _outbox_for(skill: Skill, env: Mapping[str, str], sandboxed: bool) -> Iterator[None]:
    """For a sandboxed skill that sends mail: the outbox folder (``$SKILLGROVE_OUTBOX``) exists
    while it runs, so that the sandbox can mount it. A folder made for that is removed again
    once the last step using it has ended, if nothing was put in it (steps running side by side
    share it: none removes it under another)."""
    outbox = env.get(OUTBOX_ENV)
    if not sandboxed or not outbox or "sends-email" not in skill.effects \
            or not os.path.isabs(outbox):
        yield
        return
    with _OUTBOXES_LOCK:
        _OUTBOX_USERS[outbox] = _OUTBOX_USERS.get(outbox, 0) + 1
        if not os.path.isdir(outbox):
            with contextlib.suppress(OSError):
                Path(outbox).mkdir(mode=0o700, parents=True)
                _OUTBOXES_MADE.add(outbox)
    try:
        yield
    finally:
        with _OUTBOXES_LOCK:
            _OUTBOX_USERS[outbox] -= 1
            if not _OUTBOX_USERS[outbox]:
                del _OUTBOX_USERS[outbox]
                if outbox in _OUTBOXES_MADE:
                    _OUTBOXES_MADE.discard(outbox)
                    with contextlib.suppress(OSError):
                        Path(outbox).rmdir()  # only if nothing was put in it


def path_values(skill: Skill, inputs: Mapping[str, Any]) -> list[str]:
    """The strings of the inputs the skill declares ``format: path`` (or lists of them)."""
    found: list[str] = []
    for name, schema in skill.input_properties().items():
        if name not in inputs or not isinstance(schema, Mapping):
            continue
        items = schema.get("items")
        if schema.get("format") != "path" and not (
                isinstance(items, Mapping) and items.get("format") == "path"):
            continue
        value = inputs[name]
        values = value if isinstance(value, list) else [value]
        found += [v for v in values if isinstance(v, str)]
    return found


def check_duration(seconds: float) -> float:
    """``seconds`` as a float, if it is a usable deadline: finite, > 0 and at most a day.

    >>> check_duration(2)
    2.0
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
            or not math.isfinite(seconds) or not 0 < seconds <= DURATION_MAX_SECONDS:
        raise ValueError(f"a timeout must be a finite number of seconds in (0, "
                         f"{DURATION_MAX_SECONDS:g}], not {seconds!r}")
    return float(seconds)


@functools.cache
def hide_own_environment() -> bool:
    """Make this process non-dumpable (Linux), once: then only a process with CAP_SYS_PTRACE
    may read its ``/proc/<pid>/environ``, memory or file descriptors. Core dumps are off too.
    True when it took effect."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(4, 0, 0, 0, 0) == 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        return False


class _Tree:
    """A started skill and how to stop all of it. Unsandboxed: the launcher, and the pipe whose
    closing tells it to kill the tree. Sandboxed: bwrap itself (``control`` None), killed
    outright: the namespace's first process dies with it and the kernel kills the rest."""

    def __init__(self, proc: subprocess.Popen[bytes], control: int | None) -> None:
        self.proc = proc
        self._control: int | None = control
        self._lock = threading.Lock()
        self.stopped_at: float | None = None

    def stop(self) -> None:
        """Kill every process of the tree (the launcher does it and exits when they are gone)."""
        with self._lock:
            if self.stopped_at is not None:
                return
            self.stopped_at = time.monotonic()
            if self._control is not None:
                os.close(self._control)
                self._control = None
            else:
                self.force()

    def force(self) -> None:
        """Kill the launcher's (or bwrap's) session outright."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()


class _Connections:
    """The sockets of one HTTP call, so that another thread can cut them off."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.closed = False

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if not self.closed:
                return
        self._shut(sock)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            sockets = list(self._sockets)
        for sock in sockets:
            self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _opener(connections: _Connections) -> urllib.request.OpenerDirector:
    """A urllib opener whose every connection (redirects included) is registered."""

    def watched(base: type[http.client.HTTPConnection]) -> type[http.client.HTTPConnection]:
        class Watched(base):  # type: ignore[valid-type,misc]
            def connect(self) -> None:
                super().connect()
                connections.add(self.sock)
        return Watched

    class Http(urllib.request.HTTPHandler):
        def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
            return super().do_open(watched(http_class), req, **kwargs)

    class Https(urllib.request.HTTPSHandler):
        def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
            return super().do_open(watched(http_class), req, **kwargs)

    return urllib.request.build_opener(Http(), Https())


def validate_outputs(skill: Skill, outputs: Any) -> str | None:
    """Why ``outputs`` break the skill's output schema, or None. A schema that cannot be
    applied (a ``$ref`` to nowhere, a malformed keyword) is the skill's fault too: reported
    the same way, never raised."""
    if skill.outputs is None:
        return None if isinstance(outputs, Mapping) else "a skill must return a JSON object"
    try:
        errors = sorted(run_time_validator(skill.outputs).iter_errors(outputs),
                        key=lambda e: [(1, 0, p) if isinstance(p, str) else (0, p, "")
                                       for p in e.path])
        if not errors:
            return None
        where = ".".join(str(p) for p in errors[0].path) or "output"
        message = errors[0].message
    except Exception as exc:  # jsonschema raises many kinds for a broken schema
        return f"the skill's output schema cannot be applied: {_described(exc)}"
    return f"output does not match the declared schema at {where}: {_cut(message)}"


_MESSAGE_CHARS = 300
"""How much of a message quoting a skill's output (or a server's) an error keeps."""


def _described(exc: BaseException) -> str:
    """``Name: message``, the message cut to ``_MESSAGE_CHARS``."""
    text = _cut(str(exc))
    return type(exc).__name__ + (f": {text}" if text else "")


def _cut(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS] + "..."


def parse_outputs(data: bytes, what: str) -> tuple[dict[str, Any], str | None]:
    """A skill's JSON object from the bytes it wrote (``what``: "output", "response"), or why
    not: not UTF-8, not JSON, nested deeper or holding numbers longer than
    :mod:`skills.limits` allows (see :mod:`skills.boundedjson`), not an object."""
    try:
        outputs = boundedjson.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return {}, f"{what} is not JSON: {exc}"
    except boundedjson.JSONLimitError as exc:
        return {}, f"{what} refused: {exc}"
    except ValueError as exc:  # json.JSONDecodeError
        return {}, f"{what} is not JSON: {_cut(str(exc))}"
    if not isinstance(outputs, dict):
        return {}, ("a skill must return a JSON object" if what == "output"
                    else "the endpoint must return a JSON object")
    return outputs, None


_NS_GET_USERNS = 0xB701
"""ioctl on a namespace file: the user namespace that owns it (linux/nsfs.h)."""


def _has_user_map(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/uid_map", "rb") as handle:
            return bool(handle.read().strip())
    except OSError:
        return True  # gone: slirp4netns will say so


class _Network:
    """The outward-only network of one sandboxed execution (a skill with a network effect).

    bwrap is started with ``--info-fd`` (it writes the PID of the namespace's first process
    there) and ``--block-fd`` (it runs nothing until a byte arrives). slirp4netns then joins
    that network namespace from outside, configures a tap device and NATs its connections
    through the host, with ``--disable-host-loopback``: the host's 127.0.0.0/8 (the engine's
    API, any local service) is never reached. Only when slirp4netns says it is ready does the
    skill start. slirp4netns ends when its exit pipe closes (here, or with the engine)."""

    def __init__(self) -> None:
        self.info_read, self.info_write = os.pipe()
        self.block_read, self.block_write = os.pipe()
        self.slirp: subprocess.Popen[bytes] | None = None
        self.said: IO[bytes] | None = None
        self.exit_write: int | None = None
        self._open = [self.info_read, self.block_write]

    def bwrap_options(self) -> list[str]:
        return ["--info-fd", str(self.info_write), "--block-fd", str(self.block_read)]

    def child_ends(self) -> list[int]:
        return [self.info_write, self.block_read]

    def start(self, deadline: float, cancel: Cancel) -> str | None:
        """Give the namespace its network and let the skill start; why not, if it failed."""
        info = self._read_until(self.info_read, rb'"child-pid": *(\d+)', deadline, cancel)
        if info is None:
            return "the sandbox did not start (no namespace to give a network to)"
        slirp = sandbox_module.slirp_path()
        if slirp is None:
            return sandbox_module.network_problem()
        # bwrap says the PID before the namespace's user map is written (the child writes it
        # itself when bwrap is not setuid), and later moves its child into a nested user
        # namespace (--disable-userns): slirp4netns is given the network namespace and the
        # user namespace that owns it (NS_GET_USERNS), as open files, once the map is there.
        while not _has_user_map(info.decode()):
            if time.monotonic() > deadline or cancel.is_set():
                return "the sandbox did not start (its user namespace was never mapped)"
            time.sleep(0.002)
        try:
            netns = os.open(f"/proc/{info.decode()}/ns/net", os.O_RDONLY)
        except OSError as exc:
            return f"the sandbox ended before it had a network: {exc.strerror}"
        self._open.append(netns)
        import fcntl  # Linux, as the sandbox

        try:
            userns = fcntl.ioctl(netns, _NS_GET_USERNS)
        except OSError as exc:
            return f"cannot find the sandbox's user namespace: {exc.strerror}"
        self._open.append(userns)
        ready_read, ready_write = os.pipe()
        exit_read, self.exit_write = os.pipe()
        self._open.append(ready_read)
        self.said = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        try:
            self.slirp = subprocess.Popen(
                [slirp, *sandbox_module.SLIRP_OPTIONS, f"--ready-fd={ready_write}",
                 f"--exit-fd={exit_read}", "--netns-type=path",
                 f"--userns-path=/proc/self/fd/{userns}", f"/proc/self/fd/{netns}", "tap0"],
                pass_fds=(ready_write, exit_read, netns, userns), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=self.said, start_new_session=True)
        except OSError as exc:
            return f"cannot start slirp4netns for the sandbox's network: {exc.strerror}"
        finally:
            os.close(ready_write)
            os.close(exit_read)
        if self._read_until(ready_read, rb"(1)", deadline, cancel) is None:
            self.said.seek(0)
            said = self.said.read()[-300:]
            why = printable(said.decode("utf-8", "replace").strip().replace("\n", " / ")
                            if said.strip() else "it was not ready in time")
            return f"slirp4netns could not give the sandbox its network: {why}"
        os.write(self.block_write, b"1")
        return None

    @staticmethod
    def _read_until(fd: int, pattern: bytes, deadline: float, cancel: Cancel) -> bytes | None:
        import re

        data = b""
        while not cancel.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, 0.1))
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            data += chunk
            found = re.search(pattern, data)
            if found is not None:
                return found.group(1)
        return None

    def close(self) -> None:
        """Let go of the pipes and stop slirp4netns."""
        for fd in self._open:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._open = []
        if self.exit_write is not None:
            os.close(self.exit_write)
            self.exit_write = None
        if self.slirp is not None:
            try:
                self.slirp.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.slirp.kill()
                self.slirp.wait()
            self.slirp = None
        if self.said is not None:
            self.said.close()
            self.said = None


class SubprocessExecutor:
    """Python and command entrypoints in a subprocess; HTTP entrypoints with urllib.

    ``sandbox``: run each skill process in the operating-system sandbox
    (:mod:`skillgrove.runtime.sandbox`); None (the default) means yes unless
    ``SKILLGROVE_SANDBOX=off`` in ``environ``. Where the sandbox is wanted but cannot start, a
    step fails with the one-line reason and its fix, and nothing runs. ``protected``: what a
    path named in a step's inputs may not open up in the sandbox (the engine's folders, the
    library); the user's home is always protected.

    ``pid_namespace=False`` keeps an unsandboxed skill in this process's PID namespace (the
    launcher still adopts and kills its whole tree); by default a namespace is used wherever
    the kernel allows. A sandboxed skill always has one.
    """

    def __init__(self, *, output_cap: int = DEFAULT_OUTPUT_CAP, python: str = sys.executable,
                 environ: Mapping[str, str] | None = None, pid_namespace: bool = True,
                 sandbox: bool | None = None,
                 protected: sandbox_module.Protected | None = None) -> None:
        self.output_cap = output_cap
        self.python = python
        self.environ = environ
        self.pid_namespace = pid_namespace
        self.sandbox = sandbox if sandbox is not None else sandbox_module.sandbox_wanted(environ)
        self.protected = protected or sandbox_module.Protected(home=Path.home())

    def refusal(self) -> str | None:
        """Why no skill process can run (the sandbox is wanted and cannot start), or None."""
        return sandbox_module.problem() if self.sandbox else None

    def execute(self, skill: Skill, inputs: Mapping[str, Any], *, timeout: float | None,
                cancel: Cancel, workspace: Workspace | None = None) -> ExecResult:
        entry = skill.entrypoint
        if entry is None:
            return ExecResult(Outcome.ERROR, error=f"skill '{skill.name}' is instruction-only")
        limit = check_duration(timeout if timeout is not None
                               else entry.timeout or DEFAULT_TIMEOUT)
        started = time.perf_counter()
        sandboxed = False
        if entry.kind == "http":
            result = self._http_within(entry.target, entry.method, dict(entry.headers), inputs,
                                       limit, cancel)
        else:
            if self.sandbox:
                reason = sandbox_module.problem()
                if reason is not None:
                    return ExecResult(Outcome.ERROR, error=reason)
                sandboxed = True
            with _private_pycache(sandboxed) as pycache:
                env = skill_environment(skill, self.environ, pycache=pycache,
                                        sandboxed=sandboxed)
                if entry.kind == "python":
                    # The shim sets the cache once the interpreter has started (see above).
                    env.pop("PYTHONPYCACHEPREFIX", None)
                    file, func = entry.target.rsplit(":", 1)
                    argv = [self.python, "-c", _PYTHON_SHIM, str(skill.folder / file), func,
                            str(skill.folder), pycache or ""]
                else:
                    argv = list(entry.argv)
                if workspace is not None:
                    env.update(workspace.environment())
                with _outbox_for(skill, env, sandboxed):
                    network = False
                    if sandboxed:
                        argv, network = self._sandboxed(argv, skill, inputs, workspace, env)
                    refused = sandbox_module.network_problem() if network else None
                    if refused is not None:  # never the host's network instead
                        result = ExecResult(Outcome.ERROR, error=refused)
                    else:
                        result = self._process(argv, skill, env, inputs, limit, cancel,
                                               namespace=self.pid_namespace and not sandboxed,
                                               sandboxed=sandboxed, network=network)
        seconds = time.perf_counter() - started
        if result.ok:
            problem = validate_outputs(skill, result.outputs)
            if problem:
                return ExecResult(Outcome.ERROR, result.outputs, problem, False, seconds,
                                  result.stderr_tail, sandboxed)
        return ExecResult(result.outcome, result.outputs, result.error, result.retryable,
                          seconds, result.stderr_tail, sandboxed)

    def mounts(self, skill: Skill, inputs: Mapping[str, Any],
               workspace: Workspace | None, env: Mapping[str, str]) -> sandbox_module.Mounts:
        """What the sandbox opens to this execution (see :mod:`skillgrove.runtime.sandbox`)."""
        writes = bool({"writes-files", "deletes-files"} & set(skill.effects))
        read: list[sandbox_module.Bind] = []
        write: list[sandbox_module.Bind] = []
        if workspace is not None:
            read.append((workspace.run_dir, workspace.run_dir))
            workspace.step_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            write.append((workspace.step_dir, workspace.step_dir))
        outbox = env.get(OUTBOX_ENV)
        if outbox and "sends-email" in skill.effects and os.path.isdir(outbox):
            write.append((Path(os.path.realpath(outbox)), Path(outbox)))
        more_read, more_write, refused = sandbox_module.input_mounts(
            path_values(skill, inputs), writes_files=writes,
            run_dir=workspace.run_dir if workspace is not None else None,
            protected=self.protected)
        return sandbox_module.Mounts(tuple(read + more_read), tuple(write + more_write),
                                     network=bool(sandbox_module.NETWORK_EFFECTS
                                                  & set(skill.effects)),
                                     refused=tuple(refused),
                                     masked=self.protected.masked + _bytecode_folders(skill))

    def _sandboxed(self, argv: list[str], skill: Skill, inputs: Mapping[str, Any],
                   workspace: Workspace | None, env: Mapping[str, str]) -> tuple[list[str], bool]:
        """The bwrap command line for ``argv``, and whether it wants a network."""
        mounts = self.mounts(skill, inputs, workspace, env)
        return sandbox_module.command(sandbox_module.bwrap_path(), argv, folder=skill.folder,
                                      mounts=mounts,
                                      interpreters=sandbox_module.interpreter_roots(
                                          self.python)), mounts.network

    def _process(self, argv: list[str], skill: Skill, env: Mapping[str, str],
                 inputs: Mapping[str, Any], limit: float, cancel: Cancel, *,
                 namespace: bool = True, sandboxed: bool = False,
                 network: bool = False) -> ExecResult:
        """Run ``argv`` (a bwrap command line when ``sandboxed``) with exactly ``env``. In the
        sandbox bwrap is started directly: it is the namespace's parent, and killing it kills
        the namespace; otherwise the launcher holds the tree. ``network``: bwrap waits until
        slirp4netns has given its namespace the outward-only network (:class:`_Network`)."""
        hide_own_environment()
        pipes: list[int] = []  # the child's ends, closed here once it started
        net: _Network | None = None
        if sandboxed:
            control, stop_pipe = None, None
            if network:
                net = _Network()
                argv = [argv[0], *net.bwrap_options(), *argv[1:]]
                pipes += net.child_ends()
            launch = argv
        else:
            control, stop_pipe = os.pipe()
            pipes.append(control)
            launch = [sys.executable or self.python, "-I", "-S", str(LAUNCHER), str(control),
                      *([] if namespace else ["--no-namespace"]), "--", *argv]
        try:
            proc = subprocess.Popen(
                launch, cwd=skill.folder, env=dict(env), pass_fds=tuple(pipes),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True)
        except OSError as exc:
            for fd in (stop_pipe,):
                if fd is not None:
                    os.close(fd)
            if net is not None:
                net.close()
            return ExecResult(Outcome.ERROR, error=f"cannot start {launch[0]}: {exc.strerror}")
        finally:
            for fd in pipes:
                os.close(fd)
        tree = _Tree(proc, stop_pipe)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            tree.stop()

        cancel.on_cancel(kill)
        deadline = time.monotonic() + limit
        stdout = bytearray()
        stderr = bytearray()
        network_error: str | None = None
        try:
            if net is not None:
                network_error = net.start(deadline, cancel)
                if network_error is not None:
                    tree.stop()
            payload = json.dumps(dict(inputs), ensure_ascii=False).encode()
            over_cap = False if network_error is not None else self._collect(
                tree, payload, stdout, stderr, deadline, kill)
        finally:
            cancel.on_cancel(None)
            tree.stop()
            try:
                proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                tree.force()
                proc.wait()
            if net is not None:
                net.close()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                with contextlib.suppress(OSError):
                    pipe.close()  # type: ignore[union-attr]
        tail = bytes(stderr).decode("utf-8", "replace")
        if network_error is not None and not cancel.is_set():
            return ExecResult(Outcome.ERROR, error=network_error, retryable=True)
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
        outputs, problem = parse_outputs(bytes(stdout), "output")
        if problem is not None:
            return ExecResult(Outcome.ERROR, error=problem, stderr_tail=tail[-2000:])
        return ExecResult(Outcome.SUCCESS, outputs, stderr_tail=tail[-2000:])

    def _collect(self, tree: _Tree, payload: bytes, stdout: bytearray, stderr: bytearray,
                 deadline: float, kill: Callable[[], None]) -> bool:
        """Write ``payload`` to the skill's stdin and read its stdout and stderr (the last
        64 KiB of it) until the launcher has exited and the pipes ended (or, should something
        outside the tree hold them, a little later), or stdout passes the cap (True). Stops
        the tree at the deadline."""
        proc = tree.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stdin = proc.stdin.fileno()
        os.set_blocking(stdin, False)
        pending = memoryview(payload)
        with selectors.DefaultSelector() as selector:
            selector.register(stdin, selectors.EVENT_WRITE)
            selector.register(proc.stdout.fileno(), selectors.EVENT_READ, stdout)
            selector.register(proc.stderr.fileno(), selectors.EVENT_READ, stderr)
            gone_at: float | None = None
            while True:
                now = time.monotonic()
                if now >= deadline:
                    kill()
                if tree.stopped_at is not None and now > tree.stopped_at + STOP_GRACE:
                    tree.force()
                if gone_at is None and proc.poll() is not None:
                    gone_at = now
                if gone_at is not None and (not selector.get_map()
                                            or now > gone_at + DRAIN_GRACE):
                    break  # whatever still holds a pipe escaped the tree: do not wait for it
                if not selector.get_map():
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(0.05)
                    continue
                for key, _ in selector.select(timeout=0.05):
                    if key.fd == stdin:
                        try:
                            pending = pending[os.write(stdin, pending[:65536]):]
                        except BlockingIOError:
                            continue
                        except OSError:  # the skill closed its stdin or exited: fine
                            pending = pending[:0]
                        if not pending:
                            selector.unregister(stdin)
                            proc.stdin.close()
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fd)
                        continue
                    buffer: bytearray = key.data
                    buffer.extend(chunk)
                    if buffer is stderr:
                        del stderr[:-65536]
                    elif len(stdout) > self.output_cap:
                        kill()
                        return True
        return False

    def _http_within(self, url: str, method: str, headers: dict[str, str],
                     inputs: Mapping[str, Any], limit: float, cancel: Cancel) -> ExecResult:
        """:meth:`_http` with one deadline for the whole call (connecting, sending, every read)
        and cancellation: at either, the connection is shut and the call returns at once."""
        connections = _Connections()
        done = threading.Event()
        box: list[ExecResult] = []

        def call() -> None:
            try:
                box.append(self._http(url, method, headers, inputs, limit, _opener(connections)))
            except Exception as exc:  # reported as the step's failure, not lost in the thread
                box.append(ExecResult(Outcome.ERROR, error=f"{type(exc).__name__}: {exc}"))
            finally:
                done.set()

        cancel.on_cancel(done.set)
        try:
            worker = threading.Thread(target=call, name=f"http {url}", daemon=True)
            worker.start()
            done.wait(limit)
        finally:
            cancel.on_cancel(None)
        if cancel.is_set():
            connections.close()
            return ExecResult(Outcome.CANCELLED, error=_cancelled(cancel))
        if not box:
            connections.close()
            return ExecResult(Outcome.TIMEOUT, error=f"timed out after {limit:g} s",
                              retryable=True)
        return box[0]

    def _http(self, url: str, method: str, headers: dict[str, str], inputs: Mapping[str, Any],
              limit: float, opener: urllib.request.OpenerDirector | None = None) -> ExecResult:
        body = json.dumps(dict(inputs), ensure_ascii=False).encode()
        request = urllib.request.Request(url, data=body, method=method, headers={
            "Content-Type": "application/json", "Accept": "application/json", **headers})
        try:
            with (opener or urllib.request.build_opener()).open(request, timeout=limit) \
                    as response:
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
        except http.client.RemoteDisconnected:
            return ExecResult(Outcome.ERROR, error=f"{url} closed the connection without an "
                              "HTTP response", retryable=True)
        except http.client.BadStatusLine as exc:
            return ExecResult(Outcome.ERROR, error=f"{url} did not answer with an HTTP status "
                              f"line (it sent {_cut(str(exc))!r})")
        except http.client.HTTPException as exc:  # a header line too long, too many headers
            return ExecResult(Outcome.ERROR, error=f"{url} sent a malformed HTTP response: "
                              f"{_described(exc)}")
        except ConnectionError as exc:  # reset while the answer was read
            return ExecResult(Outcome.ERROR, error=f"the connection to {url} failed while "
                              f"reading the response: {exc.strerror or type(exc).__name__}",
                              retryable=True)
        except OSError as exc:
            return ExecResult(Outcome.ERROR, error=f"the request to {url} failed: "
                              f"{exc.strerror or type(exc).__name__}")
        if len(data) > self.output_cap:
            return ExecResult(Outcome.ERROR, error=f"response exceeded the {self.output_cap:,}"
                              "-byte cap")
        outputs, problem = parse_outputs(data, "response")
        if problem is not None:
            return ExecResult(Outcome.ERROR, error=problem)
        return ExecResult(Outcome.SUCCESS, outputs)


_BWRAP_EXEC = "bwrap: execvp "


def _cancelled(cancel: Cancel) -> str:
    return "cancelled" + (f": {cancel.reason}" if cancel.reason else "")


def _error_from_stderr(stderr: str, code: int) -> tuple[str, bool]:
    """The step's error from what the skill wrote last on stderr, made printable: a skill's text
    reaches terminals (``skillgrove run``), logs and agents, so no control or format character
    of it (an escape sequence, a bidi override) is passed on as it is."""
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    if code == 1 and last.startswith(_BWRAP_EXEC):  # the sandbox found no such program
        program, _, why = last[len(_BWRAP_EXEC):].partition(": ")
        return printable(f"cannot start {program}: {why}"), False
    if last.startswith('{"__skill_error__"'):
        try:
            data = json.loads(last)
            return printable(str(data["__skill_error__"])), bool(data.get("retryable"))
        except (json.JSONDecodeError, KeyError):
            pass
    message = f"exited with code {code}" + (f": {last[:300]}" if last else "")
    return printable(message), code == EX_TEMPFAIL


def printable(text: str) -> str:
    r"""``text`` with control characters (C0, DEL, C1), format characters (zero-width, bidi
    controls) and lone surrogates written as escapes (``\x1b``, ``\u202e``).

    >>> printable("\x1b[2Jred\u202e")
    '\\x1b[2Jred\\u202e'
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == " " else ascii(ch)[1:-1] for ch in text)


class InProcessExecutor:
    """Runs registered Python functions in this process: for tests, benchmarks and embedding.
    A function cannot be killed: with a timeout it runs in a thread of its own, and at the
    timeout or on cancel the step ends while the function runs on, its result discarded
    (without a timeout a cancel is noticed when it returns). It gets no :class:`Workspace` (the
    environment is the process's own).

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
            limit = check_duration(timeout)
            done = threading.Event()

            def run() -> None:
                call()
                done.set()

            cancel.on_cancel(done.set)
            try:
                worker = threading.Thread(target=run, daemon=True)
                worker.start()
                done.wait(limit)
            finally:
                cancel.on_cancel(None)
            if worker.is_alive() and not cancel.is_set():
                return ExecResult(Outcome.TIMEOUT, error=f"timed out after {limit:g} s",
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
        problem = boundedjson.value_problem(value) or validate_outputs(skill, value)
        if problem:
            return ExecResult(Outcome.ERROR, error=problem, seconds=seconds)
        return ExecResult(Outcome.SUCCESS, dict(value or {}), seconds=seconds)

