"""Support tickets: reading, triage, details, knowledge base, sentiment, reply, SLA, escalation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.library.conftest import call_skill, run_skill


def ticket(samples: Path, name: str) -> dict[str, str]:
    return run_skill("read-ticket", path=str(samples / name))


def test_read_ticket_from_json(samples: Path) -> None:
    result = ticket(samples, "ticket_urgent.json")
    assert result["ticket_id"] == "T-20417"
    assert result["subject"] == "URGENT: charged twice and now locked out of my account"
    assert result["sender_name"] == "Marta Kowalczyk"
    assert result["sender_email"] == "marta.kowalczyk@fernleaf-studio.example"
    assert result["received_at"] == "2024-10-08T07:42:00+01:00"
    assert result["channel"] == "email"
    assert result["text"].startswith(result["subject"]) and "order #558213" in result["text"]


def test_read_ticket_from_text_with_headers(samples: Path) -> None:
    result = ticket(samples, "ticket_question.txt")
    assert (result["ticket_id"], result["sender_email"]) == ("T-20433", "ben.adeyemi@example.org")
    assert result["body"].startswith("Hi there,")
    assert "Subject:" not in result["body"]


def test_read_ticket_from_eml(tmp_path: Path) -> None:
    path = tmp_path / "message.eml"
    path.write_bytes(b"From: Ana Ruiz <ana@example.es>\r\nSubject: Parcel lost\r\n"
                     b"Date: Tue, 08 Oct 2024 09:30:00 +0200\r\nMessage-ID: <abc@example.es>\r\n"
                     b"Content-Type: text/plain; charset=utf-8\r\n\r\nMy parcel never arrived.\r\n")
    result = run_skill("read-ticket", path=str(path))
    assert result["ticket_id"] == "abc@example.es"
    assert result["received_at"] == "2024-10-08T09:30:00+02:00"
    assert result["body"] == "My parcel never arrived."


@pytest.mark.parametrize(("name", "content", "message"), [
    ("list.json", "[1, 2]", "path: list.json must hold one JSON object, not list"),
    ("broken.json", "{", "path: broken.json is not valid JSON"),
    ("empty.txt", "Subject: Hello\n\n   \n", "path: empty.txt has no message body"),
])
def test_read_ticket_rejects_unusable_files(tmp_path: Path, name: str, content: str,
                                            message: str) -> None:
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        call_skill("read-ticket", path=str(tmp_path / name))
    assert str(caught.value).startswith(message)


def test_classify_ticket_urgent_billing(samples: Path) -> None:
    result = run_skill("classify-ticket", text=ticket(samples, "ticket_urgent.json")["text"])
    assert (result["category"], result["priority"], result["is_urgent"]) == ("billing", "urgent",
                                                                             True)
    assert any("charged twice" in r and r.startswith("urgent signals") for r in result["reasons"])
    assert result["scores"]["billing"] > result["scores"]["account"] > 0


def test_classify_ticket_low_priority_question(samples: Path) -> None:
    result = run_skill("classify-ticket", text=ticket(samples, "ticket_question.txt")["text"])
    assert (result["category"], result["priority"]) == ("technical", "low")


def test_classify_ticket_with_custom_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"categories": {"wine": ["cork"]},
                                 "priority": {"urgent": ["corked"], "high": [], "low": []},
                                 "thresholds": {"urgent": 1}}), encoding="utf-8")
    result = run_skill("classify-ticket", text="The bottle was corked, the cork crumbled",
                       rules_path=str(rules))
    assert (result["category"], result["priority"]) == ("wine", "urgent")


def test_extract_customer_details_english(samples: Path) -> None:
    read = ticket(samples, "ticket_urgent.json")
    result = run_skill("extract-customer-details", text=read["body"], sender=read["sender"])
    assert result["name"] == "Marta Kowalczyk"
    assert result["email"] == "marta.kowalczyk@fernleaf-studio.example"
    assert result["phone"] == "+447700900123"
    assert result["order_ids"] == ["558213"]
    assert result["account_id"] == "FS-20931"
    assert result["found"] == ["name", "email", "phone", "order_id", "account_id"]


def test_extract_customer_details_chinese(samples: Path) -> None:
    read = ticket(samples, "complaint_zh.txt")
    result = run_skill("extract-customer-details", text=read["body"], sender=read["sender"])
    assert (result["name"], result["phone"], result["order_id"]) == ("王丽", "13812345678",
                                                                     "LX20241001882")
    assert result["email"] == "wangli@example.cn"


def test_search_knowledge_base_english_and_chinese(samples: Path) -> None:
    urgent = run_skill("search-knowledge-base", query=ticket(samples, "ticket_urgent.json")["text"],
                       category="billing")
    assert urgent["found"] and urgent["results"][0]["id"] == "duplicate-charge"
    assert urgent["best_title"] == "Charged twice or charged unexpectedly"
    assert "3 to 5 business days" in urgent["best_answer"]
    assert not urgent["best_answer"].startswith(("#", "category:"))
    question = run_skill("search-knowledge-base",
                         query="How do I export all projects as CSV?", limit=1)
    assert [r["id"] for r in question["results"]] == ["export-data"]
    chinese = run_skill("search-knowledge-base", query="物流信息一直显示待揽收，还没有发货")
    assert chinese["results"][0]["id"] == "shipping-delay-zh"


def test_search_knowledge_base_without_a_match(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Opening hours\ncategory: general\n\nWe open at nine.\n",
                                   encoding="utf-8")
    result = run_skill("search-knowledge-base", query="quantum entanglement", kb_dir=str(tmp_path))
    assert result == {"results": [], "found": False, "best_title": "", "best_answer": ""}


@pytest.mark.parametrize(("text", "label"), [
    ("Thanks, the new dashboard is really great!", "positive"),
    ("This is unacceptable, I was charged twice and nobody replies.", "negative"),
    ("The export finished at 10:42.", "neutral"),
    ("I am not happy with the delay.", "negative"),
    ("客服态度很差，非常失望，我要投诉。", "negative"),
    ("谢谢你们，处理得非常及时，很满意。", "positive"),
])
def test_sentiment_score(text: str, label: str) -> None:
    result = run_skill("sentiment-score", text=text)
    assert result["label"] == label
    assert -1 <= result["score"] <= 1


def test_sentiment_negation_is_reported() -> None:
    result = run_skill("sentiment-score", text="I am not happy with this at all")
    assert result["negative_terms"] == ["not happy"]


def test_draft_support_reply_for_an_urgent_ticket(samples: Path) -> None:
    read = ticket(samples, "ticket_urgent.json")
    kb = run_skill("search-knowledge-base", query=read["text"], category="billing")
    result = run_skill("draft-support-reply", subject=read["subject"],
                       customer_name="Marta Kowalczyk", category="billing", priority="urgent",
                       sentiment="negative", kb_title=kb["best_title"],
                       kb_answer=kb["best_answer"], ticket_id="T-20417", agent_name="Sam")
    assert result["subject"] == "Re: charged twice and now locked out of my account"
    body = result["body"]
    assert body.startswith("Hi Marta,\n\n")
    assert "I'm sorry" in body and "urgent" in body
    assert "3 to 5 business days" in body and "T-20417" in body
    assert body.rstrip().endswith("Kind regards,\nSam")
    assert result["needs_review"] is True
    assert result["word_count"] == len(body.split())


def test_draft_support_reply_without_an_answer_needs_review() -> None:
    result = run_skill("draft-support-reply", subject="Question")
    assert result["needs_review"] is True
    assert result["body"].startswith("Hello,")
    assert "specialist" in result["body"]


def test_sla_deadline_urgent_runs_round_the_clock() -> None:
    result = run_skill("sla-deadline", priority="urgent", received_at="2024-10-12T23:30:00+01:00")
    assert result["response_due"] == "2024-10-13T00:30:00+01:00"
    assert result["resolve_due"] == "2024-10-13T07:30:00+01:00"
    assert result["business_hours_only"] is False


def test_sla_deadline_counts_business_hours_over_a_weekend_and_holiday() -> None:
    result = run_skill("sla-deadline", priority="high", received_at="2024-10-11T16:00:00+01:00",
                       holidays=["2024-10-14"])
    assert result["response_due"] == "2024-10-15T12:00:00+01:00"  # 1 h Friday + 3 h Tuesday
    assert result["resolve_due"] == "2024-10-16T16:00:00+01:00"
    assert result["response_hours"] == 4


def test_create_escalation_record_appends_once_per_ticket(tmp_path: Path) -> None:
    first = run_skill("create-escalation-record", ticket_id="T-20417", priority="urgent",
                      summary="Charged twice and locked out.", category="billing",
                      customer_email="marta@example.com", response_due="2024-10-08T08:42:00+01:00",
                      reasons=["urgent signals: charged twice"], output_dir=str(tmp_path))
    assert first["created"] is True and first["open_count"] == 1
    assert first["escalation_id"].startswith("ESC-")
    again = run_skill("create-escalation-record", ticket_id="T-20417", priority="urgent",
                      summary="Same ticket again.", output_dir=str(tmp_path))
    assert again["created"] is False
    assert again["escalation_id"] == first["escalation_id"]
    other = run_skill("create-escalation-record", ticket_id="T-1", priority="high",
                      summary="Another one.", output_dir=str(tmp_path))
    assert other["open_count"] == 2
    lines = Path(first["path"]).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["ticket_id"] for line in lines] == ["T-20417", "T-1"]
    assert json.loads(lines[0])["status"] == "open"


def test_create_escalation_record_needs_a_summary(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^summary: say what is wrong"):
        call_skill("create-escalation-record", ticket_id="T-1", priority="urgent", summary=" ",
                   output_dir=str(tmp_path))
