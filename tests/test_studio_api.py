"""The authoring API the studio uses (and any script may): check group YAML as ``skillgrove
check`` does, open a group's file, save one with a diff first, edit a file in place keeping
what the edit does not touch, refuse paths outside the groups folder; the studio's files are
served (without the token, under their own Content-Security-Policy) and shipped in the wheel.
"""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from skillgrove.runtime.authoring import apply_edits, parse_path, render_document
from skillgrove.runtime.engine import Skillgrove
from skillgrove.runtime.errors import InvalidRequestError
from skillgrove.runtime.http_server import GroupCheckView, GroupSaveView, create_app
from skillgrove.runtime.paths import bundled_library
from tests.test_packaging import wheel  # noqa: F401 - the fixture

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "studio"
TOKEN = "studio-token"
NEW_GROUP = {
    "id": "word-count", "name": "Word count", "description": "Count the words of a text.",
    "examples": ["how many words is this"],
    "inputs": {"text": {"type": "string", "required": True}},
    "steps": [{"id": "count", "skill": "text-statistics",
               "with": {"text": "${{ inputs.text }}"}}],
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("authoring") / "library"
    shutil.copytree(bundled_library(), root)
    shutil.copy(FIXTURES / "annotated.yaml", root / "groups" / "annotated.yaml")
    drafts = root / "groups" / "drafts"
    drafts.mkdir()
    shutil.copy(FIXTURES / "pdf-word-count.yaml", drafts)
    broken = (FIXTURES / "pdf-word-count.yaml").read_text(encoding="utf-8")
    (drafts / "broken-draft.yaml").write_text(
        broken.replace("id: pdf-word-count", "id: broken-draft")
        .replace("skill: text-statistics", "skill: text-statistic"), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def engine(library: Path, encoder: Any) -> Iterator[Skillgrove]:
    with Skillgrove([library], index=library.parent / "index", encoder=encoder) as running:
        yield running


@pytest.fixture(scope="module")
def client(engine: Skillgrove) -> Iterator[TestClient]:
    with TestClient(create_app(engine), base_url="http://127.0.0.1") as http:
        yield http


def check(client: TestClient, **body: Any) -> GroupCheckView:
    response = client.post("/v1/groups/check", json=body)
    assert response.status_code == 200, response.text
    return GroupCheckView.model_validate(response.json())


# -- checking -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("change", "rule", "step", "field", "line", "message"), [
    ({"with": {"text": "${{ inputs.nope }}"}}, "unknown-input", "count", "with.text", 14,
     "steps[0].with.text: input 'nope' is not declared"),
    ({"with": {"text": "${{ steps.counter.outputs.words }}"}}, "unknown-step", "count",
     "with.text", 14, "steps[0].with.text: unknown step 'counter'"),
    ({"skill": "text-statistic"}, "unknown-skill", "count", "skill", 12,
     "steps[0].skill: unknown skill 'text-statistic'"),
    ({"with": {"text": 42}}, "type-mismatch", "count", "with.text", 14,
     "steps[0].with.text: 'text' does not fit the input schema"),
])
def test_check_names_rule_line_step_and_field(client: TestClient, change: dict[str, Any],
                                               rule: str, step: str, field: str, line: int,
                                               message: str) -> None:
    document = {**NEW_GROUP, "steps": [{**NEW_GROUP["steps"][0], **change}]}
    result = check(client, document=document)
    assert not result.valid
    found = [d for d in result.diagnostics if d.rule == rule]
    assert found, result.diagnostics
    assert (found[0].step_id, found[0].field, found[0].line) == (step, field, line)
    assert found[0].message.startswith(message)
    assert result.text.splitlines()[line - 1].strip().startswith(field.split(".")[-1])


def test_a_valid_group_checks_clean_and_a_typo_gets_its_hint(client: TestClient) -> None:
    assert check(client, document=NEW_GROUP).valid
    typo = {**NEW_GROUP, "steps": [{**NEW_GROUP["steps"][0], "skill": "text-statistic"}]}
    diagnostic = check(client, document=typo).diagnostics[0]
    assert diagnostic.hint == "did you mean 'text-statistics'?"


def test_check_reads_yaml_text_and_reports_syntax_errors(client: TestClient) -> None:
    result = check(client, text="id: broken\nsteps:\n  - id: a\n\tskill: x\n")
    assert not result.valid and result.diagnostics[0].rule == "yaml-syntax"
    assert result.diagnostics[0].line == 4


def test_an_alias_bomb_is_refused_by_the_loader_limits(client: TestClient) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9))
    result = check(client, text=bomb)
    assert not result.valid and result.diagnostics[0].rule == "limit-exceeded"


def test_a_group_id_already_taken_by_another_file_is_an_error(client: TestClient) -> None:
    result = check(client, document={**NEW_GROUP, "id": "report-analysis"})
    assert "duplicate-group" in [d.rule for d in result.diagnostics]
    # the group's own file is not a duplicate of itself
    assert check(client, path="report-analysis.yaml",
                 edits=[{"op": "set", "path": "steps[1].with.limit", "value": 3}]).valid


# -- saving -------------------------------------------------------------------------------------


def test_save_shows_a_diff_first_and_writes_only_when_told(client: TestClient,
                                                            library: Path) -> None:
    target = library / "groups" / "word-count.yaml"
    response = client.post("/v1/groups/files", json={"path": "word-count.yaml",
                                                      "document": NEW_GROUP})
    preview = GroupSaveView.model_validate(response.json())
    assert preview.dry_run and not preview.written and preview.created and not target.exists()
    assert preview.diff.startswith("--- /dev/null\n+++ b/groups/word-count.yaml\n")
    saved = GroupSaveView.model_validate(client.post("/v1/groups/files", json={
        "path": "word-count.yaml", "document": NEW_GROUP, "dry_run": False}).json())
    assert saved.written and saved.valid
    assert target.read_text(encoding="utf-8") == render_document(NEW_GROUP)
    # the engine picked it up: the group is listed and runs
    assert client.get("/v1/groups/word-count").json()["status"] == "valid"
    run = client.post("/v1/groups/word-count/runs", json={"inputs": {"text": "One two three."}})
    assert run.status_code == 201 and run.json()["status"] == "success", run.text


def test_edits_change_only_the_lines_they_touch(client: TestClient, library: Path) -> None:
    file = library / "groups" / "annotated.yaml"
    before = file.read_text(encoding="utf-8")
    source = client.get("/v1/groups/annotated-digest/source").json()
    assert source["text"] == before and source["path"] == "groups/annotated.yaml"
    assert source["document"]["steps"][1]["with"]["max_sentences"] == 2
    edits = [{"op": "set", "path": "steps[1].with.text", "value": "${{ steps.read.outputs.title }}"},
             {"op": "set", "path": "steps[1].with.max_sentences", "value": 3}]
    result = client.post("/v1/groups/files", json={
        "path": source["path"], "edits": edits, "base_sha256": source["sha256"],
        "dry_run": False}).json()
    assert result["written"], result
    changed = [line for line in result["diff"].splitlines()
               if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]
    assert changed == ['-      text: "${{ steps.read.outputs.text }}"',
                       '-      max_sentences: 2   # short on purpose',
                       '+      text: "${{ steps.read.outputs.title }}"',
                       '+      max_sentences: 3   # short on purpose']
    # the old sha256 no longer matches: a second, stale save is refused
    stale = client.post("/v1/groups/files", json={
        "path": source["path"], "edits": edits, "base_sha256": source["sha256"]})
    assert stale.status_code == 422 and stale.json()["error"]["details"]["field"] == \
        "base_sha256"


@pytest.mark.parametrize("path", ["../skills/pdf-to-text/SKILL.yaml", "/etc/passwd.yaml",
                                  "../../outside.yaml", "report.txt", "groups/../../x.yaml"])
def test_save_refuses_paths_outside_the_groups_folder(client: TestClient, path: str,
                                                      library: Path) -> None:
    response = client.post("/v1/groups/files", json={"path": path, "document": NEW_GROUP,
                                                      "dry_run": False})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["details"]["field"] == "path"
    assert not (library.parent / "outside.yaml").exists()


def test_a_symlink_out_of_the_groups_folder_is_refused(client: TestClient,
                                                       library: Path) -> None:
    outside = library.parent / "elsewhere"
    outside.mkdir()
    (library / "groups" / "link").symlink_to(outside)
    response = client.post("/v1/groups/files", json={"path": "link/g.yaml",
                                                      "document": NEW_GROUP, "dry_run": False})
    assert response.status_code == 422
    assert list(outside.iterdir()) == []


def test_exactly_one_source_is_taken(client: TestClient) -> None:
    both = client.post("/v1/groups/check", json={"text": "id: a", "document": NEW_GROUP})
    assert both.status_code == 422 and "exactly one" in both.json()["error"]["message"]
    edits = client.post("/v1/groups/check", json={"edits": []})
    assert edits.status_code == 422 and edits.json()["error"]["details"]["field"] == "path"


# -- drafts -------------------------------------------------------------------------------------


def test_drafts_are_listed_approved_when_they_pass_and_discarded(client: TestClient,
                                                                 library: Path) -> None:
    listed = {d["id"]: d for d in client.get("/v1/drafts").json()["drafts"]}
    assert set(listed) == {"pdf-word-count", "broken-draft"}
    assert listed["pdf-word-count"]["valid"] and listed["pdf-word-count"]["path"] == \
        "groups/drafts/pdf-word-count.yaml"
    assert not listed["broken-draft"]["valid"]
    assert listed["broken-draft"]["diagnostics"][0]["step_id"] == "text_statistics"
    statuses = {g["id"]: g["status"] for g in client.get("/v1/groups").json()["groups"]}
    assert statuses["pdf-word-count"] == statuses["broken-draft"] == "draft"
    source = client.get("/v1/groups/pdf-word-count/source").json()
    assert source["draft"] is True and source["path"] == "groups/drafts/pdf-word-count.yaml"

    refused = client.post("/v1/drafts/broken-draft/approve")
    assert refused.status_code == 422 and "1 error" in refused.json()["error"]["message"]
    approved = client.post("/v1/drafts/pdf-word-count/approve").json()
    assert approved["path"] == "groups/pdf-word-count.yaml"
    assert (library / "groups" / "pdf-word-count.yaml").is_file()
    assert not (library / "groups" / "drafts" / "pdf-word-count.yaml").exists()
    assert client.get("/v1/groups/pdf-word-count").json()["status"] == "valid"

    assert client.delete("/v1/drafts/broken-draft").json()["discarded"]
    assert not (library / "groups" / "drafts" / "broken-draft.yaml").exists()
    assert client.get("/v1/drafts").json()["drafts"] == []
    missing = client.delete("/v1/drafts/pdf-word-count")
    assert missing.status_code == 404


def test_the_impact_of_a_skill_names_the_groups_using_it(client: TestClient) -> None:
    impact = client.get("/v1/skills/pdf-to-text/impact").json()
    assert impact["known"] and {"report-analysis", "annotated-digest"} <= {
        use["group"] for use in impact["uses"]}
    assert impact["broken"] == []


# -- edits on their own -------------------------------------------------------------------------


def test_the_samples_are_the_files_a_run_form_offers(client: TestClient, library: Path) -> None:
    (library / "samples" / ".hidden.pdf").write_bytes(b"%PDF-")
    (library / "samples" / "linked.pdf").symlink_to(library / "samples" / "invoice.pdf")
    listed = client.get("/v1/samples").json()["samples"]
    names = [s["name"] for s in listed]
    assert "quarterly_report.pdf" in names and "invoice.pdf" in names
    assert names == sorted(names, key=str.lower)
    assert not {".hidden.pdf", "linked.pdf", "make_samples.py"} & set(names)
    report = next(s for s in listed if s["name"] == "quarterly_report.pdf")
    assert report["path"] == str((library / "samples" / "quarterly_report.pdf").absolute())
    assert report["size"] == (library / "samples" / "quarterly_report.pdf").stat().st_size


def test_edit_paths_parse_and_bad_ones_are_refused() -> None:
    assert parse_path("steps[2].with.text") == ["steps", 2, "with", "text"]
    assert parse_path("inputs.pdf_path.default") == ["inputs", "pdf_path", "default"]
    for bad in ("", ".a", "a.", "a..b", "a[x]", "a[1"):
        with pytest.raises(InvalidRequestError):
            parse_path(bad)


def test_append_delete_and_quoting_keep_the_file_layout() -> None:
    text = (FIXTURES / "annotated.yaml").read_text(encoding="utf-8")
    edited = apply_edits(text, [
        {"op": "append", "path": "steps", "value": {"id": "stats", "skill": "text-statistics",
                                                    "needs": ["read"],
                                                    "with": {"text": "a\nb"}}},
        {"op": "delete", "path": "examples"},
    ])
    assert "# first the text" in edited and "# flow style, on purpose" in edited
    assert "examples:" not in edited
    assert edited.endswith("outputs:\n  summary: ${{ steps.summary.outputs.summary }}\n")
    # a new key of a step goes where the bundled files have it: if before with
    placed = apply_edits(text, [{"op": "set", "path": "steps[1].if",
                                 "value": "${{ steps.read.outputs.pages > 1 }}"}])
    assert ("    needs: [read]\n    if: ${{ steps.read.outputs.pages > 1 }}\n    with:\n"
            in placed)
    assert ("  - id: stats\n    skill: text-statistics\n    needs: [read]\n    with:\n"
            "      text: |-\n        a\n        b\n") in edited


# -- the page -----------------------------------------------------------------------------------


def test_the_studio_is_served_without_the_token_and_the_api_is_not(engine: Skillgrove) -> None:
    with TestClient(create_app(engine, token=TOKEN), base_url="http://127.0.0.1") as http:
        page = http.get("/studio/")
        assert page.status_code == 200 and "<div id=\"root\">" in page.text
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "connect-src 'self'" in policy
        assert http.get("/studio", follow_redirects=False).status_code in (307, 308)
        script = http.get("/studio/assets/studio.js")
        assert script.status_code == 200 and "javascript" in script.headers["content-type"]
        assert http.get("/v1/groups").status_code == 401
        assert http.get("/v1/groups", headers={"authorization": f"Bearer {TOKEN}"}
                        ).status_code == 200
        assert http.get("/studio/", headers={"host": "evil.example"}).status_code == 200


def test_the_openapi_schema_documents_the_authoring_routes(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/groups/check", "/v1/groups/files", "/v1/groups/{group_id}/source"} <= set(paths)
    assert not any(p.startswith("/studio") for p in paths)


def test_the_wheel_ships_the_built_studio_not_its_sources(wheel: Path) -> None:  # noqa: F811
    names = zipfile.ZipFile(wheel).namelist()
    studio = [n for n in names if "/studio/" in n]
    assert "skillgrove/runtime/studio/dist/index.html" in studio
    assert "skillgrove/runtime/studio/dist/assets/studio.js" in studio
    assert not [n for n in studio if "node_modules" in n or "/src/" in n
                or n.endswith("package.json")]
