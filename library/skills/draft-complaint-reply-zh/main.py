"""A Chinese complaint reply assembled from approved paragraphs and a knowledge-base answer."""

from __future__ import annotations

import re
from typing import Any

EMPATHY = {
    "物流配送": "订单迟迟没有发出，耽误了您的安排，我们深感抱歉。",
    "商品质量": "收到的商品存在问题，给您带来了困扰，我们非常抱歉。",
    "退款售后": "退款和售后处理不够及时，让您多次费心，我们非常抱歉。",
    "服务态度": "我们的客服没有及时、妥善地回应您，这是我们的失职，向您郑重道歉。",
    "价格收费": "收费问题让您产生了疑虑，我们非常重视并立即核查。",
    "账户安全": "您的账户安全是我们最重视的事情，我们已第一时间介入处理。",
}
PROMISE = {"紧急": 2, "严重": 24, "一般": 48}


def run(subject: str, customer_name: str = "", category: str = "其他", severity: str = "一般",
        order_id: str = "", kb_answer: str = "", agent_name: str = "客户服务团队",
        ticket_id: str = "") -> dict[str, Any]:
    if not isinstance(subject, str):
        raise ValueError("subject: 必须是投诉标题文本")
    if severity not in PROMISE:
        raise ValueError(f"severity: 应为 一般、严重 或 紧急，而不是 {severity!r}")
    hours = PROMISE[severity]
    greeting = f"{customer_name.strip()} 您好：" if customer_name.strip() else "您好："
    paragraphs = [greeting]
    opening = "感谢您抽出时间把问题告诉我们。"
    opening += EMPATHY.get(category, "您反映的问题我们已经收到，并会认真处理。")
    paragraphs.append(opening)
    if order_id:
        paragraphs.append(f"我们已经调取了您的订单（订单号：{order_id}），正在与相关部门核实具体情况。")
    answer = _plain(kb_answer)
    if answer:
        paragraphs.append("根据我们的服务政策：\n" + answer)
    if severity == "紧急":
        paragraphs.append("您的投诉已被列为紧急事项，由客服主管专人跟进，"
                          f"我们会在 {hours} 小时内电话联系您并给出处理结果。")
    else:
        paragraphs.append(f"我们会在 {hours} 小时内给您明确的处理结果。"
                          "如果您希望直接取消订单并退款，也可以回复本邮件告诉我们，我们将优先办理。")
    if ticket_id:
        paragraphs.append(f"您的投诉单号是 {ticket_id}，后续沟通时提供此单号即可。")
    paragraphs.append(f"再次向您致歉，感谢您的耐心与理解。\n\n{agent_name}")
    body = "\n\n".join(paragraphs) + "\n"
    topic = re.sub(r"^(投诉|紧急|急)\s*[:：]\s*", "", subject.strip())
    return {"subject": f"回复：{topic}" if topic else "关于您反馈问题的回复", "body": body,
            "needs_review": severity != "一般" or not answer, "promised_hours": hours}


def _plain(markdown: str) -> str:
    lines = [re.sub(r"^#+\s*", "", ln).strip() for ln in (markdown or "").strip().splitlines()]
    return "\n".join(ln for ln in lines if ln)
