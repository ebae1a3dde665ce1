"""send-email: real SMTP delivery to a local aiosmtpd server, and the .eml outbox."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from tests.library.conftest import LIBRARY, call_skill, run_skill


class _Inbox:
    def __init__(self) -> None:
        self.envelopes: list[Any] = []

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,
                          options: list[str]) -> str:
        if address.startswith("nobody@"):
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.envelopes.append(envelope)
        return "250 Message accepted for delivery"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def smtp_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Inbox]:
    inbox = _Inbox()
    port = _free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SMTP_PORT", str(port))
    monkeypatch.setenv("SMTP_FROM", "Reports <reports@larkspur.example>")
    monkeypatch.delenv("SMTP_USER", raising=False)
    try:
        yield inbox
    finally:
        controller.stop()


@pytest.fixture
def no_smtp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("SMTP_HOST", raising=False)
    monkeypatch.setenv("SKILLGROVE_OUTBOX", str(tmp_path / "env-outbox"))
    return tmp_path


def test_smtp_delivery_reaches_the_server_with_attachment(smtp_server: _Inbox,
                                                          samples: Path) -> None:
    result = run_skill("send-email", to=["Dana <dana@larkspur.example>", "omar@larkspur.example"],
                       cc="finance@larkspur.example", subject="Report summary: Q3 2024",
                       body="Revenue reached $4.82 million.",
                       attachments=[str(samples / "quarterly_report.pdf"), ""])
    assert result["delivered"] == "smtp"
    assert result["path"] == ""
    assert len(smtp_server.envelopes) == 1
    envelope = smtp_server.envelopes[0]
    assert envelope.mail_from == "reports@larkspur.example"
    assert sorted(envelope.rcpt_tos) == ["dana@larkspur.example", "finance@larkspur.example",
                                         "omar@larkspur.example"]
    message = message_from_bytes(envelope.content, policy=policy.default)
    assert isinstance(message, EmailMessage)
    assert message["Subject"] == "Report summary: Q3 2024"
    assert message["Message-ID"] == result["message_id"]
    body = message.get_body(preferencelist=("plain",))
    assert body is not None and "Revenue reached $4.82 million." in body.get_content()
    attachments = list(message.iter_attachments())
    assert [a.get_filename() for a in attachments] == ["quarterly_report.pdf"]
    assert attachments[0].get_content() == (samples / "quarterly_report.pdf").read_bytes()


def test_a_recipient_refused_by_the_server_is_reported_as_bad_input(smtp_server: _Inbox) -> None:
    with pytest.raises(ValueError, match=r"^to: the SMTP server refused nobody@larkspur\.example$"):
        call_skill("send-email", to="nobody@larkspur.example", subject="s", body="b")
    assert smtp_server.envelopes == []


def test_an_unreachable_smtp_server_is_a_clear_error(smtp_server: _Inbox,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMTP_PORT", str(_free_port()))  # nothing listens there
    with pytest.raises(RuntimeError, match=r"SMTP delivery through 127\.0\.0\.1:\d+ failed"):
        call_skill("send-email", to="a@example.com", subject="s", body="b")


def test_without_smtp_the_message_is_an_eml_file_in_the_outbox(no_smtp: Path,
                                                               samples: Path) -> None:
    outbox = no_smtp / "outbox"
    result = run_skill("send-email", to="王丽 <wangli@example.cn>", subject="回复：订单一直没发货",
                       body="王丽 您好：\n\n非常抱歉。", html_body="<p>非常抱歉。</p>",
                       attachments=[str(samples / "kpi_daily.csv")], outbox_dir=str(outbox),
                       reply_to="support@larkspur.example")
    assert result["delivered"] == "outbox"
    path = Path(result["path"])
    assert path.parent == outbox and path.suffix == ".eml"
    raw = path.read_bytes()
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b""), "RFC 5322 uses CRLF"
    message = message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    assert message["Subject"] == "回复：订单一直没发货"
    assert message["To"] == "王丽 <wangli@example.cn>"
    assert message["Reply-To"] == "support@larkspur.example"
    assert message["Message-ID"] == result["message_id"]
    assert message["Date"]
    plain = message.get_body(preferencelist=("plain",))
    html = message.get_body(preferencelist=("html",))
    assert plain is not None and "非常抱歉" in plain.get_content()
    assert html is not None and "<p>非常抱歉。</p>" in html.get_content()
    [attachment] = list(message.iter_attachments())
    assert attachment.get_filename() == "kpi_daily.csv"
    assert result["recipients"] == ["王丽 <wangli@example.cn>"]


def test_outbox_defaults_to_the_environment_folder(no_smtp: Path) -> None:
    result = run_skill("send-email", to="ben@example.org", subject="Hello", body="Hi")
    assert Path(result["path"]).parent == no_smtp / "env-outbox"


@pytest.mark.parametrize(("inputs", "message"), [
    ({"to": "not-an-address"}, "to: 'not-an-address' is not an email address"),
    ({"to": []}, "to: give at least one recipient address"),
    ({"to": "a@example.com", "cc": ["bad"]}, "cc: 'bad' is not an email address"),
    ({"to": "a@example.com", "subject": "two\nlines"}, "subject: must be a single line of text"),
    ({"to": "a@example.com", "attachments": ["/no/such/file.pdf"]},
     "attachments[0]: no such file: /no/such/file.pdf"),
])
def test_bad_inputs_are_named(no_smtp: Path, inputs: dict[str, Any], message: str) -> None:
    arguments = {"subject": "s", "body": "b", "outbox_dir": str(no_smtp / "o"), **inputs}
    with pytest.raises(ValueError) as caught:
        call_skill("send-email", **arguments)
    assert str(caught.value) == message
    assert not (no_smtp / "o").exists(), "nothing is written for a rejected message"


def test_run_from_inside_the_skill_folder_never_writes_into_the_library(
        no_smtp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILLGROVE_OUTBOX")
    monkeypatch.setenv("HOME", str(no_smtp / "home"))
    monkeypatch.chdir(LIBRARY / "skills" / "send-email")  # where the runner starts skills
    result = run_skill("send-email", to="ben@example.org", subject="Hello", body="Hi")
    assert Path(result["path"]).parent == no_smtp / "home" / ".skillgrove" / "outbox"
    assert not (LIBRARY / "skills" / "send-email" / "outbox").exists()
