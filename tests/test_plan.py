"""Plans before the run: what is known is said (runs, skipped and why), what is not is "decided at
run time" with the steps that decide it. A table of conditions, the bundled groups whose
branches read step outputs, and the CLI's rendering."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest

from skillgrove.groups import load_library
from skillgrove.runtime.cli import main
from skillgrove.runtime.executors import SubprocessExecutor
from skillgrove.runtime.paths import bundled_library
from skillgrove.runtime.runner import PlannedStep, Runner
from tests.test_runner_shapes import Functions, group, runner_for

LIBRARY = bundled_library()
SAMPLES = LIBRARY / "samples"


def two_steps(condition: str, *, extra: str = "") -> str:
    """A group whose step ``b`` runs after ``a`` under ``condition``; ``c`` needs ``b``."""
    return f"""
id: branch
description: d
examples: [e]
inputs:
  flag: {{type: boolean, default: false}}
  name: {{type: string, default: ""}}
steps:
  - id: a
    skill: emit
  - id: b
    skill: emit
    needs: [a]
    if: "{condition}"
  - id: c
    skill: emit
    needs: [b]
{extra}"""


def planned(condition: str, inputs: dict[str, object] | None = None,
            extra: str = "") -> dict[str, PlannedStep]:
    runner, _ = runner_for([group(two_steps(condition, extra=extra))], Functions())
    return {s.id: s for s in runner.plan("branch", inputs).steps}


def state(step: PlannedStep) -> tuple[str, tuple[str, ...]]:
    if step.decided_at_run_time:
        return "decided at run time", step.depends_on
    return ("skipped" if step.skip_reason else "runs"), ()


RUN_TIME = "decided at run time"


@pytest.mark.parametrize(("condition", "inputs", "b", "c"), [
    # An output of a step is not known before the run: neither true nor false.
    ("${{ steps.a.outputs.value }}", {}, (RUN_TIME, ("a",)), (RUN_TIME, ("b",))),
    ("${{ !steps.a.outputs.value }}", {}, (RUN_TIME, ("a",)), (RUN_TIME, ("b",))),
    ("${{ steps.a.outputs.value == 'x' }}", {}, (RUN_TIME, ("a",)), (RUN_TIME, ("b",))),
    # What the inputs already decide stays decided, whatever the step returns.
    ("${{ steps.a.outputs.value && inputs.flag }}", {}, ("skipped", ()), ("skipped", ())),
    ("${{ steps.a.outputs.value || inputs.flag }}", {"flag": True}, ("runs", ()), ("runs", ())),
    ("${{ steps.a.outputs.value && inputs.flag }}", {"flag": True}, (RUN_TIME, ("a",)),
     (RUN_TIME, ("b",))),
    ("${{ inputs.name != '' }}", {}, ("skipped", ()), ("skipped", ())),
    ("${{ inputs.name != '' }}", {"name": "x"}, ("runs", ()), ("runs", ())),
    # A plan takes the steps that run to succeed.
    ("${{ steps.a.status == 'success' }}", {}, ("runs", ()), ("runs", ())),
    ("${{ failure() }}", {}, ("skipped", ()), ("skipped", ())),
])
def test_conditions_before_the_run(condition: str, inputs: dict[str, object],
                                   b: tuple[str, tuple[str, ...]],
                                   c: tuple[str, tuple[str, ...]]) -> None:
    steps = planned(condition, inputs)
    assert state(steps["a"]) == ("runs", ())
    assert (state(steps["b"]), state(steps["c"])) == (b, c)


def test_skip_reasons_say_what_decided() -> None:
    steps = planned("${{ steps.a.outputs.value && inputs.flag }}")
    assert steps["b"].skip_reason == ("if ${{ steps.a.outputs.value && inputs.flag }} is false, "
                                      "whatever steps.a returns")
    assert steps["c"].skip_reason == "a step it needs is skipped"
    failure = planned("${{ failure() }}")["b"]
    assert failure.skip_reason == ("if ${{ failure() }} is false (a plan takes the steps it needs "
                                   "to succeed)")


def test_always_runs_after_a_step_decided_at_run_time() -> None:
    extra = """  - id: d
    skill: emit
    needs: [b]
    if: ${{ always() }}
"""
    steps = planned("${{ steps.a.outputs.value }}", extra=extra)
    assert state(steps["d"]) == ("runs", ())


@pytest.mark.parametrize("value", ["x", ""])
def test_the_run_decides_what_the_plan_left_open(value: str) -> None:
    funcs = Functions()
    text = two_steps("${{ steps.a.outputs.value }}").replace(
        "  - id: a\n    skill: emit\n", f"  - id: a\n    skill: emit\n    with: {{value: '{value}'}}\n")
    runner, _ = runner_for([group(text)], funcs)
    assert runner.plan("branch").steps[1].decided_at_run_time
    record = runner.run("branch")
    expected = "success" if value else "skipped"
    assert [s.status for s in record.steps] == ["success", expected, expected]


def bundled_runner() -> Runner:
    library = load_library([LIBRARY])
    assert not library.errors
    return Runner(library.groups, library.skills, SubprocessExecutor())


def test_invoice_booking_is_decided_at_run_time() -> None:
    plan = bundled_runner().plan("invoice-to-ledger", {
        "pdf_path": str(SAMPLES / "invoice.pdf"), "ledger_path": "l.csv"})
    steps = {s.id: s for s in plan.steps}
    assert state(steps["book"]) == (RUN_TIME, ("check",))
    assert steps["book"].skip_reason is None
    # Without an accounts-payable address nothing is sent, whatever the check finds.
    assert steps["reject"].skip_reason is not None and not steps["reject"].decided_at_run_time
    with_address = bundled_runner().plan("invoice-to-ledger", {
        "pdf_path": str(SAMPLES / "invoice.pdf"), "ledger_path": "l.csv",
        "ap_email": "ap@example.com"})
    assert state({s.id: s for s in with_address.steps}["reject"]) == (RUN_TIME, ("check",))


def test_urgent_ticket_escalation_is_decided_at_run_time() -> None:
    plan = bundled_runner().plan("support-ticket-reply", {
        "ticket_path": str(SAMPLES / "ticket_urgent.json")})
    steps = {s.id: s for s in plan.steps}
    assert state(steps["escalate"]) == (RUN_TIME, ("classify",))
    assert state(steps["reply"]) == (RUN_TIME, ("details", "draft"))
    assert state(steps["draft"]) == ("runs", ())
    assert steps["review"].skip_reason is not None  # no support lead in the context


def cli(*args: str) -> str:
    out = StringIO()
    assert main(list(args), out) == 0
    return out.getvalue()


def test_cli_plan_shows_what_is_decided_at_run_time(tmp_path: Path) -> None:
    text = cli("plan", "invoice-to-ledger", "--library", str(LIBRARY), "--index",
               str(tmp_path / "idx"), "--input", f"pdf_path={SAMPLES / 'invoice.pdf'}",
               "--input", "ledger_path=l.csv")
    assert "  book: skill append-ledger-row  [decided at run time (depends on steps.check)]\n" \
        in text
    assert "book: skill append-ledger-row  [skipped" not in text
    text = cli("plan", "support-ticket-reply", "--library", str(LIBRARY), "--index",
               str(tmp_path / "idx"), "--input", f"ticket_path={SAMPLES / 'ticket_urgent.json'}",
               "--json")
    escalate = next(s for s in json.loads(text)["steps"] if s["id"] == "escalate")
    assert (escalate["skip_reason"], escalate["decided_at_run_time"], escalate["depends_on"]) == (
        None, True, ["classify"])
