"""Nothing a library or a skill writes reaches a terminal raw (issue #26): escape sequences,
C1 controls, zero-width and bidi characters in skill names, descriptions, bodies, outputs and
the stderr of a failing skill are printed as escapes by every command, through the real CLI
(a subprocess, as a user runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillgrove.runtime.terminal import SafeText, Style, escaped
from tests.helpers import write_skill

# Each hostile character or sequence, and how it is printed instead.
HOSTILE = {
    "\x1b[2J": "\\u001b[2J",                           # clear the screen
    "\x1b]0;owned\x07": "\\u001b]0;owned\\u0007",      # set the window title
    "\x9b31m": "\\u009b31m",                           # C1 CSI: a sequence without ESC
    "\u202e": "\\u202e",                               # right-to-left override
    "\u2066": "\\u2066",                               # left-to-right isolate
    "\u200b": "\\u200b",                               # zero-width space
    "\ufeff": "\\ufeff",                               # zero-width no-break space
    "\r": "\\u000d",                                   # back to the start of the line
    "\x08": "\\u0008",                                 # backspace
}
RAW = tuple(HOSTILE)
PAYLOAD = "".join(HOSTILE)


def library(root: Path) -> Path:
    lib = root / "lib"
    # A description and a body full of them; the YAML spells them as escapes.
    quoted = json.dumps(f"Mails a report {PAYLOAD} to the team.")
    where = write_skill(lib, "loud", f"""
        ---
        name: loud
        description: {quoted}
        inputs: {{properties: {{note: {{type: string}}}}}}
        entrypoint: {{command: [sh, run.sh], env: [LOUD_FAIL]}}
        ---
        Body: {PAYLOAD.replace(chr(13), "")}
        """)
    # It prints them to stderr and in its output; with LOUD_FAIL set it fails saying them.
    (where.parent / "run.sh").write_text(
        "cat >/dev/null\n"
        f"printf '%s' {json.dumps(PAYLOAD)} >&2\n"
        "if [ -n \"$LOUD_FAIL\" ]; then\n"
        "  printf 'failing \\033[2J\\342\\200\\256 here\\n' >&2; exit 2\n"
        "fi\n"
        "printf '{\"said\": \"%s\"}' \"$(printf 'x\\302\\233y\\342\\200\\256z')\"\n",
        encoding="utf-8")
    # A name that tries to pass for another (zero-width space inside): rejected, and named.
    write_skill(lib, "sneaky", """
        ---
        name: "lo\u200bud"
        description: Pretends to be loud.
        ---
        b
        """)
    return lib


def cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skillgrove.runtime.cli", *args],
                          capture_output=True, text=True, timeout=300, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL, errors="surrogateescape")


def raw_in(text: str) -> list[str]:
    return [repr(r) for r in RAW if r in text]


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    lib = library(tmp_path)
    env = {**os.environ, "SKILLGROVE_INDEX": str(tmp_path / "index"), "HF_HUB_OFFLINE": "1",
           "SKILLGROVE_PATH": str(lib)}
    env.pop("NO_COLOR", None)
    return lib, env


@pytest.mark.parametrize("colour", ["plain", "FORCE_COLOR"])
def test_check_and_show_print_escapes(setup: tuple[Path, dict[str, str]], tmp_path: Path,
                                      colour: str) -> None:
    lib, env = setup
    if colour == "FORCE_COLOR":
        env["FORCE_COLOR"] = "1"  # our own colours pass; nothing of the library does
    for args in (["check", str(lib)], ["show", "loud", "--library", str(lib)],
                 ["show", "loud", "SKILL.md", "--library", str(lib)],
                 ["show", "loud", "--library", str(lib), "--json"]):
        done = cli(*args, env=env, cwd=tmp_path)
        printed = done.stdout + done.stderr
        assert "Traceback" not in printed, printed
        assert raw_in(printed) == [], (args, raw_in(printed), printed)
        if args[-1] == "--json":  # still the same JSON: the escapes are JSON's own
            assert json.loads(done.stdout)["description"] == f"Mails a report {PAYLOAD} to " \
                "the team.", done.stdout
        elif args[0] == "show":
            assert all(shown in done.stdout for shown in HOSTILE.values()
                       if shown != "\\u000d" or args[-1] == "SKILL.md"), (args, done.stdout)
        else:
            assert "lo\\u200bud" in printed, printed  # the rejected name, quoted with escapes
    if colour == "FORCE_COLOR":
        assert "\x1b[" in cli("check", str(lib), env=env, cwd=tmp_path).stdout


def test_a_skills_output_and_stderr_reach_the_terminal_escaped(
        setup: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    lib, env = setup
    ok = cli("run-skill", "loud", "--library", str(lib), "--no-sandbox", env=env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert raw_in(ok.stdout + ok.stderr) == [], ok.stdout + ok.stderr
    assert "x\\u009by\\u202ez" in ok.stdout, ok.stdout
    failing = cli("run-skill", "loud", "--library", str(lib), "--no-sandbox",
                  env={**env, "LOUD_FAIL": "1"}, cwd=tmp_path)
    assert failing.returncode != 0
    printed = failing.stdout + failing.stderr
    assert raw_in(printed) == [], printed
    assert "failing \\x1b[2J\\u202e here" in printed, printed  # the step error: printable()


def test_search_prints_a_description_escaped(setup: tuple[Path, dict[str, str]],
                                             tmp_path: Path) -> None:
    lib, env = setup
    done = cli("search", "mail the report to the team", "--library", str(lib), env=env,
               cwd=tmp_path)
    printed = done.stdout + done.stderr
    assert "Traceback" not in printed, printed
    assert "loud" in done.stdout, printed
    assert raw_in(printed) == [], printed


def test_escaped_keeps_text_and_only_this_modules_own_styles() -> None:
    assert escaped("报告 émoji ✓\tok\n") == "报告 émoji ✓\tok\n"
    assert escaped("\ud800") == "\\ud800"
    style = Style(True)
    painted = style.error("FAIL") + " \x1b[2J"
    assert escaped(painted, keep_own_styles=True) == style.error("FAIL") + " \\u001b[2J"
    assert escaped(painted) == "\\u001b[1;31mFAIL\\u001b[0m \\u001b[2J"
    import io

    inner = io.StringIO()
    SafeText(inner).write(PAYLOAD)
    assert raw_in(inner.getvalue()) == []
