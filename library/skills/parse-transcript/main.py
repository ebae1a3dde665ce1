"""A meeting transcript: header fields, attendees and timestamped speaker turns."""

from __future__ import annotations

import math
import re
from email.utils import getaddresses
from pathlib import Path
from typing import Any

_HEADER = re.compile(r"^(?P<key>title|subject|meeting|date|time|start|duration|timezone|time zone|"
                     r"organizer|organiser|attendees|participants)\s*:\s*(?P<value>.+)$",
                     re.IGNORECASE)
_TURN = re.compile(r"^\s*(?:[\[(](?P<time>\d{1,2}:\d{2}(?::\d{2})?)[\])]\s*)?"
                   r"(?P<speaker>[A-Z\u4e00-\u9fff][\w .'\u4e00-\u9fff-]{0,40}?)\s*[:：]\s+(?P<text>.+)$")


def run(path: str) -> dict[str, Any]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"path: no such file: {file}")
    header: dict[str, str] = {}
    turns: list[dict[str, str]] = []
    in_header = True
    for line in file.read_text(encoding="utf-8-sig").splitlines():
        if not line.strip():
            if header:
                in_header = False
            continue
        match = _HEADER.match(line.strip()) if in_header else None
        if match:
            key = match["key"].lower().replace(" ", "")
            key = {"subject": "title", "meeting": "title", "start": "time", "organiser": "organizer",
                   "participants": "attendees"}.get(key, key)
            header[key] = match["value"].strip()
            continue
        in_header = False
        turn = _TURN.match(line)
        if turn:
            turns.append({"time": turn["time"] or "", "speaker": turn["speaker"].strip(),
                          "text": turn["text"].strip()})
        elif turns:
            turns[-1]["text"] += " " + line.strip()
    if not turns:
        raise ValueError(f"path: {file.name} has no speaker turns ('Name: text' lines)")
    attendees = [{"name": name.strip(), "email": address.strip()}
                 for name, address in getaddresses([header.get("attendees", "")])
                 if name.strip() or address.strip()]
    speakers = list(dict.fromkeys(t["speaker"] for t in turns))
    known = {a["name"] for a in attendees}
    attendees += [{"name": s, "email": ""} for s in speakers if s not in known]
    for person in attendees:
        if "@" in person["name"] and not person["email"]:
            person["email"], person["name"] = person["name"], ""
    organizer = header.get("organizer", "")
    return {
        "title": header.get("title", file.stem.replace("_", " ")),
        "date": header.get("date", ""),
        "start_time": header.get("time", ""),
        "timezone": header.get("timezone", ""),
        "duration_minutes": _duration(header.get("duration", ""), turns),
        "organizer": organizer,
        "attendees": attendees,
        "attendee_emails": [f"{a['name']} <{a['email']}>" if a["name"] else a["email"]
                            for a in attendees if a["email"]],
        "speakers": speakers,
        "turns": turns,
        "text": "\n".join(f"{t['speaker']} - {t['text']}" for t in turns),
    }


def _duration(stated: str, turns: list[dict[str, str]]) -> int:
    match = re.search(r"(\d+)\s*(h|hour|hours|m|min|mins|minutes)?\b", stated, re.IGNORECASE)
    if match:
        unit = (match.group(2) or "m").lower()
        return int(match.group(1)) * (60 if unit.startswith("h") else 1)
    stamps = [t["time"] for t in turns if t["time"]]
    if not stamps:
        return 0
    parts = [int(p) for p in stamps[-1].split(":")]
    seconds = parts[0] * 3600 + parts[1] * 60 + parts[2] if len(parts) == 3 else parts[0] * 60 + parts[1]
    return max(1, math.ceil(seconds / 60))
