"""Keyword-rule classification of a Chinese customer complaint: category and severity."""

from __future__ import annotations

from typing import Any

CATEGORIES = {
    "物流配送": ("shipping", ("发货", "快递", "物流", "没收到", "未收到", "待揽收", "配送", "送货",
                          "包裹", "催单")),
    "商品质量": ("quality", ("质量", "破损", "坏了", "损坏", "假货", "瑕疵", "不能用", "故障", "变质")),
    "退款售后": ("billing", ("退款", "退货", "换货", "售后", "退钱", "退回")),
    "服务态度": ("service", ("态度", "不回复", "没有回复", "敷衍", "没人理", "推诿", "客服")),
    "价格收费": ("pricing", ("扣费", "多收", "乱收费", "价格", "优惠券", "收费", "扣款")),
    "账户安全": ("security", ("盗号", "被盗", "账号异常", "隐私", "泄露", "盗刷")),
}
URGENT = ("12315", "消协", "消费者协会", "律师", "起诉", "法院", "媒体", "曝光", "报警", "受伤",
          "过敏", "起火", "冒烟", "爆炸", "人身安全", "工商")
SERIOUS = ("投诉", "差评", "多次", "三次", "一直", "再不", "生气", "失望", "愤怒", "太差", "欺骗",
           "尽快", "马上", "立即")


def run(text: str) -> dict[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text: 投诉内容为空")
    reasons: list[str] = []
    best, best_code, best_hits = "其他", "general", 0
    for name, (code, words) in CATEGORIES.items():
        hits = [w for w in words if w in text]
        if hits:
            reasons.append(f"类别 {name}：{'、'.join(hits)}")
        if len(hits) > best_hits:
            best, best_code, best_hits = name, code, len(hits)
    urgent = [w for w in URGENT if w in text]
    serious = [w for w in SERIOUS if w in text]
    if urgent:
        reasons.append(f"紧急信号：{'、'.join(urgent)}")
    if serious:
        reasons.append(f"严重信号：{'、'.join(serious)}")
    if urgent or len(serious) >= 3:
        severity, priority = "紧急", "urgent"
    elif serious:
        severity, priority = "严重", "high"
    else:
        severity, priority = "一般", "normal"
    return {"category": best, "category_code": best_code, "severity": severity,
            "priority": priority, "needs_escalation": severity == "紧急", "reasons": reasons}
