"""Meeting follow-up: transcript, action items, minutes, and an RFC 5545 invitation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.library.conftest import call_skill, run_skill


def transcript(samples: Path) -> dict[str, Any]:
    return run_skill("parse-transcript", path=str(samples / "meeting_transcript.txt"))


def actions(samples: Path) -> dict[str, Any]:
    meeting = transcript(samples)
    return run_skill("extract-action-items", turns=meeting["turns"], meeting_date=meeting["date"],
                     attendees=meeting["attendees"])


def unfold(ics: str) -> list[tuple[str, dict[str, str], str]]:
    """Content lines of an iCalendar text as (name, parameters, value), checking the framing."""
    assert ics.endswith("\r\n")
    physical = ics[:-2].split("\r\n")
    assert all(len(line.encode("utf-8")) <= 75 for line in physical), "lines fold at 75 octets"
    logical: list[str] = []
    for line in physical:
        if line.startswith(" "):
            logical[-1] += line[1:]
        else:
            logical.append(line)
    parsed = []
    for line in logical:
        head, _, value = _split_unquoted(line)
        name, *params = _split_params(head)
        parsed.append((name, dict(p.split("=", 1) for p in params), value))
    return parsed


def _split_unquoted(line: str) -> tuple[str, str, str]:
    quoted = False
    for index, char in enumerate(line):
        if char == '"':
            quoted = not quoted
        elif char == ":" and not quoted:
            return line[:index], ":", line[index + 1:]
    raise AssertionError(f"no value in {line!r}")


def _split_params(head: str) -> list[str]:
    parts, current, quoted = [], "", False
    for char in head:
        if char == '"':
            quoted = not quoted
        if char == ";" and not quoted:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def unescape(value: str) -> str:
    out, index = "", 0
    while index < len(value):
        if value[index] == "\\" and index + 1 < len(value):
            out += {"n": "\n", "N": "\n"}.get(value[index + 1], value[index + 1])
            index += 2
        else:
            out += value[index]
            index += 1
    return out


def test_parse_transcript_header_attendees_and_turns(samples: Path) -> None:
    result = transcript(samples)
    assert result["title"] == "Autumn campaign launch check-in"
    assert (result["date"], result["start_time"], result["timezone"]) == (
        "2024-10-07", "14:00", "Europe/London")
    assert result["duration_minutes"] == 40
    assert result["speakers"] == ["Dana Whitfield", "Omar Haddad", "Priya Natarajan",
                                  "Tomasz Nowak"]
    assert result["attendee_emails"][1] == "Omar Haddad <omar.haddad@larkspur.example>"
    assert len(result["turns"]) == 15
    assert result["turns"][2] == {"time": "00:01:02", "speaker": "Priya Natarajan",
                                  "text": "I'll send the final photo set to Omar by Wednesday."}


def test_parse_transcript_without_turns_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("Title: Nothing said\n\njust some notes\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^path: empty\.txt has no speaker turns"):
        call_skill("parse-transcript", path=str(path))


def test_extract_action_items_owners_tasks_and_dates(samples: Path) -> None:
    result = actions(samples)
    items = [(i["owner"], i["task"], i["due"]) for i in result["action_items"]]
    assert items == [
        ("Priya Natarajan", "Send the final photo set to Omar", "2024-10-09"),
        ("Tomasz Nowak", "Get the discount code approved by finance", "2024-10-11"),
        ("Omar Haddad", "Add tracking links to every call-to-action button before the QA pass",
         ""),
        ("Dana Whitfield", "Proofread the landing page copy", "2024-10-10"),
    ]
    assert result["action_items"][1]["owner_email"] == "tomasz.nowak@larkspur.example"
    assert result["count"] == 4
    assert len(result["decisions"]) == 3
    assert result["decisions"][1].startswith("The launch date stays on 21 October")
    assert result["next_meeting"] == "2024-10-15T10:00"


@pytest.mark.parametrize(("sentence", "due"), [
    ("Bo will update the deck by tomorrow.", "2024-10-08"),
    ("Bo will update the deck by end of week.", "2024-10-11"),
    ("Bo will update the deck by end of month.", "2024-10-31"),
    ("Bo will update the deck by next week.", "2024-10-14"),
    ("Bo will update the deck by October 20.", "2024-10-20"),
    ("Bo will update the deck by Monday.", "2024-10-14"),
])
def test_extract_action_items_resolves_due_phrases(sentence: str, due: str) -> None:
    result = run_skill("extract-action-items", turns=[{"speaker": "Al", "text": sentence}],
                       meeting_date="2024-10-07")
    assert [(i["owner"], i["task"], i["due"]) for i in result["action_items"]] == [
        ("Bo", "Update the deck", due)]


def test_write_meeting_minutes(samples: Path, tmp_path: Path) -> None:
    meeting, found = transcript(samples), actions(samples)
    result = run_skill("write-meeting-minutes", title=meeting["title"], date=meeting["date"],
                       attendees=meeting["attendees"], action_items=found["action_items"],
                       decisions=found["decisions"], next_meeting=found["next_meeting"],
                       output_dir=str(tmp_path))
    path = Path(result["path"])
    assert path.name == "2024-10-07-autumn-campaign-launch-check-in.md"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Minutes: Autumn campaign launch check-in")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1] == "| Priya Natarajan | Send the final photo set to Omar | 2024-10-09 |"
    assert rows[-1].startswith("| Omar Haddad |") and rows[-1].endswith("| — |"), "undated last"
    assert "2024-10-15 at 10:00" in text
    assert result["open_items"] == 4


def test_create_calendar_invite_is_valid_rfc5545(samples: Path, tmp_path: Path) -> None:
    meeting, found = transcript(samples), actions(samples)
    description = "Agenda: QA results; launch, photos\nSecond line"
    result = run_skill("create-calendar-invite", title="Follow-up: " + meeting["title"],
                       start=found["next_meeting"], timezone=meeting["timezone"],
                       duration_minutes=45, attendees=meeting["attendee_emails"],
                       organizer=meeting["organizer"], description=description,
                       location="Room 2, Leeds", output_dir=str(tmp_path))
    raw = Path(result["path"]).read_bytes()
    assert raw.decode("utf-8") == result["content"]
    lines = unfold(result["content"])
    names = [name for name, _, _ in lines]
    assert names[:2] == ["BEGIN", "VERSION"] and lines[0][2] == "VCALENDAR"
    assert [v for n, _, v in lines if n == "BEGIN"] == ["VCALENDAR", "VEVENT", "VALARM"]
    assert [v for n, _, v in lines if n == "END"] == ["VALARM", "VEVENT", "VCALENDAR"]
    alarm = lines.index(("BEGIN", {}, "VALARM"))
    props = {name: (params, value) for name, params, value in lines[:alarm]}
    for required in ("PRODID", "METHOD", "UID", "DTSTAMP", "DTSTART", "DTEND", "SUMMARY"):
        assert required in props, required
    assert props["VERSION"][1] == "2.0" and props["METHOD"][1] == "REQUEST"
    assert props["DTSTART"][1] == "20241015T090000Z"  # 10:00 in London (BST) is 09:00 UTC
    assert props["DTEND"][1] == "20241015T094500Z"
    assert unescape(props["DESCRIPTION"][1]) == description
    assert unescape(props["LOCATION"][1]) == "Room 2, Leeds"
    assert props["ORGANIZER"][1] == "mailto:dana.whitfield@larkspur.example"
    attendees = [(p["CN"], v) for n, p, v in lines if n == "ATTENDEE"]
    assert attendees == [(a["name"], "mailto:" + a["email"]) for a in meeting["attendees"]]
    assert all(p["RSVP"] == "TRUE" and p["PARTSTAT"] == "NEEDS-ACTION"
               for n, p, _ in lines if n == "ATTENDEE")
    assert result["attendee_count"] == 4
    assert result["start_utc"] == "2024-10-15T09:00:00+00:00"


def test_create_calendar_invite_uid_is_stable_and_long_lines_fold(tmp_path: Path) -> None:
    common = {"title": "会议 " * 40, "start": "2024-10-15T10:00:00+08:00", "method": "PUBLISH",
              "reminder_minutes": 0}
    first = run_skill("create-calendar-invite", output_dir=str(tmp_path / "a"), **common)
    second = run_skill("create-calendar-invite", output_dir=str(tmp_path / "b"), **common)
    assert first["uid"] == second["uid"]
    summary = next(v for n, _, v in unfold(first["content"]) if n == "SUMMARY")
    assert unescape(summary) == common["title"]
    assert "VALARM" not in first["content"]


@pytest.mark.parametrize(("inputs", "message"), [
    ({"start": "next tuesday"}, "start: 'next tuesday' is not an ISO 8601 date and time"),
    ({"start": "2024-10-15T10:00", "timezone": "Mars/Olympus"},
     "timezone: unknown time zone 'Mars/Olympus'"),
    ({"start": "2024-10-15T10:00"}, "organizer: an invitation (method REQUEST) needs"),
    ({"start": "2024-10-15T10:00", "method": "PUBLISH", "attendees": ["nobody"]},
     "attendees[0]: 'nobody' is not an email address"),
])
def test_create_calendar_invite_bad_inputs(tmp_path: Path, inputs: dict[str, Any],
                                           message: str) -> None:
    with pytest.raises(ValueError) as caught:
        call_skill("create-calendar-invite", title="Sync", output_dir=str(tmp_path), **inputs)
    assert str(caught.value).startswith(message)
