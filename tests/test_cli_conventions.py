"""The command line's conventions: one way to name the library, help for every option and
examples that parse, values that cannot be meant refused with the reason, results on stdout
and diagnostics on stderr, counts in good English, colour and a status line only on a terminal
(checked under a real pseudo-terminal), and the README's command lines matching the parser."""

from __future__ import annotations

import argparse
import os
import pty
import re
import select
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest

from skillgrove.runtime.cli import build_parser, main
from skillgrove.runtime.terminal import Status, Style, _FirstLoad, plural
from tests.helpers import copy_fixture_library, write_group

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")

BROKEN_GROUP = """
    id: broken-digest
    description: Summarize a text, then do something that is not there.
    examples: [summarize this and then something else]
    inputs:
      text: {type: string, required: true}
    steps:
      - id: summary
        skill: summarize-text
        with: {text: "${{ inputs.text }}"}
      - id: after
        skill: summarize-text
        needs: [sumary]
        with: {text: "${{ inputs.text }}"}
    """


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser of the command tree with its command words (``("graph", "export")``)."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from commands(child, (*path, name))


def leaf_commands() -> dict[str, argparse.ArgumentParser]:
    tree = list(commands(build_parser()))
    parents = {path[:-1] for path, _ in tree if path}
    # `runs` is both a command and the parent of `runs show`: it counts as a leaf too.
    return {" ".join(path): parser for path, parser in tree
            if path and (path not in parents or parser.get_default("handler"))}


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return copy_fixture_library(tmp_path / "library")


# -- help -------------------------------------------------------------------------------------


def test_every_option_and_argument_of_every_command_has_help() -> None:
    missing = []
    for path, parser in commands(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{' '.join(path)} {choice.dest}" for choice in action._choices_actions
                            if not choice.help]
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{' '.join(path) or 'skillgrove'} "
                               f"{'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_the_top_level_help_has_examples_and_says_how_to_name_the_library() -> None:
    text = build_parser().format_help()
    assert "\nexamples:\n" in text
    assert "--library PATH" in text and "$SKILLGROVE_PATH" in text and "NO_COLOR" in text


def _examples(parser: argparse.ArgumentParser) -> list[str]:
    epilog = parser.epilog or ""
    if "examples:" not in epilog:
        return []
    block = epilog.split("examples:\n", 1)[1].split("\n\n", 1)[0].replace("\\\n", " ")
    return [re.split(r"\s{3,}", line.strip())[0] for line in block.splitlines()
            if line.strip()]


def test_every_example_in_the_help_parses() -> None:
    examples = [example for _, parser in commands(build_parser()) for example in
                _examples(parser)]
    assert len(examples) >= 15
    for example in examples:
        words = shlex.split(example)
        assert words[0] == "skillgrove", example
        build_parser().parse_args(words[1:])  # a bad example exits 2 and fails the test


def test_the_main_commands_show_examples_in_their_help() -> None:
    leaves = leaf_commands()
    for name in ("check", "index", "search", "plan", "run", "inject", "ask", "bench"):
        assert _examples(leaves[name]), name


# -- one way to name the library --------------------------------------------------------------

NO_LIBRARY = {
    "runs": "the run log lives in the index folder",
    "runs show": "the run log lives in the index folder",
    "bench": "the benchmark folder holds its own skills",
    "demo": "always the bundled library",
}


def test_every_command_that_reads_a_library_takes_library() -> None:
    leaves = leaf_commands()
    without = sorted(name for name, parser in leaves.items() if "--library" not in options(parser))
    assert without == sorted(NO_LIBRARY)


def test_library_and_the_path_alias_check_the_same_folders(library: Path, tmp_path: Path) -> None:
    write_group(library, "broken.yaml", BROKEN_GROUP)
    by_option, by_alias, joined = StringIO(), StringIO(), StringIO()
    assert main(["check", "--library", str(library)], by_option) == 1
    assert main(["check", str(library)], by_alias) == 1
    other = tmp_path / "other"
    other.mkdir()
    assert main(["check", "--library", f"{other}{os.pathsep}{library}"], joined) == 1
    assert by_option.getvalue() == by_alias.getvalue() == joined.getvalue()
    assert "unknown step 'sumary'" in by_option.getvalue()


# -- bad values -------------------------------------------------------------------------------

BAD_VALUES = [
    (["search", "summarize a pdf", "-k", "0"], "argument -k: must be from 1 to 50 (got 0)"),
    (["search", "summarize a pdf", "-k", "-3"], "argument -k: must be from 1 to 50 (got -3)"),
    (["search", "summarize a pdf", "-k", "51"], "argument -k: must be from 1 to 50 (got 51)"),
    (["search", "summarize a pdf", "-k", "ten"],
     "argument -k: must be a whole number from 1 to 50 (got 'ten')"),
    (["search", "summarize a pdf", "--detail", "all"],
     "argument --detail: invalid choice: 'all' (choose from 'compact', 'full')"),
    (["search", ""], "argument request: the request is empty"),
    (["search", "   \t"], "argument request: the request is empty"),
    (["ask", " "], "argument request: the request is empty"),
    (["inject", ""], "argument request: the request is empty"),
    (["compose", "\n"], "argument request: the request is empty"),
    (["runs", "--limit", "0"], "argument --limit: must be at least 1 (got 0)"),
    (["runs", "--limit", "-1"], "argument --limit: must be at least 1 (got -1)"),
    (["bench", "dir", "--limit", "0"], "argument --limit: must be at least 1 (got 0)"),
    (["bench", "dir", "--hide-sets", "1"],
     "argument --hide-sets: must be from 0 up to (not including) 1 (got 1)"),
    (["bench", "dir", "--hide-sets", "-0.5"],
     "argument --hide-sets: must be from 0 up to (not including) 1 (got -0.5)"),
    (["groups", "suggest", "--min-support", "0"],
     "argument --min-support: must be at least 1 (got 0)"),
    (["groups", "suggest", "--limit", "-2"], "argument --limit: must be at least 1 (got -2)"),
    (["ask", "summarize a pdf", "--concurrency", "0"],
     "argument --concurrency: must be at least 1 (got 0)"),
    (["run", "report-analysis", "--concurrency", "-1"],
     "argument --concurrency: must be at least 1 (got -1)"),
    (["demo", "--budget", "0"], "argument --budget: must be at least 1 (got 0)"),
    (["serve", "http", "--port", "70000"],
     "argument --port: must be from 0 to 65535 (got 70000)"),
    (["serve", "http", "--max-body", "0"], "argument --max-body: must be at least 1 (got 0)"),
    (["serve", "mcp", "--port", "-1"], "argument --port: must be from 0 to 65535 (got -1)"),
    (["studio", "--port", "99999"], "argument --port: must be from 0 to 65535 (got 99999)"),
]


@pytest.mark.parametrize(("argv", "reason"), BAD_VALUES, ids=[" ".join(a) for a, _ in BAD_VALUES])
def test_a_bad_value_is_refused_with_the_reason(argv: list[str], reason: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv, StringIO())
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    last = captured.err.splitlines()[-1]
    assert last.startswith("skillgrove ") and f": error: {reason}" in last, last


def test_a_request_keeps_its_words_without_the_blanks_around_them() -> None:
    args = build_parser().parse_args(["search", "  summarize a pdf \n"])
    assert args.request == "summarize a pdf"


# -- stdout and stderr ------------------------------------------------------------------------


def test_index_prints_its_result_on_stdout_and_the_library_errors_on_stderr(
        library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_group(library, "broken.yaml", BROKEN_GROUP)
    out = StringIO()
    assert main(["index", "--library", str(library), "--index", str(tmp_path / "index"), "-q"],
                out) == 5  # indexed, with something left out
    result = out.getvalue().splitlines()
    assert len(result) == 1 and result[0].startswith("indexed 7 skills and 2 groups into ")
    err = capsys.readouterr().err
    assert "broken.yaml" in err and "unknown step 'sumary'" in err
    assert "1 error: the skills and groups they concern were left out" in err


def test_check_counts_in_the_singular_and_the_plural(library: Path) -> None:
    write_group(library, "broken.yaml", BROKEN_GROUP)
    out = StringIO()
    assert main(["check", "--library", str(library)], out) == 1
    summary = out.getvalue().splitlines()[-2:]
    assert summary[0].endswith("; 3 group files: 2 valid"), summary
    assert summary[1] == "1 error, 0 warnings", summary


@pytest.mark.parametrize(("count", "text"), [(0, "0 errors"), (1, "1 error"), (2, "2 errors")])
def test_plural(count: int, text: str) -> None:
    assert plural(count, "error") == text
    assert plural(1, "match", "matches") == "1 match"


# -- colour and status, on a real terminal ----------------------------------------------------


def in_terminal(argv: list[str], env: dict[str, str], timeout: float = 300) -> tuple[int, str]:
    """Run ``argv`` with stdin, stdout and stderr on a new pseudo-terminal: (exit code, what
    the terminal showed)."""
    parent, child = pty.openpty()
    process = subprocess.Popen(argv, stdin=child, stdout=child, stderr=child, env=env,
                               cwd=REPO, close_fds=True)
    os.close(child)
    shown = b""
    try:
        while True:
            ready, _, _ = select.select([parent], [], [], timeout)
            if not ready:
                raise AssertionError(f"{argv} showed nothing for {timeout} s: {shown!r}")
            try:
                chunk = os.read(parent, 65536)
            except OSError:  # the child closed the terminal (EIO on Linux)
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(parent)
        code = process.wait(timeout=60)
    return code, shown.decode("utf-8", errors="replace")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return {**env, "HF_HUB_OFFLINE": "1", "TERM": "xterm-256color", **extra}


CLI = [sys.executable, "-m", "skillgrove.runtime.cli"]
RED_ERROR = "\x1b[1;31merror\x1b[0m"


def test_check_is_coloured_on_a_terminal_and_plain_elsewhere(library: Path) -> None:
    write_group(library, "broken.yaml", BROKEN_GROUP)
    argv = [*CLI, "check", "--library", str(library)]
    code, shown = in_terminal(argv, _env())
    assert code == 1
    line = next(line for line in shown.splitlines() if "sumary" in line)
    assert f": {RED_ERROR}: " in line and "\x1b[2m[unknown-step]\x1b[0m" in line, repr(line)
    assert "\x1b[1;31m1 error\x1b[0m, 0 warnings" in shown

    code, shown = in_terminal(argv, _env(NO_COLOR="1"))
    assert code == 1 and "\x1b[" not in shown and ": error: " in shown

    piped = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=300)
    assert piped.returncode == 1 and "\x1b[" not in piped.stdout + piped.stderr

    forced = subprocess.run(argv, env=_env(FORCE_COLOR="1"), capture_output=True, text=True,
                            timeout=300)
    assert RED_ERROR in forced.stdout


def test_an_error_line_is_red_on_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "index").write_text("a file, not a folder")
    argv = [*CLI, "search", "summarize a pdf", "--index", str(tmp_path / "index")]
    code, shown = in_terminal(argv, _env())
    assert code == 1
    assert re.search(r"^skillgrove: \x1b\[1;31m--index .* is a file, not a folder: .*\x1b\[0m\r$",
                     shown, re.M), repr(shown)
    piped = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=300)
    assert piped.stderr.startswith("skillgrove: ") and "\x1b[" not in piped.stderr


def test_a_usage_error_is_coloured_on_a_terminal() -> None:
    code, shown = in_terminal([*CLI, "search", "x", "-k", "0"], _env())
    assert code == 2 and f"skillgrove search: {RED_ERROR}: argument -k" in shown


def test_loading_the_model_shows_a_status_line_on_a_terminal_only(library: Path,
                                                                 tmp_path: Path) -> None:
    index = tmp_path / "index"
    base = ["--library", str(library), "--index", str(index)]
    assert subprocess.run([*CLI, "index", *base, "-q"], env=_env(), capture_output=True,
                          timeout=600).returncode == 0
    # A request never asked before: its vector is in no cache, so the model must load.
    code, shown = in_terminal([*CLI, "search", f"summarize {uuid.uuid4().hex}", *base], _env())
    assert code == 0, shown
    assert re.search(r"✓\x1b\[0m loading the embedding model \x1b\[2m\(\d+\.\d s\)", shown), \
        repr(shown[:600])
    piped = subprocess.run([*CLI, "search", f"summarize {uuid.uuid4().hex}", *base], env=_env(),
                           capture_output=True, text=True, timeout=600)
    assert piped.returncode == 0 and "loading the embedding model" not in piped.stderr
    assert "\x1b[" not in piped.stdout + piped.stderr


class _Terminal(StringIO):
    def isatty(self) -> bool:
        return True


def test_a_status_line_spins_on_a_terminal_and_ends_in_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    screen = _Terminal()
    with Status(screen).step("loading the embedding model"):
        pass
    assert screen.getvalue().endswith("\r\x1b[2K✓ loading the embedding model (0.0 s)\n")


def test_off_a_terminal_a_status_says_nothing_unless_it_is_announced() -> None:
    log = StringIO()
    with Status(log).step("loading the embedding model"):
        pass
    assert log.getvalue() == ""
    with Status(log).step("exporting the model", announce=True):
        pass
    assert log.getvalue() == "skillgrove: exporting the model...\n"


class _FakeOnnx:
    name = "fake"
    dimensions = 3

    def __init__(self, onnx_path: Path) -> None:
        self.onnx_path = onnx_path
        self.calls = 0

    def encode(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        self.onnx_path.write_text("exported")
        return [[0.0, 0.0, 1.0] for _ in texts]


def test_the_one_time_onnx_export_is_announced_even_in_a_log(tmp_path: Path) -> None:
    log = StringIO()
    inner = _FakeOnnx(tmp_path / "model.onnx")
    encoder = _FirstLoad(inner, Status(log))
    encoder.encode(["a"])
    encoder.encode(["b"])
    assert log.getvalue() == ("skillgrove: exporting the embedding model to ONNX (once per "
                              "machine, about 40 s)...\n")
    assert inner.calls == 2
    with encoder.bulk():
        pass
    assert log.getvalue().count("\n") == 1


def test_an_exported_model_loads_without_a_word_in_a_log(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_text("exported")
    log = StringIO()
    _FirstLoad(_FakeOnnx(tmp_path / "model.onnx"), Status(log)).encode(["a"])
    assert log.getvalue() == ""


def test_a_diagnostic_is_styled_only_when_colour_is_on() -> None:
    line = "lib/groups/a.yaml:3:5: warning: unused input 'x' (remove it) [unused-input]"
    assert Style(False).diagnostic(line) == line
    coloured = Style(True).diagnostic(line)
    assert coloured == ("lib/groups/a.yaml:3:5: \x1b[1;33mwarning\x1b[0m: unused input 'x' "
                        "(remove it) \x1b[2m[unused-input]\x1b[0m")


# -- the README -------------------------------------------------------------------------------


def readme_command_lines() -> list[str]:
    """The command lines the README shows in its indented blocks, one per ``skillgrove`` call."""
    found = []
    for line in README.splitlines():
        if not line.startswith("    skillgrove "):
            continue
        for part in re.split(r"\s+/\s+(?=skillgrove )", line.strip()):
            found.append(part.split("  #", 1)[0].strip())
    return found


def test_every_option_the_readme_shows_exists_on_its_command() -> None:
    lines = readme_command_lines()
    assert len(lines) >= 15
    wrong = []
    for line in lines:
        parser = build_parser()
        words = line.split()[1:]
        while words:
            sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)),
                       None)
            if sub is None or words[0] not in sub.choices:
                break
            parser = sub.choices[words.pop(0)]
        known = options(parser)
        wrong += [f"{line}: {flag}" for flag in re.findall(r"(?<![\w-])--?[a-z][\w-]*",
                                                           " ".join(words))
                  if flag not in known]
    assert wrong == []


def test_the_readme_names_the_library_one_way() -> None:
    assert "[PATHS...]" not in README
    assert not re.search(r"skillgrove (check|index|serve \w+) (\.|~|/)", README)


def test_demo_shows_what_the_readme_says_it_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Quick start: the group chosen and run, then a request falling back and one in Chinese."""
    monkeypatch.setenv("SKILLGROVE_OUTBOX", str(tmp_path / "outbox"))
    out = StringIO()
    assert main(["demo", "--index", str(tmp_path / "index")], out) == 0
    shown = out.getvalue()
    assert "Group **Report analysis and notification** (`report-analysis`" in shown
    fallback = shown.split('$ skillgrove search "translate this paragraph into German" -k 5\n')[1]
    assert fallback.startswith("No group: no group fits")
    chinese = shown.split('$ skillgrove search "生成本周的工作周报" -k 5\n')[1]
    assert chinese.startswith("Group  weekly-report-zh  \"周报生成\"")
    assert "run " in capsys.readouterr().err and list((tmp_path / "outbox").iterdir())
