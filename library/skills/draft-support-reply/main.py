"""A support reply assembled from approved building blocks and a knowledge-base answer."""

from __future__ import annotations

import re
from typing import Any

_TOPICS = {
    "billing": "the charge on your account",
    "account": "access to your account",
    "technical": "the problem you ran into",
    "shipping": "your delivery",
    "cancellation": "your subscription",
    "feedback": "your feedback",
}


def run(subject: str, customer_name: str = "", category: str = "general",
        priority: str = "normal", sentiment: str = "neutral", kb_title: str = "",
        kb_answer: str = "", ticket_id: str = "", agent_name: str = "Customer Support"
        ) -> dict[str, Any]:
    if not isinstance(subject, str):
        raise ValueError("subject: must be the ticket's subject text")
    if priority not in ("urgent", "high", "normal", "low"):
        raise ValueError(f"priority: expected urgent, high, normal or low, not {priority!r}")
    first_name = (customer_name or "").strip().split(" ")[0]
    topic = "your question" if priority == "low" else _TOPICS.get(category, "your message")
    paragraphs = [f"Hi {first_name}," if first_name else "Hello,"]
    opening = f"Thank you for contacting us about {topic}."
    if sentiment == "negative":
        opening += " I'm sorry for the trouble this has caused, and I understand how frustrating it is."
    paragraphs.append(opening)
    if priority == "urgent":
        paragraphs.append("We are treating your request as urgent, and a specialist has already "
                          "been asked to look at it.")
    answer = _plain(kb_answer)
    if answer:
        intro = (f'Our help article "{kb_title}" explains what happens next:' if kb_title
                 else "Here is what happens next:")
        paragraphs += [intro, answer]
    else:
        paragraphs.append("I have passed your message to a specialist, who will reply within "
                          "one business day.")
    closing = "If anything is still unclear, simply reply to this email."
    if ticket_id:
        closing = f"Your ticket reference is {ticket_id}. " + closing
    paragraphs += [closing, f"Kind regards,\n{agent_name}"]
    body = "\n\n".join(paragraphs) + "\n"
    clean_subject = re.sub(r"^(re:\s*)+", "", subject.strip(), flags=re.IGNORECASE)
    clean_subject = re.sub(r"^(urgent|asap)\s*[:!-]\s*", "", clean_subject, flags=re.IGNORECASE)
    return {
        "subject": f"Re: {clean_subject}" if clean_subject else "Re: your request",
        "body": body,
        "needs_review": not answer or priority == "urgent",
        "word_count": len(body.split()),
    }


def _plain(markdown: str) -> str:
    """Knowledge-base Markdown as plain text: no heading marks or emphasis, lists kept."""
    lines = []
    for line in (markdown or "").strip().splitlines():
        line = re.sub(r"^#+\s*", "", line)
        line = re.sub(r"\*\*(.+?)\*\*|__(.+?)__", lambda m: m.group(1) or m.group(2), line)
        line = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", line)
        lines.append(line.rstrip())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
