"""skillgrove studio in a real browser: Debian's chromium driven by Playwright, against a real
``skillgrove serve http`` process on a copy of the bundled library.

What a business user does, with mouse and keyboard: build a three-step group from the palette
by dragging and connecting, see a type mismatch and an unknown reference at the node they
concern, fix them and save (the file equals ``fixtures/studio/pdf-digest.yaml`` and passes
``skillgrove check``); change one field of a hand-written, commented group file (only that line
changes); run a group with side effects after confirming, each step going running -> success.
The main views are saved as screenshots under ``docs/studio/`` when
``SKILLGROVE_SCREENSHOTS=docs/studio`` is set. An axe-core audit of each view
finds nothing critical, and every control is reachable with the Tab key.

Playwright never downloads a browser here: it launches ``/usr/bin/chromium`` (``.ci/setup``
installs it). The tests are marked ``browser``; ``.ci/run`` fails when they were skipped.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from skillgrove.runtime.paths import bundled_library
from tests.test_http_server import Server, start_server, stop_server

pytestmark = pytest.mark.browser

CHROMIUM = Path(os.environ.get("SKILLGROVE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "studio"
AXE = FIXTURES / "axe.min.js"
SHOTS = Path(os.environ["SKILLGROVE_SCREENSHOTS"]) if os.environ.get("SKILLGROVE_SCREENSHOTS") \
    else None
"""Where the screenshots go: ``SKILLGROVE_SCREENSHOTS=docs/studio`` refreshes the committed
ones; without it they are taken (the views must render) and thrown away."""
REPORT = str(bundled_library() / "samples" / "quarterly_report.pdf")
HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
HOSTILE_GROUP = f"""id: hostile-text
description: '{HOSTILE}'
examples: [shows markup as text]
steps:
  - id: stats
    skill: text-statistics
    with:
      text: '{HOSTILE}'
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("studio") / "library"
    shutil.copytree(bundled_library(), root)
    shutil.copy(FIXTURES / "annotated.yaml", root / "groups" / "annotated.yaml")
    (root / "groups" / "hostile-text.yaml").write_text(HOSTILE_GROUP, encoding="utf-8")
    (root / "groups" / "drafts").mkdir()
    shutil.copy(FIXTURES / "pdf-word-count.yaml", root / "groups" / "drafts")  # as suggested
    return root


@pytest.fixture(scope="module")
def server(library: Path) -> Iterator[Server]:
    running = start_server(library.parent, library=library)
    yield running
    stop_server(running)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"no {CHROMIUM}: .ci/setup installs Debian's chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def studio_page(browser: Any, server: Server, width: int, height: int) -> Iterator[Any]:
    """The studio in a fresh browser context of the given size; no error may reach the page."""
    # bypass_csp only so that the test can add axe-core to the page; the studio itself runs
    # under its own Content-Security-Policy.
    context = browser.new_context(viewport={"width": width, "height": height}, bypass_csp=True)
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda exc: problems.append(str(exc)))
    opened.goto(f"{server.url}/studio/")
    opened.get_by_role("button", name="report-analysis", exact=True).wait_for()
    yield opened
    context.close()
    assert problems == [], problems


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Any]:
    yield from studio_page(browser, server, 1440, 900)


@pytest.fixture
def wide_page(browser: Any, server: Server) -> Iterator[Any]:
    """The studio on a large screen: a five-step group and its inputs fit at the first zoom."""
    yield from studio_page(browser, server, 1920, 1200)


def shot(page: Any, name: str) -> None:
    if SHOTS is None:
        page.screenshot()
        return
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def audit(page: Any) -> list[dict[str, Any]]:
    """axe-core's violations on the page as it is now."""
    page.add_script_tag(path=str(AXE))
    result: dict[str, Any] = page.evaluate("""async () => await axe.run(document, {
        resultTypes: ['violations'], rules: {'color-contrast': {enabled: true}}})""")
    violations: list[dict[str, Any]] = result["violations"]
    return violations


def assert_accessible(page: Any) -> None:
    violations = audit(page)
    serious = [(v["id"], v["help"], [n["target"] for n in v["nodes"]][:3])
               for v in violations if v["impact"] in ("critical", "serious")]
    assert serious == []
    # Every control has a name a screen reader can say, and none is kept out of the tab order.
    unnamed = page.evaluate("""() => [...document.querySelectorAll(
            'button, input, select, textarea, a[href]')]
        .filter(e => !e.disabled && e.offsetParent !== null)
        .filter(e => e.tabIndex < 0 || !(e.labels && e.labels.length || e.getAttribute('aria-label')
                     || e.getAttribute('aria-labelledby') || e.textContent.trim()))
        .map(e => e.outerHTML.slice(0, 120))""")
    assert unnamed == []


def tab_reaches(page: Any, selector: str, limit: int = 400) -> bool:
    """Whether pressing Tab from the top of the page reaches the element."""
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement === document.querySelector(s)",
                         selector):
            return True
    return False


def drag_skill(page: Any, skill: str, x: float = 300, y: float = 200) -> None:
    """Drag a skill from the palette and drop it at (x, y) of the canvas."""
    page.get_by_test_id(f"palette-{skill}").drag_to(page.get_by_test_id("canvas"),
                                                    target_position={"x": x, "y": y})


def steady_box(page: Any, test_id: str) -> dict[str, float]:
    """The element's box once the canvas stopped moving (it re-fits after each change)."""
    box = None
    for _ in range(50):
        page.wait_for_timeout(150)
        now = page.get_by_test_id(test_id).bounding_box()
        if now is not None and now == box:
            return now
        box = now
    raise AssertionError(f"{test_id} kept moving")


def connect(page: Any, output: str, input_: str, *, expect_hint: str | None = None) -> None:
    """Drag from an output handle to an input handle with the mouse."""
    source = steady_box(page, output)
    target = steady_box(page, input_)
    page.mouse.move(source["x"] + source["width"] / 2, source["y"] + source["height"] / 2)
    page.mouse.down()
    x, y = target["x"] + target["width"] / 2, target["y"] + target["height"] / 2
    page.mouse.move(x - 30, y - 30, steps=8)
    page.mouse.move(x, y, steps=8)
    if expect_hint is not None:
        hint = page.get_by_test_id("connection-hint")
        hint.wait_for()
        assert expect_hint in hint.inner_text()
        shot(page, "connect-mismatch")
    page.mouse.up()


def select_step(page: Any, step: str) -> None:
    page.get_by_test_id(f"node-{step}").locator(".step-title").click()
    page.get_by_role("heading", name=f"Step {step}").wait_for()


def wait_node_error(page: Any, step: str, text: str) -> None:
    """Wait until the node of ``step`` shows an error with ``text`` in it."""
    page.get_by_test_id(f"diags-{step}").filter(has_text=text).wait_for()


def wait_valid(page: Any) -> None:
    page.get_by_test_id("check-status").filter(has_text="valid").wait_for()


# -- the library ------------------------------------------------------------------------------


def test_the_library_shows_groups_skills_and_search(page: Any) -> None:
    groups = page.get_by_role("region", name="Groups").get_by_role("table")
    assert "report-analysis" in groups.inner_text() and "valid" in groups.inner_text()
    skills = page.get_by_role("region", name="Skills").get_by_role("table").inner_text()
    assert "pdf-to-text" in skills and "path, max_pages, password" in skills
    page.get_by_label("Request", exact=True).fill("summarize the quarterly report PDF and email the key "
                                      "numbers to my team")
    page.keyboard.press("Enter")
    assert "report-analysis" in page.get_by_test_id("search-result").inner_text()
    page.evaluate("() => window.scrollTo(0, 0)")
    shot(page, "library")
    page.get_by_role("button", name="Show which groups use pdf-to-text").click()
    uses = page.get_by_test_id("impact-pdf-to-text")
    uses.get_by_role("button", name="report-analysis").wait_for()
    assert "annotated-digest" in uses.inner_text()
    shot(page, "impact")
    assert_accessible(page)
    assert tab_reaches(page, "#search")
    assert tab_reaches(page, "header nav button:nth-of-type(3)")  # New group


def test_markup_from_the_library_is_shown_as_text(page: Any) -> None:
    row = page.get_by_role("row").filter(has_text="hostile-text")
    assert HOSTILE in row.inner_text()
    page.get_by_role("button", name="hostile-text", exact=True).click()
    page.get_by_test_id("node-stats").wait_for()
    assert page.get_by_label("description", exact=True).input_value() == HOSTILE
    assert page.evaluate("() => window.pwned") is None
    assert page.locator("img[src=x]").count() == 0


# -- building a group by hand -----------------------------------------------------------------


def test_build_a_three_step_group_by_dragging_and_connecting(page: Any, library: Path) -> None:
    page.get_by_role("button", name="New group").click()
    page.get_by_label("id", exact=True).fill("pdf-digest")
    page.get_by_label("File name", exact=True).fill("pdf-digest.yaml")
    page.get_by_label("name", exact=True).fill("PDF digest")
    page.get_by_label("description", exact=True).fill("Read a PDF, count its words and summarize it.")
    page.get_by_label("examples (one request a line)", exact=True).fill("count the words of this PDF")
    page.get_by_label("New input name", exact=True).fill("pdf_path")
    page.get_by_role("button", name="Add input").click()

    drag_skill(page, "pdf-to-text", 435, 190)
    page.get_by_label("path (required): string", exact=True).fill("${{ inputs.pdf_path }}")
    drag_skill(page, "text-statistics", 435, 360)
    drag_skill(page, "summarize-text", 435, 530)
    for step in ("pdf_to_text", "text_statistics", "summarize_text"):
        page.get_by_test_id(f"node-{step}").wait_for()

    # pages (an integer) into text (a string): flagged while dragging, then at the node
    connect(page, "out-pdf_to_text-pages", "in-text_statistics-text",
            expect_hint="Type mismatch: pages is integer, text_statistics.text expects string")
    wait_node_error(page, "text_statistics",
                    "expects string but 'steps.pdf_to_text.outputs.pages' is integer")
    # a reference to a step that does not exist, typed by hand
    select_step(page, "summarize_text")
    page.get_by_label("text (required): string", exact=True).fill("${{ steps.pdf_reader.outputs.text }}")
    wait_node_error(page, "summarize_text", "unknown step 'pdf_reader'")
    assert "unknown step 'pdf_reader'" in page.locator(".panel").inner_text()
    shot(page, "canvas-errors")
    assert_accessible(page)

    connect(page, "out-pdf_to_text-text", "in-text_statistics-text")
    connect(page, "out-pdf_to_text-text", "in-summarize_text-text")
    select_step(page, "summarize_text")
    page.get_by_label("max_sentences: integer", exact=True).fill("3")
    page.get_by_label("retry: max attempts", exact=True).fill("2")
    page.get_by_label("timeout (e.g. 30s)", exact=True).fill("20s")
    page.locator(".react-flow__pane").click(position={"x": 8, "y": 8})  # back to the group
    page.get_by_label("New output name", exact=True).fill("summary")
    page.get_by_label("Output value", exact=True).select_option(label="summarize_text.summary")
    page.get_by_role("button", name="Add output").click()
    wait_valid(page)
    assert page.get_by_test_id("diags-text_statistics").count() == 0
    assert page.get_by_test_id("diags-summarize_text").count() == 0

    page.get_by_role("button", name="Save…").click()
    diff = page.get_by_test_id("diff")
    diff.wait_for()
    assert "+++ b/groups/pdf-digest.yaml" in diff.inner_text()
    shot(page, "save-diff")
    assert_accessible(page)
    page.get_by_role("button", name="Write file").click()
    page.get_by_test_id("message").filter(has_text="Saved groups/pdf-digest.yaml").wait_for()
    wait_valid(page)
    shot(page, "canvas")

    written = (library / "groups" / "pdf-digest.yaml").read_text(encoding="utf-8")
    assert written == (FIXTURES / "pdf-digest.yaml").read_text(encoding="utf-8")
    check = subprocess.run([sys.executable, "-m", "skillgrove.runtime.cli", "check",
                            str(library), "--json"], capture_output=True, text=True,
                           env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=120)
    report = json.loads(check.stdout)
    assert check.returncode == 0, check.stdout + check.stderr
    assert not [d for d in _diagnostics(report)
                if "pdf-digest" in str(d.get("path")) and d.get("severity") == "error"]


def _diagnostics(report: Any) -> list[dict[str, Any]]:
    if isinstance(report, dict):
        found = report.get("diagnostics") or report.get("errors") or []
        return [d for d in found if isinstance(d, dict)]
    return []


def test_editing_one_field_of_a_commented_file_changes_only_that_line(
        page: Any, library: Path) -> None:
    file = library / "groups" / "annotated.yaml"
    before = file.read_text(encoding="utf-8")
    page.get_by_role("button", name="annotated-digest").click()
    page.get_by_test_id("node-summary").wait_for()
    select_step(page, "summary")
    field = page.get_by_label("max_sentences: integer", exact=True)
    field.fill("")
    field.type("5")
    wait_valid(page)
    page.get_by_role("button", name="Save…").click()
    diff = page.get_by_test_id("diff").inner_text()
    assert [line for line in diff.splitlines() if line.startswith(("+", "-"))
            and not line.startswith(("+++", "---"))] == [
        "-      max_sentences: 2   # short on purpose",
        "+      max_sentences: 5   # short on purpose"]
    page.get_by_role("button", name="Write file").click()
    page.get_by_test_id("message").filter(has_text="Saved groups/annotated.yaml").wait_for()
    after = file.read_text(encoding="utf-8")
    changed = [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(),
                                                     lineterm="", n=0)
               if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]
    assert changed == ["-      max_sentences: 2   # short on purpose",
                       "+      max_sentences: 5   # short on purpose"]


# -- trying a group ---------------------------------------------------------------------------


def test_run_a_group_with_side_effects_after_confirming(wide_page: Any, server: Server) -> None:
    page = wide_page
    page.get_by_role("button", name="report-analysis", exact=True).click()
    page.get_by_test_id("node-notify").wait_for()
    # the advanced toggle: the same values as JSON
    page.get_by_label("Advanced: write inputs and context as JSON", exact=True).check()
    page.get_by_label("inputs (JSON)", exact=True).fill(json.dumps({"pdf_path": REPORT}))
    # a flat context is refused, in the words of every interface
    page.get_by_label("context (JSON)", exact=True).fill(json.dumps({
        "team_email": "team@larkspur.example"}))
    page.get_by_role("button", name="Plan").click()
    page.get_by_test_id("message").filter(has_text="Cannot plan").wait_for(timeout=120_000)
    assert page.get_by_test_id("message").inner_text() == (
        "Cannot plan: context.team_email: unknown field: a context is {values, recent_skills, "
        'conversation}; put what you know under values: {"values": {"team_email": ...}}')
    page.get_by_label("context (JSON)", exact=True).fill(json.dumps({"values": {
        "team_email": "team@larkspur.example", "report_name": "Q3 2024"}}))
    page.get_by_role("button", name="Plan").click()
    page.get_by_test_id("message").wait_for(state="detached")  # the refusal is gone
    # the first call after a save may wait for the library's re-index
    page.get_by_test_id("plan").or_(page.get_by_test_id("message")).wait_for(timeout=120_000)
    assert page.get_by_test_id("message").count() == 0, page.get_by_test_id("message").inner_text()
    assert "notify sends email" in page.get_by_test_id("plan-effects").inner_text()
    page.get_by_role("button", name="Run", exact=True).click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    assert "step notify sends email (skill send-email)" in dialog.inner_text()
    shot(page, "run-confirm")
    page.get_by_role("button", name="Run anyway").click()
    page.get_by_test_id("message").filter(has_text="success").wait_for(timeout=120_000)
    for step in ("extract_text", "metrics", "summarize", "figures", "notify"):
        node = page.get_by_test_id(f"node-{step}")
        assert node.get_attribute("data-history") == "running success", step
    shot(page, "run")
    assert_accessible(page)
    assert tab_reaches(page, ".react-flow__node[data-id=notify]")  # steps: reachable with Tab
    page.keyboard.press("Enter")  # and chosen with Enter: its properties open
    page.get_by_role("heading", name="Step notify").wait_for()
    assert list(server.outbox.glob("*.eml")), "the group's mail went to the outbox"


# -- drafts -------------------------------------------------------------------------------------


def test_review_a_draft_on_the_canvas_and_approve_it(page: Any, library: Path,
                                                     server: Server) -> None:
    row = page.get_by_test_id("draft-pdf-word-count")
    assert "passes" in row.inner_text() and "pdf-to-text → text-statistics" in row.inner_text()
    row.scroll_into_view_if_needed()
    shot(page, "drafts")
    page.get_by_role("button", name="Edit draft pdf-word-count").click()
    page.get_by_test_id("node-text_statistics").wait_for()
    wait_valid(page)
    page.get_by_role("button", name="Library").click()
    page.get_by_role("button", name="Approve draft pdf-word-count").click()
    page.get_by_test_id("message").filter(has_text="Approved: groups/pdf-word-count.yaml").wait_for()
    assert (library / "groups" / "pdf-word-count.yaml").read_text(encoding="utf-8") == \
        (FIXTURES / "pdf-word-count.yaml").read_text(encoding="utf-8")
    assert not (library / "groups" / "drafts" / "pdf-word-count.yaml").exists()
    page.get_by_role("button", name="Library").click()
    page.get_by_role("button", name="pdf-word-count", exact=True).wait_for()
    assert page.get_by_test_id("draft-pdf-word-count").count() == 0


# -- the keyboard and the token -----------------------------------------------------------------


def test_a_group_can_be_built_and_connected_with_the_keyboard_alone(page: Any) -> None:
    page.get_by_role("button", name="New group").focus()
    page.keyboard.press("Enter")
    for skill in ("pdf-to-text", "summarize-text"):
        page.get_by_role("button", name=f"Add {skill} to the canvas").focus()
        page.keyboard.press("Enter")
        page.get_by_test_id(f"node-{skill.replace('-', '_')}").wait_for()
    page.get_by_label("Connect text from an output", exact=True).focus()
    page.keyboard.press("ArrowDown")  # the first output offered: pdf_to_text.text (string)
    assert page.get_by_label("text (required): string", exact=True).input_value() == \
        "${{ steps.pdf_to_text.outputs.text }}"
    page.get_by_role("button", name="Save…").focus()
    page.keyboard.press("Enter")
    diff = page.get_by_test_id("diff").inner_text()
    assert "+    needs: [pdf_to_text]" in diff
    assert "+      text: ${{ steps.pdf_to_text.outputs.text }}" in diff
    page.keyboard.press("Escape")
    page.get_by_test_id("diff").wait_for(state="detached")


def test_with_a_token_the_page_loads_and_sends_the_token(browser: Any, library: Path,
                                                         tmp_path: Path) -> None:
    token = "studio-s3cret"
    guarded = start_server(tmp_path / "guarded", "--token", token, "--no-watch", ready=False,
                           library=library)
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{guarded.url}/studio/#token={token}")
        page.get_by_role("button", name="report-analysis", exact=True).wait_for()
        assert "token" not in page.url  # taken out of the address once read
        other = browser.new_context().new_page()
        other.goto(f"{guarded.url}/studio/")
        other.get_by_label("This server needs its API token", exact=True).fill(token)
        other.keyboard.press("Enter")
        other.get_by_role("button", name="report-analysis", exact=True).wait_for()
        context.close()
        other.context.close()
    finally:
        stop_server(guarded)


# -- what a user of n8n, Kestra or Dify expects (#29) -------------------------------------------


def add_input(page: Any, name: str, type_: str = "string", default: str = "") -> None:
    page.get_by_label("New input name", exact=True).fill(name)
    page.get_by_label("Type", exact=True).select_option(type_)
    page.get_by_label("Default value", exact=True).fill(default)
    page.get_by_role("button", name="Add input").click()
    page.get_by_test_id(f"node-inputs.{name}").wait_for()


def add_context(page: Any, name: str) -> None:
    page.get_by_label("New context value name", exact=True).fill(name)
    page.get_by_role("button", name="Add context value").click()
    page.get_by_test_id(f"node-context.{name}").wait_for()


def back_to_group(page: Any) -> None:
    """Click the empty canvas: the panel shows the group again."""
    page.locator(".react-flow__pane").click(position={"x": 5, "y": 400})
    page.get_by_role("heading", name="Group", exact=True).wait_for()


def test_build_report_analysis_from_an_empty_canvas_by_clicking_and_dragging(
        wide_page: Any, library: Path, server: Server) -> None:
    """The bundled report-analysis, rebuilt as a new group without typing one expression:
    inputs and context values are nodes, their handles and the steps' outputs are dragged onto
    the inputs they feed, the mail's text takes values from a picker, the condition from a
    builder. Saved, it runs from the form and its mail reaches the outbox."""
    page = wide_page
    page.get_by_role("button", name="New group").click()
    assert "Drag a skill" in page.get_by_test_id("empty-hint").inner_text()
    shot(page, "empty-canvas")
    page.get_by_label("id", exact=True).fill("report-mail")
    assert page.get_by_label("File name", exact=True).input_value() == "report-mail.yaml"
    page.get_by_label("name", exact=True).fill("Report summary by mail")
    page.get_by_label("description", exact=True).fill(
        "Read a PDF report, pull out its key figures, summarize it and mail both to the team.")
    page.get_by_label("examples (one request a line)", exact=True).fill(
        "summarize the quarterly report PDF and email the key numbers to my team")
    add_input(page, "pdf_path")
    add_input(page, "max_metrics", "integer", "8")
    add_input(page, "summary_sentences", "integer", "4")
    add_context(page, "team_email")
    add_context(page, "report_name")
    assert page.get_by_test_id("empty-hint").count() == 0

    drag_skill(page, "pdf-to-text", 330, 230)
    # a required input that nothing reads: the hint says what to do on the canvas
    unused = page.get_by_test_id("group-diagnostics").locator("li[data-rule=unused-input]")
    unused.wait_for()
    assert "drag the handle of its node" in unused.inner_text() and "${{" not in unused.inner_text()
    drag_skill(page, "extract-metrics", 330, 420)
    drag_skill(page, "summarize-text", 160, 620)
    drag_skill(page, "markdown-table", 560, 620)
    drag_skill(page, "send-email", 520, 840)
    for step in ("pdf_to_text", "extract_metrics", "summarize_text", "markdown_table", "send_email"):
        page.get_by_test_id(f"node-{step}").wait_for()

    connect(page, "out-inputs.pdf_path", "in-pdf_to_text-path")
    connect(page, "out-pdf_to_text-text", "in-extract_metrics-text")
    connect(page, "out-inputs.max_metrics", "in-extract_metrics-limit")
    connect(page, "out-pdf_to_text-text", "in-summarize_text-text")
    connect(page, "out-inputs.summary_sentences", "in-summarize_text-max_sentences")
    connect(page, "out-extract_metrics-metrics", "in-summarize_text-metrics")
    connect(page, "out-extract_metrics-metrics", "in-markdown_table-rows")
    connect(page, "out-context.team_email", "in-send_email-to")
    connect(page, "out-inputs.pdf_path", "in-send_email-attachments")  # a list of one

    # named as in the bundled file: the references follow
    for old, new in (("pdf_to_text", "extract_text"), ("extract_metrics", "metrics"),
                     ("summarize_text", "summarize"), ("markdown_table", "figures"),
                     ("send_email", "notify")):
        select_step(page, old)
        page.get_by_label("step id (its name in the group)", exact=True).fill(new)
        page.keyboard.press("Enter")
        page.get_by_test_id(f"node-{new}").wait_for()

    select_step(page, "figures")
    page.get_by_label("columns: array", exact=True).fill("label, display, change")
    page.get_by_label("headers: object", exact=True).fill(
        '{"label": "Metric", "display": "Value", "change": "Change"}')
    select_step(page, "notify")
    page.get_by_label("subject (required): string", exact=True).fill("Report summary: ")
    page.get_by_label("Insert a value into subject", exact=True).select_option(
        label="context.report_name (any)")
    body = page.get_by_label("body (required): string", exact=True)
    body.fill("")
    page.get_by_label("Insert a value into body", exact=True).select_option(
        label="summarize.summary (string)")
    body.focus()
    page.keyboard.press("Control+End")
    page.keyboard.type("\n\nKey figures\n\n")
    page.get_by_label("Insert a value into body", exact=True).select_option(
        label="figures.markdown (string)")
    page.get_by_label("Condition: value", exact=True).select_option(
        label="context.team_email (string | array)")
    page.get_by_label("Condition: test", exact=True).select_option(label="is set")
    page.get_by_role("button", name="Set condition").click()
    page.get_by_label("retry: max attempts", exact=True).fill("3")
    page.get_by_label("retry: first wait (e.g. 1s)", exact=True).fill("1s")
    page.get_by_label("timeout (e.g. 30s)", exact=True).fill("30s")

    back_to_group(page)
    for name, output in (("summary", "summarize.summary"), ("metrics", "metrics.metrics"),
                         ("delivered", "notify.delivered"), ("message_id", "notify.message_id")):
        page.get_by_label("Output value", exact=True).select_option(label=output)
        assert page.get_by_label("New output name", exact=True).input_value() == name
        page.get_by_role("button", name="Add output").click()
    wait_valid(page)
    shot(page, "build-report")
    assert_accessible(page)

    page.get_by_role("button", name="Save…").click()
    page.get_by_test_id("diff").wait_for()
    page.get_by_role("button", name="Write file").click()
    page.get_by_test_id("message").filter(has_text="Saved groups/report-mail.yaml").wait_for()

    # the bundled group's steps, wiring and outputs; only the mail's subject and body are
    # simpler (the bundled subject falls back to the PDF's title, which takes an expression)
    saved = yaml.safe_load((library / "groups" / "report-mail.yaml").read_text(encoding="utf-8"))
    bundled = yaml.safe_load((library / "groups" / "report-analysis.yaml").read_text(encoding="utf-8"))
    assert saved["inputs"] == {
        "pdf_path": {"type": "string", "required": True},
        "max_metrics": {"type": "integer", "default": 8},
        "summary_sentences": {"type": "integer", "default": 4}}
    assert saved["outputs"] == bundled["outputs"]
    mail = saved["steps"][-1]
    for step, original in zip(saved["steps"][:-1], bundled["steps"][:-1], strict=True):
        assert step["id"] == original["id"] and step["skill"] == original["skill"]
        assert step["with"] == original["with"], step["id"]
        assert sorted(step.get("needs", [])) == sorted(original.get("needs", [])), step["id"]
    original = bundled["steps"][-1]
    for key in ("id", "skill", "if", "retry", "timeout"):
        assert mail[key] == original[key], key
    assert {k: v for k, v in mail["with"].items() if k not in ("subject", "body")} == \
        {k: v for k, v in original["with"].items() if k not in ("subject", "body")}
    assert mail["with"]["subject"] == "Report summary: ${{ context.report_name }}"
    assert mail["with"]["body"] == ("${{ steps.summarize.outputs.summary }}\n\nKey figures\n\n"
                                    "${{ steps.figures.outputs.markdown }}")
    assert sorted(mail["needs"]) == ["figures", "summarize"]

    # run it through the form: the report from the library's samples, the context typed
    before = set(server.outbox.glob("*.eml"))
    page.get_by_label("A sample file for pdf_path", exact=True).select_option(label="quarterly_report.pdf")
    assert page.get_by_label("pdf_path (required)", exact=True).input_value() == \
        str(library / "samples" / "quarterly_report.pdf")
    assert page.get_by_test_id("run-sample-chosen-pdf_path").inner_text() == \
        "the library's sample quarterly_report.pdf"
    page.get_by_label("team_email", exact=True).fill("team@larkspur.example")
    page.get_by_label("report_name", exact=True).fill("Q3 2024")
    shot(page, "run-form")
    page.get_by_role("button", name="Plan").click()
    # the first call after a save may wait for the library's re-index
    page.get_by_test_id("plan-effects").or_(page.get_by_role("alert")).or_(
        page.get_by_test_id("message").filter(has_text="Cannot plan")).wait_for(timeout=120_000)
    assert page.get_by_test_id("plan-effects").is_visible(), page.locator(
        "[role=alert], [data-testid=message]").all_inner_texts()
    assert "notify sends email" in page.get_by_test_id("plan-effects").inner_text()
    page.get_by_test_id("plan").scroll_into_view_if_needed()
    shot(page, "plan")
    assert_accessible(page)
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_role("dialog").wait_for()
    page.get_by_role("button", name="Run anyway").click()
    page.get_by_test_id("message").filter(has_text="success").wait_for(timeout=120_000)
    mails = set(server.outbox.glob("*.eml")) - before
    assert len(mails) == 1
    text = mails.pop().read_text(encoding="utf-8")
    assert "Subject: Report summary: Q3 2024" in text
    assert "To: team@larkspur.example" in text
    assert "Key figures" in text and "| Metric | Value | Change |" in text
    assert "quarterly_report.pdf" in text  # attached


def test_undo_and_redo_every_edit_and_a_warning_before_leaving(page: Any) -> None:
    page.get_by_role("button", name="report-analysis", exact=True).click()
    page.get_by_test_id("node-figures").wait_for()
    undo = page.get_by_role("button", name="Undo", exact=True)
    assert undo.is_disabled()
    edges = page.locator(".react-flow__edge").count()

    select_step(page, "figures")
    page.get_by_role("button", name="Remove step").click()
    page.get_by_test_id("node-figures").wait_for(state="detached")
    assert page.locator(".react-flow__edge").count() < edges
    page.keyboard.press("Control+z")
    page.get_by_test_id("node-figures").wait_for()
    page.wait_for_function("(n) => document.querySelectorAll('.react-flow__edge').length === n",
                           arg=edges)
    assert page.get_by_test_id("unsaved").count() == 0
    page.keyboard.press("Control+Shift+z")
    page.get_by_test_id("node-figures").wait_for(state="detached")
    undo.click()
    page.get_by_test_id("node-figures").wait_for()
    # the Delete key on a chosen node removes it too, and Ctrl+Z brings it back
    select_step(page, "figures")
    page.get_by_test_id("node-figures").locator(".step-title").focus()
    page.keyboard.press("Delete")
    page.get_by_test_id("node-figures").wait_for(state="detached")
    page.locator("body").focus()
    page.keyboard.press("Control+z")
    page.get_by_test_id("node-figures").wait_for()

    # a connection made with the picker, undone with the button, redone with the keys
    select_step(page, "summarize")
    field = page.get_by_label("text (required): string", exact=True)
    page.get_by_label("Connect text from an output", exact=True).select_option(
        label="extract_text.title (string)")
    assert field.input_value() == "${{ steps.extract_text.outputs.title }}"
    undo.click()
    assert field.input_value() == "${{ steps.extract_text.outputs.text }}"
    page.get_by_role("button", name="Redo", exact=True).click()
    assert field.input_value() == "${{ steps.extract_text.outputs.title }}"
    page.get_by_test_id("unsaved").wait_for()
    # the library view keeps the editor as it was, and Ctrl+Z there does not touch it
    page.get_by_role("button", name="Library", exact=True).click()
    page.locator("body").focus()
    page.keyboard.press("Control+z")
    page.get_by_role("button", name="Editor", exact=True).click()
    assert field.input_value() == "${{ steps.extract_text.outputs.title }}"

    # leaving: inside the studio a dialog asks, and the browser asks on reload
    page.get_by_role("button", name="New group").click()
    dialog = page.get_by_role("dialog", name="Leave without saving?")
    dialog.wait_for()
    shot(page, "leave-unsaved")
    assert_accessible(page)
    page.get_by_role("button", name="Keep editing").click()
    assert page.get_by_test_id("node-figures").is_visible()
    asked: list[str] = []
    page.once("dialog", lambda d: (asked.append(d.type), d.dismiss()))
    page.evaluate("() => window.location.reload()")  # dismissed: the page stays
    page.wait_for_timeout(800)
    assert asked == ["beforeunload"]
    assert page.get_by_test_id("node-figures").is_visible()


def test_the_picker_offers_inputs_and_upstream_outputs_never_a_downstream_one(page: Any) -> None:
    page.get_by_role("button", name="report-analysis", exact=True).click()
    page.get_by_test_id("node-inputs.pdf_path").wait_for()
    for node in ("inputs.max_metrics", "inputs.summary_sentences", "context.team_email",
                 "context.report_name"):
        assert page.get_by_test_id(f"node-{node}").is_visible()
    assert "string" in page.get_by_test_id("node-inputs.pdf_path").inner_text()
    # a screen reader names the nodes; Tab reaches an input node and Enter opens it
    assert page.locator(".react-flow__node[data-id='inputs.pdf_path']").get_attribute(
        "aria-label") == "Group input pdf_path"
    assert tab_reaches(page, ".react-flow__node[data-id='inputs.pdf_path']")
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Group input pdf_path").wait_for()
    assert page.get_by_test_id("source-readers").inner_text() == "Read by extract_text, notify."
    # (with the keyboard: at this size the node may lie beyond the canvas's right edge, and
    # focusing it pans the canvas to it)
    assert tab_reaches(page, ".react-flow__node[data-id='context.team_email']")
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Context value team_email").wait_for()
    assert page.get_by_test_id("source-readers").inner_text() == "Read by notify."
    assert page.get_by_role("button", name="Remove context value").count() == 0
    page.get_by_role("button", name="fit view").click()  # the whole group in sight again
    page.wait_for_timeout(300)

    def offered(step: str, field: str) -> list[str]:
        select_step(page, step)
        picker = page.get_by_label(f"Connect {field} from an output", exact=True)
        return [o for o in picker.locator("option").all_inner_texts() if o != "connect from…"]

    first = offered("extract_text", "path")
    assert first[0] == "inputs.pdf_path (string)"
    assert "inputs.max_metrics (integer) — type mismatch" in first
    assert "context.team_email (string | array) — type mismatch" in first  # the input it feeds
    assert "context.report_name (any)" in first
    assert not [o for o in first if o.startswith(("metrics.", "summarize.", "figures.", "notify.",
                                                  "extract_text."))]
    middle = offered("summarize", "text")
    assert "extract_text.text (string)" in middle
    assert "metrics.count (integer) — type mismatch" in middle
    assert not [o for o in middle if o.startswith(("summarize.", "notify."))]
    assert "figures.markdown (string)" in middle  # side by side with summarize: no cycle
    last = offered("notify", "body")
    assert "figures.markdown (string)" in last and "summarize.summary (string)" in last

    # on the canvas too: notify's output dropped on extract_text's input is refused
    connect(page, "out-notify-delivered", "in-extract_text-password")
    page.wait_for_timeout(400)
    assert page.get_by_test_id("unsaved").count() == 0


def test_nodes_stay_where_dropped_and_auto_layout_is_a_button(page: Any) -> None:
    page.get_by_role("button", name="New group").click()
    page.get_by_test_id("empty-hint").wait_for()
    drag_skill(page, "pdf-to-text", 500, 140)
    first = steady_box(page, "node-pdf_to_text")
    canvas = page.get_by_test_id("canvas").bounding_box()
    assert abs(first["x"] + first["width"] / 2 - (canvas["x"] + 500)) < 4
    drag_skill(page, "summarize-text", 250, 420)
    second = steady_box(page, "node-summarize_text")
    assert abs(second["x"] + second["width"] / 2 - (canvas["x"] + 250)) < 4
    assert steady_box(page, "node-pdf_to_text") == first  # adding a node moved no other

    # a node dragged by its title stays where it is let go
    title = page.get_by_test_id("node-summarize_text").locator(".step-title")
    box = title.bounding_box()
    page.mouse.move(box["x"] + 20, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + 120, box["y"] + 60, steps=10)
    page.mouse.up()
    moved = steady_box(page, "node-summarize_text")
    # where the pointer let it go (less the few pixels before a drag starts)
    assert 80 <= moved["x"] - second["x"] <= 101 and 35 <= moved["y"] - second["y"] <= 61
    page.keyboard.press("Control+z")
    assert abs(steady_box(page, "node-summarize_text")["x"] - second["x"]) < 4

    # auto-layout: two steps that do not depend on each other side by side, in one row
    page.get_by_role("button", name="Auto-layout").click()
    page.wait_for_timeout(400)
    left, right = steady_box(page, "node-pdf_to_text"), steady_box(page, "node-summarize_text")
    assert abs(left["y"] - right["y"]) < 2 and left["x"] != right["x"]
    page.get_by_role("button", name="Undo", exact=True).click()  # where the user had them
    page.wait_for_timeout(300)
    after = steady_box(page, "node-summarize_text")["y"] - steady_box(page, "node-pdf_to_text")["y"]
    assert abs(after - (second["y"] - first["y"])) < 4


def test_handle_labels_are_readable_at_the_first_zoom(page: Any) -> None:
    page.get_by_role("button", name="report-analysis", exact=True).click()
    page.get_by_test_id("node-notify").wait_for()
    steady_box(page, "node-notify")
    sizes = page.evaluate("""() => {
        const scale = new DOMMatrixReadOnly(getComputedStyle(
            document.querySelector('.react-flow__viewport')).transform).a;
        return [...document.querySelectorAll('.port span')].map(
            s => parseFloat(getComputedStyle(s).fontSize) * scale);
    }""")
    assert sizes and min(sizes) >= 11, sizes


def test_palette_descriptions_word_filter_and_plain_messages(page: Any) -> None:
    page.get_by_label("Request", exact=True).fill("summarize the quarterly report PDF and email "
                                                  "the key numbers to my team")
    page.keyboard.press("Enter")
    answer = page.get_by_test_id("search-result")
    answer.get_by_text("An agent asking this gets the group").wait_for()
    assert not re.search(r"score \d", answer.inner_text())
    answer.get_by_text("Details (scores)").click()
    assert re.search(r"group report-analysis: score \d+\.\d\d", answer.inner_text())

    page.get_by_role("button", name="New group").click()
    entry = page.get_by_test_id("palette-pdf-to-text")
    assert "text" in entry.locator(".description").inner_text().lower()  # shown, not on hover
    page.get_by_label("Find a skill (words in its name or description)").fill("table markdown")
    page.get_by_test_id("palette-markdown-table").wait_for()
    assert page.get_by_test_id("palette-pdf-to-text").count() == 0
    page.get_by_label("Find a skill (words in its name or description)").fill("")

    page.get_by_label("id", exact=True).fill("word-count")
    assert page.get_by_label("File name", exact=True).input_value() == "word-count.yaml"
    page.get_by_label("File name", exact=True).fill("counting.yaml")
    page.get_by_label("id", exact=True).fill("word-counts")
    assert page.get_by_label("File name", exact=True).input_value() == "counting.yaml"
    page.get_by_role("button", name="Add pdf-to-text to the canvas").click()
    page.get_by_test_id("check-status").filter(has_text="1 problem").wait_for()
    page.get_by_role("button", name="Save…").click()
    words = page.get_by_role("dialog").inner_text()
    assert "1 problem to fix" in words and "errors" not in words
    page.keyboard.press("Escape")


def test_the_run_form_follows_the_input_schema(page: Any, library: Path) -> None:
    page.get_by_role("button", name="ticket-escalation", exact=True).click()
    form = page.get_by_role("group", name="Run inputs")
    form.wait_for()
    labels = form.locator("label").all_inner_texts()
    assert {"ticket_id (required)", "priority (required)", "summary (required)",
            "category"} <= set(labels)
    priority = page.get_by_label("priority (required)", exact=True)
    assert priority.locator("option").all_inner_texts() == ["choose…", "urgent", "high",
                                                            "normal", "low"]
    assert page.get_by_label("reasons", exact=True).evaluate("e => e.tagName") == "TEXTAREA"
    page.get_by_role("button", name="Plan").click()
    problem = page.get_by_role("alert").filter(has_text="Please fill in")
    assert problem.inner_text() == "Please fill in ticket_id, priority, summary (required)."

    # a file input offers the library's samples; a step's `if` on a step output is decided
    # when the run gets there
    page.get_by_role("button", name="Library", exact=True).click()
    page.get_by_role("button", name="invoice-to-ledger", exact=True).click()
    page.get_by_test_id("node-inputs.ledger_path").wait_for()
    page.get_by_label("A sample file for pdf_path", exact=True).select_option(label="invoice.pdf")
    assert page.get_by_label("approval_limit", exact=True).get_attribute("type") == "number"
    page.get_by_label("ledger_path (required)", exact=True).fill(str(library / "ledger.csv"))
    page.get_by_role("button", name="Plan").click()
    later = page.get_by_test_id("plan-later")
    later.wait_for(timeout=120_000)
    assert "book: runs or not depending on check" in later.inner_text()
    assert "writes files" in page.get_by_test_id("plan-effects").inner_text()


def test_a_connection_is_removed_with_the_delete_key_and_comes_back_with_undo(page: Any) -> None:
    page.get_by_role("button", name="report-analysis", exact=True).click()
    edge = page.get_by_test_id("rf__edge-metrics/out:metrics->figures.rows")
    edge.wait_for(state="attached")
    edge.focus()
    page.keyboard.press("Enter")  # chosen, as a click would
    page.keyboard.press("Delete")
    edge.wait_for(state="detached")
    page.get_by_test_id("unsaved").wait_for()
    page.get_by_role("button", name="Save…").click()
    diff = page.get_by_test_id("diff").inner_text()
    assert "-    needs: [metrics]" in diff
    assert "-      rows: ${{ steps.metrics.outputs.metrics }}" in diff
    page.get_by_role("button", name="Cancel").click()
    page.get_by_role("button", name="Undo", exact=True).click()
    edge.wait_for(state="attached")
    assert page.get_by_test_id("unsaved").count() == 0
