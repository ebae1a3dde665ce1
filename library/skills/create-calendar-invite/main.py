"""An iCalendar (RFC 5545) invitation file with one event."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from datetime import UTC, datetime, timedelta
from email.utils import getaddresses
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def run(title: str, start: str, duration_minutes: int = 30, timezone: str = "UTC",
        attendees: list[str] | None = None, organizer: str = "", description: str = "",
        location: str = "", method: str = "REQUEST", reminder_minutes: int = 15,
        output_dir: str = "", filename: str = "invite.ics") -> dict[str, Any]:
    if not str(title or "").strip():
        raise ValueError("title: the event needs a title")
    if method not in ("REQUEST", "PUBLISH"):
        raise ValueError(f"method: expected REQUEST or PUBLISH, not {method!r}")
    if duration_minutes is None or duration_minutes < 1:
        raise ValueError(f"duration_minutes: must be at least 1, not {duration_minutes}")
    if not re.fullmatch(r"[\w.-]+\.ics", filename or ""):
        raise ValueError(f"filename: {filename!r} must be a plain file name ending in .ics")
    begin = _start(start, timezone or "UTC")
    end = begin + timedelta(minutes=duration_minutes)
    guests = [_person(a, f"attendees[{i}]") for i, a in enumerate(attendees or []) if a]
    host = _person(organizer, "organizer") if organizer else None
    if method == "REQUEST" and host is None:
        raise ValueError("organizer: an invitation (method REQUEST) needs an organizer address; "
                         "give one or use method PUBLISH")
    seed = f"{title}|{begin.isoformat()}|{host[1] if host else ''}"
    uid = hashlib.sha256(seed.encode("utf-8")).hexdigest()[:24] + "@skillgrove"

    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//skillgrove//create-calendar-invite//EN",
             "CALSCALE:GREGORIAN", f"METHOD:{method}", "BEGIN:VEVENT", f"UID:{uid}",
             f"DTSTAMP:{_utc(datetime.now(UTC))}", f"DTSTART:{_utc(begin)}", f"DTEND:{_utc(end)}",
             f"SUMMARY:{_text(title)}"]
    if description:
        lines.append(f"DESCRIPTION:{_text(description)}")
    if location:
        lines.append(f"LOCATION:{_text(location)}")
    if host:
        lines.append(f"ORGANIZER{_cn(host[0])}:mailto:{host[1]}")
    for name, address in guests:
        lines.append(f"ATTENDEE{_cn(name)};CUTYPE=INDIVIDUAL;ROLE=REQ-PARTICIPANT;"
                     f"PARTSTAT=NEEDS-ACTION;RSVP={'TRUE' if method == 'REQUEST' else 'FALSE'}:"
                     f"mailto:{address}")
    lines += ["SEQUENCE:0", "STATUS:CONFIRMED", "TRANSP:OPAQUE"]
    if reminder_minutes:
        lines += ["BEGIN:VALARM", "ACTION:DISPLAY", f"DESCRIPTION:{_text(title)}",
                  f"TRIGGER:-PT{int(reminder_minutes)}M", "END:VALARM"]
    lines += ["END:VEVENT", "END:VCALENDAR"]
    content = "".join(_fold(line) + "\r\n" for line in lines)

    folder = Path(output_dir).expanduser() if output_dir else _default_folder("skillgrove-ics-")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    path.write_bytes(content.encode("utf-8"))
    return {"path": str(path), "uid": uid, "start_utc": begin.astimezone(UTC).isoformat(),
            "end_utc": end.astimezone(UTC).isoformat(), "attendee_count": len(guests),
            "content": content}


def _start(text: str, timezone: str) -> datetime:
    try:
        moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"start: {text!r} is not an ISO 8601 date and time "
                         "(e.g. 2024-10-15T10:00)") from exc
    if moment.tzinfo is None:
        try:
            moment = moment.replace(tzinfo=ZoneInfo(timezone))
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"timezone: unknown time zone {timezone!r} "
                             "(use an IANA name such as Europe/London)") from exc
    return moment


def _person(value: str, field: str) -> tuple[str, str]:
    pairs = getaddresses([value])
    if len(pairs) != 1 or not re.fullmatch(r"[^@\s]+@[^@\s]+", pairs[0][1]):
        raise ValueError(f"{field}: {value!r} is not an email address")
    return pairs[0][0].strip(), pairs[0][1].strip()


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _text(value: str) -> str:
    """Escape a TEXT value (RFC 5545, 3.3.11)."""
    value = value.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,")
    return value.replace("\r\n", "\n").replace("\n", "\\n")


def _cn(name: str) -> str:
    if not name:
        return ""
    clean = name.replace('"', "'")
    return f';CN="{clean}"' if re.search(r"[,;:]", clean) else f";CN={clean}"


def _fold(line: str) -> str:
    """Fold a content line into chunks of at most 75 octets, never inside a UTF-8 character."""
    out, current, size = [], "", 0
    for char in line:
        width = len(char.encode("utf-8"))
        if size + width > (75 if not out else 74):
            out.append(current)
            current, size = "", 0
        current += char
        size += width
    out.append(current)
    return "\r\n ".join(out)


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
