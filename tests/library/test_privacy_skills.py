"""redact-pii: checksummed detection, masking styles, and what it leaves alone."""

from __future__ import annotations

from pathlib import Path

from tests.library.conftest import run_skill

TEXT = ("Mail marta@example.com, call +44 7700 900123, card 4111 1111 1111 1111, "
        "order 1234567812345678, IBAN GB82 WEST 1234 5698 7654 32, IP 192.168.10.4, "
        "ID 11010519491231002X, SSN 123-45-6789, date 2024-10-08, total 1,274.94.")


def test_redact_pii_labels_every_kind_and_spares_look_alikes() -> None:
    result = run_skill("redact-pii", text=TEXT)
    assert result["text"] == (
        "Mail [EMAIL], call [PHONE], card [CARD], order 1234567812345678, IBAN [IBAN], IP [IP], "
        "ID [CN_ID], SSN [SSN], date 2024-10-08, total 1,274.94.")
    assert result["total"] == 7
    assert result["counts"] == {"card": 1, "iban": 1, "cn_id": 1, "ssn": 1, "email": 1, "ip": 1,
                                "phone": 1}


def test_redact_pii_partial_masks_and_kind_filter() -> None:
    partial = run_skill("redact-pii", text=TEXT, style="partial", kinds=["email", "card"])
    assert "m***@example.com" in partial["text"]
    assert "************1111" in partial["text"]
    assert "+44 7700 900123" in partial["text"], "phones were not asked for"
    assert partial["found_kinds"] == ["card", "email"]


def test_redact_pii_on_the_chinese_complaint(samples: Path) -> None:
    text = (samples / "complaint_zh.txt").read_text(encoding="utf-8")
    result = run_skill("redact-pii", text=text)
    assert "13812345678" not in result["text"] and "我的手机号是[PHONE]" in result["text"]
    assert "LX20241001882" in result["text"], "order numbers are not personal data"
    assert result["counts"] == {"email": 1, "phone": 1}
