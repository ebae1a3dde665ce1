"""Customer name, contact details and reference numbers from a message."""

from __future__ import annotations

import re
from email.utils import parseaddr
from typing import Any

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_CN_MOBILE = re.compile(r"(?<!\d)1[3-9]\d{9}(?!\d)")
_PHONE = re.compile(r"(?<![\w#])(?:\+|00)?\d[\d\s().-]{7,18}\d(?![\d-])")
_ORDER = re.compile(r"(?:order|订单)\s*(?:number|no\.?|id|号|编号)?\s*[:：#]?\s*#?\s*"
                    r"(?P<id>[A-Z0-9][A-Z0-9-]{3,})", re.IGNORECASE)
_HASH_ID = re.compile(r"(?<![\w&])#(?P<id>\d{5,})\b")
_ACCOUNT = re.compile(r"(?:account|customer|客户|账户|账号)\s*(?:id|number|no\.?|编号|号)?"
                      r"\s*[:：#]\s*(?P<id>[A-Z0-9][A-Z0-9-]{2,})", re.IGNORECASE)
_NAME_EN = re.compile(r"\b(?:my name is|i am|i'm|this is)\s+(?P<name>[A-Z][a-z'-]+"
                      r"(?:\s[A-Z][a-z'-]+){0,2})")
_NAME_ZH = re.compile(r"(?:我是|我叫|姓名[:：]\s*)(?P<name>[\u4e00-\u9fff]{2,4}?)(?=[，,。\s]|$)")
_SIGN_OFF = re.compile(r"^(?:thanks|thank you|regards|best|best regards|kind regards|cheers|"
                       r"sincerely|many thanks)[,!.]?\s*$", re.IGNORECASE)


def run(text: str, sender: str = "") -> dict[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text: the message is empty")
    sender_name, sender_email = parseaddr(sender or "")
    email_match = _EMAIL.search(text)
    email = email_match.group(0) if email_match else (sender_email if "@" in sender_email else "")
    orders = _unique([m["id"] for m in _ORDER.finditer(text) if re.search(r"\d", m["id"])]
                     + [m["id"] for m in _HASH_ID.finditer(text)])
    account = _ACCOUNT.search(text)
    details = {
        "name": _name(text) or sender_name.strip(),
        "email": email.lower(),
        "phone": _phone(text, orders),
        "order_ids": orders,
        "order_id": orders[0] if orders else "",
        "account_id": account["id"] if account else "",
    }
    details["found"] = [key for key in ("name", "email", "phone", "order_id", "account_id")
                        if details[key]]
    return details


def _name(text: str) -> str:
    zh = _NAME_ZH.search(text)
    if zh:
        return zh["name"]
    en = _NAME_EN.search(text)
    if en:
        return en["name"]
    lines = [line.strip() for line in text.splitlines()]
    for index, line in enumerate(lines[:-1]):
        if _SIGN_OFF.match(line):
            candidate = lines[index + 1]
            if re.fullmatch(r"[A-Z][a-z'-]+(?:\s[A-Z][a-z'-]+){0,2}", candidate):
                return candidate
    return ""


def _phone(text: str, orders: list[str]) -> str:
    mobile = _CN_MOBILE.search(text)
    candidates = [mobile.group(0)] if mobile else []
    candidates += [m.group(0) for m in _PHONE.finditer(text)]
    for raw in candidates:
        digits = re.sub(r"[^\d]", "", raw)
        if len(digits) < 9 or any(digits in re.sub(r"\D", "", o) for o in orders):
            continue
        if re.fullmatch(r"(19|20)\d{6}", digits):  # a compact date, not a phone
            continue
        return ("+" if raw.lstrip().startswith(("+", "00")) else "") + digits.removeprefix(
            "00" if raw.lstrip().startswith("00") else "")
    return ""


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
