"""Send an email over SMTP when SMTP_HOST is set; otherwise write an .eml file to an outbox.

The SMTP password is sent only over TLS (port 465, or STARTTLS when the server offers it);
``SMTP_ALLOW_PLAINTEXT_AUTH=1`` allows it in the clear, for a relay on a connection that is
protected otherwise (localhost, a tunnel). Outbox files are readable by their owner only.
"""

from __future__ import annotations

import mimetypes
import os
import re
import smtplib
import ssl
import uuid
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.utils import formatdate, getaddresses, make_msgid
from pathlib import Path
from typing import Any

_ADDRESS = re.compile(r"^[^@\s<>,;]+@[^@\s<>,;]+\.[^@\s<>,;]+$|^[^@\s<>,;]+@localhost$")


def run(to: str | list[str], subject: str, body: str, cc: str | list[str] | None = None,
        html_body: str = "", attachments: list[str] | None = None, sender: str = "",
        reply_to: str = "", outbox_dir: str = "") -> dict[str, Any]:
    recipients = _addresses(to, "to")
    copies = _addresses(cc, "cc")
    if not recipients:
        raise ValueError("to: give at least one recipient address")
    if not isinstance(subject, str) or "\n" in subject or "\r" in subject:
        raise ValueError("subject: must be a single line of text")
    sender = sender or os.environ.get("SMTP_FROM") or "skillgrove@localhost"
    _addresses(sender, "sender")
    domain = sender.rsplit("@", 1)[-1].strip(" >")

    message = EmailMessage()
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    if copies:
        message["Cc"] = ", ".join(copies)
    if reply_to:
        _addresses(reply_to, "reply_to")
        message["Reply-To"] = reply_to
    message["Subject"] = subject
    message["Date"] = formatdate(usegmt=True)
    message["Message-ID"] = make_msgid(domain=domain)
    message.set_content(body or "")
    if html_body:
        message.add_alternative(html_body, subtype="html")
    for index, item in enumerate(attachments or []):
        if not item:
            continue
        _attach(message, Path(item).expanduser(), index)

    everyone = recipients + copies
    host = (os.environ.get("SMTP_HOST") or "").strip()
    if host:
        _send_smtp(message, host)
        return {"delivered": "smtp", "message_id": message["Message-ID"], "path": "",
                "recipients": everyone}
    folder = Path(outbox_dir or os.environ.get("SKILLGROVE_OUTBOX") or _default_outbox())
    folder = folder.expanduser()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    slug = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")[:40] or "message"
    path = folder / f"{stamp}-{slug}-{uuid.uuid4().hex[:6]}.eml"
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as file:
        file.write(message.as_bytes(policy=policy.SMTP))
    return {"delivered": "outbox", "message_id": message["Message-ID"], "path": str(path),
            "recipients": everyone}


def _default_outbox() -> Path:
    here = Path(__file__).resolve().parent
    if Path.cwd().resolve() == here:  # run by the skillgrove runner: keep the library clean
        return Path.home() / ".skillgrove" / "outbox"
    return Path("outbox")


def _addresses(value: str | list[str] | None, field: str) -> list[str]:
    """Addresses as written ('Name <a@b.c>' kept), each checked for the shape of an address."""
    if value is None or value == "":
        return []
    items = [value] if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"{field}: {item!r} is not an email address")
        for name, address in getaddresses([item]):
            if not _ADDRESS.match(address or ""):
                raise ValueError(f"{field}: {item.strip()!r} is not an email address")
            out.append(f"{name} <{address}>" if name else address)
    return out


def _attach(message: EmailMessage, path: Path, index: int) -> None:
    if not path.is_file():
        raise ValueError(f"attachments[{index}]: no such file: {path}")
    ctype, encoding = mimetypes.guess_type(path.name)
    if ctype is None or encoding is not None:
        ctype = "application/octet-stream"
    maintype, subtype = ctype.split("/", 1)
    data = path.read_bytes()
    if maintype == "text":
        message.add_attachment(data.decode("utf-8", errors="replace"), subtype=subtype,
                               filename=path.name)
    else:
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=path.name)


class PlaintextAuthRefused(RuntimeError):
    """The server would have received the password unencrypted."""


def _send_smtp(message: EmailMessage, host: str) -> None:
    port_text = os.environ.get("SMTP_PORT") or "25"
    if not port_text.isdigit():
        raise ValueError(f"SMTP_PORT: {port_text!r} is not a port number")
    port = int(port_text)
    user = os.environ.get("SMTP_USER") or ""
    password = os.environ.get("SMTP_PASSWORD") or ""
    plaintext_allowed = (os.environ.get("SMTP_ALLOW_PLAINTEXT_AUTH") or "").strip().lower() in (
        "1", "true", "yes")
    context = ssl.create_default_context()
    try:
        if port == 465:
            client: smtplib.SMTP = smtplib.SMTP_SSL(host, port, timeout=30, context=context)
        else:
            client = smtplib.SMTP(host, port, timeout=30)
        with client:
            client.ehlo()
            encrypted = port == 465
            if not encrypted and client.has_extn("starttls"):
                client.starttls(context=context)
                client.ehlo()
                encrypted = True
            if user and not encrypted and not plaintext_allowed:
                raise PlaintextAuthRefused(
                    f"SMTP {host}:{port} offers no STARTTLS: refusing to send the password of "
                    f"{user} unencrypted. Use port 465 or a server with STARTTLS, or set "
                    "SMTP_ALLOW_PLAINTEXT_AUTH=1 if the connection is protected otherwise "
                    "(localhost, a tunnel)")
            if user:
                client.login(user, password)
            client.send_message(message)
    except smtplib.SMTPRecipientsRefused as exc:
        refused = ", ".join(exc.recipients)
        raise ValueError(f"to: the SMTP server refused {refused}") from exc
    except (OSError, smtplib.SMTPException) as exc:
        raise RuntimeError(f"SMTP delivery through {host}:{port} failed: {exc}") from exc
