"""Same-named skills: which one answers for the name, and that every one is indexed and located.

The library: root ``first`` holds ``PDF/``, ``pdf/`` and ``tools/pdf/``, root ``second`` holds
``Pdf/`` and ``pdf/``, every one named ``pdf`` (folders that differ only by letter case); plus
``merge-pdfs``, which names ``pdf`` as a dependency. The README ("Duplicates and ids") gives the
precedence: roots in the order given; inside a root, folder by folder with letter case ignored,
then upper case first, a folder before the folders inside it.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest

from skillgrove.graph.model import NodeKind
from skillgrove.runtime.cli import main
from skillgrove.runtime.commands import render_toolbox
from skillgrove.runtime.engine import Skillgrove
from skillgrove.skills.loader import LoadOptions, discover_skills
from skillgrove.skills.model import ID_SIDECAR, path_id
from tests.helpers import write_skill

FOLDERS = ("first/PDF", "first/pdf", "first/tools/pdf", "second/Pdf", "second/pdf")
"""Every ``pdf`` skill, in the documented order of precedence: the first one wins."""


def pdf_skill(where: str) -> str:
    return f"---\nname: pdf\ndescription: Read PDF files and extract their text ({where}).\n---\n"


@pytest.fixture
def roots(tmp_path: Path) -> list[Path]:
    for folder in reversed(FOLDERS):  # creation order must not matter
        root, _, below = folder.partition("/")
        write_skill(tmp_path / root, below, pdf_skill(folder))
    write_skill(tmp_path / "second", "merge-pdfs",
                "---\nname: merge-pdfs\ndescription: Merge several PDF files into one.\n"
                "depends_on: [pdf]\n---\n")
    return [tmp_path / "first", tmp_path / "second"]


def test_precedence_is_root_order_then_case_folded_path(roots: list[Path]) -> None:
    catalog = discover_skills(roots)
    pdfs = [s for s in catalog.skills if s.name == "pdf"]
    assert [f"{s.root.name}/{s.relative_path}" for s in pdfs] == list(FOLDERS)
    assert catalog.active["pdf"] is pdfs[0]
    assert [(sh.hidden.relative_path, sh.winner.relative_path, sh.same_root)
            for sh in catalog.shadowed] == [("pdf", "PDF", True), ("tools/pdf", "PDF", True),
                                            ("Pdf", "PDF", False), ("pdf", "PDF", False)]


def test_inside_a_root_letter_case_does_not_decide_before_the_name(tmp_path: Path) -> None:
    """Byte order puts ``Zeta/`` before ``alpha/`` (how a vendored copy beat the original)."""
    write_skill(tmp_path, "Zeta-copies/x", "---\nname: x\ndescription: the copy\n---\n")
    write_skill(tmp_path, "alpha/x", "---\nname: x\ndescription: the original\n---\n")
    write_skill(tmp_path, "alpha/x/nested", "---\nname: x\ndescription: nested\n---\n")
    catalog = discover_skills([tmp_path])
    assert catalog.active["x"].description == "the original"
    assert [s.description for s in catalog.skills] == ["the original", "nested", "the copy"]


def test_check_names_both_paths_and_the_winner(roots: list[Path]) -> None:
    catalog = discover_skills(roots)
    by_path = {d.path: d for d in catalog.diagnostics if d.rule in ("duplicate-name", "shadowed")}
    winner = roots[0] / "PDF" / "SKILL.md"
    assert set(by_path) == {roots[0] / "pdf/SKILL.md", roots[0] / "tools/pdf/SKILL.md",
                            roots[1] / "Pdf/SKILL.md", roots[1] / "pdf/SKILL.md"}
    same_root = by_path[roots[0] / "pdf/SKILL.md"]
    assert same_root.rule == "duplicate-name"
    assert f"also defined at {winner}, which is used for the name" in same_root.message
    hidden = next(s for s in catalog.skills if s.skill_file == roots[0] / "pdf/SKILL.md")
    assert f"stays loaded, under id {hidden.id}" in same_root.message
    other_root = by_path[roots[1] / "Pdf/SKILL.md"]
    assert other_root.rule == "shadowed"
    assert f"shadowed by {winner} from an earlier root" in other_root.message


def test_check_json_lists_the_duplicates(roots: list[Path]) -> None:
    out = StringIO()
    main(["check", "--library", f"{roots[0]}:{roots[1]}", "--json"], out)
    duplicates = json.loads(out.getvalue())["duplicates"]
    winner = str(roots[0] / "PDF" / "SKILL.md")
    assert [(d["used"], d["also"], d["same_root"]) for d in duplicates] == [
        (winner, str(roots[0] / f / "SKILL.md"), True) for f in ("pdf", "tools/pdf")] + [
        (winner, str(roots[1] / f / "SKILL.md"), False) for f in ("Pdf", "pdf")]


def test_ids_come_from_the_path_below_the_root_and_nothing_is_written(roots: list[Path]) -> None:
    first = discover_skills(roots)
    ids = [s.id for s in first.skills]
    assert len(set(ids)) == len(ids) == 6
    assert first.active["pdf"].id == path_id("PDF")
    # `pdf/` sits at the same relative path in both roots: the later one's id names its root.
    assert {s.id for s in first.skills if s.relative_path == "pdf"} == {
        path_id("pdf"), path_id("pdf", roots[1])}
    assert [s.id for s in discover_skills(roots).skills] == ids  # stable across loads
    assert not list(roots[0].parent.rglob(ID_SIDECAR))


def test_ids_survive_moving_the_library(roots: list[Path], tmp_path: Path) -> None:
    before = [s.id for s in discover_skills(roots).skills]
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    for root in roots:
        root.rename(moved / root.name)
    assert [s.id for s in discover_skills([moved / r.name for r in roots]).skills] == before


def test_write_ids_writes_the_ids_the_skills_have_anyway(roots: list[Path]) -> None:
    plain = discover_skills(roots)
    written = discover_skills(roots, LoadOptions(write_ids=True))
    assert [s.id for s in written.skills] == [s.id for s in plain.skills]
    for skill in written.skills:
        assert (skill.folder / ID_SIDECAR).read_text().strip() == skill.id
    again = discover_skills(roots)
    assert [s.id for s in again.skills] == [s.id for s in plain.skills]
    assert {s.id_source for s in again.skills} == {"sidecar"}


def test_overlapping_roots_load_a_skill_once(roots: list[Path]) -> None:
    """Naming a collection before the folder that holds it makes it win, without copies."""
    catalog = discover_skills([roots[1], roots[0].parent])
    assert len(catalog.skills) == 6
    assert catalog.active["pdf"].folder == roots[1] / "Pdf"


def test_every_skill_is_indexed_and_every_output_says_where(
        roots: list[Path], tmp_path: Path, encoder) -> None:  # type: ignore[no-untyped-def]
    engine = Skillgrove(roots, index=tmp_path / "index", encoder=encoder, auto_refresh=False)
    try:
        result = engine.index()
        catalog = engine.library.catalog
        assert result.skills == len(catalog.skills) == 6
        assert {n.id for n in engine.store.nodes(NodeKind.SKILL)} == {s.id for s in catalog.skills}
        assert not list(tmp_path.rglob(ID_SIDECAR))  # indexing wrote nothing into the library

        # A name means the winner; a shadowed skill is still there by its id.
        winner, hidden = catalog.active["pdf"], catalog.shadowed[0].hidden
        assert engine.node("pdf").id == winner.id
        assert engine.node(hidden.id).data["path"] == str(hidden.folder)
        _, rows = engine.neighbors("merge-pdfs")
        flows = [r for r in rows if r["edge"] == "FLOWS_TO"]
        assert [r["id"] for r in flows] == [winner.id]  # depends_on: [pdf] means the winner

        toolbox = engine.search("read the text of a PDF file", k=10)
        view = engine.views.toolbox(toolbox)
        listed = {(s["root"], s["path"]) for s in view["skills"] if s["name"] == "pdf"}
        assert listed == {(str(r), f.partition("/")[2])
                          for f in FOLDERS for r in roots if r.name == f.partition("/")[0]}
        text = render_toolbox(toolbox, engine.views.where)
        for folder in FOLDERS:
            assert f"[{folder}]" in text, text
        assert "merge-pdfs" in text and "[second/merge-pdfs]" not in text  # a unique name

        out = StringIO()
        main(["graph", "neighbors", hidden.id, "--library", f"{roots[0]}:{roots[1]}",
              "--index", str(tmp_path / "index")], out)
        header, *edges = out.getvalue().splitlines()
        assert header == f"skill pdf ({hidden.id})  {hidden.folder}"
        assert any("skill pdf [first/" in line or "skill pdf [second/" in line
                   for line in edges), edges

        block = engine.inject("read the text of a PDF file").text
        assert f"folder: {winner.folder}" in block or f"(folder: {winner.folder})" in block
    finally:
        engine.close()
