"""Hostile input for the loaders: every case is a diagnostic with its rule and place, never a crash,
a hang or a run.

The committed cases are in ``tests/hostile/parsers`` (``skills/<case>/SKILL.md``,
``groups/<case>.yaml``, and ``support/`` with the two skills the groups call). Cases that need
special files (named pipes, 1,100 nested folders, 5,000-digit numbers, alias bombs, files over a
size limit) are made here in ``tmp_path``. Skills with an entrypoint run a script that would write
an ``EXECUTED`` marker: no test may find one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest

from skillgrove.groups.library import group_effects, load_library
from skillgrove.groups.loader import ancestors, find_cycle, load_group_text, parse_duration
from skillgrove.groups.model import Group, Step
from skillgrove.runtime.cli import main
from skillgrove.runtime.runner import topological_levels
from skillgrove.skills import limits
from skillgrove.skills._yaml import YamlLimitError, YamlSyntaxError, load_located
from skillgrove.skills.diagnostics import Diagnostic, Severity
from skillgrove.skills.errors import SkillgroveError
from skillgrove.skills.loader import check_value, risky_pattern, schema_problems

HOSTILE = Path(__file__).resolve().parent / "hostile" / "parsers"
HEAD = "id: {id}\ndescription: A hostile case.\nexamples: [never runs]\n"

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")


def check(*paths: Path) -> tuple[int, str]:
    out = StringIO()
    code = main(["check", *map(str, paths)], out)
    return code, out.getvalue()


def check_in_subprocess(*paths: Path) -> subprocess.CompletedProcess[str]:
    """``skillgrove check`` in its own process, killed after a minute: a case that used to hang
    fails the test instead of hanging it."""
    return subprocess.run([sys.executable, "-m", "skillgrove.runtime.cli", "check",
                           *map(str, paths)], capture_output=True, text=True, timeout=60,
                          check=False)


def markers(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("EXECUTED")]


def skill_library(tmp_path: Path, case: str) -> Path:
    root = tmp_path / "lib"
    shutil.copytree(HOSTILE / "skills" / case, root / case)
    return root


def group_library(tmp_path: Path, case: str | None = None, text: str | None = None) -> Path:
    root = tmp_path / "lib"
    shutil.copytree(HOSTILE / "support", root)
    (root / "groups").mkdir()
    if case is not None:
        shutil.copy(HOSTILE / "groups" / f"{case}.yaml", root / "groups" / f"{case}.yaml")
    if text is not None:
        (root / "groups" / "generated.yaml").write_text(text, encoding="utf-8")
    return root


def the_diagnostic(diagnostics: tuple[Diagnostic, ...], rule: str) -> Diagnostic:
    found = [d for d in diagnostics if d.rule == rule]
    assert len(found) == 1, [d.format() for d in diagnostics]
    return found[0]


def assert_reported(code: int, text: str, diagnostic: Diagnostic) -> None:
    assert diagnostic.format() in text.splitlines(), text
    assert "Traceback" not in text
    assert code == (1 if diagnostic.is_error else 0), text


# -- SKILL.md ------------------------------------------------------------------------------------

SKILL_CASES = [
    # case, severity, rule, line, column, part of the message
    ("date-out-of-range", "error", "frontmatter-invalid-yaml", 4, 10,
     "cannot read '2024-02-30' as a date: day is out of range for month"),
    ("float-tag-not-a-number", "error", "frontmatter-invalid-yaml", 4, 10,
     "cannot read 'abc' as a number"),
    ("int-tag-empty-hex", "error", "frontmatter-invalid-yaml", 4, 10,
     "cannot read '0x' as an integer"),
    ("timestamp-bad-month", "error", "frontmatter-invalid-yaml", 5, 13,
     "cannot read '2020-13-01' as a date: month must be in 1..12"),
    ("nested-brackets", "error", "limit-exceeded", 4, 70,
     "lists and mappings nest more than 64 levels deep (limit YAML_MAX_DEPTH)"),
    ("alias-depth-chain", "error", "limit-exceeded", 67, 14,
     "alias *a61 makes lists and mappings nest more than 64 levels deep (limit YAML_MAX_DEPTH)"),
    ("merge-key-doubling", "error", "limit-exceeded", 19, 19,
     "more than 200,000 values (every use of an alias counts as a copy of what it names) "
     "(limit YAML_MAX_NODES)"),
    ("recursive-alias", "error", "frontmatter-invalid-yaml", 5, 9,
     "alias *m refers to a value that contains it"),
    ("duplicate-anchor", "error", "frontmatter-invalid-yaml", 4, 14,
     "found duplicate anchor (first given on line 4)"),
    ("undefined-alias", "error", "frontmatter-invalid-yaml", 4, 8, "found undefined alias"),
    ("python-tag", "error", "frontmatter-invalid-yaml", 5, 8,
     "unknown tag 'tag:yaml.org,2002:python/object/apply:os.system'"),
    ("bad-binary", "error", "frontmatter-invalid-yaml", 5, 9, "failed to decode base64 data"),
    ("control-character", "error", "frontmatter-invalid-yaml", 3, 19,
     "unacceptable character #x0007"),
    ("not-utf8", "error", "not-utf8", 3, None, "SKILL.md is not valid UTF-8"),
    ("unterminated-frontmatter", "error", "frontmatter-unterminated", 1, 1, "never closes"),
    ("ref-nowhere-beside-default", "error", "schema-invalid", 8, 13,
     "$ref '#/$defs/missing' names nothing in this schema"),
    ("ref-beside-wrong-default", "error", "default-type", 11, 16,
     "default 42 does not fit its schema: 42 is not of type 'string'"),
    ("ref-remote", "error", "schema-invalid", 8, 13,
     "$ref 'http://127.0.0.1:9/schema.json' points outside this schema"),
    ("ref-loop", "error", "schema-invalid", 11, 17,
     "this $ref leads back to itself without reading any part of the value"),
    ("pattern-nested-quantifier", "warning", "default-unchecked", 10, 16,
     "its pattern '^(a+)+$' repeats a repetition"),
    ("timeout-infinite", "error", "entrypoint-invalid", 6, 12,
     "at most 86400 (limit DURATION_MAX_SECONDS)"),
    ("timeout-too-long", "error", "entrypoint-invalid", 6, 12,
     "at most 86400 (limit DURATION_MAX_SECONDS)"),
]


@pytest.mark.parametrize(("case", "severity", "rule", "line", "column", "fragment"), SKILL_CASES,
                         ids=[c[0] for c in SKILL_CASES])
def test_hostile_skill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, severity: str,
                       rule: str, line: int, column: int | None, fragment: str) -> None:
    monkeypatch.chdir(tmp_path)  # where `touch EXECUTED` would land
    root = skill_library(tmp_path, case)
    started = time.perf_counter()
    library = load_library([root])
    assert time.perf_counter() - started < 5
    found = the_diagnostic(library.diagnostics, rule)
    assert (found.severity.value, found.line, found.column) == (severity, line, column)
    assert fragment in found.message
    assert (case in library.skills) == (severity == "warning")
    assert_reported(*check(root), found)
    assert not markers(tmp_path)


def test_the_corpus_has_every_case_and_no_other() -> None:
    assert sorted(p.name for p in (HOSTILE / "skills").iterdir()) == sorted(
        c[0] for c in SKILL_CASES)
    assert sorted(p.stem for p in (HOSTILE / "groups").iterdir()) == sorted(
        [*(c[0] for c in GROUP_CASES), *(c[0] for c in RUN_CASES), "retry-unbounded"])
    assert len(SKILL_CASES) + len(list((HOSTILE.parent / "skills").iterdir())) >= 40
    assert len(list((HOSTILE / "groups").iterdir())) >= 20


@pytest.mark.parametrize("case", [c[0] for c in SKILL_CASES
                                  if (HOSTILE / "skills" / c[0] / "run.py").exists()
                                  and c[1] == "error"])
def test_a_rejected_skill_does_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       case: str) -> None:
    from skillgrove.runtime.engine import Skillgrove

    monkeypatch.chdir(tmp_path)
    root = skill_library(tmp_path, case)
    engine = Skillgrove([root], index=tmp_path / "index")
    with pytest.raises(SkillgroveError):
        engine.run_skill(case, {})
    assert not markers(tmp_path)


# -- group files ----------------------------------------------------------------------------------

GROUP_CASES = [
    ("date-out-of-range", "error", "yaml-syntax", 4, 10,
     "not valid YAML: cannot read '2024-02-30' as a date: day is out of range for month"),
    ("int-tag-empty-hex", "error", "yaml-syntax", 7, 18, "cannot read '0x' as an integer"),
    ("nested-brackets", "error", "limit-exceeded", 8, 73,
     "too large to read: lists and mappings nest more than 64 levels deep (limit YAML_MAX_DEPTH)"),
    ("merge-key-doubling", "error", "limit-exceeded", 19, 19, "(limit YAML_MAX_NODES)"),
    ("recursive-alias", "error", "yaml-syntax", 8, 18,
     "alias *s refers to a value that contains it"),
    ("python-tag", "error", "yaml-syntax", 7, 18,
     "unknown tag 'tag:yaml.org,2002:python/object/apply:os.system'"),
    ("timeout-infinite", "error", "wrong-type", 7, 14,
     "steps[0].timeout: timeout inf is not a duration above 0 and at most a day "
     "(limit DURATION_MAX_SECONDS)"),
    ("timeout-too-long", "error", "wrong-type", 7, 14,
     "steps[0].timeout: timeout '999999h' is not a duration above 0 and at most a day"),
    ("retry-nan", "error", "wrong-type", 8, 25,
     "steps[0].retry.initial_interval: nan is not a duration above 0"),
    ("cycle-written-backwards", "error", "cycle", 7, 12,
     "steps form a cycle: s29 -> s0 -> s1 -> s2"),
    ("pattern-nested-quantifier", "warning", "value-unchecked", 7, 18,
     "'slug' not checked against the input schema: its pattern '^(a+)+$' repeats a repetition"),
    ("float-tag-not-a-number", "error", "yaml-syntax", 7, 14, "cannot read 'abc' as a number"),
    ("timestamp-bad-month", "error", "yaml-syntax", 8, 13,
     "cannot read '2020-13-01' as a date: month must be in 1..12"),
    ("duplicate-anchor", "error", "yaml-syntax", 10, 11,
     "found duplicate anchor (first given on line 7)"),
    ("undefined-alias", "error", "yaml-syntax", 7, 11, "found undefined alias"),
    ("control-character", "error", "yaml-syntax", 2, 24, "unacceptable character #x0007"),
    ("not-utf8", "error", "not-utf8", 2, None, "the group file is not valid UTF-8"),
    ("expression-hex-escape", "error", "expression-syntax", 8, 19,
     "invalid escape '\\x' in a string (write \\\\ for a backslash)"),
    ("expression-deep-parentheses", "error", "expression-syntax", 8, 82,
     "expression nests deeper than 64 levels (EXPRESSION_MAX_DEPTH)"),
    ("expression-many-terms", "error", "expression-syntax", 8, 272,
     "expression nests deeper than 64 levels (EXPRESSION_MAX_DEPTH)"),
]

RUN_CASES = [
    # case: valid at load time, the step fails at run time with this; the run is recorded
    ("expression-format-bomb",
     "format() would be longer than 16,777,216 characters (EXPRESSION_MAX_RESULT_CHARS)"),
    ("expression-tojson-nesting",
     "toJSON() would be longer than 16,777,216 characters (EXPRESSION_MAX_RESULT_CHARS)"),
    ("expression-index-by-list", "an array cannot be the key of an object; use a string"),
]


@pytest.mark.parametrize(("case", "severity", "rule", "line", "column", "fragment"),
                         [*GROUP_CASES, ("retry-unbounded", "", "", 0, 0, "")],
                         ids=[*(c[0] for c in GROUP_CASES), "retry-unbounded"])
def test_hostile_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, severity: str,
                       rule: str, line: int, column: int, fragment: str) -> None:
    monkeypatch.chdir(tmp_path)
    root = group_library(tmp_path, case)
    library = load_library([root])
    mine = tuple(d for d in library.diagnostics if d.path is not None and d.path.stem == case)
    if case == "retry-unbounded":
        assert [(d.rule, d.line, d.column, d.message) for d in mine] == [
            ("wrong-type", 8, 21, "steps[0].retry.max_attempts: 'max_attempts' must be an integer "
             "from 1 to 100 (limit RETRY_MAX_ATTEMPTS)"),
            ("wrong-type", 9, 23, "steps[0].retry.backoff_factor: 'backoff_factor' must be a "
             "number from 1 to 10 (limit RETRY_MAX_BACKOFF_FACTOR)"),
            ("wrong-type", 10, 21, "steps[0].retry.max_interval: inf is not a duration above 0 "
             "and at most a day (limit DURATION_MAX_SECONDS)")]
        found = mine[0]
    else:
        found = the_diagnostic(mine, rule)
        assert (found.severity.value, found.line, found.column) == (severity, line, column)
        assert fragment in found.message
    assert (case in library.groups) == (found.severity is Severity.WARNING)
    assert_reported(*check(root), found)
    if found.is_error:
        from skillgrove.runtime.engine import Skillgrove

        with pytest.raises(SkillgroveError):
            Skillgrove([root], index=tmp_path / "index").run(case, {})
    assert not markers(tmp_path)


@pytest.mark.parametrize(("case", "fragment"), RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_hostile_group_fails_its_step_at_run_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  case: str, fragment: str) -> None:
    from skillgrove.runtime.engine import Skillgrove

    monkeypatch.chdir(tmp_path)
    root = group_library(tmp_path, case)
    library = load_library([root])
    assert case in library.groups
    assert not [d for d in library.diagnostics if d.path is not None and d.path.stem == case]
    engine = Skillgrove([root], index=tmp_path / "index")
    started = time.perf_counter()
    record = engine.run(case, {})
    assert time.perf_counter() - started < 10
    assert record.status == "failure"
    (step,) = record.steps
    assert step.status == "failure" and fragment in (step.error or "")
    assert [r.id for r in engine.runs()] == [record.id]
    assert not markers(tmp_path)


# -- made here: huge numbers, alias bombs, sizes ----------------------------------------------------

def billion_laughs(levels: int = 9) -> str:
    """Nine lists of nine aliases, each naming the one before: 342 bytes, 9**9 values."""
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    previous = "a"
    for name in "bcdefghijklmnop"[: levels - 1]:
        text += f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]\n"
        previous = name
    return text


def test_a_5000_digit_integer_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    (root / "big").mkdir(parents=True)
    (root / "big" / "SKILL.md").write_text(
        "---\nname: big\ndescription: d\nversion: " + "9" * 5000 + "\n---\nbody\n")
    (root / "groups").mkdir()
    (root / "groups" / "big.yaml").write_text(
        HEAD.format(id="big") + "steps:\n  - id: s\n    skill: big\n    with: {n: "
        + "7" * 5000 + "}\n")
    library = load_library([root])
    skill = the_diagnostic(tuple(d for d in library.diagnostics if d.path is not None
                                 and d.path.name == "SKILL.md"), "limit-exceeded")
    group = the_diagnostic(tuple(d for d in library.diagnostics if d.path is not None
                                 and d.path.name == "big.yaml"), "limit-exceeded")
    assert (skill.line, skill.column) == (4, 10)
    assert (group.line, group.column) == (7, 15)
    for found in (skill, group):
        assert "an integer written with 5,000 characters (limit YAML_MAX_NUMBER_CHARS)" \
            in found.message
    code, text = check(root)
    assert code == 1 and skill.format() in text and group.format() in text
    assert "Traceback" not in text


def test_an_alias_bomb_stops_at_the_node_limit_at_once(tmp_path: Path) -> None:
    bomb = billion_laughs()
    assert len(bomb) < 500
    root = tmp_path / "lib"
    (root / "bomb").mkdir(parents=True)
    (root / "bomb" / "SKILL.md").write_text(
        "---\nname: bomb\ndescription: d\nmetadata:\n" + "".join(
            "  " + line + "\n" for line in bomb.splitlines()) + "---\nbody\n")
    (root / "groups").mkdir()
    (root / "groups" / "bomb.yaml").write_text(bomb + HEAD.format(id="bomb")
                                               + "steps:\n  - id: s\n    skill: bomb\n")
    started = time.perf_counter()
    library = load_library([root])
    assert time.perf_counter() - started < 2
    found = [d for d in library.diagnostics if d.rule == "limit-exceeded"]
    assert [(d.path.name if d.path else None, d.line) for d in found] == [
        ("SKILL.md", 10), ("bomb.yaml", 6)]
    assert all("(limit YAML_MAX_NODES)" in d.message for d in found)
    code, text = check(root)
    assert code == 1 and all(d.format() in text for d in found)


def test_yaml_errors_are_the_only_exceptions() -> None:
    for text, error in [
        ("a: " + "[" * 2000, YamlLimitError),
        (billion_laughs(12), YamlLimitError),
        ("a: \ud800", YamlSyntaxError),
        ("a: !!float 1e", YamlSyntaxError),
        ("a: !!timestamp 2020-01-01T25:00:00", YamlSyntaxError),
        ("a: !!str [1]", YamlSyntaxError),
        ("a: !local [1]", YamlSyntaxError),
    ]:
        with pytest.raises(error):
            load_located(text)


def test_a_group_file_over_the_size_limit_is_not_read(tmp_path: Path) -> None:
    root = group_library(tmp_path, text=HEAD.format(id="huge") + "steps:\n  - id: s\n"
                         "    skill: echo-text\n    with: {text: hi}\n"
                         + "# padding\n" * (limits.GROUP_FILE_MAX_BYTES // 10 + 1))
    library = load_library([root])
    found = the_diagnostic(library.diagnostics, "file-too-large")
    assert "(limit GROUP_FILE_MAX_BYTES)" in found.message
    assert_reported(*check(root), found)


def test_too_many_steps(tmp_path: Path) -> None:
    count = limits.GROUP_MAX_STEPS + 1
    root = group_library(tmp_path, text=HEAD.format(id="wide") + "steps:\n" + "".join(
        f"  - id: s{i}\n    skill: echo-text\n    with: {{text: hi}}\n" for i in range(count)))
    library = load_library([root])
    found = the_diagnostic(library.diagnostics, "limit-exceeded")
    assert (found.line, found.column) == (5, 3)
    assert found.message == (f"steps: {count:,} steps; a group has at most "
                             f"{limits.GROUP_MAX_STEPS:,} (limit GROUP_MAX_STEPS)")
    assert_reported(*check(root), found)


def test_sub_groups_nested_too_deep(tmp_path: Path) -> None:
    depth = limits.GROUP_MAX_NESTING + 3
    root = group_library(tmp_path)
    for i in range(depth):
        step = (f"  - id: s\n    group: g{i + 1}\n" if i + 1 < depth
                else "  - id: s\n    skill: echo-text\n    with: {text: hi}\n")
        (root / "groups" / f"g{i}.yaml").write_text(HEAD.format(id=f"g{i}") + "steps:\n" + step)
    library = load_library([root])
    deep = [d for d in library.diagnostics if d.rule == "limit-exceeded"]
    assert [d.subject for d in deep] == ["g0", "g1"]  # g2 calls 32 levels: allowed
    assert deep[0].message == (f"sub-groups nest {limits.GROUP_MAX_NESTING + 1} levels deep "
                               "(g0 -> g1 -> g2 -> ... -> g32 -> g33); at most "
                               f"{limits.GROUP_MAX_NESTING} (limit GROUP_MAX_NESTING)")
    assert "g2" in library.groups and "g0" not in library.groups
    assert_reported(*check(root), deep[0])


# -- made here: named pipes and deep folders ------------------------------------------------------

@needs_fifo
@pytest.mark.parametrize(("where", "reported"), [
    ("skills/piped/SKILL.md", "skills/piped/SKILL.md"),
    ("groups/piped.yaml", "groups/piped.yaml:1:1"),
])
def test_a_named_pipe_is_reported_and_never_opened(tmp_path: Path, where: str,
                                                   reported: str) -> None:
    root = group_library(tmp_path)
    (root / "skills" / "piped").mkdir()
    os.mkfifo(root / where)
    result = check_in_subprocess(root)  # it used to block here for good
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert (f"{root / reported}: error: {Path(where).name} is a named pipe (FIFO), not a regular "
            "file; it was not read (replace it with an ordinary file) [not-a-regular-file]"
            ) in result.stdout.splitlines()


@needs_fifo
def test_a_named_pipe_among_the_scripts_does_not_hang_the_load(tmp_path: Path) -> None:
    # The safety scan's listing reports it (its message is the scan's); here: the load ends.
    root = tmp_path / "lib"
    (root / "piped").mkdir(parents=True)
    (root / "piped" / "SKILL.md").write_text("---\nname: piped\ndescription: d\n---\nbody\n")
    os.mkfifo(root / "piped" / "run.sh")
    result = check_in_subprocess(root)
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == 1 and "run.sh" in result.stdout
    assert "[not-a-regular-file]" in result.stdout


@needs_fifo
def test_a_named_pipe_as_the_skill_id_does_not_hang_the_load(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    (root / "s").mkdir(parents=True)
    (root / "s" / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\nbody\n")
    os.mkfifo(root / "s" / ".skill_id")
    result = check_in_subprocess(root)  # reading the id used to block here
    assert "Traceback" not in result.stdout + result.stderr
    assert "1 loaded" in result.stdout or "[not-a-regular-file]" in result.stdout, result.stdout


def test_folders_nested_past_the_limit(tmp_path: Path) -> None:
    from skillgrove.groups.library import library_fingerprint

    root = tmp_path / "lib"
    folders = [root]
    for _ in range(1100):  # Path.mkdir(parents=True) would recurse as deep
        folders.append(folders[-1] / "d")
    for folder in folders:
        folder.mkdir()
    (folders[-1] / "SKILL.md").write_text("---\nname: d\ndescription: d\n---\nbody\n")
    try:
        library = load_library([root])
        found = the_diagnostic(library.diagnostics, "limit-exceeded")
        assert found.message.startswith(f"folders nest more than {limits.LIBRARY_MAX_DEPTH} "
                                        f"levels below {root}; nothing under ")
        assert found.message.endswith(" was searched (limit LIBRARY_MAX_DEPTH)")
        assert found.path == folders[limits.LIBRARY_MAX_DEPTH + 1]
        assert_reported(*check(root), found)
        assert library_fingerprint([root])  # the same walk, with no recursion either
    finally:  # shutil.rmtree recurses too
        (folders[-1] / "SKILL.md").unlink()
        for folder in reversed(folders):
            folder.rmdir()


# -- algorithms: linear, iterative ------------------------------------------------------------------

def chain(count: int, *, backwards: bool) -> Group:
    steps = [Step(id=f"s{i}", skill="x", needs=(f"s{i - 1}",) if i else (), index=i)
             for i in range(count)]
    if backwards:
        steps.reverse()
    return Group(id="chain", name="chain", description="d", path=Path("chain.yaml"),
                 content_hash="h", steps=tuple(steps))


def test_a_long_chain_written_backwards_loads_and_levels() -> None:
    count = limits.GROUP_MAX_STEPS
    text = HEAD.format(id="chain") + "steps:\n" + "".join(
        f"  - id: s{i}\n    skill: echo-text\n" + (f"    needs: [s{i - 1}]\n" if i else "")
        + (f"    with: {{text: '${{{{ steps.s{i - 1}.status }}}}'}}\n" if i else "")
        for i in reversed(range(count)))
    started = time.perf_counter()
    load = load_group_text(text, Path("chain.yaml"))
    assert time.perf_counter() - started < 10
    assert load.group is not None and not [d for d in load.diagnostics if d.is_error]
    levels = topological_levels(load.group)
    assert [level[0] for level in levels] == [f"s{i}" for i in range(count)]


def test_graph_helpers_take_thousands_of_steps() -> None:
    big = chain(8000, backwards=True)
    started = time.perf_counter()
    upstream = ancestors({s.id: s.needs for s in big.steps})
    assert "s0" in upstream["s7999"] and "s7999" not in upstream["s0"]
    assert len(upstream["s7999"]) == 7999
    assert find_cycle({s.id: list(s.needs) for s in big.steps}) is None
    looped = {s.id: list(s.needs) for s in big.steps} | {"s0": ["s7999"]}
    assert len(find_cycle(looped) or []) == 8000
    assert len(topological_levels(big)) == 8000
    assert time.perf_counter() - started < 10


def test_group_effects_follow_a_long_chain_of_sub_groups() -> None:
    groups: dict[str, Group] = {}
    for i in range(2000):
        step = Step(id="s", group=f"g{i + 1}") if i < 1999 else Step(id="s", skill="x")
        groups[f"g{i}"] = Group(id=f"g{i}", name="g", description="d", path=Path("g.yaml"),
                                content_hash="h", steps=(step,))
    assert group_effects(groups["g0"], {}, groups) == {}


# -- the rules themselves -------------------------------------------------------------------------

@pytest.mark.parametrize(("pattern", "risky"), [
    ("^(a+)+$", True), ("(a|aa)*", True), ("(x*y*)*$", True), ("((ab)*c)+", True),
    ("(a{2,})*", True), ("^[a-z0-9-]+$", False), ("^\\d{4}-\\d{2}-\\d{2}$", False),
    ("(ab){2,}", False), ("\\(a+\\)+", False), ("[(]a+[)]+", False), ("(a+)?", False),
    ("(a+){1}", False), ("a{" + "9" * 5000 + "}", False), ("(", False), ("", False),
    # a repeated group led by a literal its inner repetitions cannot match splits one way only
    ("^[a-z0-9]+(?:-[a-z0-9]+)*$", False), ("^\\d+(\\.\\d+)*$", False),
    ("^(?P<part>-[a-z]+)+$", False), ("^(?:[a-z-]+)*$", True), ("^(-[a-z-]+)*$", True),
    ("^(\\.?\\d+)*$", True), ("^(.a+)*$", True), ("^(-(a|b)+)*$", True), ("((-a+)+)+", True),
    ("^(?=a+)+", True),
])
def test_risky_patterns(pattern: str, risky: bool) -> None:
    assert risky_pattern(pattern) is risky


def test_a_risky_pattern_is_never_matched() -> None:
    schema = {"type": "object", "properties": {"w": {"type": "string", "pattern": "^(a+)+$"}}}
    started = time.perf_counter()
    result = check_value("a" * 60 + "!", schema, ("properties", "w"))
    assert time.perf_counter() - started < 1
    assert result.problems == () and result.skipped is not None


def test_refs_resolve_against_the_whole_schema() -> None:
    schema = {"type": "object", "$defs": {"n": {"type": "integer"}},
              "properties": {"n": {"$ref": "#/$defs/n", "default": 3}}}
    assert schema_problems(schema) == []
    assert check_value(3, schema, ("properties", "n")).problems == ()
    assert check_value("x", schema, ("properties", "n")).problems == (
        "'x' is not of type 'integer'",)


def test_a_large_unique_list_is_not_checked_at_load_time() -> None:
    schema = {"type": "array", "uniqueItems": True}
    result = check_value([{} for _ in range(5000)], schema)
    assert result.skipped is not None and "SCHEMA_CHECK_MAX_WORK" in result.skipped


@pytest.mark.parametrize(("value", "seconds"), [
    (30, 30.0), ("500ms", 0.5), ("2m", 120.0), ("1h", 3600.0), (86_400, 86_400.0),
    (86_401, None), (0, None), (-1, None), (float("inf"), None), (float("nan"), None),
    (10**400, None), ("1" + "0" * 400 + "s", None), ("9" * 5000, None), (True, None),
    ("24h", 86_400.0), ("25h", None),
])
def test_durations_are_finite_positive_and_bounded(value: object, seconds: float | None) -> None:
    assert parse_duration(value) == seconds


# -- the other commands on the whole corpus ---------------------------------------------------------

def test_index_and_ask_over_every_case_do_not_crash(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "lib"
    shutil.copytree(HOSTILE / "support", root)
    shutil.copytree(HOSTILE / "skills", root / "hostile")
    shutil.copytree(HOSTILE / "groups", root / "groups")
    index = tmp_path / "index"
    for args in (["index", str(root), "--index", str(index)],
                 ["ask", "echo some text", "--index", str(index), "--plan-only"],
                 ["inject", "echo some text", "--index", str(index)]):
        out = StringIO()
        code = main(args, out)
        # index: 5 when it left a hostile case out (it must); ask --plan-only: 4 when nothing
        # fits
        assert code in (0, 1, 4, 5), (args, out.getvalue())
        assert "Traceback" not in out.getvalue()
    assert not markers(tmp_path)


def test_the_published_group_schema_states_the_same_bounds() -> None:
    from skillgrove.groups.schema import group_schema

    schema = group_schema()
    step = schema["$defs"]["step"]["properties"]
    retry = step["retry"]["oneOf"]
    assert schema["properties"]["steps"]["maxItems"] == limits.GROUP_MAX_STEPS
    assert retry[0]["maximum"] == retry[1]["properties"]["max_attempts"]["maximum"] \
        == limits.RETRY_MAX_ATTEMPTS
    assert retry[1]["properties"]["backoff_factor"]["maximum"] == limits.RETRY_MAX_BACKOFF_FACTOR
    for duration in (step["timeout"], retry[1]["properties"]["initial_interval"],
                     retry[1]["properties"]["max_interval"]):
        assert duration["oneOf"][0]["maximum"] == limits.DURATION_MAX_SECONDS


def test_a_thousand_wrong_names_are_reported_quickly() -> None:
    # Each "did you mean" compares the name with every step; a budget keeps this linear.
    count = limits.GROUP_MAX_STEPS
    text = HEAD.format(id="typos") + "steps:\n" + "".join(
        f"  - id: step_{i}\n    skill: echo-text\n    needs: [stap_{i}]\n"
        f"    with: {{text: '${{{{ steps.stup_{i}.outputs.text }}}}'}}\n" for i in range(count))
    started = time.perf_counter()
    load = load_group_text(text, Path("typos.yaml"))
    assert time.perf_counter() - started < 10
    unknown = [d for d in load.diagnostics if d.rule == "unknown-step"]
    assert len(unknown) == 2 * count
    assert unknown[0].hint == "did you mean 'step_0'?"
    assert 0 < sum(1 for d in unknown if d.hint) < count
