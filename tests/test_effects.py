"""Side effects are declared and confirmed: a skill says what it changes (``effects``), a group's
effects are its skills', and ``ask`` runs a group with effects only when the caller confirms it
or a policy allows them; otherwise the answer is the plan and what needs confirmation."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest

from skillgrove import Skillgrove
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.groups.library import load_library
from skillgrove.runtime.cli import main
from skillgrove.runtime.errors import ConfirmationRequired
from skillgrove.runtime.paths import bundled_library
from skillgrove.skills.loader import LoadOptions
from tests.helpers import write_group, write_skill

SAMPLES = bundled_library() / "samples"
REPORT_REQUEST = "summarize the quarterly report PDF and email the key numbers to my team"
REPORT_VALUES = {"pdf_path": str(SAMPLES / "quarterly_report.pdf"),
                 "team_email": "team@example.com", "report_name": "Q3"}


def test_effects_are_read_from_the_frontmatter(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "post-note", """
        ---
        name: post-note
        description: Post a note to the team channel.
        effects: [sends-messages, writes-file]
        ---
        Post it.
        """)
    write_skill(tmp_path / "skills", "read-note", """
        ---
        name: read-note
        description: Read a note.
        effects: none
        ---
        Read it.
        """)
    library = load_library([tmp_path], LoadOptions())
    assert library.skills["post-note"].effects == ("sends-messages", "writes-file")
    assert library.skills["read-note"].effects == ()
    [warning] = [d for d in library.warnings if d.rule == "unknown-effect"]
    assert "writes-file" in warning.message and warning.line == 4
    assert warning.hint and "writes-files" in warning.hint


def test_a_groups_effects_are_its_skills_sub_groups_included() -> None:
    library = load_library([bundled_library()])
    effects = {gid: library.effects(g) for gid, g in library.groups.items()}
    assert effects["report-analysis"] == {"sends-email": ("send-email",)}
    assert effects["invoice-to-ledger"] == {"writes-files": ("append-ledger-row",),
                                            "sends-email": ("send-email",)}
    declared = {name for name, s in library.skills.items() if s.effects}
    assert declared == {"send-email", "append-ledger-row", "create-escalation-record"}


def test_sub_group_effects_count(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "mail-it", """
        ---
        name: mail-it
        description: Mail a text.
        effects: [sends-email]
        ---
        """)
    write_skill(tmp_path / "skills", "say-it", """
        ---
        name: say-it
        description: Say a text.
        ---
        """)
    write_group(tmp_path, "inner.yaml", """
        id: inner
        description: Mail a text.
        steps:
          - {id: mail, skill: mail-it}
        """)
    write_group(tmp_path, "outer.yaml", """
        id: outer
        description: Say a text, then mail it.
        steps:
          - {id: say, skill: say-it}
          - {id: send, group: inner, needs: [say]}
        """)
    library = load_library([tmp_path], LoadOptions())
    assert not library.errors, library.errors
    assert library.effects(library.groups["outer"]) == {"sends-email": ("mail-it",)}


@pytest.fixture
def engine(tmp_path: Path, encoder: CachedEncoder, monkeypatch: pytest.MonkeyPatch) -> Skillgrove:
    monkeypatch.setenv("SKILLGROVE_OUTBOX", str(tmp_path / "outbox"))
    monkeypatch.delenv("SKILLGROVE_ALLOW_EFFECTS", raising=False)
    for name in ("SMTP_HOST", "SMTP_PORT"):
        monkeypatch.delenv(name, raising=False)
    return Skillgrove([bundled_library()], index=tmp_path / "index", encoder=encoder)


def _mails(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "outbox").glob("*.eml"))


def test_ask_plans_a_group_with_effects_and_runs_it_once_confirmed(engine: Skillgrove,
                                                                   tmp_path: Path) -> None:
    for _ in range(2):  # asking again sends nothing either
        answer = engine.ask(REPORT_REQUEST, {"values": REPORT_VALUES})
        assert answer.run is None
        assert answer.toolbox.group is not None
        assert answer.needs_confirmation == {"sends-email": ("send-email",)}
        assert answer.plan is not None and answer.plan.group == "report-analysis"
        assert any("needs confirmation" in note for note in answer.notes)
    assert _mails(tmp_path) == []
    confirmed = engine.ask(REPORT_REQUEST, {"values": REPORT_VALUES}, confirm=True)
    assert confirmed.run is not None and confirmed.run.status == "success"
    assert not confirmed.needs_confirmation and confirmed.plan is None
    assert len(_mails(tmp_path)) == 1


def test_plan_only_never_runs(engine: Skillgrove, tmp_path: Path) -> None:
    answer = engine.ask(REPORT_REQUEST, {"values": REPORT_VALUES}, confirm=True, plan_only=True)
    assert answer.run is None and answer.plan is not None
    assert _mails(tmp_path) == []


def test_a_policy_allows_effects_without_confirmation(tmp_path: Path, encoder: CachedEncoder,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLGROVE_OUTBOX", str(tmp_path / "outbox"))
    monkeypatch.setenv("SKILLGROVE_ALLOW_EFFECTS", "sends-email")
    engine = Skillgrove([bundled_library()], index=tmp_path / "index", encoder=encoder)
    assert engine.allow_effects == {"sends-email"}
    answer = engine.ask(REPORT_REQUEST, {"values": REPORT_VALUES})
    assert answer.run is not None and answer.run.status == "success"
    assert engine.unconfirmed_effects("invoice-to-ledger") == {
        "writes-files": ("append-ledger-row",)}
    assert Skillgrove([bundled_library()], index=tmp_path / "index", encoder=encoder,
                      allow_effects=["all"]).unconfirmed_effects("invoice-to-ledger") == {}


def test_an_unconfirmed_run_is_refused_after_its_inputs_are_checked(engine: Skillgrove,
                                                                   tmp_path: Path) -> None:
    from skillgrove.runtime.runner import RunError

    with pytest.raises(RunError, match="pdf_path"):
        engine.run("report-analysis", {}, confirm=False)
    with pytest.raises(ConfirmationRequired) as refused:
        engine.run("report-analysis", {"pdf_path": REPORT_VALUES["pdf_path"]}, confirm=False)
    assert refused.value.code == "needs_confirmation"
    assert refused.value.details["effects"] == {"sends-email": ["send-email"]}
    with pytest.raises(ConfirmationRequired):
        engine.run_skill("send-email", {"to": "a@example.com", "subject": "s", "body": "b"},
                         confirm=False)
    assert _mails(tmp_path) == []


def test_the_cli_asks_for_confirmation_and_dry_runs(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SKILLGROVE_OUTBOX", str(tmp_path / "outbox"))
    monkeypatch.delenv("SKILLGROVE_ALLOW_EFFECTS", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    context = tmp_path / "context.json"
    context.write_text(json.dumps({"values": {"pdf_path": REPORT_VALUES["pdf_path"],
                                              "team_email": "t@example.com"}}))
    index = ["--index", str(tmp_path / "index")]
    out = StringIO()
    assert main(["ask", REPORT_REQUEST, "--context", str(context), *index], out) == 3
    assert "planned, not run: needs confirmation for sends-email (send-email)" in out.getvalue()
    err = capsys.readouterr().err
    assert "needs confirmation before it runs: sends-email (send-email)" in err
    assert "effects: sends-email (send-email)" in err and "level 3:" in err
    assert _mails(tmp_path) == []
    assert main(["ask", REPORT_REQUEST, "--context", str(context), "--yes", *index],
                StringIO()) == 0
    assert len(_mails(tmp_path)) == 1
    ledger = tmp_path / "ledger.csv"
    out = StringIO()
    assert main(["run", "invoice-to-ledger", "--dry-run", "--input",
                 f"pdf_path={SAMPLES / 'invoice.pdf'}", "--input", f"ledger_path={ledger}",
                 *index], out) == 0
    assert "effects: writes-files (append-ledger-row); sends-email (send-email)" in out.getvalue()
    assert not ledger.exists()
