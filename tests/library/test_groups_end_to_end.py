"""Every bundled group, end to end: the real Runner and SubprocessExecutor on the samples.

Each test copies the samples into its own ``tmp_path``, runs one group there (relative paths are
resolved against ``RunOptions.workdir``), and checks the group's outputs against the sample data
and what reached a real SMTP server (aiosmtpd). Skills run in the sandbox, whose network is
outward only, so the server listens on this machine's outward address as any mail relay on the
network would (127.0.0.1 is never reached from the sandbox). The SMTP settings reach
``send-email`` only through the executor's ``environ``, as the variables it declares under
``entrypoint.env``; HOME, TMPDIR and SKILLGROVE_OUTBOX point into ``tmp_path`` too, so a run
writes nothing outside it (the module checks that the library folder is left untouched).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import socket
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from pypdf import PdfReader

from skillgrove.graph.runlog import RunRecord
from skillgrove.groups.library import Library, load_library
from skillgrove.runtime.events import Event, EventKind
from skillgrove.runtime.executors import SubprocessExecutor
from skillgrove.runtime.runner import EventRecorder, Runner, RunOptions
from tests.library.conftest import LIBRARY, SAMPLES

SENDER = "skillgrove@larkspur.example"
ON_CALL = "oncall@larkspur.example"


# -- fixtures -------------------------------------------------------------------------------------


class Inbox:
    """aiosmtpd handler that keeps every envelope it accepts."""

    def __init__(self) -> None:
        self.envelopes: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.envelopes.append(envelope)
        return "250 Message accepted for delivery"


@dataclass(frozen=True)
class SmtpServer:
    inbox: Inbox
    host: str
    port: int


@dataclass(frozen=True)
class Mail:
    sender: str
    recipients: list[str]
    message: EmailMessage

    @property
    def subject(self) -> str:
        # A long subject is folded onto a continuation line; parsing keeps the fold's space.
        return " ".join(str(self.message["Subject"]).split())

    @property
    def text(self) -> str:
        part = self.message.get_body(preferencelist=("plain",))
        assert isinstance(part, EmailMessage)
        return str(part.get_content()).replace("\r\n", "\n")

    @property
    def html(self) -> str:
        part = self.message.get_body(preferencelist=("html",))
        assert isinstance(part, EmailMessage)
        return str(part.get_content()).replace("\r\n", "\n")

    def attachments(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for part in self.message.iter_attachments():
            assert isinstance(part, EmailMessage)
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            out[str(part.get_filename())] = payload
        return out


@dataclass(frozen=True)
class GroupRun:
    record: RunRecord
    events: list[Event]
    mail: list[Mail]
    """Messages that reached the SMTP server during this run, in arrival order."""

    @property
    def outputs(self) -> Mapping[str, Any]:
        return self.record.outputs

    def step_outputs(self, step_id: str) -> Mapping[str, Any]:
        step = self.record.step(step_id)
        assert step is not None
        return step.outputs

    def mail_to(self, address: str) -> Mail:
        [mail] = [m for m in self.mail if address in m.recipients]
        return mail


def _outward_address() -> str:
    """This machine's address on its default route (a UDP socket's connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.254", 9))
        except OSError:
            return ""
        address = str(probe.getsockname()[0])
    return "" if address.startswith("127.") else address


@pytest.fixture(scope="module")
def smtp() -> Iterator[SmtpServer]:
    host = _outward_address()
    if not host:
        pytest.fail("no outward network address: the sandboxed mail skill could not reach any "
                    "SMTP server from here")
    with socket.socket() as probe:
        probe.bind((host, 0))
        port = int(probe.getsockname()[1])
    inbox = Inbox()
    controller = Controller(inbox, hostname=host, port=port)
    controller.start()
    try:
        yield SmtpServer(inbox, host, port)
    finally:
        controller.stop()


def _library_files() -> list[str]:
    return sorted(str(p.relative_to(LIBRARY)) for p in LIBRARY.rglob("*")
                  if "__pycache__" not in p.parts)


@pytest.fixture(scope="module")
def library() -> Iterator[Library]:
    before = _library_files()
    loaded = load_library([LIBRARY])
    assert not loaded.errors, loaded.errors
    assert len(loaded.groups) == 11
    yield loaded
    assert _library_files() == before, "a run wrote into the library folder"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """tmp_path with a copy of the samples in ./samples; runs resolve relative paths here."""
    shutil.copytree(SAMPLES, tmp_path / "samples", ignore=shutil.ignore_patterns("*.py"))
    return tmp_path


# -- running a group ------------------------------------------------------------------------------


def run_group(library: Library, smtp: SmtpServer, workdir: Path, group_id: str,
              inputs: Mapping[str, Any], context: Mapping[str, Any] | None = None, *,
              skipped: frozenset[str] = frozenset()) -> GroupRun:
    """Run a group for real; check it succeeded with exactly ``skipped`` skipped, and the events."""
    (workdir / "tmp").mkdir(exist_ok=True)
    environ = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(workdir / "home"),
        "TMPDIR": str(workdir / "tmp"),
        "SMTP_HOST": smtp.host,
        "SMTP_PORT": str(smtp.port),
        "SMTP_FROM": f"Skillgrove <{SENDER}>",
        "SKILLGROVE_OUTBOX": str(workdir / "outbox"),
    }
    recorder = EventRecorder()
    runner = Runner(library.groups, library.skills, SubprocessExecutor(environ=environ),
                    events=recorder, options=RunOptions(workdir=workdir))
    arrived = len(smtp.inbox.envelopes)
    record = runner.run(group_id, dict(inputs), dict(context or {}))

    failures = {s.id: s.error for s in record.steps if s.status == "failure"}
    assert record.status == "success", (record.error, failures)
    statuses = {s.id: s.status for s in record.steps}
    assert skipped <= set(statuses), f"no such steps: {sorted(skipped - set(statuses))}"
    assert statuses == {sid: "skipped" if sid in skipped else "success" for sid in statuses}

    events = recorder.events
    first, last = events[0], events[-1]
    assert (first.kind, first.step, first.group) == (EventKind.RUN_STARTED, None, group_id)
    assert (last.kind, last.step, last.status) == (EventKind.RUN_FINISHED, None, "success")
    assert {e.run_id for e in events} == {record.id}
    assert not [e for e in events if e.kind in (EventKind.STEP_FAILED, EventKind.STEP_RETRYING)]
    for step in record.steps:
        kinds = [e.kind for e in events if e.step == step.id]
        if step.status == "skipped":
            assert kinds == [EventKind.STEP_SKIPPED], (step.id, kinds)
        else:
            assert kinds == [EventKind.STEP_STARTED, EventKind.STEP_FINISHED], (step.id, kinds)

    assert not (workdir / "outbox").exists(), "mail fell back to the outbox instead of SMTP"
    mail = []
    for envelope in smtp.inbox.envelopes[arrived:]:
        message = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        mail.append(Mail(envelope.mail_from, list(envelope.rcpt_tos), message))
    return GroupRun(record, events, mail)


def pdf_text(source: Path | bytes) -> str:
    reader = PdfReader(BytesIO(source) if isinstance(source, bytes) else source)
    return "\n".join(page.extract_text() for page in reader.pages)


# -- the groups -----------------------------------------------------------------------------------


def test_every_group_has_an_end_to_end_test(library: Library) -> None:
    tests = [name for name in globals() if name.startswith("test_")]
    untested = [g for g in library.groups
                if not any(t.startswith("test_" + g.replace("-", "_")) for t in tests)]
    assert untested == []


def test_report_analysis(library: Library, smtp: SmtpServer, workdir: Path) -> None:
    run = run_group(library, smtp, workdir, "report-analysis",
                    {"pdf_path": "samples/quarterly_report.pdf"},
                    {"team_email": "team@larkspur.example", "report_name": "Q3 2024"})
    report = pdf_text(SAMPLES / "quarterly_report.pdf")
    metrics = {m["label"]: m for m in run.outputs["metrics"]}
    assert metrics["Revenue"]["display"] == "$4.82 million"
    assert metrics["Revenue"]["value"] == 4_820_000
    assert metrics["Revenue"]["change"] == "up 12.4%"
    assert metrics["Active customers"]["value"] == 18_240
    assert all(m["display"] in report for m in metrics.values())
    summary = run.outputs["summary"]
    assert "$4.82 million" in summary and "$4.82 million" in report
    assert "61.3%" in summary
    assert run.outputs["delivered"] == "smtp"

    [mail] = run.mail
    assert mail.sender == SENDER
    assert mail.recipients == ["team@larkspur.example"]
    assert mail.subject == "Report summary: Q3 2024"
    assert mail.message["Message-ID"] == run.outputs["message_id"]
    assert summary in mail.text
    assert "| Revenue | $4.82 million | up 12.4% |" in mail.text
    assert "(2 pages; the report is attached.)" in mail.text
    assert mail.attachments() == {
        "quarterly_report.pdf": (SAMPLES / "quarterly_report.pdf").read_bytes()}


def test_support_ticket_reply_routine_question(library: Library, smtp: SmtpServer,
                                               workdir: Path) -> None:
    run = run_group(library, smtp, workdir, "support-ticket-reply",
                    {"ticket_path": "samples/ticket_question.txt", "escalation_dir": "escalations"},
                    {"on_call_email": ON_CALL, "support_lead_email": "lead@larkspur.example"},
                    skipped=frozenset({"escalate", "review"}))
    assert run.outputs["priority"] == "low"
    assert run.outputs["needs_review"] is False
    assert run.outputs["escalation_id"] is None
    assert run.outputs["sent_to_customer"] == "smtp"
    assert run.outputs["reply_body"].startswith("Hi Ben,")
    assert "T-20433" in run.outputs["reply_body"]
    assert "Export workspace" in run.outputs["reply_body"]  # the knowledge-base answer
    assert not (workdir / "escalations").exists()
    assert not [e for e in run.events if (e.step or "").startswith("escalate/")]

    [mail] = run.mail  # the customer only: no escalation, no review
    assert mail.recipients == ["ben.adeyemi@example.org"]
    assert mail.subject == "Re: How do I export my project data to CSV?"
    assert mail.text.strip() == run.outputs["reply_body"].strip()


def test_support_ticket_reply_urgent_ticket_branches_into_escalation(
        library: Library, smtp: SmtpServer, workdir: Path) -> None:
    ticket = json.loads((SAMPLES / "ticket_urgent.json").read_text(encoding="utf-8"))
    run = run_group(library, smtp, workdir, "support-ticket-reply",
                    {"ticket_path": "samples/ticket_urgent.json", "escalation_dir": "escalations"},
                    {"on_call_email": ON_CALL, "support_lead_email": "lead@larkspur.example"},
                    skipped=frozenset({"reply"}))
    assert (run.outputs["priority"], run.outputs["category"]) == ("urgent", "billing")
    assert run.outputs["needs_review"] is True
    assert run.outputs["sent_to_customer"] is None
    escalation = run.step_outputs("escalate")
    escalation_id = run.outputs["escalation_id"]
    assert re.fullmatch(r"ESC-\d{8}-[0-9A-F]{6}", escalation_id)
    assert escalation["created"] is True
    assert escalation["response_due"] == "2024-10-08T08:42:00+01:00"  # urgent: one hour
    assert escalation["alerted"] == "smtp"

    # The sub-group ran as steps of its own, reported under the calling step.
    sub = {e.step: e.status for e in run.events
           if e.kind is EventKind.STEP_FINISHED and (e.step or "").startswith("escalate/")}
    assert sub == {"escalate/deadlines": "success", "escalate/record": "success",
                   "escalate/alert": "success"}
    [logged] = [json.loads(line) for line in
                (workdir / "escalations" / "escalations.jsonl").read_text().splitlines()]
    assert logged["escalation_id"] == escalation_id
    assert (logged["ticket_id"], logged["priority"]) == (ticket["id"], "urgent")
    assert logged["customer_email"] == "marta.kowalczyk@fernleaf-studio.example"

    assert len(run.mail) == 2  # on-call alert and review request; nothing to the customer
    alert = run.mail_to(ON_CALL)
    assert alert.subject == f"[URGENT] {escalation_id} - ticket T-20417"
    assert "First response due: 2024-10-08T08:42:00+01:00" in alert.text
    review = run.mail_to("lead@larkspur.example")
    assert review.subject == ("[Review needed] Re: charged twice and now locked out of my account "
                              "(urgent)")
    assert run.outputs["reply_body"].strip() in review.text
    assert not [m for m in run.mail if "marta.kowalczyk@fernleaf-studio.example" in m.recipients]


def test_ticket_escalation_once_per_ticket(library: Library, smtp: SmtpServer,
                                           workdir: Path) -> None:
    ticket = json.loads((SAMPLES / "ticket_urgent.json").read_text(encoding="utf-8"))
    inputs = {"ticket_id": ticket["id"], "priority": "high", "received_at": ticket["received_at"],
              "summary": ticket["subject"], "category": "billing",
              "customer_email": "marta.kowalczyk@fernleaf-studio.example",
              "reasons": ["charged twice", "locked out"], "on_call_email": ON_CALL,
              "output_dir": "escalations"}
    first = run_group(library, smtp, workdir, "ticket-escalation", inputs)
    # Received Tuesday 07:42, before business hours: the clock starts at 09:00.
    assert first.outputs["response_due"] == "2024-10-08T13:00:00+01:00"  # 4 business hours
    assert first.outputs["resolve_due"] == "2024-10-09T17:00:00+01:00"  # 2 business days
    assert first.outputs["created"] is True
    assert first.outputs["alerted"] == "smtp"
    assert Path(first.outputs["log_path"]) == workdir / "escalations" / "escalations.jsonl"
    [alert] = first.mail
    assert alert.recipients == [ON_CALL]
    assert alert.subject == f"[HIGH] {first.outputs['escalation_id']} - ticket T-20417"
    assert "Why it was escalated: charged twice; locked out" in alert.text

    again = run_group(library, smtp, workdir, "ticket-escalation", inputs,
                      skipped=frozenset({"alert"}))
    assert again.outputs["created"] is False
    assert again.outputs["escalation_id"] == first.outputs["escalation_id"]
    assert again.mail == []
    assert len(Path(first.outputs["log_path"]).read_text().splitlines()) == 1


def _week_change(rows: list[dict[str, str]], column: str) -> float:
    current = sum(float(r[column]) for r in rows[-7:])
    previous = sum(float(r[column]) for r in rows[-14:-7])
    return round((current / previous - 1) * 100, 1)


def test_weekly_kpi_report(library: Library, smtp: SmtpServer, workdir: Path) -> None:
    run = run_group(library, smtp, workdir, "weekly-kpi-report",
                    {"csv_path": "samples/kpi_daily.csv", "output_dir": "kpi"},
                    {"team_email": "team@larkspur.example"})
    with (SAMPLES / "kpi_daily.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    signups, refunds = _week_change(rows, "signups"), _week_change(rows, "refunds")
    assert (signups, refunds) == (-13.7, 77.8)
    headline = run.outputs["headline"]
    assert f"signups down {-signups}%" in headline and f"Refunds up {refunds}%" in headline
    assert run.outputs["alert_count"] == 2  # signups below -10 %, refunds above 12
    assert "signups changed by -13.7%" in run.outputs["alerts"]
    kpi = workdir / "kpi"
    assert Path(run.outputs["report_path"]) == kpi / "kpi-report.md"
    chart = Path(run.outputs["chart_path"])
    assert chart.parent == kpi and chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    report = Path(run.outputs["report_path"]).read_text(encoding="utf-8")
    assert headline in report

    [mail] = run.mail
    assert mail.recipients == ["team@larkspur.example"]
    assert mail.subject == "[ALERT] Weekly KPI report, week ending 2024-10-01"
    assert headline in mail.text
    assert headline in mail.html
    attachments = mail.attachments()
    assert sorted(attachments) == ["chart.png", "kpi-report.html"]
    assert attachments["chart.png"] == chart.read_bytes()


def test_meeting_followup(library: Library, smtp: SmtpServer, workdir: Path) -> None:
    run = run_group(library, smtp, workdir, "meeting-followup",
                    {"transcript_path": "samples/meeting_transcript.txt", "output_dir": "meeting"})
    attendees = ["dana.whitfield@larkspur.example", "omar.haddad@larkspur.example",
                 "priya.natarajan@larkspur.example", "tomasz.nowak@larkspur.example"]
    owners = {(a["owner"], a["due"]) for a in run.outputs["action_items"]}
    assert owners == {("Priya Natarajan", "2024-10-09"), ("Tomasz Nowak", "2024-10-11"),
                      ("Omar Haddad", ""), ("Dana Whitfield", "2024-10-10")}
    assert any("21 October" in d for d in run.outputs["decisions"])

    invite = Path(run.outputs["invite_path"])
    assert invite == workdir / "meeting" / "follow-up.ics"
    ics = invite.read_text(encoding="utf-8")
    unfolded = ics.replace("\r\n ", "").replace("\n ", "")
    assert "BEGIN:VCALENDAR" in unfolded and "METHOD:REQUEST" in unfolded
    # "2024-10-15 at 10:00" in Europe/London (BST) is 09:00 UTC.
    assert "DTSTART:20241015T090000Z" in unfolded and "DTEND:20241015T093000Z" in unfolded
    assert "ORGANIZER;CN=Dana Whitfield:mailto:dana.whitfield@larkspur.example" in unfolded
    invited = re.findall(r"^ATTENDEE;[^\n]*:mailto:(\S+)$", unfolded, re.MULTILINE)
    assert invited == attendees
    minutes = Path(run.outputs["minutes_path"])
    assert minutes.parent == workdir / "meeting"
    assert "| Tomasz Nowak | Get the discount code approved by finance | 2024-10-11 |" in \
        minutes.read_text(encoding="utf-8")

    [mail] = run.mail
    assert mail.sender == "dana.whitfield@larkspur.example"  # the organizer sends it
    assert sorted(mail.recipients) == attendees
    assert mail.subject == "Minutes and next steps: Autumn campaign launch check-in"
    attachments = mail.attachments()
    assert sorted(attachments) == sorted([minutes.name, "follow-up.ics"])
    assert attachments["follow-up.ics"] == invite.read_bytes()
    # Text parts travel with CRLF line ends.
    assert attachments[minutes.name].replace(b"\r\n", b"\n") == minutes.read_bytes()


def test_invoice_to_ledger_books_once_then_rejects_the_duplicate(
        library: Library, smtp: SmtpServer, workdir: Path) -> None:
    ledger = workdir / "books" / "ledger.csv"
    ledger.parent.mkdir()
    columns = ["invoice_number", "vendor", "invoice_date", "due_date", "currency", "subtotal",
               "tax", "total", "source_file", "source_sha256", "recorded_at"]
    earlier = ["NS-88", "Northside Print", "2024-09-01", "2024-10-01", "USD", "500.00", "0.00",
               "500.00", "", "", "2024-09-02T10:00:00+00:00"]
    ledger.write_text(",".join(columns) + "\n" + ",".join(earlier) + "\n", encoding="utf-8")
    inputs = {"pdf_path": "samples/invoice.pdf", "ledger_path": "books/ledger.csv",
              "ap_email": "ap@larkspur.example"}

    run = run_group(library, smtp, workdir, "invoice-to-ledger", inputs,
                    skipped=frozenset({"reject"}))
    assert run.outputs["invoice_number"] == "BW-2024-0193"
    assert run.outputs["vendor"] == "Brightwater Office Supply Ltd."
    assert run.outputs["total"] == 1274.94
    assert (run.outputs["valid"], run.outputs["appended"]) == (True, True)
    assert run.outputs["ledger_total"] == 1774.94
    with ledger.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 and rows[0]["invoice_number"] == "NS-88"
    booked = rows[1]
    assert (booked["invoice_number"], booked["currency"], booked["subtotal"], booked["tax"],
            booked["total"]) == ("BW-2024-0193", "USD", "1180.50", "94.44", "1274.94")
    pdf = workdir / "samples" / "invoice.pdf"
    assert booked["source_file"] == str(pdf)
    assert booked["source_sha256"] == hashlib.sha256(pdf.read_bytes()).hexdigest()
    assert run.mail == []

    again = run_group(library, smtp, workdir, "invoice-to-ledger", inputs,
                      skipped=frozenset({"book"}))
    assert again.outputs["valid"] is False
    assert again.step_outputs("check")["duplicate"] is True
    assert again.outputs["appended"] is None
    with ledger.open(encoding="utf-8", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 2
    [mail] = again.mail
    assert mail.recipients == ["ap@larkspur.example"]
    assert mail.subject == "Invoice BW-2024-0193 from Brightwater Office Supply Ltd. was not booked"
    assert again.outputs["report"] in mail.text
    assert "Total read: 1274.94 USD" in mail.text
    assert mail.attachments() == {"invoice.pdf": pdf.read_bytes()}


def test_web_page_digest(library: Library, smtp: SmtpServer, workdir: Path) -> None:
    run = run_group(library, smtp, workdir, "web-page-digest",
                    {"html_path": "samples/article.html", "output_dir": "digest",
                     "send_to": "research@larkspur.example"})
    title = "Five lessons from moving our warehouse to same-day dispatch | Larkspur Journal"
    assert run.outputs["title"] == title
    assert "warehouse" in run.outputs["keywords"]
    urls = [link["url"] for link in run.outputs["links"]]
    assert "https://carriers.example/service-levels" in urls
    digest = run.outputs["digest"]
    assert Path(run.outputs["digest_path"]) == workdir / "digest" / "digest.md"
    assert Path(run.outputs["digest_path"]).read_text(encoding="utf-8") == digest
    assert digest.startswith(f"# Digest: {title}\n")
    assert "_Omar Haddad · " in digest
    assert "96% of orders meet that promise" in digest  # the summary
    assert "| carrier service levels | https://carriers.example/service-levels |" in digest

    [mail] = run.mail
    assert mail.recipients == ["research@larkspur.example"]
    assert mail.subject == f"Digest: {title}"
    assert mail.text.strip() == digest.strip()


def test_csv_cleanup(library: Library, smtp: SmtpServer, workdir: Path) -> None:
    run = run_group(library, smtp, workdir, "csv-cleanup",
                    {"csv_path": "samples/customers_messy.csv", "output_dir": "clean",
                     "notify_email": "crm@larkspur.example"})
    out = run.outputs
    assert (out["valid_rows"], out["rejected_rows"], out["duplicates_removed"]) == (5, 3, 2)
    with Path(out["valid_path"]).open(encoding="utf-8", newline="") as handle:
        valid = list(csv.DictReader(handle))
    emails = [row["email"] for row in valid]
    assert len(emails) == len(set(emails)) == 5  # no duplicates left
    assert emails == [e.lower() for e in emails]
    assert {r["customer_name"] for r in valid} >= {"Alice Moreau", "Bob Stein"}
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["signup_date"]) for r in valid)
    with Path(out["rejected_path"]).open(encoding="utf-8", newline="") as handle:
        rejected = {row["email"]: row["errors"] for row in csv.DictReader(handle)}
    assert set(rejected) == {"dana.whitfield@larkspur", "missing.name@example.com",
                             "fatima.zahra@example.ma"}
    assert "customer_name: is required" in rejected["missing.name@example.com"]
    archive = Path(out["archive"])
    assert archive == workdir / "clean" / "cleaned.zip"
    with zipfile.ZipFile(archive) as bundle:
        assert sorted(bundle.namelist()) == ["rejected.csv", "valid.csv"]
        assert bundle.read("valid.csv") == Path(out["valid_path"]).read_bytes()

    [mail] = run.mail
    assert mail.recipients == ["crm@larkspur.example"]
    assert mail.subject == "CSV clean-up: 5 rows ready, 3 rejected"
    assert "Removed 2 duplicate rows." in mail.text
    assert mail.attachments() == {"cleaned.zip": archive.read_bytes()}


def test_redacted_document_share(library: Library, smtp: SmtpServer, workdir: Path) -> None:
    original = pdf_text(SAMPLES / "invoice.pdf")
    assert "accounts@brightwater.example" in original
    run = run_group(library, smtp, workdir, "redacted-document-share",
                    {"pdf_path": "samples/invoice.pdf", "recipient": "auditor@partner.example",
                     "note": "Here is the invoice you asked for.", "output_dir": "shared"})
    redacted = Path(run.outputs["redacted_pdf"])
    assert redacted == workdir / "shared" / "redacted.pdf"
    text = pdf_text(redacted)
    assert "accounts@brightwater.example" not in text and "[EMAIL]" in text
    assert "Invoice number: BW-2024-0193" in text and "Total due: USD 1,274.94" in text
    assert run.outputs["items_masked"] >= 1
    assert run.outputs["sha256"] == hashlib.sha256(redacted.read_bytes()).hexdigest()

    [mail] = run.mail
    assert mail.recipients == ["auditor@partner.example"]
    assert mail.subject == "Redacted document: Invoice BW-2024-0193"
    assert mail.text.startswith("Here is the invoice you asked for.")
    assert f"{run.outputs['items_masked']} items of personal data were masked" in mail.text
    assert run.outputs["sha256"] in mail.text
    attachment = mail.attachments()["redacted.pdf"]
    assert attachment == redacted.read_bytes()
    assert b"accounts@brightwater.example" not in attachment
    assert "accounts@brightwater.example" not in pdf_text(attachment)


def test_weekly_report_zh(library: Library, smtp: SmtpServer, workdir: Path) -> None:
    run = run_group(library, smtp, workdir, "weekly-report-zh",
                    {"log_path": "samples/work_log_zh.txt", "output_dir": "weekly"},
                    {"manager_email": "manager@larkspur.example"})
    log = (SAMPLES / "work_log_zh.txt").read_text(encoding="utf-8")
    hours = sum(float(h) for h in re.findall(r"^- .* (\d+(?:\.\d+)?)h$", log, re.MULTILINE))
    assert run.outputs["total_hours"] == hours == 26.0
    title = "陈晓明 工作周报（2024-10-07 至 2024-10-11）"
    assert run.outputs["title"] == title
    assert run.outputs["blocked"] == ["排查测试环境数据库连接超时问题，等待运维同事扩容"]
    report = Path(run.outputs["report_path"])
    assert report.parent == workdir / "weekly"
    markdown = report.read_text(encoding="utf-8")
    assert "数据平台" in markdown and "销售报表增加导出Excel功能" in markdown
    assert Path(run.outputs["html_path"]).parent == workdir / "weekly"

    [mail] = run.mail
    assert mail.recipients == ["manager@larkspur.example"]
    assert mail.subject == title
    assert mail.text.strip() == markdown.strip()
    assert "排查测试环境数据库连接超时问题" in mail.html


def test_customer_complaint_zh(library: Library, smtp: SmtpServer, workdir: Path) -> None:
    run = run_group(library, smtp, workdir, "customer-complaint-zh",
                    {"complaint_path": "samples/complaint_zh.txt", "escalation_dir": "escalations"},
                    {"on_call_email": ON_CALL, "supervisor_email": "supervisor@larkspur.example"},
                    skipped=frozenset({"reply"}))
    assert (run.outputs["category"], run.outputs["severity"]) == ("物流配送", "紧急")
    assert run.outputs["order_id"] == "LX20241001882"
    assert run.outputs["reply_subject"] == "回复：订单一直没发货，客服也不回复"
    body = run.outputs["reply_body"]
    assert body.startswith("王丽 您好") and "LX20241001882" in body and "C-3107" in body
    escalation_id = run.outputs["escalation_id"]
    [logged] = [json.loads(line) for line in
                (workdir / "escalations" / "escalations.jsonl").read_text().splitlines()]
    assert (logged["escalation_id"], logged["ticket_id"]) == (escalation_id, "C-3107")
    assert logged["customer_email"] == "wangli@example.cn"

    assert len(run.mail) == 2  # the supervisor reviews; on-call is alerted; no direct reply
    review = run.mail_to("supervisor@larkspur.example")
    assert review.subject == "【待审核】回复：订单一直没发货，客服也不回复（紧急）"
    assert "电话 13812345678" in review.text
    assert body.strip() in review.text
    alert = run.mail_to(ON_CALL)
    assert alert.subject == f"[URGENT] {escalation_id} - ticket C-3107"
    assert not [m for m in run.mail if "wangli@example.cn" in m.recipients]
