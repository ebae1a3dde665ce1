"""中文流程：工作日志、周报、投诉分类与回复。"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.library.conftest import run_skill


def work_log(samples: Path) -> dict[str, Any]:
    return run_skill("parse-work-log", path=str(samples / "work_log_zh.txt"))


def complaint(samples: Path) -> dict[str, Any]:
    return run_skill("read-ticket", path=str(samples / "complaint_zh.txt"))


def test_parse_work_log(samples: Path) -> None:
    result = work_log(samples)
    assert result["author"] == "陈晓明"
    assert (result["start_date"], result["end_date"]) == ("2024-10-07", "2024-10-11")
    assert len(result["entries"]) == 11
    assert result["total_hours"] == 26.0
    assert result["by_project"][0] == {"project": "数据平台", "hours": 12.5, "tasks": 4}
    assert result["entries"][2] == {"date": "2024-10-07", "project": "其他",
                                    "task": "参加产品需求评审会", "hours": 1.0, "status": "完成"}
    assert result["blocked"] == ["排查测试环境数据库连接超时问题，等待运维同事扩容"]
    assert [e["status"] for e in result["entries"]].count("进行中") == 1
    assert result["plans"][0] == "客户门户：找回密码流程上线"


def test_compose_weekly_report(samples: Path, tmp_path: Path) -> None:
    log = work_log(samples)
    result = run_skill("compose-weekly-report-zh", entries=log["entries"],
                       by_project=log["by_project"], plans=log["plans"], author=log["author"],
                       start_date=log["start_date"], end_date=log["end_date"],
                       output_dir=str(tmp_path))
    assert result["title"] == "陈晓明 工作周报（2024-10-07 至 2024-10-11）"
    text = Path(result["path"]).read_text(encoding="utf-8")
    assert text == result["markdown"]
    assert "本周共投入 **26 小时**，涉及 4 个项目，完成 9 项工作，1 项进行中，1 项受阻。" in text
    assert "| 数据平台 | 12.5 | 4 | 48% |" in text
    assert "- ⚠️ 【运维】排查测试环境数据库连接超时问题" in text
    assert text.rstrip().endswith("- 运维：跟进测试环境扩容")


def test_classify_complaint_urgent_shipping(samples: Path) -> None:
    result = run_skill("classify-complaint-zh", text=complaint(samples)["text"])
    assert (result["category"], result["category_code"]) == ("物流配送", "shipping")
    assert (result["severity"], result["priority"], result["needs_escalation"]) == (
        "紧急", "urgent", True)
    assert "紧急信号：12315" in result["reasons"]


@pytest.mark.parametrize(("text", "category", "severity"), [
    ("收到的杯子有破损，能换货吗？", "商品质量", "一般"),
    ("第二次投诉了，退款到现在还没到账，非常失望。", "退款售后", "严重"),
    ("我的账号被盗了，还被盗刷了两笔，我已经报警。", "账户安全", "紧急"),
    ("请问你们周末营业吗", "其他", "一般"),
])
def test_classify_complaint_table(text: str, category: str, severity: str) -> None:
    result = run_skill("classify-complaint-zh", text=text)
    assert (result["category"], result["severity"]) == (category, severity)


def test_draft_complaint_reply(samples: Path) -> None:
    read = complaint(samples)
    kb = run_skill("search-knowledge-base", query=read["text"], category="shipping")
    result = run_skill("draft-complaint-reply-zh", subject=read["subject"], customer_name="王丽",
                       category="物流配送", severity="紧急", order_id="LX20241001882",
                       kb_answer=kb["best_answer"], ticket_id="C-3107")
    assert result["subject"] == "回复：订单一直没发货，客服也不回复"
    body = result["body"]
    assert body.startswith("王丽 您好：")
    assert "订单号：LX20241001882" in body and "C-3107" in body
    assert "待揽收" in body, "quotes the knowledge-base policy"
    assert "2 小时内" in body and result["promised_hours"] == 2
    assert result["needs_review"] is True


def test_draft_complaint_reply_ordinary_case() -> None:
    result = run_skill("draft-complaint-reply-zh", subject="杯子破损", category="商品质量",
                       kb_answer="确认属于质量问题的，我们为您免费换货。")
    assert result["body"].startswith("您好：")
    assert (result["promised_hours"], result["needs_review"]) == (48, False)
