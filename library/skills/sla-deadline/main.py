"""Response and resolution deadlines from priority, arrival time and business hours."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

# priority: (response hours, resolution hours, business hours only)
POLICY = {
    "urgent": (1, 8, False),
    "high": (4, 16, True),
    "normal": (8, 40, True),
    "low": (16, 80, True),
}


def run(priority: str, received_at: str = "", holidays: list[str] | None = None,
        business_start: int = 9, business_end: int = 17) -> dict[str, Any]:
    if priority not in POLICY:
        raise ValueError(f"priority: expected one of {', '.join(POLICY)}, not {priority!r}")
    if not 0 <= business_start < business_end <= 24:
        raise ValueError(f"business_start/business_end: {business_start}-{business_end} is not a "
                         "valid working day (start must come before end, within 0-24)")
    start = _parse_time(received_at)
    days_off = set()
    for index, text in enumerate(holidays or []):
        try:
            days_off.add(date.fromisoformat(text))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"holidays[{index}]: {text!r} is not a YYYY-MM-DD date") from exc
    respond, resolve, business = POLICY[priority]
    if business:
        hours = (business_start, business_end, days_off)
        response_due = _add_business_hours(start, respond, *hours)
        resolve_due = _add_business_hours(start, resolve, *hours)
        policy = (f"{priority}: first response within {respond} business hours, resolution within "
                  f"{resolve} business hours ({business_start}:00-{business_end}:00, Mon-Fri)")
    else:
        response_due = start + timedelta(hours=respond)
        resolve_due = start + timedelta(hours=resolve)
        policy = (f"{priority}: first response within {respond} hour, resolution within "
                  f"{resolve} hours, round the clock")
    return {"response_due": response_due.isoformat(), "resolve_due": resolve_due.isoformat(),
            "response_hours": respond, "business_hours_only": business, "policy": policy}


def _parse_time(text: str) -> datetime:
    if not text:
        return datetime.now(UTC).replace(microsecond=0)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"received_at: {text!r} is not an ISO 8601 date and time") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _add_business_hours(start: datetime, hours: float, open_hour: int, close_hour: int,
                        days_off: set[date]) -> datetime:
    remaining = timedelta(hours=hours)
    current = start
    while True:
        day_open = current.replace(hour=open_hour, minute=0, second=0, microsecond=0)
        day_close = day_open + timedelta(hours=close_hour - open_hour)
        if current.weekday() >= 5 or current.date() in days_off or current >= day_close:
            current = day_open + timedelta(days=1)
            continue
        current = max(current, day_open)
        available = day_close - current
        if remaining <= available:
            return current + remaining
        remaining -= available
        current = day_open + timedelta(days=1)
