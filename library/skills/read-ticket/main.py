"""A customer message from .json, .eml or .txt, in one normalised shape."""

from __future__ import annotations

import json
import re
from datetime import datetime
from email import policy
from email.parser import BytesParser
from email.utils import parseaddr, parsedate_to_datetime
from pathlib import Path
from typing import Any

_HEADER = re.compile(r"^(?P<key>[A-Za-z][A-Za-z -]{0,30}):\s*(?P<value>.*)$")
_KEYS = {
    "ticket_id": ("ticket_id", "id", "ticket", "number"),
    "subject": ("subject", "title", "topic"),
    "body": ("body", "message", "description", "text", "content"),
    "sender": ("from", "sender", "email", "customer", "requester"),
    "received_at": ("received_at", "received", "created_at", "date", "created", "timestamp"),
    "channel": ("channel", "source", "via"),
}


def run(path: str) -> dict[str, Any]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"path: no such file: {file}")
    suffix = file.suffix.lower()
    if suffix == ".json":
        fields = _from_json(file)
    elif suffix == ".eml":
        fields = _from_eml(file)
    else:
        fields = _from_text(file)
    body = (fields.get("body") or "").strip()
    if not body:
        raise ValueError(f"path: {file.name} has no message body")
    name, address = parseaddr(fields.get("sender") or "")
    subject = (fields.get("subject") or "").strip()
    return {
        "ticket_id": str(fields.get("ticket_id") or file.stem),
        "subject": subject,
        "body": body,
        "sender": (fields.get("sender") or "").strip(),
        "sender_name": name,
        "sender_email": address if "@" in address else "",
        "received_at": _iso(fields.get("received_at") or ""),
        "channel": fields.get("channel") or ("email" if suffix == ".eml" else "unknown"),
        "text": f"{subject}\n\n{body}" if subject else body,
    }


def _pick(data: dict[str, Any]) -> dict[str, str]:
    lowered = {str(k).lower().replace("-", "_"): v for k, v in data.items()}
    out: dict[str, str] = {}
    for field, keys in _KEYS.items():
        for key in keys:
            value = lowered.get(key)
            if isinstance(value, dict):  # {"from": {"name": ..., "email": ...}}
                value = f"{value.get('name', '')} <{value.get('email', '')}>".strip()
            if value not in (None, ""):
                out[field] = str(value)
                break
    return out


def _from_json(file: Path) -> dict[str, str]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"path: {file.name} is not valid JSON ({exc.msg}, line {exc.lineno})"
                         ) from exc
    if not isinstance(data, dict):
        raise ValueError(f"path: {file.name} must hold one JSON object, not {type(data).__name__}")
    return _pick(data)


def _from_eml(file: Path) -> dict[str, str]:
    with file.open("rb") as handle:
        message = BytesParser(policy=policy.default).parse(handle)
    part = message.get_body(preferencelist=("plain", "html"))
    body = part.get_content() if part is not None else ""
    if part is not None and part.get_content_subtype() == "html":
        body = re.sub(r"<[^>]+>", " ", body)
    return {"ticket_id": (message.get("Message-ID") or "").strip("<> "),
            "subject": str(message.get("Subject") or ""), "body": body,
            "sender": str(message.get("From") or ""), "received_at": str(message.get("Date") or ""),
            "channel": "email"}


def _from_text(file: Path) -> dict[str, str]:
    lines = file.read_text(encoding="utf-8").splitlines()
    headers: dict[str, str] = {}
    index = 0
    while index < len(lines) and (match := _HEADER.match(lines[index])):
        headers[match["key"].strip()] = match["value"].strip()
        index += 1
    if headers and index < len(lines) and lines[index].strip():
        headers, index = {}, 0  # no blank line after them: they were part of the body
    fields = _pick(headers)
    fields["body"] = "\n".join(lines[index:])
    return fields


def _iso(value: str) -> str:
    value = value.strip()
    if not value:
        return ""
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).isoformat()
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(value).isoformat()
    except (TypeError, ValueError, IndexError):
        return value
