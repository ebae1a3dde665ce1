"""Stopping a run: SIGINT and SIGTERM to ``skillgrove run`` (a real process, a real skill
subprocess), :meth:`Runner.cancel` and the caller's ``stop`` event. Each leaves no process
behind and a run recorded as ``cancelled`` that ``--resume`` completes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from skillgrove.graph.runlog import SqliteRunLog
from skillgrove.groups import load_library
from skillgrove.runtime.executors import SubprocessExecutor
from skillgrove.runtime.runner import EventRecorder, Runner, RunOptions
from tests.helpers import write_group, write_skill

NAP = """
import os, time
from pathlib import Path

def run(seconds=0, pid_file=""):
    if pid_file:
        # Written whole, then renamed: the test never reads half a pid.
        Path(pid_file + ".tmp").write_text(str(os.getpid()))
        os.replace(pid_file + ".tmp", pid_file)
    time.sleep(seconds)
    Path(os.environ["SKILLGROVE_STEP_DIR"], "woke.txt").write_text("awake")
    return {"pid": os.getpid()}
"""


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    path = write_skill(root / "skills", "nap", """
        ---
        name: nap
        description: sleep a while, then say so
        entrypoint: {python: "main.py:run"}
        inputs:
          properties:
            seconds: {type: number}
            pid_file: {type: string, format: path}
        outputs:
          properties:
            pid: {type: integer}
        ---
        Sleeps.
        """)
    (path.parent / "main.py").write_text(NAP)
    write_group(root, "sleepy.yaml", """
        id: sleepy
        description: Nap briefly, then nap long.
        examples: [take a nap]
        inputs:
          seconds: {type: number, default: 60}
          pid_file: {type: string, required: true}
        steps:
          - id: first
            skill: nap
          - id: second
            skill: nap
            needs: [first]
            with: {seconds: "${{ inputs.seconds }}", pid_file: "${{ inputs.pid_file }}"}
        outputs:
          pid: ${{ steps.second.outputs.pid }}
        """)
    return root


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def wait_for_pid(pid_file: Path, proc: subprocess.Popen[str] | None = None) -> int:
    deadline = time.monotonic() + 60
    while not pid_file.exists():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run ended first: {proc.communicate()}")
        assert time.monotonic() < deadline, "the slow step never started"
        time.sleep(0.05)
    return outside_pid(int(pid_file.read_text()), str(pid_file.parent))


def outside_pid(pid: int, marker: str) -> int:
    """The pid in this process's view of the skill that wrote ``pid``: a skill may run in a PID
    namespace of its own, where its pid is another (the innermost in its ``NSpid`` line)."""
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        nspid = [line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")]
        if nspid and nspid[0][-1] == str(pid) and marker.encode() in cmdline:
            return int(entry.name)
    return pid


def skillgrove(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skillgrove.runtime.cli", *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_cancels_the_run_kills_the_skill_and_resume_completes_it(
        library: Path, tmp_path: Path, signum: int, code: int) -> None:
    index = str(tmp_path / "idx")
    pid_file = tmp_path / "nap.pid"
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillgrove.runtime.cli", "run", "sleepy", "--library",
         str(library), "--index", index, "--input", f"pid_file={pid_file}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"})
    child = wait_for_pid(pid_file, proc)
    sent = time.monotonic()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 10, "the runner must not wait for the slow step"
    assert proc.returncode == code, err
    name = signal.Signals(signum).name
    assert f"  stop  second: cancelled: interrupted by {name}" in err
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the skill's process must die with the run"

    listing = skillgrove("runs", "--index", index)
    run_id = listing.stdout.split()[0]
    assert "cancelled" in listing.stdout
    record = json.loads(skillgrove("runs", "show", run_id, "--index", index).stdout)
    assert record["status"] == "cancelled"
    assert record["error"] == f"cancelled: interrupted by {name}"
    assert [s["status"] for s in record["steps"]] == ["success", "cancelled"]
    assert f"--resume {run_id}" in err

    pid_file.unlink()  # a file that exists is mounted read-only for a skill without writes-files
    resumed = skillgrove("run", "sleepy", "--library", str(library), "--index", index,
                         "--resume", run_id, "--input", "seconds=0")
    assert resumed.returncode == 0, resumed.stderr
    assert f"  ok    first 0.00 s (reused from run {run_id})" in resumed.stderr
    assert json.loads(resumed.stdout)["pid"] != child


def runner_for(library: Path, tmp_path: Path, **kw: object) -> tuple[Runner, SqliteRunLog]:
    loaded = load_library([library])
    assert not loaded.errors, [d.format() for d in loaded.errors]
    log = SqliteRunLog(tmp_path / "runs.sqlite")
    runner = Runner(loaded.groups, loaded.skills, SubprocessExecutor(), run_log=log,
                    events=EventRecorder(), options=RunOptions(runs_dir=tmp_path / "runs"),
                    **kw)  # type: ignore[arg-type]
    return runner, log


def test_cancel_from_another_thread(library: Path, tmp_path: Path) -> None:
    runner, log = runner_for(library, tmp_path)
    pid_file = tmp_path / "nap.pid"
    pids: list[int] = []

    def cancel_when_napping() -> None:
        pids.append(wait_for_pid(pid_file))
        runner.cancel("the user changed their mind")

    thread = threading.Thread(target=cancel_when_napping)
    thread.start()
    record = runner.run("sleepy", {"pid_file": str(pid_file)})
    thread.join()
    assert record.status == "cancelled"
    assert record.error == "cancelled: the user changed their mind"
    assert log.get(record.id) == record
    time.sleep(0.2)
    assert not alive(pids[0])


def test_the_callers_stop_event_cancels(library: Path, tmp_path: Path) -> None:
    stop = threading.Event()
    runner, _ = runner_for(library, tmp_path, stop=stop)
    pid_file = tmp_path / "nap.pid"
    threading.Thread(target=lambda: (wait_for_pid(pid_file), stop.set())).start()
    started = time.monotonic()
    record = runner.run("sleepy", {"pid_file": str(pid_file)})
    assert record.status == "cancelled" and time.monotonic() - started < 30
    assert record.step("second").error == "cancelled: cancelled by the caller"  # type: ignore[union-attr]


def test_keyboard_interrupt_is_recorded_then_raised(library: Path, tmp_path: Path) -> None:
    """An embedding program without handlers: Ctrl-C reaches the runner as KeyboardInterrupt."""
    runner, log = runner_for(library, tmp_path)
    pid_file = tmp_path / "nap.pid"
    threading.Thread(target=lambda: (wait_for_pid(pid_file),
                                     os.kill(os.getpid(), signal.SIGINT))).start()
    with pytest.raises(KeyboardInterrupt):
        runner.run("sleepy", {"pid_file": str(pid_file)})
    (record,) = log.list()
    assert record.status == "cancelled" and record.error == "cancelled: interrupted"
