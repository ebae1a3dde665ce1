"""Action items, decisions and the follow-up meeting from a meeting's speaker turns."""

from __future__ import annotations

import re
from calendar import monthrange
from datetime import date, timedelta
from typing import Any

MONTHS = {m: i for i, m in enumerate(
    "jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)}
WEEKDAYS = {d: i for i, d in enumerate(
    "monday tuesday wednesday thursday friday saturday sunday".split())}
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_DATE = (r"(?:\d{4}-\d{2}-\d{2}|\d{1,2}(?:st|nd|rd|th)?\s+" + _MONTH + r"(?:\s+\d{4})?|" + _MONTH
         + r"\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?|(?:next\s+)?(?:monday|tuesday|wednesday|"
         r"thursday|friday|saturday|sunday)|tomorrow|today|end of (?:the )?(?:day|week|month)|"
         r"next week|the \d{1,2}(?:st|nd|rd|th))")
_DUE = re.compile(r"\s*\b(?:by|before|on|until|no later than)?\s*(?P<when>" + _DATE + r")\b",
                  re.IGNORECASE)
_EXPLICIT = re.compile(r"^(?:action item|action|todo|to do|follow[- ]up)\s*[:：-]\s*(?P<task>.+)$",
                       re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:i'll|i will|i can|i'm going to|i am going to|let me)\s+"
                           r"(?P<task>(?!be\b|say\b|think\b)\w.+)$", re.IGNORECASE)
_REQUEST = re.compile(r"^(?P<name>[A-Z][a-z]+)\s*,\s*(?:can|could|would|will) you(?: please)?\s+"
                      r"(?P<task>.+)$")
_ASSIGNED = re.compile(r"^(?P<name>[A-Z][a-z]+)(?:\s[A-Z][a-z]+)?\s+(?:will|to|is going to)\s+"
                       r"(?P<task>.+)$")
_ACCEPT = re.compile(r"^(?:yes|yeah|sure|ok|okay|of course|will do|fine)\b", re.IGNORECASE)
_DECISION = re.compile(r"^decision\s*[:：]|\bwe (?:have )?(?:decided|agreed)\b|\bagreed to\b",
                       re.IGNORECASE)
_NEXT = re.compile(r"\b(?:meet again|next meeting|follow-up meeting|reconvene|catch up again)\b",
                   re.IGNORECASE)
_WHEN = re.compile(r"\b" + _DATE + r"\b", re.IGNORECASE)
_AT = re.compile(r"\bat\s+(?P<time>\d{1,2}(?::\d{2})?\s*(?:am|pm)?)", re.IGNORECASE)


def run(turns: list[dict[str, Any]], meeting_date: str = "",
        attendees: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    if not isinstance(turns, list) or not all(isinstance(t, dict) and "text" in t for t in turns):
        raise ValueError("turns: must be a list of objects with speaker and text")
    try:
        reference = date.fromisoformat(meeting_date) if meeting_date else None
    except ValueError as exc:
        raise ValueError(f"meeting_date: {meeting_date!r} is not a YYYY-MM-DD date") from exc
    people = [a for a in attendees or [] if isinstance(a, dict) and a.get("name")]
    items: list[dict[str, Any]] = []
    decisions: list[str] = []
    next_meeting = ""
    for turn in turns:
        speaker = str(turn.get("speaker", "")).strip()
        for sentence in re.split(r"(?<=[.!?])\s+", str(turn["text"]).strip()):
            if _DECISION.search(sentence):
                decisions.append(_tidy(_ACCEPT.sub("", re.sub(
                    r"^decision\s*[:：]\s*", "", sentence, flags=re.IGNORECASE))) + ".")
                continue
            if _NEXT.search(sentence):
                when, at = _WHEN.search(sentence), _AT.search(sentence)
                day = resolve_date(when.group(0), reference) if when else ""
                if day and at and not next_meeting:
                    next_meeting = f"{day}T{_clock(at['time'])}"
                continue
            item = _item(sentence, speaker)
            if item is None:
                continue
            owner, task = item
            if _ACCEPT.match(sentence) and items and items[-1]["owner"] == _full_name(
                    owner, people)[0]:
                continue  # "Yes, I will ..." accepts the request just made
            due_match = _DUE.search(task)
            due_text = due_match["when"] if due_match else ""
            if due_match:
                task = (task[:due_match.start()] + task[due_match.end():]).strip()
            name, email = _full_name(owner, people)
            items.append({
                "owner": name, "owner_email": email,
                "task": _tidy(task), "due": resolve_date(due_text, reference) if due_text else "",
                "due_text": due_text, "source": f"{speaker}: {sentence}" if speaker else sentence,
            })
    return {"action_items": items, "count": len(items),
            "owners": list(dict.fromkeys(i["owner"] for i in items if i["owner"])),
            "decisions": decisions, "next_meeting": next_meeting}


def _item(sentence: str, speaker: str) -> tuple[str, str] | None:
    text = sentence.strip()
    explicit = _EXPLICIT.match(text)
    if explicit:
        task = explicit["task"]
        assigned = _ASSIGNED.match(task)
        return (assigned["name"], assigned["task"]) if assigned else (speaker, task)
    request = _REQUEST.match(text)
    if request:
        return request["name"], request["task"]
    mine = _FIRST_PERSON.search(text)
    if mine:
        return speaker, mine["task"]
    assigned = _ASSIGNED.match(text)
    if assigned and assigned["name"].lower() not in {"we", "it", "this", "that", "they", "there"}:
        return assigned["name"], assigned["task"]
    return None


def _full_name(name: str, people: list[dict[str, Any]]) -> tuple[str, str]:
    for person in people:
        full = str(person["name"])
        if full == name or full.split()[0] == name:
            return full, str(person.get("email", ""))
    return name, ""


def _tidy(task: str) -> str:
    task = re.sub(r"\s+", " ", task).strip(" ,;:.?!")
    return task[:1].upper() + task[1:]


def _clock(text: str) -> str:
    match = re.match(r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?", text.strip(), re.IGNORECASE)
    if not match:
        return "09:00"
    hour, minute = int(match.group(1)), int(match.group(2) or 0)
    suffix = (match.group(3) or "").lower()
    if suffix == "pm" and hour < 12:
        hour += 12
    if suffix == "am" and hour == 12:
        hour = 0
    return f"{hour:02d}:{minute:02d}"


def resolve_date(text: str, reference: date | None) -> str:
    """An ISO date for a due phrase, or an empty string when it cannot be pinned down."""
    phrase = text.lower().strip()
    if m := re.fullmatch(r"\d{4}-\d{2}-\d{2}", phrase):
        return m.group(0)
    month_day = re.fullmatch(r"(\d{1,2})(?:st|nd|rd|th)?\s+([a-z]+)\.?(?:\s+(\d{4}))?", phrase) \
        or re.fullmatch(r"([a-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?", phrase)
    if month_day:
        first, second, year = month_day.groups()
        day_text, month_text = (first, second) if first.isdigit() else (second, first)
        month = MONTHS.get(month_text[:3])
        if month:
            chosen = int(year) if year else (reference.year if reference else date.today().year)
            candidate = date(chosen, month, int(day_text))
            if not year and reference and candidate < reference:
                candidate = candidate.replace(year=chosen + 1)
            return candidate.isoformat()
    if reference is None:
        return ""
    if phrase == "today" or phrase == "end of the day" or phrase == "end of day":
        return reference.isoformat()
    if phrase == "tomorrow":
        return (reference + timedelta(days=1)).isoformat()
    if phrase in ("end of week", "end of the week"):
        return (reference + timedelta(days=(4 - reference.weekday()) % 7)).isoformat()
    if phrase in ("end of month", "end of the month"):
        return reference.replace(day=monthrange(reference.year, reference.month)[1]).isoformat()
    if phrase == "next week":
        return (reference + timedelta(days=7 - reference.weekday())).isoformat()
    weekday = re.fullmatch(r"(?:next\s+)?([a-z]+)", phrase)
    if weekday and weekday.group(1) in WEEKDAYS:
        ahead = (WEEKDAYS[weekday.group(1)] - reference.weekday()) % 7 or 7
        return (reference + timedelta(days=ahead)).isoformat()
    if m := re.fullmatch(r"the (\d{1,2})(?:st|nd|rd|th)", phrase):
        day = int(m.group(1))
        candidate = reference.replace(day=min(day, monthrange(reference.year, reference.month)[1]))
        return candidate.isoformat()
    return ""
