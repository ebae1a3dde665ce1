"""Names that pose as other names (issue #26): a skill whose name looks like another's is an
error naming both, whatever the trick: another script's letter, an invisible character, a
bidi control, another normalisation form, another letter case, full-width forms."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from skillgrove.skills import discover_skills
from skillgrove.skills.names import skeleton
from tests.helpers import write_skill

REAL = "send-email"

LOOKALIKES = [
    pytest.param("s\u0435nd-email", "U+0435 CYRILLIC SMALL LETTER IE", id="cyrillic-e"),
    pytest.param("send-\u0435mail", "U+0435 CYRILLIC SMALL LETTER IE", id="cyrillic-e-later"),
    pytest.param("\u0455end-email", "U+0455 CYRILLIC SMALL LETTER DZE", id="cyrillic-dze"),
    pytest.param("send-em\u0430il", "U+0430 CYRILLIC SMALL LETTER A", id="cyrillic-a"),
    pytest.param("\uff53end-email", "U+FF53 FULLWIDTH LATIN SMALL LETTER S", id="fullwidth"),
    pytest.param("Send-Email", "letter case", id="case"),
    pytest.param("SEND-EMAIL", "letter case", id="upper"),
]


def folder_name(name: str) -> str:
    return "x" + name.encode("unicode_escape").decode().replace("\\", "_")


def library(tmp_path: Path, names: list[str]) -> Path:
    for name in names:
        write_skill(tmp_path, folder_name(name), f"""
            ---
            name: "{name.encode('unicode_escape').decode()}"
            description: Sends the mail.
            ---
            Body.
            """)
    return tmp_path


@pytest.mark.parametrize(("fake", "why"), LOOKALIKES)
@pytest.mark.parametrize("order", ["real-first", "fake-first"])
def test_a_lookalike_name_is_an_error_naming_both(tmp_path: Path, fake: str, why: str,
                                                  order: str) -> None:
    names = [REAL, fake] if order == "real-first" else [fake, REAL]
    catalog = discover_skills([library(tmp_path, names)])
    assert set(catalog.active) == {REAL}, "the real name is kept, whichever loads first"
    errors = [d for d in catalog.diagnostics if d.rule == "name-lookalike"]
    assert len(errors) == 1, [d.format() for d in catalog.diagnostics]
    message = errors[0].message
    assert ascii(fake) in message and ascii(REAL) in message
    assert str(tmp_path / folder_name(REAL) / "SKILL.md") in message
    assert errors[0].path == tmp_path / folder_name(fake) / "SKILL.md"
    assert why in message
    assert all(s.name == REAL for s in catalog.skills)


def test_every_table_entry_is_a_lookalike() -> None:
    for param in LOOKALIKES:
        fake = param.values[0]
        assert isinstance(fake, str) and skeleton(fake) == skeleton(REAL), fake


@pytest.mark.parametrize("name", ["send\u200b-email", "send-email\u200d", "\u202esend-email",
                                  "send\u2066-email", "\ufeffsend-email", "send\u00ad-email"],
                         ids=["zwsp", "zwj", "rlo", "lri", "bom", "soft-hyphen"])
def test_a_name_with_invisible_characters_is_rejected_alone(tmp_path: Path, name: str) -> None:
    catalog = discover_skills([library(tmp_path, [name])])
    assert catalog.active == {}
    rejected = catalog.rejected[0]
    assert "name-invisible" in rejected.rejected_by
    message = next(d for d in rejected.diagnostics if d.rule == "name-invisible").format()
    assert "U+" in message and ascii(name) in message
    assert not any(ch in message for ch in name if unicodedata.category(ch) == "Cf")


def test_nfc_and_nfd_spellings_are_one_name_too(tmp_path: Path) -> None:
    nfc = unicodedata.normalize("NFC", "caf\u00e9-report")
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfc != nfd
    catalog = discover_skills([library(tmp_path, [nfc, nfd])])
    assert list(catalog.active) == [nfc]
    errors = [d for d in catalog.diagnostics if d.rule == "name-lookalike"]
    assert len(errors) == 1
    assert "U+0301 COMBINING ACUTE ACCENT" in errors[0].message


def test_different_names_stay(tmp_path: Path) -> None:
    names = ["send-email", "send-emails", "scan-1", "scan-l", "daily-report", "report-daily"]
    catalog = discover_skills([library(tmp_path, names)])
    assert sorted(catalog.active) == sorted(names)
    assert not [d for d in catalog.diagnostics if d.rule == "name-lookalike"]


GROUP = """
id: "{gid}"
description: Mail the report.
examples: [mail the report]
steps:
  - {{id: mail, skill: mailer}}
"""


def group_library(tmp_path: Path, ids: list[str]) -> Path:
    write_skill(tmp_path, "mailer", """
        ---
        name: mailer
        description: Mails.
        ---
        Body.
        """)
    (tmp_path / "groups").mkdir()
    for index, gid in enumerate(ids):
        (tmp_path / "groups" / f"g{index}.yaml").write_text(
            GROUP.format(gid=gid.encode("unicode_escape").decode()), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("fake", ["d\u0430ily-report", "Daily-Report", "daily\u200b-report",
                                  "\uff44aily-report"],
                         ids=["cyrillic-a", "case", "zwsp", "fullwidth"])
def test_a_group_id_that_looks_like_another_is_an_error(tmp_path: Path, fake: str) -> None:
    from skillgrove.groups import load_library

    library = load_library([group_library(tmp_path, ["daily-report", fake])])
    assert set(library.groups) == {"daily-report"}
    found = [d for d in library.diagnostics if d.rule in ("name-lookalike", "name-invisible")]
    assert len(found) == 1 and found[0].is_error, [d.format() for d in library.diagnostics]
    assert ascii(fake) in found[0].message


@pytest.mark.skipif(not hasattr(__import__("os"), "symlink"), reason="symlinks")
def test_a_group_file_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    from skillgrove.groups import load_library

    outside = tmp_path / "outside.yaml"
    outside.write_text(GROUP.format(gid="sneaky"), encoding="utf-8")
    lib = group_library(tmp_path / "lib", [])
    (lib / "groups" / "sneaky.yaml").symlink_to(outside)
    library = load_library([lib])
    assert "sneaky" not in library.groups
    assert any(d.rule == "symlink" and d.is_error for d in library.diagnostics)


# ------------------------------------------------------------------- files served or run

def test_a_hard_link_in_a_skill_folder_rejects_the_skill(tmp_path: Path) -> None:
    import os

    from skillgrove.skills import load_skill

    secret = tmp_path / "secret.txt"
    secret.write_text("outside the library")
    where = write_skill(tmp_path / "lib", "linker", """
        ---
        name: linker
        description: Holds another name of an outside file.
        ---
        Body.
        """)
    os.link(secret, where.parent / "notes.txt")
    loaded = load_skill(where, tmp_path / "lib")
    assert loaded.skill is None and "hard-link" in loaded.rejected_by
    # SKILL.md itself, linked from outside
    where2 = tmp_path / "lib2" / "linked"
    where2.mkdir(parents=True)
    outside_md = tmp_path / "outside.md"
    outside_md.write_text("---\nname: linked\ndescription: d\n---\nb\n")
    os.link(outside_md, where2 / "SKILL.md")
    loaded2 = load_skill(where2 / "SKILL.md", tmp_path / "lib2")
    assert loaded2.skill is None and "hard-link" in loaded2.rejected_by


def test_a_file_swapped_for_a_link_after_loading_is_not_served(tmp_path: Path) -> None:
    import os

    from skillgrove import Skillgrove
    from skillgrove.runtime.errors import EngineError

    secret = tmp_path / "secret.txt"
    secret.write_text("outside the library")
    where = write_skill(tmp_path / "lib", "notes", """
        ---
        name: notes
        description: Has notes.
        ---
        Body.
        """)
    notes = where.parent / "notes.txt"
    notes.write_text("the notes")
    engine = Skillgrove([tmp_path / "lib"], index=tmp_path / "index", auto_refresh=False)
    assert engine.skill_file("notes", "notes.txt") == b"the notes"
    notes.unlink()
    os.link(secret, notes)
    with pytest.raises(EngineError):  # not listed, and not read even if asked for
        engine.skill_file("notes", "notes.txt")
    notes.unlink()
    notes.symlink_to(secret)
    with pytest.raises(EngineError):
        engine.skill_file("notes", "notes.txt")


def test_two_groups_that_would_be_one_mcp_tool_are_an_error(tmp_path: Path) -> None:
    from skillgrove.groups import load_library

    lib = group_library(tmp_path, [])
    for index, gid in enumerate(["daily-report", "daily_report", "daily.report"]):
        (lib / "groups" / f"t{index}.yaml").write_text(
            GROUP.format(gid=gid) + "expose: tool\n", encoding="utf-8")
    library = load_library([lib])
    assert set(library.groups) == {"daily-report"}
    clashes = [d for d in library.diagnostics if d.rule == "tool-name-collision"]
    assert len(clashes) == 2 and all(d.is_error for d in clashes)
    assert all("group_daily_report" in d.message and "'daily-report'" in d.message
               for d in clashes)


def test_groups_that_are_no_tools_may_share_a_tool_spelling(tmp_path: Path) -> None:
    from skillgrove.groups import load_library

    library = load_library([group_library(tmp_path, ["daily-report", "daily_report"])])
    assert set(library.groups) == {"daily-report", "daily_report"}
