"""The skill sandbox against real skills, real files, real sockets and a real bubblewrap
(issue #26). Nothing here mocks the sandbox: each test runs a skill that tries to reach
something, and most run the same skill without the sandbox as the control, which shows that
the test would notice the reach.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skillgrove.runtime import sandbox
from skillgrove.runtime.executors import Cancel, ExecResult, SubprocessExecutor, Workspace
from skillgrove.runtime.runner import RunError, Runner
from skillgrove.skills import load_skill
from skillgrove.skills.model import Skill
from tests.helpers import write_skill

# Linux only; there the sandbox must work (.ci/setup installs bubblewrap): no skip hides it.
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the sandbox is bubblewrap's, on Linux")

# A skill that tries each path it is given: reads it, or writes a file into it.
PROBE = '''
import json, os

def run(read=(), write=(), paths=(), env=False, connect=None, connect_to=()):
    out = {"read": {}, "wrote": {}, "env": None, "connect": None, "reached": {}}
    for path in list(read) + list(paths):
        try:
            with open(path, "rb") as handle:
                out["read"][path] = handle.read(200).decode("utf-8", "replace")
        except OSError as exc:
            out["read"][path] = "denied: " + type(exc).__name__
    for path in write:
        target = os.path.join(path, "planted.txt")
        try:
            with open(target, "w") as handle:
                handle.write("planted")
            out["wrote"][path] = "wrote"
        except OSError as exc:
            out["wrote"][path] = "denied: " + type(exc).__name__
    if env:
        out["env"] = dict(os.environ)
        proc = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/environ", "rb") as handle:
                        proc[name] = handle.read().decode("utf-8", "replace")
                except OSError:
                    pass
        out["proc"] = proc
    if connect is not None:
        import socket
        try:
            with socket.create_connection(("127.0.0.1", connect), timeout=3) as sock:
                out["connect"] = sock.recv(100).decode()
        except OSError as exc:
            out["connect"] = "denied: " + type(exc).__name__
    for target in connect_to:
        import socket
        host, port = target.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=3) as sock:
                out["reached"][target] = sock.recv(100).decode()
        except OSError as exc:
            out["reached"][target] = "denied: " + type(exc).__name__
    return out
'''


def probe_skill(root: Path, name: str = "probe", effects: str = "none",
                env: tuple[str, ...] = ()) -> Skill:
    where = write_skill(root, name, f"""
        ---
        name: {name}
        description: Tries to read, write and connect to what it is given.
        inputs:
          properties:
            read: {{type: array, items: {{type: string}}}}
            write: {{type: array, items: {{type: string}}}}
            paths: {{type: array, items: {{type: string, format: path}}}}
            env: {{type: boolean}}
            connect: {{type: integer}}
            connect_to: {{type: array, items: {{type: string}}}}
        effects: {effects}
        entrypoint:
          python: main.py:run
          env: {json.dumps(list(env))}
        ---
        A probe.
        """)
    (where.parent / "main.py").write_text(PROBE)
    loaded = load_skill(where, root)
    assert loaded.skill is not None, [d.format() for d in loaded.diagnostics]
    return loaded.skill


def execute(skill: Skill, inputs: dict[str, Any], *, sandboxed: bool = True,
            environ: dict[str, str] | None = None, workspace: Workspace | None = None,
            protected: sandbox.Protected | None = None, timeout: float = 60) -> ExecResult:
    executor = SubprocessExecutor(environ=environ, sandbox=sandboxed, protected=protected)
    return executor.execute(skill, inputs, timeout=timeout, cancel=Cancel(),
                            workspace=workspace)


@pytest.fixture
def fake_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN FAKE PRIVATE KEY-----\n")
    (home / "Documents").mkdir()
    (home / "Documents" / "report.txt").write_text("quarterly numbers\n")
    return home


# ------------------------------------------------------------------------------------- files

def test_a_skill_cannot_read_the_users_ssh_keys(tmp_path: Path, fake_home: Path) -> None:
    skill = probe_skill(tmp_path / "lib")
    key = str(fake_home / ".ssh" / "id_rsa")
    environ = {**os.environ, "HOME": str(fake_home)}
    protected = sandbox.Protected(home=fake_home)
    # The control: without the sandbox the key is read, by name or through a path input.
    plain = execute(skill, {"read": [key], "paths": [key]}, sandboxed=False, environ=environ,
                    protected=protected)
    assert plain.ok and plain.outputs["read"][key].startswith("-----BEGIN FAKE"), plain.error
    boxed = execute(skill, {"read": [key, "~/.ssh/id_rsa"], "paths": [key]}, environ=environ,
                    protected=protected)
    assert boxed.ok, boxed.error
    assert boxed.sandboxed
    assert boxed.outputs["read"] == {key: "denied: FileNotFoundError",
                                     "~/.ssh/id_rsa": "denied: FileNotFoundError"}


def test_a_file_the_inputs_name_outside_hidden_places_is_readable_only(
        tmp_path: Path, fake_home: Path) -> None:
    skill = probe_skill(tmp_path / "lib")
    report = str(fake_home / "Documents" / "report.txt")
    result = execute(skill, {"paths": [report], "write": [str(fake_home / "Documents")]},
                     protected=sandbox.Protected(home=fake_home))
    assert result.ok, result.error
    assert result.outputs["read"][report] == "quarterly numbers\n"
    # The folder is not the host's: whatever the skill writes there stays in its sandbox.
    assert not (fake_home / "Documents" / "planted.txt").exists()


def test_a_skill_cannot_write_another_skills_folder_or_its_own(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    victim = probe_skill(lib, "victim")
    attacker = probe_skill(lib, "attacker", effects="[writes-files]")
    targets = [str(victim.folder), str(attacker.folder)]
    plain = execute(attacker, {"write": targets}, sandboxed=False)
    assert plain.ok and set(plain.outputs["wrote"].values()) == {"wrote"}, plain.error
    for target in targets:
        os.remove(os.path.join(target, "planted.txt"))
    # Even a skill that may write files, given the other folder as a path input, cannot.
    protected = sandbox.Protected(read_only=(lib,))
    boxed = execute(attacker, {"write": targets, "paths": [str(victim.folder / "main.py")]},
                    protected=protected)
    assert boxed.ok, boxed.error
    # Its own folder is mounted read-only; the other one's file only read-only, and whatever
    # it writes beside it lands in the sandbox's own root, never in the host's folder.
    assert boxed.outputs["wrote"][str(attacker.folder)].startswith("denied"), boxed.outputs
    assert boxed.outputs["read"][str(victim.folder / "main.py")].startswith("\nimport json")
    assert not any(Path(t, "planted.txt").exists() for t in targets)


def test_a_skill_writes_its_step_folder_and_reads_the_run_folder(tmp_path: Path) -> None:
    skill = probe_skill(tmp_path / "lib")
    run_dir = tmp_path / "runs" / "r1"
    (run_dir / "earlier").mkdir(parents=True)
    (run_dir / "earlier" / "out.txt").write_text("from an earlier step")
    step_dir = run_dir / "probe"
    result = execute(skill, {"write": [str(step_dir), str(run_dir / "earlier")],
                             "read": [str(run_dir / "earlier" / "out.txt")]},
                     workspace=Workspace(run_dir, step_dir))
    assert result.ok, result.error
    assert result.outputs["wrote"] == {str(step_dir): "wrote",
                                       str(run_dir / "earlier"): "denied: OSError"}
    assert result.outputs["read"][str(run_dir / "earlier" / "out.txt")] == "from an earlier step"
    assert (step_dir / "planted.txt").read_text() == "planted"


def test_a_skill_cannot_read_the_index_or_the_run_log(tmp_path: Path) -> None:
    from skillgrove import Skillgrove

    lib = tmp_path / "lib"
    probe_skill(lib)
    engine = Skillgrove([lib], index=tmp_path / "index", allow_effects=["all"])
    engine.run_skill("probe", {})  # the run log and a run exist now
    log = engine.index_dir / "runs.sqlite"
    assert log.exists()
    targets = [str(log), str(engine.index_dir)]
    record = engine.run_skill("probe", {"read": targets, "paths": targets})
    assert record.status == "success", record.error
    assert record.sandboxed is True
    read = record.outputs["read"]
    assert read and all(text.startswith("denied") for text in read.values()), read


# ------------------------------------------------------------------------------- environment

def test_a_skill_sees_only_the_environment_it_declares(tmp_path: Path) -> None:
    skill = probe_skill(tmp_path / "lib", env=("PROBE_DECLARED",))
    secret = secrets.token_hex(16)
    environ = {**os.environ, "SKILLGROVE_TOKEN": f"tok-{secret}", "SMTP_PASSWORD": f"pw-{secret}",
               "UNDECLARED": f"un-{secret}", "PROBE_DECLARED": "yes"}
    result = execute(skill, {"env": True}, environ=environ)
    assert result.ok, result.error
    assert result.outputs["env"]["PROBE_DECLARED"] == "yes"
    assert result.outputs["env"]["HOME"] == sandbox.SANDBOX_HOME
    seen = json.dumps(result.outputs)
    assert secret not in seen
    # Its /proc shows its own namespace only: no engine process to read.
    assert set(result.outputs["proc"]) <= {"1", "2", "3"}


@pytest.mark.parametrize("name", ["SKILLGROVE_TOKEN", "NEO4J_PASSWORD", "SMTP_PASSWORD"])
def test_an_engine_secret_cannot_be_declared(tmp_path: Path, name: str) -> None:
    where = write_skill(tmp_path, "greedy", f"""
        ---
        name: greedy
        description: Asks for a secret.
        entrypoint:
          python: main.py:run
          env: [HOME, {name}]
        ---
        b
        """)
    (where.parent / "main.py").write_text("def run():\n    return {}\n")
    loaded = load_skill(where, tmp_path)
    assert loaded.skill is None
    messages = [d.format() for d in loaded.diagnostics]
    assert any("engine-secret" in m or f"'{name}' is" in m for m in messages), messages
    assert any(":6:" in m and f"'{name}'" in m for m in messages), messages


def test_the_mail_sender_may_declare_the_mail_password(tmp_path: Path) -> None:
    where = write_skill(tmp_path, "mailer", """
        ---
        name: mailer
        description: Sends mail.
        effects: [sends-email]
        entrypoint:
          python: main.py:run
          env: [SMTP_PASSWORD]
        ---
        b
        """)
    (where.parent / "main.py").write_text("def run():\n    return {}\n")
    assert load_skill(where, tmp_path).skill is not None


def test_an_owner_listed_secret_cannot_be_declared(tmp_path: Path) -> None:
    from skillgrove.skills.loader import LoadOptions

    where = write_skill(tmp_path, "greedy", """
        ---
        name: greedy
        description: Asks for the owner's secret.
        requires: {env: [ACME_API_KEY]}
        entrypoint: {python: main.py:run}
        ---
        b
        """)
    (where.parent / "main.py").write_text("def run():\n    return {}\n")
    options = LoadOptions(environ={"SKILLGROVE_SECRETS": "OTHER, ACME_API_KEY",
                                   "ACME_API_KEY": "k"})
    loaded = load_skill(where, tmp_path, options)
    assert loaded.skill is None
    assert any("SKILLGROVE_SECRETS" in d.format() for d in loaded.diagnostics)


# ----------------------------------------------------------------------------------- network

@contextlib.contextmanager
def greeting_server() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"hello from the host")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        server.close()


def test_loopback_is_out_of_reach_without_the_network_effect(tmp_path: Path) -> None:
    skill = probe_skill(tmp_path / "lib")
    with greeting_server() as port:
        plain = execute(skill, {"connect": port}, sandboxed=False)
        assert plain.ok and plain.outputs["connect"] == "hello from the host", plain.error
        boxed = execute(skill, {"connect": port})
    assert boxed.ok, boxed.error
    assert boxed.outputs["connect"] == "denied: ConnectionRefusedError"


def test_the_network_effect_reaches_out_once_confirmed_but_never_the_hosts_loopback(
        tmp_path: Path) -> None:
    """In a user and network namespace made for the test: 127.0.0.1 stands for the host's
    loopback (the engine's API), 10.99.0.1 for the world outside (see
    tests/sandbox_network_world.py). The control, without the sandbox, reaches both."""
    import shutil

    lib = tmp_path / "lib"
    probe_skill(lib)
    probe_skill(lib, "fetcher", effects="[network]")
    unshare, ip = shutil.which("unshare"), shutil.which("ip", path=os.defpath + ":/usr/sbin:/sbin")
    assert unshare and ip, "the test needs util-linux's unshare and iproute2's ip"
    script = (f"{ip} link set lo up && {ip} addr add 10.99.0.1/32 dev lo && exec \"$0\" -m "
              f"tests.sandbox_network_world {lib} {tmp_path / 'index'}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).parent.parent)}
    env.pop("SKILLGROVE_ALLOW_EFFECTS", None)
    done = subprocess.run([unshare, "--user", "--map-root-user", "--net", "sh", "-c", script,
                           sys.executable], capture_output=True, text=True, timeout=300, env=env,
                          cwd=Path(__file__).parent.parent, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    world = json.loads(done.stdout.splitlines()[-1])
    loopback, outside, gateway = world["targets"]
    runs = world["runs"]
    hello = {loopback: "hello from 127.0.0.1", outside: "hello from 10.99.0.1"}
    # The controls: without the sandbox both are reached, effect or not.
    for skill in ("probe", "fetcher"):
        assert {k: v for k, v in runs[f"{skill}, sandbox off"]["reached"].items()
                if k != gateway} == hello, runs
    assert runs["probe, sandbox off"]["unconfirmed"] == "ran"
    # In the sandbox without the effect: nothing, its 127.0.0.1 is its own.
    boxed = runs["probe, sandbox on"]
    assert boxed["sandboxed"] is True and boxed["status"] == "success", boxed
    assert all(v.startswith("denied") for v in boxed["reached"].values()), boxed
    # With the effect: only once confirmed; then out, but never to the host's loopback.
    fetcher = runs["fetcher, sandbox on"]
    assert fetcher["unconfirmed"] == "needs confirmation"
    assert fetcher["sandboxed"] is True and fetcher["status"] == "success", fetcher
    assert fetcher["reached"][outside] == "hello from 10.99.0.1", fetcher
    assert fetcher["reached"][loopback].startswith("denied"), fetcher
    assert fetcher["reached"][gateway].startswith("denied"), fetcher


def test_a_network_skill_never_reaches_the_hosts_loopback(tmp_path: Path) -> None:
    # The same on the machine's own network (no outside address to try here): a server on the
    # host's 127.0.0.1 that the control reaches is out of reach of a confirmed network skill.
    skill = probe_skill(tmp_path / "lib", "fetcher", effects="[network]")
    with greeting_server() as port:
        plain = execute(skill, {"connect": port}, sandboxed=False)
        assert plain.ok and plain.outputs["connect"] == "hello from the host", plain.error
        boxed = execute(skill, {"connect": port, "connect_to": [f"10.0.2.2:{port}"]})
    assert boxed.ok and boxed.sandboxed, boxed.error
    assert boxed.outputs["connect"] == "denied: ConnectionRefusedError"
    assert boxed.outputs["reached"][f"10.0.2.2:{port}"].startswith("denied"), boxed.outputs


def _my_slirps() -> list[int]:
    """slirp4netns processes that are children of this process."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:]
            if comm == "slirp4netns" and int(rest.split()[1]) == os.getpid():
                found.append(int(name))
    return found


def test_a_network_skill_and_its_slirp4netns_end_at_the_timeout(tmp_path: Path) -> None:
    import time

    where = write_skill(tmp_path / "lib", "waiter", """
        ---
        name: waiter
        description: Holds its network and never answers.
        effects: [network]
        entrypoint: {command: [sh, run.sh]}
        ---
        b
        """)
    (where.parent / "run.sh").write_text("setsid sleep 60 & sleep 60\n")
    skill = load_skill(where, tmp_path / "lib").skill
    assert skill is not None
    started = time.monotonic()
    result = execute(skill, {}, timeout=2)
    assert result.outcome.value == "timeout", result.error
    assert time.monotonic() - started < 6
    assert _my_slirps() == []


def test_a_network_skill_refuses_without_slirp4netns(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # Never a silent fall back to the host's network.
    skill = probe_skill(tmp_path / "lib", "fetcher", effects="[network]")
    bwrap = sandbox.bwrap_path()
    only = tmp_path / "bin"
    only.mkdir()
    (only / "bwrap").symlink_to(bwrap)
    monkeypatch.setenv("PATH", str(only))
    result = execute(skill, {"connect": 9})
    assert not result.ok
    assert result.error is not None and "slirp4netns" in result.error \
        and "\n" not in result.error, result.error


# ----------------------------------------------------------------------------------- bytecode

VICTIM = "def run():\n    return {'who': 'victim'}\n"
PLANTER = '''
import importlib.util, marshal, os, sys

def run(victim, mtime, size):
    """Write bytecode that says 'planted' for the victim's main.py wherever Python would look:
    the cache prefix this process was given, and the __pycache__ beside the victim (its
    source's mtime and size in the header, as Python checks them)."""
    source = os.path.join(victim, "main.py")
    code = compile("def run():\\n    return {'who': 'planted'}\\n", source, "exec")
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") \\
        + int(mtime).to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little")
    written = []
    for target in (importlib.util.cache_from_source(source),
                   os.path.join(victim, "__pycache__", os.path.basename(
                       importlib.util.cache_from_source(source)))):
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(header + marshal.dumps(code))
            written.append(target)
        except OSError:
            pass
    return {"written": written, "prefix": sys.pycache_prefix}
'''


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "no-sandbox"])
def test_a_bytecode_plant_in_one_step_does_not_change_another(tmp_path: Path,
                                                              sandboxed: bool) -> None:
    lib = tmp_path / "lib"
    where = write_skill(lib, "victim", """
        ---
        name: victim
        description: Says who it is.
        entrypoint: {python: main.py:run}
        ---
        b
        """)
    (where.parent / "main.py").write_text(VICTIM)
    where = write_skill(lib, "planter", """
        ---
        name: planter
        description: Plants bytecode for another skill.
        inputs: {properties: {victim: {type: string}, mtime: {type: number},
                              size: {type: integer}}}
        entrypoint: {python: main.py:run}
        ---
        b
        """)
    (where.parent / "main.py").write_text(PLANTER)
    victim = load_skill(lib / "victim" / "SKILL.md", lib).skill
    planter = load_skill(lib / "planter" / "SKILL.md", lib).skill
    assert victim is not None and planter is not None
    executor = SubprocessExecutor(sandbox=sandboxed)
    source = (victim.folder / "main.py").stat()
    planted = executor.execute(planter, {"victim": str(victim.folder),
                                         "mtime": source.st_mtime, "size": source.st_size},
                               timeout=60, cancel=Cancel())
    assert planted.ok, planted.error
    if not sandboxed:  # outside the sandbox the folder is writable: the plant lands
        assert planted.outputs["prefix"], "each execution compiles into a cache of its own"
        assert planted.outputs["written"]
        assert not Path(planted.outputs["prefix"]).exists(), "the cache is deleted afterwards"
    again = executor.execute(victim, {}, timeout=60, cancel=Cancel())
    assert again.ok, again.error
    assert again.outputs == {"who": "victim"}


# ------------------------------------------------------------------------ refusing, records

def test_without_bubblewrap_a_run_refuses_in_one_line(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from skillgrove.groups.model import Group, Step

    skill = probe_skill(tmp_path / "lib")
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    sandbox.problem.cache_clear()
    try:
        executor = SubprocessExecutor(sandbox=True)
        why = executor.refusal()
        assert why is not None and "\n" not in why
        assert "bubblewrap" in why and "--no-sandbox" in why and "SKILLGROVE_SANDBOX=off" in why
        result = executor.execute(skill, {}, timeout=30, cancel=Cancel())
        assert not result.ok and result.error == why
        group = Group(id="g", name="g", description="d", path=tmp_path / "g.yaml",
                      content_hash="x", inputs=(), steps=(Step(id="probe", skill="probe"),),
                      outputs={})
        with pytest.raises(RunError, match="bubblewrap"):
            Runner({"g": group}, {"probe": skill}, executor).run("g", {})
    finally:
        monkeypatch.undo()
        sandbox.problem.cache_clear()


def test_the_cli_refuses_without_bubblewrap_and_runs_with_no_sandbox(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    probe_skill(lib)
    empty = tmp_path / "bin"
    empty.mkdir()
    cli = [sys.executable, "-m", "skillgrove.runtime.cli"]
    env = {**os.environ, "PATH": str(empty), "SKILLGROVE_INDEX": str(tmp_path / "index"),
           "HF_HUB_OFFLINE": "1"}
    env.pop("SKILLGROVE_SANDBOX", None)
    refused = subprocess.run([*cli, "run-skill", "probe", "--library", str(lib), "--json"],
                             env=env, capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
    assert refused.returncode != 0
    assert "bubblewrap" in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    ran = subprocess.run([*cli, "run-skill", "probe", "--library", str(lib), "--json",
                          "--no-sandbox"], env=env, capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    assert ran.returncode == 0, ran.stderr


def test_each_run_record_says_whether_it_was_sandboxed(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from skillgrove import Skillgrove

    lib = tmp_path / "lib"
    probe_skill(lib)
    engine = Skillgrove([lib], index=tmp_path / "index")
    boxed = engine.run_skill("probe", {})
    monkeypatch.setenv("SKILLGROVE_SANDBOX", "off")
    plain = engine.run_skill("probe", {})
    assert (boxed.sandboxed, plain.sandboxed) == (True, False)
    assert engine.get_run(boxed.id).sandboxed is True
    assert engine.get_run(plain.id).sandboxed is False


def test_a_new_path_opens_its_folder_with_the_library_and_index_covered(tmp_path: Path) -> None:
    from skillgrove import Skillgrove

    lib = tmp_path / "lib"
    probe_skill(lib)
    other = probe_skill(lib, "other")
    engine = Skillgrove([lib], index=tmp_path / "index", allow_effects=["all"])
    engine.run_skill("probe", {})
    log = str(engine.index_dir / "runs.sqlite")
    fresh = str(tmp_path / "fresh" / "report.csv")  # to be made: its nearest folder opens
    record = engine.run_skill("probe", {
        "paths": [fresh], "write": [str(tmp_path), str(lib)],
        "read": [log, str(other.folder / "main.py")]})
    assert record.status == "success", record.error
    assert record.outputs["wrote"][str(tmp_path)] == "wrote"
    assert (tmp_path / "planted.txt").read_text() == "planted"
    assert not (lib / "planted.txt").exists()
    assert all(v.startswith("denied") for p, v in record.outputs["read"].items()
               if p != fresh), record.outputs["read"]


@pytest.mark.parametrize("target", ["/etc/hostname", "/usr/share", "/var/tmp"])
def test_no_input_makes_the_system_writable(tmp_path: Path, target: str) -> None:
    if not os.path.exists(target):
        pytest.skip(f"{target} is not on this machine")
    skill = probe_skill(tmp_path / "lib", effects="[writes-files, deletes-files]")
    folder = target if os.path.isdir(target) else os.path.dirname(target)
    result = execute(skill, {"paths": [target], "write": [folder]})
    assert result.ok, result.error
    assert result.outputs["wrote"][folder].startswith("denied"), result.outputs
    assert not os.path.exists(os.path.join(folder, "planted.txt"))


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "no-sandbox"])
def test_bytecode_beside_the_source_is_never_run(tmp_path: Path, sandboxed: bool) -> None:
    import importlib.util
    import marshal

    where = write_skill(tmp_path / "lib", "victim", """
        ---
        name: victim
        description: Says who it is.
        entrypoint: {python: main.py:run}
        ---
        b
        """)
    source = where.parent / "main.py"
    source.write_text(VICTIM)
    # Bytecode shipped with the library (or left by anything else) that Python would take for
    # main.py: its header carries the source's mtime and size.
    st = source.stat()
    code = compile("def run():\n    return {'who': 'planted'}\n", str(source), "exec")
    cached = Path(importlib.util.cache_from_source(str(source)))
    cached.parent.mkdir()
    cached.write_bytes(importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
                       + int(st.st_mtime).to_bytes(4, "little")
                       + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little") + marshal.dumps(code))
    # The control: plain Python runs the planted bytecode.
    control = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]);"
                              " import main; print(main.run()['who'])", str(where.parent)],
                             capture_output=True, text=True, timeout=60,
                             env={k: v for k, v in os.environ.items()
                                  if not k.startswith("PYTHON")})
    assert control.stdout.strip() == "planted", control.stderr
    skill = load_skill(where, tmp_path / "lib").skill
    assert skill is not None
    for _ in range(2):
        result = execute(skill, {}, sandboxed=sandboxed)
        assert result.ok and result.outputs == {"who": "victim"}, result.error


# ---------------------------------------------------------------------- what check reports

def test_check_reports_what_the_sandbox_allows_each_skill(tmp_path: Path) -> None:
    from io import StringIO

    from skillgrove.runtime.cli import main

    lib = tmp_path / "lib"
    quiet = write_skill(lib, "quiet-mailer", """
        ---
        name: quiet-mailer
        description: Mails, but says it changes nothing.
        effects: none
        entrypoint: {python: main.py:run, env: [MAIL_TO]}
        ---
        b
        """)
    (quiet.parent / "main.py").write_text("import smtplib\n\ndef run():\n    return {}\n")
    probe_skill(lib, "fetcher", effects="[network]")
    out = StringIO()
    assert main(["check", str(lib), "--json"], out) == 0
    report = json.loads(out.getvalue())["sandbox"]
    assert report["on"] is True and report["problem"] is None
    mailer = report["skills"]["quiet-mailer"]
    assert mailer["network"] is False and mailer["env"] == ["MAIL_TO"]
    assert mailer["undeclared_effects"] == {"sends-email": "main.py:1: smtplib"}
    fetcher = report["skills"]["fetcher"]
    assert fetcher["network"] is True and fetcher["network_by"] == ["network"]
    assert fetcher["path_inputs"] == ["paths"]
    text = StringIO()
    main(["check", str(lib)], text)
    lines = text.getvalue().splitlines()
    assert "sandbox: fetcher: network: outward only, never the host's loopback (network); " \
           "env: none declared; writes: its step " \
           "folder, a private /tmp (and HOME in it); path inputs paths (files read-only; " \
           "folders and new paths writable)" in lines
    assert "  advice: quiet-mailer looks like it sends mail (main.py:1: smtplib) but does not " \
           "declare 'sends-email': in the sandbox it cannot" in lines


def test_a_library_file_is_readable_even_under_a_hidden_folder_of_home(tmp_path: Path) -> None:
    # A clone kept in ~/.local/share/...: its sample files are the library's own, not the
    # user's secrets; what else the hidden folder holds stays out.
    home = tmp_path / "home"
    lib = home / ".local" / "lib"
    skill = probe_skill(lib)
    sample = lib / "samples" / "report.txt"
    sample.parent.mkdir(parents=True)
    sample.write_text("sample numbers")
    other = home / ".local" / "token.txt"
    other.write_text("not for skills")
    protected = sandbox.Protected(read_only=(lib,), home=home)
    result = execute(skill, {"paths": [str(sample), str(other)]}, protected=protected)
    assert result.ok, result.error
    assert result.outputs["read"] == {str(sample): "sample numbers",
                                      str(other): "denied: FileNotFoundError"}
