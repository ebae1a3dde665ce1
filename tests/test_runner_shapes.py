"""The DAG runner as a table of shapes, each asserting the event stream and the outcome."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from skillgrove.graph.runlog import SqliteRunLog
from skillgrove.groups import load_group_text
from skillgrove.groups.model import Group
from skillgrove.runtime.executors import InProcessExecutor
from skillgrove.runtime.runner import EventRecorder, RunError, Runner, RunOptions
from skillgrove.skills.model import Entrypoint, Skill

NAMES = ["emit", "join", "slow", "boom", "flaky", "hang", "track"]


def make_skill(name: str) -> Skill:
    return Skill(id="sk-" + name, name=name, description=name, folder=Path("/nonexistent"),
                 root=Path("/"), content_hash="x", body_line=1,
                 entrypoint=Entrypoint("python", target="main.py:run"))


SKILLS = {n: make_skill(n) for n in NAMES}


class RetryableError(Exception):
    pass


class Functions:
    """The skills' behaviour, with counters the tests read."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.active = 0
        self.max_active = 0
        self.lock = threading.Lock()
        self.fail_flaky = 2
        self.boom = True

    def count(self, name: str) -> None:
        with self.lock:
            self.calls[name] = self.calls.get(name, 0) + 1

    def emit(self, value: Any = "x") -> dict[str, Any]:
        self.count("emit")
        return {"value": value}

    def join(self, **parts: Any) -> dict[str, Any]:
        self.count("join")
        return {"value": "+".join(str(parts[k]) for k in sorted(parts))}

    def slow(self, seconds: float = 0.2) -> dict[str, Any]:
        self.count("slow")
        time.sleep(seconds)
        return {"value": seconds}

    def track(self, seconds: float = 0.1) -> dict[str, Any]:
        with self.lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        time.sleep(seconds)
        with self.lock:
            self.active -= 1
        return {"value": 1}

    def boom_(self) -> dict[str, Any]:
        self.count("boom")
        if self.boom:
            raise ValueError("boom went the skill")
        return {"value": "fixed"}

    def flaky(self) -> dict[str, Any]:
        self.count("flaky")
        if self.calls["flaky"] <= self.fail_flaky:
            raise RetryableError("service busy")
        return {"value": "ok"}

    def hang(self) -> dict[str, Any]:
        time.sleep(3)
        return {"value": "late"}

    def registry(self) -> dict[str, Any]:
        return {"emit": self.emit, "join": self.join, "slow": self.slow, "boom": self.boom_,
                "flaky": self.flaky, "hang": self.hang, "track": self.track}


def group(text: str, path: str = "g.yaml") -> Group:
    load = load_group_text(text, Path(path))
    assert load.group is not None and load.ok, [d.format() for d in load.diagnostics]
    return load.group


def runner_for(groups: list[Group], funcs: Functions, **kw: Any) -> tuple[Runner, EventRecorder]:
    recorder = EventRecorder()
    sleeps: list[float] = []
    runner = Runner({g.id: g for g in groups}, SKILLS, InProcessExecutor(funcs.registry()),
                    events=recorder, sleep=sleeps.append, **kw)
    return runner, recorder


LINEAR = """
id: linear
description: d
examples: [e]
steps:
  - id: a
    skill: emit
    with: {value: start}
  - id: b
    skill: join
    needs: [a]
    with: {x: "${{ steps.a.outputs.value }}", y: b}
  - id: c
    skill: join
    needs: [b]
    with: {x: "${{ steps.b.outputs.value }}", y: c}
outputs:
  final: ${{ steps.c.outputs.value }}
"""


def test_linear() -> None:
    funcs = Functions()
    runner, events = runner_for([group(LINEAR)], funcs)
    record = runner.run("linear")
    assert record.status == "success"
    assert record.outputs == {"final": "start+b+c"}
    assert events.kinds() == ["run_started", "step_started", "step_finished", "step_started",
                              "step_finished", "step_started", "step_finished", "run_finished"]
    assert [e.step for e in events.events if e.kind.value == "step_started"] == ["a", "b", "c"]


DIAMOND = """
id: diamond
description: d
examples: [e]
steps:
  - id: a
    skill: emit
  - id: left
    skill: slow
    needs: [a]
    with: {seconds: 0.3}
  - id: right
    skill: slow
    needs: [a]
    with: {seconds: 0.3}
  - id: d
    skill: join
    needs: [left, right]
    with: {l: "${{ steps.left.outputs.value }}", r: "${{ steps.right.outputs.value }}"}
outputs: {d: "${{ steps.d.outputs.value }}"}
"""


def test_diamond_runs_branches_in_parallel() -> None:
    funcs = Functions()
    runner, events = runner_for([group(DIAMOND)], funcs)
    started = time.perf_counter()
    record = runner.run("diamond")
    elapsed = time.perf_counter() - started
    assert record.status == "success" and record.outputs == {"d": "0.3+0.3"}
    assert elapsed < 0.55, "left and right overlap"
    order = [(e.kind.value, e.step) for e in events.events if e.step]
    assert order.index(("step_finished", "a")) < order.index(("step_started", "left"))
    assert order.index(("step_finished", "right")) < order.index(("step_started", "d"))
    assert order.index(("step_finished", "left")) < order.index(("step_started", "d"))


def fan_out(n: int) -> str:
    steps = "".join(f"  - id: t{i}\n    skill: track\n    with: {{seconds: 0.1}}\n"
                    for i in range(n))
    return f"id: fan\ndescription: d\nexamples: [e]\nsteps:\n{steps}"


def test_fan_out_respects_the_concurrency_cap() -> None:
    funcs = Functions()
    runner, events = runner_for([group(fan_out(6))], funcs, options=RunOptions(max_concurrency=2))
    record = runner.run("fan")
    assert record.status == "success"
    assert funcs.max_active == 2
    assert events.kinds().count("step_finished") == 6


SKIPPED = """
id: skipped
description: d
examples: [e]
inputs:
  urgent: {type: boolean, default: false}
steps:
  - id: check
    skill: emit
  - id: escalate
    skill: emit
    needs: [check]
    if: ${{ inputs.urgent }}
  - id: after_escalate
    skill: emit
    needs: [escalate]
  - id: report
    skill: emit
    needs: [escalate]
    if: ${{ always() }}
    with: {value: "${{ steps.escalate.status }}"}
outputs: {report: "${{ steps.report.outputs.value }}"}
"""


def test_skipped_branch_and_always() -> None:
    funcs = Functions()
    runner, events = runner_for([group(SKIPPED)], funcs)
    record = runner.run("skipped")
    assert record.status == "success"
    assert {s.id: s.status for s in record.steps} == {
        "check": "success", "escalate": "skipped", "after_escalate": "skipped",
        "report": "success"}
    assert record.outputs == {"report": "skipped"}
    skipped = [e for e in events.events if e.kind.value == "step_skipped"]
    assert [(e.step, e.message) for e in skipped] == [
        ("escalate", "if ${{ inputs.urgent }} is false"),
        ("after_escalate", "a step it needs did not succeed")]
    urgent = runner.run("skipped", {"urgent": True})
    assert urgent.step("escalate").status == "success"  # type: ignore[union-attr]


FAIL = """
id: fail
description: d
examples: [e]
steps:
  - id: broken
    skill: boom
  - id: long
    skill: slow
    with: {seconds: 2}
  - id: after
    skill: emit
    needs: [broken]
"""


def test_failure_is_fail_fast() -> None:
    funcs = Functions()
    runner, events = runner_for([group(FAIL)], funcs)
    started = time.perf_counter()
    record = runner.run("fail")
    assert record.status == "failure"
    assert record.error == "step 'broken' failed: ValueError: boom went the skill"
    statuses = {s.id: s.status for s in record.steps}
    assert statuses["broken"] == "failure" and statuses["after"] == "cancelled"
    assert statuses["long"] in ("cancelled", "success")
    failed = [e for e in events.events if e.kind.value == "step_failed"]
    assert failed[0].step == "broken" and failed[0].message == "ValueError: boom went the skill"
    assert events.events[-1].kind.value == "run_finished" and events.events[-1].status == "failure"
    assert "after" not in [e.step for e in events.events if e.kind.value == "step_started"]
    del started


CONTINUE = FAIL.replace("    skill: boom\n", "    skill: boom\n    continue_on_error: true\n") \
    .replace("    with: {seconds: 2}", "    with: {seconds: 0.01}").replace("id: fail", "id: cont")


def test_failure_with_continue_on_error() -> None:
    funcs = Functions()
    runner, events = runner_for([group(CONTINUE)], funcs)
    record = runner.run("cont")
    assert record.status == "success"
    statuses = {s.id: s.status for s in record.steps}
    assert statuses == {"broken": "failure", "long": "success", "after": "success"}
    assert record.step("broken").continued  # type: ignore[union-attr]
    failed = [e for e in events.events if e.kind.value == "step_failed"]
    assert failed[0].data == {"continue_on_error": True}


RETRY = """
id: retry
description: d
examples: [e]
steps:
  - id: call
    skill: flaky
    retry: {max_attempts: 3, initial_interval: 0.5, backoff_factor: 2, jitter: false}
outputs: {v: "${{ steps.call.outputs.value }}"}
"""


def test_retry_then_success() -> None:
    funcs = Functions()
    recorder = EventRecorder()
    sleeps: list[float] = []
    runner = Runner({"retry": group(RETRY)}, SKILLS, InProcessExecutor(funcs.registry()),
                    events=recorder, sleep=sleeps.append)
    record = runner.run("retry")
    assert record.status == "success" and record.outputs == {"v": "ok"}
    assert recorder.kinds("call") == ["step_started", "step_retrying", "step_started",
                                      "step_retrying", "step_started", "step_finished"]
    assert sleeps == [0.5, 1.0]
    assert record.step("call").attempts == 3  # type: ignore[union-attr]


def test_non_retryable_error_is_not_retried() -> None:
    funcs = Functions()
    text = RETRY.replace("skill: flaky", "skill: boom")
    runner, events = runner_for([group(text)], funcs)
    record = runner.run("retry")
    assert record.status == "failure" and funcs.calls["boom"] == 1
    assert "step_retrying" not in events.kinds()


TIMEOUT = """
id: timeout
description: d
examples: [e]
steps:
  - id: stuck
    skill: hang
    timeout: 200ms
"""


def test_timeout() -> None:
    funcs = Functions()
    runner, events = runner_for([group(TIMEOUT)], funcs)
    started = time.perf_counter()
    record = runner.run("timeout")
    assert time.perf_counter() - started < 1.5
    assert record.status == "failure"
    assert record.step("stuck").error == "timed out after 0.2 s"  # type: ignore[union-attr]
    assert events.kinds("stuck") == ["step_started", "step_failed"]


ESCALATION = """
id: escalation
description: d
examples: [e]
inputs:
  ticket: {type: string, required: true}
steps:
  - id: page
    skill: join
    with: {a: page, b: "${{ inputs.ticket }}"}
outputs: {paged: "${{ steps.page.outputs.value }}"}
"""
TRIAGE = """
id: triage
description: d
examples: [e]
inputs:
  priority: {type: string, required: true}
steps:
  - id: classify
    skill: emit
    with: {value: "${{ inputs.priority }}"}
  - id: escalate
    group: escalation
    needs: [classify]
    if: ${{ steps.classify.outputs.value == 'urgent' }}
    with: {ticket: T-1}
  - id: reply
    skill: emit
    needs: [classify]
    with: {value: replied}
outputs:
  paged: ${{ steps.escalate.outputs.paged }}
  reply: ${{ steps.reply.outputs.value }}
"""


def test_sub_group_branch() -> None:
    funcs = Functions()
    runner, events = runner_for([group(TRIAGE), group(ESCALATION)], funcs)
    urgent = runner.run("triage", {"priority": "urgent"})
    assert urgent.status == "success"
    assert urgent.outputs == {"paged": "page+T-1", "reply": "replied"}
    assert ("step_finished", "escalate/page") in [(e.kind.value, e.step) for e in events.events]
    calm = runner.run("triage", {"priority": "low"})
    assert calm.outputs == {"paged": None, "reply": "replied"}
    assert calm.step("escalate").status == "skipped"  # type: ignore[union-attr]


RESUME = """
id: resume
description: d
examples: [e]
steps:
  - id: first
    skill: emit
    with: {value: one}
  - id: second
    skill: boom
    needs: [first]
  - id: third
    skill: join
    needs: [first, second]
    with: {a: "${{ steps.first.outputs.value }}", b: "${{ steps.second.outputs.value }}"}
outputs: {v: "${{ steps.third.outputs.value }}"}
"""


def test_resume_after_a_failure(tmp_path: Path) -> None:
    funcs = Functions()
    log = SqliteRunLog(tmp_path / "runs.sqlite")
    runner, events = runner_for([group(RESUME)], funcs, run_log=log)
    failed = runner.run("resume")
    assert failed.status == "failure"
    assert [s.status for s in failed.steps] == ["success", "failure", "cancelled"]
    funcs.boom = False
    stored = log.get(failed.id)
    assert stored is not None and stored.status == "failure"
    resumed = runner.run("resume", resume=stored)
    assert resumed.status == "success" and resumed.outputs == {"v": "one+fixed"}
    assert resumed.resumed_from == failed.id
    assert funcs.calls["emit"] == 1, "the step that succeeded is not run again"
    assert funcs.calls["boom"] == 2
    reused = [e for e in events.events if e.data.get("resumed")]
    assert [e.step for e in reused] == ["first"]
    assert [r.id for r in log.list()] == [resumed.id, failed.id]


def test_inputs_are_checked_before_the_run() -> None:
    runner, _ = runner_for([group(TRIAGE), group(ESCALATION)], Functions())
    with pytest.raises(RunError, match="missing required input 'priority'"):
        runner.run("triage")
    with pytest.raises(RunError, match="unknown input 'prio'"):
        runner.run("triage", {"priority": "x", "prio": 1})
    with pytest.raises(RunError, match="unknown group 'nope'"):
        runner.run("nope")


def test_plan_shows_levels_inputs_and_skips() -> None:
    runner, _ = runner_for([group(SKIPPED)], Functions())
    plan = runner.plan("skipped")
    assert plan.levels == (("check",), ("escalate",), ("after_escalate", "report"))
    assert {p.id: p.skip_reason for p in plan.steps} == {
        "check": None, "escalate": "if ${{ inputs.urgent }} is false",
        "after_escalate": "a step it needs is skipped", "report": None}
    assert plan.inputs == {"urgent": False}


CHANGING = """
id: changing
description: d
examples: [e]
inputs:
  left: {type: string, required: true}
  right: {type: string, required: true}
steps:
  - id: left
    skill: emit
    with: {value: "${{ inputs.left }}"}
  - id: right
    skill: emit
    with: {value: "${{ inputs.right }}"}
  - id: last
    skill: boom
    needs: [left, right]
outputs: {v: "${{ steps.last.outputs.value }}"}
"""


def test_resume_lays_given_inputs_over_the_stored_ones_and_reruns_what_they_change() -> None:
    funcs = Functions()
    runner, events = runner_for([group(CHANGING)], funcs)
    failed = runner.run("changing", {"left": "L", "right": "R"})
    assert failed.status == "failure"
    funcs.boom = False
    resumed = runner.run("changing", {"right": "R2"}, resume=failed)
    assert resumed.status == "success"
    assert resumed.inputs == {"left": "L", "right": "R2"}
    assert funcs.calls["emit"] == 3, "left is reused, right runs again"
    notes = {s.id: s.note for s in resumed.steps}
    assert notes == {"left": f"reused from run {failed.id}",
                     "right": f"re-run: its inputs changed since run {failed.id} (value)",
                     "last": f"not reused: it failed in run {failed.id}"}
    started = [e for e in events.events if e.run_id == resumed.id
               and e.kind.value == "step_started" and e.data.get("rerun")]
    assert [(e.step, e.message) for e in started] == [("right", notes["right"])]


def test_resume_reruns_a_step_whose_definition_changed() -> None:
    funcs = Functions()
    runner, events = runner_for([group(RESUME)], funcs)
    failed = runner.run("resume")
    # The same value written another way: the inputs are equal, the definition is not.
    edited = RESUME.replace("with: {value: one}", "with: {value: \"${{ 'one' }}\"}")
    runner, events = runner_for([group(edited)], funcs)
    funcs.boom = False
    resumed = runner.run("resume", resume=failed)
    assert resumed.status == "success" and funcs.calls["emit"] == 2
    first = resumed.step("first")
    assert first is not None and first.note == f"re-run: its definition changed since run " \
        f"{failed.id}"
    assert first.definition != failed.step("first").definition  # type: ignore[union-attr]
    assert not [e for e in events.events if e.data.get("resumed")]


def test_resume_under_another_group_names_the_runs_group() -> None:
    runner, _ = runner_for([group(RESUME), group(LINEAR)], Functions())
    failed = runner.run("resume")
    with pytest.raises(RunError, match=f"run {failed.id} belongs to group 'resume', not "
                                       f"'linear'; resume it with `skillgrove run resume "
                                       f"--resume {failed.id}`"):
        runner.run("linear", resume=failed)
