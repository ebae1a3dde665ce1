""""Usually used with" for a cold library, from the library itself (``graph/companions.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillgrove.graph.companions import (
    Companion,
    CompanionSettings,
    MentionFinder,
    companions,
    data_flow,
    families,
    mentions,
    packages,
    role_words,
    roles,
)
from skillgrove.groups.library import load_library
from skillgrove.skills.model import Skill
from tests.conftest import CORPUS
from tests.helpers import write_skill


def _skill(root: Path, folder: str, name: str, body: str = "", extra: str = "",
           description: str = "") -> None:
    write_skill(root, folder, f"---\nname: {name}\ndescription: {description or name}\n"
                f"{extra}---\n{body}\n")


@pytest.fixture
def library(tmp_path: Path) -> dict[str, Skill]:
    root = tmp_path / "lib"
    # mentions: a one-word name in a strong form, a path, a compound name bare; and the trap:
    # docx and report-writer say "pdf" and "PDF" as a word, which is not the pdf skill.
    _skill(root, "skills/pdf", "pdf", "Read PDF files. For Word files see the docx skill.")
    _skill(root, "skills/docx", "docx", "Write Word files; export a PDF or `.pdf` when asked "
           "(application/pdf). Do not use the pdf skill for that.")
    _skill(root, "skills/report-writer", "report-writer",
           "Charts come from chart-maker. Read ../pdf/SKILL.md before quoting a PDF.")
    _skill(root, "skills/chart-maker", "chart-maker", "Plot a table.")
    # data flow: an output feeding a required input of a compatible type, and one that does not
    _skill(root, "skills/fetch-weather", "fetch-weather", extra=(
        "outputs:\n  properties:\n    forecast: {type: object}\n    days: {type: integer}\n"))
    _skill(root, "skills/plan-trip", "plan-trip", extra=(
        "inputs:\n  properties:\n    forecast: {type: object}\n    days: {type: number}\n"
        "  required: [forecast, days]\n"))
    _skill(root, "skills/pack-list", "pack-list", extra=(
        "inputs:\n  properties:\n    forecast: {type: string}\n  required: [forecast]\n"))
    # depends_on, declared
    _skill(root, "skills/book-hotel", "book-hotel", extra="depends_on: [plan-trip]\n")
    # a plugin's folder: a package
    _skill(root, "plugins/travel/skills/visa-check", "visa-check")
    _skill(root, "plugins/travel/skills/currency-rates", "currency-rates",
           "Then run visa-check.")
    loaded = load_library([root])
    assert not loaded.errors, [e.format() for e in loaded.errors]
    return dict(loaded.skills)


def _pairs(found: dict[str, tuple[Companion, ...]], source: str) -> set[tuple[str, str]]:
    return {(name, c.name) for name, items in found.items() for c in items
            if c.source == source}


def test_each_source_finds_its_pairs_in_both_directions(library: dict[str, Skill]) -> None:
    found = companions(library.values())
    assert _pairs(found, "depends_on") == {("book-hotel", "plan-trip"),
                                           ("plan-trip", "book-hotel")}
    assert _pairs(found, "data_flow") == {("fetch-weather", "plan-trip"),
                                          ("plan-trip", "fetch-weather")}
    assert _pairs(found, "mentions") == {
        ("pdf", "docx"), ("docx", "pdf"),                     # "the docx skill"
        ("report-writer", "chart-maker"), ("chart-maker", "report-writer"),  # compound
        ("report-writer", "pdf"), ("pdf", "report-writer"),   # ../pdf/SKILL.md
        ("currency-rates", "visa-check"), ("visa-check", "currency-rates"),
    }
    # visa-check is named by its sibling: the mention is the stronger source, the folder
    # stays as a weaker one.
    assert _pairs(found, "package") == set()
    pair = found["currency-rates"][0]
    assert (pair.name, pair.source, pair.also) == ("visa-check", "mentions", ("package",))


def test_a_common_word_is_not_a_mention(library: dict[str, Skill]) -> None:
    # docx says "PDF", ".pdf", "application/pdf", and "do not use the pdf skill": none of
    # them is a companion; pdf is one of docx's only because pdf names docx.
    found = companions(library.values())
    (pdf,) = [c for c in found["docx"] if c.name == "pdf"]
    assert not pdf.outgoing and pdf.reason == "`pdf`'s instructions name it"


def test_reasons_say_where_each_companion_came_from(library: dict[str, Skill]) -> None:
    found = companions(library.values())
    assert [(c.name, c.source, c.reason, c.outgoing) for c in found["plan-trip"]] == [
        ("book-hotel", "depends_on", "`book-hotel` declares it needs it first", False),
        ("fetch-weather", "data_flow",
         "`fetch-weather`'s output `days` feeds its required input `days`", False),
    ]
    assert found["book-hotel"][0].reason == "it declares it needs `plan-trip` first"
    assert found["report-writer"][1].reason == "its instructions name `pdf`"
    (sibling,) = companions(library.values(), CompanionSettings(limit=None))["visa-check"]
    assert sibling.reason == "`currency-rates`'s instructions name it"


def test_order_is_by_source_then_own_declarations_then_name(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    _skill(root, "pack/a-main", "a-main", "Use zz-helper and mm-helper.",
           extra="depends_on: [yy-prereq]\n")
    _skill(root, "pack/zz-helper", "zz-helper")
    _skill(root, "pack/mm-helper", "mm-helper", "Called by a-main.")
    _skill(root, "pack/yy-prereq", "yy-prereq")
    _skill(root, "other/bb-sibling", "bb-sibling")
    _skill(root, "other/cc-sibling", "cc-sibling")
    found = companions(load_library([root]).skills.values())
    assert [(c.name, c.source, c.outgoing) for c in found["a-main"]] == [
        ("yy-prereq", "depends_on", True),
        ("mm-helper", "mentions", True),   # each names the other: its own words first
        ("zz-helper", "mentions", True),
    ]
    assert found["mm-helper"][0].also == ("package",)
    assert [c.name for c in found["bb-sibling"]] == ["cc-sibling"]
    limited = companions(load_library([root]).skills.values(), CompanionSettings(limit=1))
    assert [c.name for c in limited["a-main"]] == ["yy-prereq"]
    off = companions(load_library([root]).skills.values(),
                     CompanionSettings(package_sizes=None))
    assert off["bb-sibling"] == ()


def test_packages_skip_the_root_its_skills_folder_and_big_folders(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    for name in ("top-a", "top-b"):
        _skill(root, name, name)
    for name in ("lib-a", "lib-b"):
        _skill(root, f"skills/{name}", name)
    for index in range(13):
        _skill(root, f"vendor/big/s{index:02d}", f"s{index:02d}")
    for name in ("one", "two", "three"):
        _skill(root, f"plugins/kit/skills/{name}", name)
    skills = load_library([root]).skills.values()
    assert packages(skills) == {"plugins/kit/skills": ("one", "three", "two")}
    assert "vendor/big" in packages(skills, (2, 13))
    # A library whose skills all sit in one folder is not a package of itself.
    flat = tmp_path / "flat"
    for name in ("x-one", "x-two"):
        _skill(flat, f"all/{name}", name)
    assert packages(load_library([flat]).skills.values()) == {}


def test_data_flow_matches_name_and_type_and_skips_generic_names(
        library: dict[str, Skill]) -> None:
    # days: an integer output may feed a number input; forecast: object to object, not to
    # the string that pack-list wants.
    assert data_flow(library.values()) == [("fetch-weather", "days", "plan-trip"),
                                           ("fetch-weather", "forecast", "plan-trip")]
    assert data_flow(library.values(), max_fan=0) == []


@pytest.mark.parametrize(("text", "expected"), [
    ("Use the pdf skill to read it.", {"pdf": "skill"}),
    ("Use the `pdf` skill to read it.", {"pdf": "skill"}),
    ("Use the **PDF** skill.", {"pdf": "skill"}),
    ("See ../pdf/SKILL.md for forms.", {"pdf": "path"}),
    ("python skills/pdf/scripts/fill.py", {"pdf": "path"}),
    ("REQUIRED: superpowers:pdf first.", {"pdf": "namespace"}),
    ("For forms use pdf; for sheets use xlsx-tools.", {"pdf": "use", "xlsx-tools": "use"}),
    ("Save as PDF, `pdf` or .pdf; MIME application/pdf; PNG/PDF/SVG.", {}),
    ("Use pdf, docx or html.", {}),                     # a list of formats
    ("Use the pdf skill instead.", {}),                 # a substitute
    ("Do NOT use xlsx-tools here.", {}),                # a skill to avoid
    ("python-docx and pdf_tools and file.pdf and xlsx-tools-v2", {}),  # inside other words
    ("Open it with Zoho  Desk, then xlsx-tools.", {"Zoho Desk": "compound",
                                                   "xlsx-tools": "compound"}),
    # words saying two tools are used together
    ("Complements PDF for scanned pages.", {"pdf": "with"}),
    ("### Integration with pdf", {"pdf": "with"}),
    ("Combine with the `docx` writer.", {"docx": "with"}),
    ("Integrates with PDF files and docx documents.", {}),   # file formats
    ("Works with pdf.", {}),                             # said of formats as often
    # a kind of skill in an example is not the library's skill
    ("A negative test for a PDF skill is too easy.", {}),
    ("Build an `xlsx-tools` skill first.", {}),
])
def test_mention_forms(text: str, expected: dict[str, str]) -> None:
    finder = MentionFinder(["pdf", "xlsx-tools", "Zoho Desk", "docx"])
    assert finder.find(text) == expected


def test_a_skill_naming_itself_spelled_another_way_names_no_companion() -> None:
    finder = MentionFinder(["Zoho Desk Automation", "zoho_desk-automation"])
    assert finder.find("# Zoho Desk Automation via MCP", skip="zoho_desk-automation") == {}
    assert finder.find("# Zoho Desk Automation via MCP", skip="other") == {
        "Zoho Desk Automation": "compound"}


def test_a_compound_name_most_texts_say_is_a_common_word() -> None:
    texts = {f"skill-{i:02d}": ("", "Send a follow-up after the call.") for i in range(30)}
    texts["follow-up"] = ("Schedule reminders.", "")
    texts["closer"] = ("", "Then use the follow-up skill.")
    low = CompanionSettings(common_share=0.05, common_min=20)
    assert mentions(texts, low) == {"closer": {"follow-up": "instructions"}}
    # Below the minimum count (or with the guard off) every bare mention counts.
    assert len(mentions(texts, CompanionSettings(common_min=40))) == 31
    assert len(mentions(texts, CompanionSettings(common_share=None))) == 31


def test_a_sibling_is_named_by_what_it_does(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    kit = "plugins/studio/skills"
    _skill(root, f"{kit}/studio-image-gen", "studio-image-gen", "Make pictures.")
    _skill(root, f"{kit}/studio-slide-deck", "studio-slide-deck",
           "Step 7: select an available image generation skill, then render each slide.")
    _skill(root, f"{kit}/studio-comic", "studio-comic",
           "Do not call an image generation skill here; draw it yourself.")   # avoided
    _skill(root, f"{kit}/studio-cover", "studio-cover", "Uses the Slide Decks skill's layout.")
    # Another folder asks for it too: not a sibling, so its role words mean nothing there.
    _skill(root, "elsewhere/poster", "poster", "Use any image generation skill.")
    _skill(root, "elsewhere/banner", "banner", "Banners.")
    skills = load_library([root]).skills
    # 'studio' is the folder's own word; 'comic' and 'cover' alone say too little.
    assert role_words([s.name for s in skills.values() if "studio" in s.name]) == {
        "studio-image-gen": ("image", "gen"), "studio-slide-deck": ("slide", "deck")}
    texts = {name: (s.description, s.body()) for name, s in skills.items()}
    folders = {name: str(s.folder.parent) for name, s in skills.items()}
    assert roles(texts, folders) == {
        "studio-slide-deck": {"studio-image-gen": ("instructions", "image generation skill")},
        "studio-cover": {"studio-slide-deck": ("instructions", "Slide Decks skill")},
    }
    found = companions(skills.values(), CompanionSettings(package_sizes=None))
    assert [(c.name, c.source, c.reason) for c in found["studio-slide-deck"]] == [
        ("studio-image-gen", "mentions",
         "its instructions ask for `studio-image-gen`: 'image generation skill'"),
        ("studio-cover", "mentions",
         "`studio-cover`'s instructions ask for it: 'Slide Decks skill'")]
    assert found["studio-comic"] == () and found["poster"] == ()
    off = companions(skills.values(), CompanionSettings(package_sizes=None, role_share=None))
    assert off["studio-slide-deck"] == ()


def test_a_folder_of_several_families_is_several_packages(tmp_path: Path) -> None:
    assert families(["gh-fix-ci", "gh-address-comments", "notion-capture", "notion-spec",
                     "lone"]) == [("gh", ("gh-fix-ci", "gh-address-comments")),
                                  ("notion", ("notion-capture", "notion-spec"))]
    # One family, or none: the folder is one package.
    assert families(["spark-cast", "spark-director", "bailian"]) == [
        ("", ("spark-cast", "spark-director", "bailian"))]
    root = tmp_path / "lib"
    for name in ("gh-fix-ci", "gh-address-comments", "notion-capture", "notion-spec"):
        _skill(root, f"vendor/curated/{name}", name)
    _skill(root, "vendor/other/elsewhere", "elsewhere")
    found = companions(load_library([root]).skills.values())
    assert [(c.name, c.reason) for c in found["gh-fix-ci"]] == [
        ("gh-address-comments", "same package folder 'vendor/curated' (4 skills), both 'gh-'")]
    assert [c.name for c in found["notion-spec"]] == ["notion-capture"]


def test_an_empty_library_has_no_companions() -> None:
    assert companions([]) == {}
    assert MentionFinder([]).find("anything at all") == {}


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpora is not here")
def test_the_corpus_gets_precise_companions() -> None:
    skills = load_library([CORPUS]).skills
    found = companions(skills.values(), CompanionSettings(limit=None))
    with_any = sum(1 for items in found.values() if items)
    # Measured: 143 of 1,299 skills (11%), 135 by mentions, 16 by package folders; at most
    # 22 companions for one skill unlimited (scientific-schematics, named by 21 others).
    assert with_any >= 125
    assert max(len(items) for items in found.values()) <= 30
    # Pairs read by eye and known right ...
    pairs = {(name, c.name, c.source) for name, items in found.items() for c in items}
    assert {("writing-plans", "executing-plans", "mentions"),
            ("scientific-slides", "pptx", "mentions"),
            ("baoyu-comic", "baoyu-image-gen", "mentions"),
            ("anndata", "scanpy", "mentions")} <= pairs
    # ... and the traps: 'connect' is said in 822 texts and 'pdf' in 126, as words.
    assert not any(c.name == "connect" for items in found.values() for c in items)
    named_pdf = {name for name, items in found.items() for c in items
                 if c.name == "pdf" and c.outgoing}
    assert len(named_pdf) <= 3
    # A copy of a skill under another spelling is not its companion.
    assert not any(c.name == "Zoho Desk Automation" for c in found["zoho_desk-automation"])
    # Read by eye, #25 item 6: a sibling asked for by what it does ("select an available
    # image generation skill"), tools said to work together ("Complements Scanpy", "Integration
    # with Scanpy") ...
    assert {("baoyu-slide-deck", "baoyu-image-gen", "mentions"),
            ("baoyu-infographic", "baoyu-image-gen", "mentions"),
            ("scvelo", "scanpy", "mentions"),
            ("cellxgene-census", "scanpy", "mentions"),
            ("gh-fix-ci", "gh-address-comments", "package")} <= pairs
    # ... and what is not: 'a negative test for a PDF skill' (skill-creator) is an example,
    # and openai's '.curated' folder holds two families (gh-..., notion-...), not one package.
    assert ("skill-creator", "pdf", "mentions") not in pairs
    assert not any(c.name.startswith("notion-") for c in found["gh-fix-ci"])
